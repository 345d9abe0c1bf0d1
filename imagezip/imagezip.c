/* imagezip: capture a disk, partition or file as an image of 1 MiB compressed chunks. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/err.h"
#include "core/io.h"
#include "scan.h"
#include "core/target.h"
#include "codec/convert.h"
#include "from.h"
#include "trust/trust.h"
#include "codec/zip.h"

static const char usage_text[] =
	"Usage: imagezip [options] SOURCE IMAGE\n"
	"       imagezip -i [options] SOURCE\n"
	"Capture SOURCE (a disk, partition or file) as an image; IMAGE '-' is stdout.\n"
	"Only allocated sectors of known filesystems are taken (ext2/3/4, NTFS, UFS,\n"
	"FAT, exFAT, XFS, btrfs, swap, and these inside the linear LVs of an LVM2\n"
	"PV); the partition table and the boot code before the first partition too.\n"
	"\n"
	"  -s, --slice N      image partition N alone (restore with imageunzip -s)\n"
	"  -S, --fs N=TYPE    read partition N as TYPE: ext2/3/4, ntfs, ufs, fat,\n"
	"                     exfat, xfs, btrfs, lvm, swap, bsdswap or raw\n"
	"  -R, --raw-part N   take partition N raw\n"
	"  -I, --ignore-part N  leave partition N out of the image\n"
	"                     (N as -i prints it; 3a: BSD partition a of slice 3)\n"
	"  -F, --min-free SIZE  free runs shorter than SIZE are compressed (default 32k)\n"
	"  -i, --info         print the partitions and filesystems found; write no image\n"
	"  -f, --force        replace IMAGE even when it is not an image, or is a\n"
	"                     symbolic link (the link is replaced); never a device\n"
	"      --keep-pagefile  keep the contents of NTFS pagefile.sys and hiberfil.sys\n"
	"      --keep-journal  keep the body of a clean ext3/4 journal (default: zeros)\n"
	"      --codec C      compress with zstd (default) or zlib\n"
	"  -z, --level N      compression level: zlib 0-9 (default 4), zstd 1-19 (default 3)\n"
	"  -j, --threads N    compression threads (default: online cores)\n"
	"  -r, --raw          take every sector, ignoring filesystems\n"
	"      --uuid UUID    give the image this UUID (default: random), for\n"
	"                     reproducible images\n"
	"      --sign SECKEY  sign the image: write its manifest, IMAGE.manifest\n"
	"      --manifest FILE  write the manifest there (needed for IMAGE '-')\n"
	"      --encrypt KEY  encrypt every chunk with KEY (imagekey generate -e)\n"
	"      --cipher C     with --encrypt: aes256gcm (default) or xchacha20\n"
	"      --from-image   SOURCE is an image, ours or the original Frisbee's (V1-V4):\n"
	"                     convert it, the restore unchanged\n"
	"      --orig-key FILE  with --from-image: an original V4 image's Blowfish key\n"
	"      --to-orig      write the original Frisbee V3 format, for old clients\n"
	"                     (zlib, no signing or encryption, 2 TiB at most)\n"
	"  -o, --progress     show progress and the time left: a line redrawn on a\n"
	"                     terminal, else a plain line every few seconds\n"
	"      --progress=json  progress as one JSON object a line (see the man page)\n"
	"  -q, --quiet        print errors only\n"
	"  -v, --verbose      print a summary at the end\n"
	"  -h, --help         show this help and exit\n"
	"  -V, --version      show the version and exit\n"
	"\n"
	"Exit status: 0 success, 1 failure, 2 bad usage.\n";

/* The temporary output name: owned (cli_own_file) until it is renamed into place. */
static char tmp_path[PATH_MAX];

struct output {
	int fd;
	const char *name;
	struct ndz_io *io;             /* the image written in order */
	uint64_t written;
	const struct ndz_key *crypt;   /* --encrypt: each chunk encrypted with it */
	uint8_t *buf;                  /* with crypt: the chunk being encrypted */
	struct ndz_manifest *m;        /* --sign: the hashes of the chunks so far */
	int cipher;                    /* --cipher: enum ndz_cipher */
};

/* The chunk as stored: encrypted (--encrypt), then hashed for the manifest (--sign). */
static int write_chunk(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	struct output *o = ctx;
	int rc;

	if (o->crypt) {
		memcpy(o->buf, chunk, NDZ_CHUNK_SIZE);
		rc = ndz_chunk_encrypt(o->crypt, o->cipher, o->buf);
		if (rc < 0)
			return ndz_error_set(e, rc, 0, "chunk %u: encryption failed: %s", index,
					     ndz_strerror(rc));
		chunk = o->buf;
	}
	if (o->m) {
		if (index >= o->m->chunks) {
			uint32_t want = o->m->chunks * 2;
			uint8_t (*more)[NDZ_HASH_LEN];

			if (index >= NDZ_MANIFEST_MAX_CHUNKS)
				return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: more chunks than "
						     "a manifest holds", index);
			more = realloc(o->m->hash, (size_t)want * NDZ_HASH_LEN);
			if (!more)
				return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", ndz_strerror(NDZ_ENOMEM));
			o->m->hash = more;
			o->m->chunks = want;
		}
		ndz_chunk_hash(chunk, o->m->hash[index]);
		if (index == 0) {
			struct ndz_chunk_hdr h;

			rc = ndz_hdr_decode(chunk, &h);
			if (rc < 0)
				return ndz_error_set(e, rc, 0, "chunk 0: %s", ndz_strerror(rc));
			memcpy(o->m->uuid, h.uuid, 16);
			o->m->codec = h.codec;
			o->m->source_bytes = h.source_bytes;
			o->m->flags = o->crypt ? NDZ_MANIFEST_ENCRYPTED : 0;
		}
	}
	rc = ndz_io_write_full(o->io, chunk, NDZ_CHUNK_SIZE, o->written, e);
	if (rc < 0)
		return rc;
	o->written += NDZ_CHUNK_SIZE;
	return 0;
}

static void load_key(const char *path, enum ndz_key_type want, struct ndz_key *k)
{
	struct ndz_error e = { 0 };

	if (ndz_key_load_as(path, NDZ_KEY_BIT(want), k, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
}

/* --sign: the manifest of the chunks written, signed, into path. */
static int write_manifest(struct ndz_manifest *m, uint32_t chunks, const struct ndz_key *k,
			  const char *path)
{
	struct ndz_error e = { 0 };
	uint8_t *buf;
	size_t len;
	int rc;

	m->chunks = chunks;
	rc = ndz_manifest_sign(m, k, &buf, &len);
	if (rc < 0) {
		cli_error("%s: %s", path, ndz_strerror(rc));
		return rc;
	}
	rc = ndz_manifest_save(path, buf, len, &e);
	free(buf);
	if (rc < 0)
		cli_error("%s", ndz_error_msg(&e));
	return rc;
}

/* Progress counts the disk bytes read of those in use, as the summary does. */
static void show_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)total;
	cli_progress_update(ctx, done, 0);
}

static void scan_warn(void *ctx, const char *msg)
{
	(void)ctx;
	cli_warn("%s", msg);            /* fs/ messages name the source and partition */
}

static void add_override(struct ndz_scan_opts *o, enum ndz_scan_action a, const char *opt,
			 const char *arg)
{
	int rc = ndz_scan_override_parse(o, a, arg);

	if (rc == NDZ_ERANGE)
		cli_usage_error("too many partition options");
	if (rc < 0)
		cli_usage_error("%s: bad argument '%s'%s", opt, arg,
				a == NDZ_SCAN_FORCE ? " (want N=TYPE: ext2/3/4, ntfs, ufs, fat, "
						      "exfat, xfs, btrfs, lvm, swap, bsdswap, raw)" : "");
}

static void print_size(const char *label, uint64_t bytes)
{
	printf(" %s %llu (%.1f MiB)", label, (unsigned long long)bytes,
	       (double)bytes / (1024.0 * 1024.0));
}

/* -i: what the scan found, one partition a line. */
static void print_report(const char *src, const struct ndz_scan_report *r,
			 const struct ndz_scan_result *res)
{
	printf("%s: %llu bytes, partition table: %s\n", src,
	       (unsigned long long)r->source_bytes, r->scheme);
	if (r->note[0])
		printf("  note: %s\n", r->note);
	if (res->image_kind == NDZ_KIND_PARTITION)
		printf("  imaging partition %u alone (start sector %llu, %llu bytes)\n",
		       res->part_index, (unsigned long long)res->part_start,
		       (unsigned long long)res->bytes);
	for (size_t i = 0; i < r->n; i++) {
		const struct ndz_scan_entry *e = &r->v[i];

		if (e->sub)
			printf("  %d%c:", e->index, 'a' + e->sub - 1);
		else
			printf("  %d:", e->index);
		printf(" start %llu sectors %llu type %s (0x%x):", (unsigned long long)e->start,
		       (unsigned long long)e->count, e->type_name, e->type);
		if (e->how == NDZ_HOW_FS)
			printf(" %s [%s]", e->fs, e->detail);
		else
			printf(" %s", ndz_scan_how_name(e->how));
		if (e->how != NDZ_HOW_EXTENDED && e->how != NDZ_HOW_BSDLABEL) {
			print_size("used", e->used_bytes);
			print_size("free", e->free_bytes);
		}
		if (e->zero_bytes)
			print_size("zeroed", e->zero_bytes);
		if (e->note[0])
			printf(" (%s)", e->note);
		putchar('\n');
	}
	printf("  image holds %llu of %llu bytes before compression\n",
	       (unsigned long long)r->image_bytes, (unsigned long long)res->bytes);
}

/* 32 hex digits, dashes anywhere; all zero is refused (it means "random"). */
static int parse_uuid(const char *s, uint8_t *uuid)
{
	unsigned n = 0, nonzero = 0;

	for (; *s; s++) {
		int v;

		if (*s == '-')
			continue;
		if (*s >= '0' && *s <= '9')
			v = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			v = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			v = *s - 'A' + 10;
		else
			return -1;
		if (n == 32)
			return -1;
		uuid[n / 2] = (uint8_t)(n % 2 ? uuid[n / 2] | v : v << 4);
		nonzero |= (unsigned)v;
		n++;
	}
	return n == 32 && nonzero ? 0 : -1;
}

static int open_output(const char *path, struct output *o)
{
	int fd;

	o->name = path;
	if (strcmp(path, "-") == 0) {
		if (isatty(STDOUT_FILENO))
			cli_usage_error("refusing to write an image to a terminal");
		o->fd = STDOUT_FILENO;
		if (ndz_io_open_stream(o->fd, "stdout", &o->io, NULL) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_strerror(NDZ_ENOMEM));
		return 0;
	}
	if (snprintf(tmp_path, sizeof(tmp_path), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp_path))
		cli_die(EXIT_FAIL, "%s: name too long", path);
	cli_hold_signals(1);
	fd = mkstemp(tmp_path);
	if (fd >= 0)
		cli_own_file(tmp_path);
	cli_hold_signals(0);
	if (fd < 0)
		cli_die(EXIT_FAIL, "%s: cannot create a file beside it: %s", path, strerror(errno));
	fchmod(fd, 0644);
	o->fd = fd;
	if (ndz_io_open_stream(fd, path, &o->io, NULL) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_strerror(NDZ_ENOMEM));
	return 0;
}

/* Flush and move the finished image into place; the directory entry too. */
static int commit_output(struct output *o)
{
	struct ndz_error e = { 0 };
	char dir[PATH_MAX];
	const char *slash;
	int dfd, rc = ndz_io_flush(o->io, &e);

	if (rc < 0) {
		cli_error("%s", ndz_error_msg(&e));
		return -1;
	}
	if (o->io->unsynced && cli_verbose)
		cli_info("%s: not flushed (%s)", o->io->name, o->io->unsynced);
	if (o->fd == STDOUT_FILENO)
		return 0;
	if (close(o->fd) < 0) {
		cli_error("%s: %s", o->name, strerror(errno));
		return -1;
	}
	o->fd = -1;
	if (rename(tmp_path, o->name) < 0) {
		cli_error("%s: cannot rename %s to it: %s", o->name, tmp_path, strerror(errno));
		return -1;
	}
	cli_own_file(NULL);
	slash = strrchr(o->name, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - o->name) : 1,
		 slash ? o->name : ".");
	if (slash == o->name)
		snprintf(dir, sizeof(dir), "/");
	/* the new name is on the disk only once its directory is */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		cli_error("%s: renamed into place, but its directory %s could not be flushed: %s",
			  o->name, dir, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	close(dfd);
	return 0;
}

static void discard_output(struct output *o)
{
	if (o->fd >= 0 && o->fd != STDOUT_FILENO)
		close(o->fd);
	cli_drop_file();
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "level", required_argument, NULL, 'z' },
		{ "threads", required_argument, NULL, 'j' },
		{ "raw", no_argument, NULL, 'r' },
		{ "slice", required_argument, NULL, 's' },
		{ "fs", required_argument, NULL, 'S' },
		{ "raw-part", required_argument, NULL, 'R' },
		{ "ignore-part", required_argument, NULL, 'I' },
		{ "min-free", required_argument, NULL, 'F' },
		{ "info", no_argument, NULL, 'i' },
		{ "force", no_argument, NULL, 'f' },
		{ "keep-pagefile", no_argument, NULL, 'K' },
		{ "keep-journal", no_argument, NULL, 'L' },
		{ "uuid", required_argument, NULL, 'U' },
		{ "progress", optional_argument, NULL, 'o' },
		{ "codec", required_argument, NULL, 'C' },
		{ "sign", required_argument, NULL, 'G' },
		{ "manifest", required_argument, NULL, 'M' },
		{ "encrypt", required_argument, NULL, 'E' },
		{ "cipher", required_argument, NULL, 'Y' },
		{ "from-image", no_argument, NULL, 0x200 },
		{ "orig-key", required_argument, NULL, 0x201 },
		{ "to-orig", no_argument, NULL, 0x202 },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	struct ndz_scan_opts sopts;
	struct ndz_scan_result scan;
	struct ndz_zip_opts zopts;
	struct ndz_zip_stats stats;
	struct cli_progress prog;
	struct output out = { -1, NULL, NULL, 0, NULL, NULL, NULL, 0 };
	const char *sign_path = NULL, *crypt_path = NULL, *manifest = NULL;
	struct ndz_key sign_key = { 0 }, crypt_key = { 0 };
	struct ndz_manifest m = { 0 };
	char mbuf[PATH_MAX];
	struct ndz_error zerr = { 0 };
	struct ndz_io *src = NULL, *view = NULL, *zview = NULL;
	int progress = 0, info = 0, level = -1, cipher = 0, force = 0, c, rc;
	int from = 0, to_orig = 0;
	const char *orig_key = NULL;
	struct ndz_scan_report report;
	uint64_t u64;
	char rate[64];

	cli_init(argv[0]);
	ndz_zip_opts_init(&zopts);
	zopts.codec = NDZ_CODEC_ZSTD;          /* README: why zstd is the default */
	ndz_scan_opts_init(&sopts);
	while ((c = getopt_long(argc, argv, "z:j:rs:S:R:I:F:ifoqvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'z':
			level = cli_parse_int(optarg, "-z", 0, 19);
			break;
		case 'C':
			if (!strcmp(optarg, "zlib"))
				zopts.codec = NDZ_CODEC_ZLIB;
			else if (!strcmp(optarg, "zstd"))
				zopts.codec = NDZ_CODEC_ZSTD;
			else
				cli_usage_error("--codec: '%s' is not zlib or zstd", optarg);
			break;
		case 'j':
			zopts.threads = cli_parse_int(optarg, "-j", 1, 64);
			break;
		case 'r':
			sopts.raw = 1;
			break;
		case 's':
			sopts.partition = cli_parse_int(optarg, "-s", 1, 65535);
			break;
		case 'S':
			add_override(&sopts, NDZ_SCAN_FORCE, "-S", optarg);
			break;
		case 'R':
			add_override(&sopts, NDZ_SCAN_RAW, "-R", optarg);
			break;
		case 'I':
			add_override(&sopts, NDZ_SCAN_IGNORE, "-I", optarg);
			break;
		case 'F':
			if (cli_parse_u64(optarg, 1, &u64) < 0)
				cli_usage_error("-F: bad size '%s'", optarg);
			sopts.min_free = u64;
			break;
		case 'i':
			info = 1;
			break;
		case 'f':
			force = 1;
			break;
		case 'K':
			sopts.keep_pagefile = 1;
			break;
		case 'L':
			sopts.keep_journal = 1;
			break;
		case 'U':
			if (parse_uuid(optarg, zopts.uuid) < 0)
				cli_usage_error("--uuid: '%s' is not a UUID (32 hex digits, dashes "
						"allowed)", optarg);
			break;
		case 'o':
			progress = cli_progress_option(optarg);
			break;
		case 'G':
			sign_path = optarg;
			break;
		case 'M':
			manifest = optarg;
			break;
		case 'E':
			crypt_path = optarg;
			break;
		case 'Y':
			cipher = ndz_cipher_parse(optarg);
			if (cipher < 0)
				cli_usage_error("--cipher: '%s': aes256gcm or xchacha20", optarg);
			break;
		case 0x200:
			from = 1;
			break;
		case 0x201:
			orig_key = optarg;
			break;
		case 0x202:
			to_orig = 1;
			break;
		default:
			cli_common_option(c, usage_text);
			break;
		}
	}
	if (to_orig && (sign_path || crypt_path))
		cli_usage_error("--to-orig: the original format V3 has neither --sign nor --encrypt");
	if (to_orig)
		zopts.codec = NDZ_CODEC_ZLIB;
	if (orig_key && !from)
		cli_usage_error("--orig-key: only with --from-image");
	if (from && info)
		cli_usage_error("--from-image: not with -i");
	if (zopts.codec == NDZ_CODEC_ZSTD)
		zopts.level = level < 0 ? NDZ_ZSTD_DEFAULT_LEVEL : level;
	else if (level >= 0)
		zopts.level = level;
	if (zopts.codec == NDZ_CODEC_ZSTD ? zopts.level < 1 : zopts.level > 9)
		cli_usage_error("-z: level %d is outside %s for %s", zopts.level,
				zopts.codec == NDZ_CODEC_ZSTD ? "1-19" : "0-9",
				zopts.codec == NDZ_CODEC_ZSTD ? "zstd" : "zlib");
	if (info && argc - optind != 1)
		cli_usage_error("-i: expected SOURCE only");
	if (!info && argc - optind != 2)
		cli_usage_error("expected SOURCE and IMAGE, got %d argument%s", argc - optind,
				argc - optind == 1 ? "" : "s");

	/* Before anything is read: IMAGE is not SOURCE, not a device, nor a file of other worth. */
	if (!info && strcmp(argv[optind + 1], "-") != 0 &&
	    ndz_same_file(argv[optind], argv[optind + 1]))
		cli_usage_error("SOURCE %s and IMAGE %s are the same file (or a loop device "
				"and its file): write the image elsewhere", argv[optind],
				argv[optind + 1]);
	if (!info && strcmp(argv[optind + 1], "-") != 0 &&
	    (rc = ndz_output_check(argv[optind + 1], force, &zerr)) < 0)
		cli_die(EXIT_FAIL, "%s%s", ndz_error_msg(&zerr),
			rc == NDZ_ENOTFILE ? "" : "; use --force to replace it");
	if (manifest && !sign_path)
		cli_usage_error("--manifest: only with --sign");
	if (sign_path && !info) {
		if (!manifest && strcmp(argv[optind + 1], "-") == 0)
			cli_usage_error("--sign: an image to stdout needs --manifest FILE");
		if (!manifest && ndz_manifest_path(argv[optind + 1], mbuf, sizeof(mbuf)) < 0)
			cli_usage_error("%s: name too long", argv[optind + 1]);
		manifest = manifest ? manifest : mbuf;
		load_key(sign_path, NDZ_KEY_SIGN_SECRET, &sign_key);
		if (ndz_manifest_init(&m, 64) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_strerror(NDZ_ENOMEM));
		out.m = &m;
	}
	if (cipher && !crypt_path)
		cli_usage_error("--cipher: only with --encrypt");
	out.cipher = cipher ? cipher : NDZ_CIPHER_DEFAULT;
	if (crypt_path && !info) {
		load_key(crypt_path, NDZ_KEY_CRYPT, &crypt_key);
		out.crypt = &crypt_key;
		out.buf = malloc(NDZ_CHUNK_SIZE);
		if (!out.buf)
			cli_die(EXIT_FAIL, "%s", ndz_strerror(NDZ_ENOMEM));
		zopts.reserve = NDZ_CRYPT_OVERHEAD;
	}

	signal(SIGPIPE, SIG_IGN);
	if (from)
		src = from_image(argv[optind], argv[optind + 1], orig_key, &scan);
	else if (ndz_io_open_file(argv[optind], NDZ_IO_READ, &src, &zerr) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&zerr));
	sopts.warn = scan_warn;
	sopts.warn_ctx = argv[optind];
	if (info)
		sopts.report = &report;
	rc = from ? 0 : ndz_scan(src, &sopts, &scan, &zerr);
	if (rc < 0) {
		ndz_io_close(src);
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&zerr));
	}
	if (info) {
		print_report(argv[optind], &report, &scan);
		ndz_scan_report_release(&report);
		ndz_scan_result_release(&scan);
		ndz_io_close(src);
		return EXIT_OK;
	}
	rc = ndz_io_open_sub(src, scan.base, scan.bytes, &view, NULL);
	/* blocks to be imaged as zeros (a clean journal's body) read as zeros */
	if (rc == 0 && scan.zero.n)
		rc = ndz_io_open_zeroed(view, &scan.zero, &zview, NULL);
	if (rc < 0)
		cli_die(EXIT_FAIL, "%s: %s", argv[optind], ndz_strerror(rc));
	zopts.image_kind = scan.image_kind;
	zopts.part_index = scan.part_index;
	zopts.part_type = scan.part_type;
	zopts.part_start = scan.part_start;

	open_output(argv[optind + 1], &out);
	cli_progress_init(&prog, progress, "reading", "disk", "read");
	cli_progress_total(&prog, ndz_ranges_total(&scan.alloc) * NDZ_SECTOR_SIZE, 0);
	zopts.progress = show_progress;
	zopts.progress_ctx = &prog;
	if (to_orig) {
		memset(&stats, 0, sizeof(stats));
		stats.in_bytes = ndz_ranges_total(&scan.alloc) * NDZ_SECTOR_SIZE;
		rc = ndz_orig_zip_v3(zview ? zview : view, scan.bytes, &scan.alloc,
				     level < 0 ? NDZ_ZLIB_DEFAULT_LEVEL : level, write_chunk, &out,
				     &stats.chunks, &zerr);
		stats.out_bytes = (uint64_t)stats.chunks * NDZ_CHUNK_SIZE;
	} else {
		rc = ndz_zip(zview ? zview : view, scan.bytes, &scan.alloc, &zopts, write_chunk,
			     &out, &stats, &zerr);
	}
	cli_progress_update(&prog, stats.in_bytes, 0);
	if (rc < 0)
		cli_progress_end(&prog, 0);    /* before the reason: the reason is the last line */
	if (rc < 0)
		cli_error("%s", ndz_error_msg(&zerr));
	if (rc == 0)
		cli_progress_phase(&prog, "flushing");
	/* The manifest is in place before the image is: a signed image never lacks it. */
	if (rc == 0 && out.m && (rc = write_manifest(&m, stats.chunks, &sign_key, manifest)) < 0)
		manifest = NULL;
	if (rc == 0 && commit_output(&out) < 0)
		rc = NDZ_EIO;
	cli_progress_end(&prog, rc == 0);
	if (rc < 0)
		discard_output(&out);
	if (rc < 0 && out.m && manifest)
		unlink(manifest);
	ndz_key_wipe(&sign_key);
	ndz_key_wipe(&crypt_key);
	ndz_manifest_release(&m);
	free(out.buf);
	if (rc == 0 && cli_verbose)
		cli_info("%s: %llu of %llu bytes in use, imaged into %u chunks (%.1f%% of the "
			 "bytes in use), %.2f s, %s, flushed in %.2f s",
			 argv[optind], (unsigned long long)stats.in_bytes,
			 (unsigned long long)scan.bytes, stats.chunks,
			 stats.in_bytes ? 100.0 * (double)stats.out_bytes / (double)stats.in_bytes : 0.0,
			 cli_progress_elapsed(&prog), cli_progress_rate(&prog, rate, sizeof(rate)),
			 prog.flush_s);
	ndz_io_close(zview);
	ndz_scan_result_release(&scan);
	ndz_io_close(out.io);
	ndz_io_close(view);
	ndz_io_close(src);
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}
