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
#include "core/fields.h"
#include "core/io.h"
#include "scan.h"
#include "core/target.h"
#include "codec/convert.h"
#include "from.h"
#include "trust/index.h"
#include "trust/seal.h"
#include "codec/zip.h"
#include "ctl/upsink.h"

static const char usage_text[] =
	"Usage: imagezip [options] SOURCE IMAGE\n"
	"       imagezip --upload HOST[:PORT]:NAME [options] SOURCE\n"
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
	"      --index FILE   write the content index (for seeded restores and\n"
	"                     checking a disk) there; default IMAGE.index, none for\n"
	"                     IMAGE '-' or --upload unless named; signed with --sign\n"
	"      --no-index     write no content index\n"
	"      --encrypt KEY  encrypt every chunk with KEY (imagekey generate -e)\n"
	"      --cipher C     with --encrypt: aes256gcm (default) or xchacha20\n"
	"      --from-image   SOURCE is an image, ours or the original Frisbee's (V1-V4):\n"
	"                     convert it, the restore unchanged\n"
	"      --orig-key FILE  with --from-image: an original V4 image's Blowfish key\n"
	"      --to-orig      write the original Frisbee V3 format, for old clients\n"
	"                     (zlib, no signing or encryption, 2 TiB at most)\n"
	"      --upload HOST[:PORT]:NAME  send the image to an image master (mfrisbeed,\n"
	"                     TCP port 3563 by default), which checks it and stores it\n"
	"                     as image NAME; no IMAGE then. Exit 0 once the master\n"
	"                     said it is stored\n"
	"      --wait SECONDS  with --upload: how long to wait for the master at each\n"
	"                     step (default 60; for its verdict, at least 600)\n"
	"  -o, --progress     show progress and the time left: a line redrawn on a\n"
	"                     terminal, else a plain line every few seconds\n"
	"      --progress=json  progress as one JSON object a line (see the man page)\n"
	"  -q, --quiet        print errors only\n"
	"  -v, --verbose      print a summary at the end\n"
	"  -h, --help         show this help and exit\n"
	"  -V, --version      show the version and exit\n"
	"\n"
	"Exit status: 0 success (with --upload: the master stored the image), 1 failure\n"
	"(with --upload: the master's reason, or what failed first), 2 bad usage.\n";

/* The temporary output name: owned (cli_own_file) until it is renamed into place. */
static char tmp_path[PATH_MAX];

/* --upload: the image goes to the master through this sink instead of a file. */
static struct ndz_upsink *upsink;

struct output {
	int fd;
	const char *name;
	struct ndz_io *io;             /* the image written in order */
	uint64_t written;
};

/* The chunk as stored (the sealer's sink: encrypted and hashed already). */
static int write_chunk(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	struct output *o = ctx;
	int rc;

	(void)index;
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
		if ((v = ndz_hexval((unsigned char)*s)) < 0)
			return -1;
		if (n == 32)
			return -1;
		uuid[n / 2] = (uint8_t)(n % 2 ? uuid[n / 2] | v : v << 4);
		nonzero |= (unsigned)v;
		n++;
	}
	return n == 32 && nonzero ? 0 : -1;
}

/*
 * --upload HOST[:PORT]:NAME: the sink to the master, written as a stream; the
 * size is not known in advance, which the exchange allows (0, as for a pipe).
 */
static void open_upload(const char *arg, int wait_s, struct output *o)
{
	struct ndz_error e = { 0 };
	const char *colon = strrchr(arg, ':');
	char spec[256];

	if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(spec))
		cli_usage_error("--upload: '%s' is not HOST[:PORT]:NAME", arg);
	snprintf(spec, sizeof(spec), "%.*s", (int)(colon - arg), arg);
	if (ndz_upsink_open(spec, colon + 1, 0, wait_s, &upsink, &e) < 0)
		cli_usage_error("--upload: %s", ndz_error_msg(&e));
	o->name = arg;
	if (ndz_io_open_stream(ndz_upsink_fd(upsink), arg, &o->io, NULL) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_strerror(NDZ_ENOMEM));
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
	if (upsink) {
		/* the master's verdict: it has checked, synced and stored the image */
		rc = ndz_upsink_finish(upsink, 0, NULL, &e);
		upsink = NULL;
		if (rc < 0)
			cli_error("%s", ndz_error_msg(&e));
		return rc < 0 ? -1 : 0;
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
		{ "upload", required_argument, NULL, 0x203 },
		{ "wait", required_argument, NULL, 0x204 },
		{ "index", required_argument, NULL, 0x205 },
		{ "no-index", no_argument, NULL, 0x206 },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	struct ndz_scan_opts sopts;
	struct ndz_scan_result scan;
	struct ndz_zip_opts zopts;
	struct ndz_zip_stats stats;
	struct cli_progress prog;
	struct output out = { -1, NULL, NULL, 0 };
	const char *sign_path = NULL, *crypt_path = NULL, *manifest = NULL;
	struct ndz_key sign_key = { 0 }, crypt_key = { 0 };
	struct ndz_seal_opts seal_opts = { .next = write_chunk, .next_ctx = &out };
	struct ndz_seal *seal = NULL;
	char mbuf[PATH_MAX], ibuf[PATH_MAX];
	const char *index_path = NULL;
	struct ndz_index index = { 0 };
	int no_index = 0;
	struct ndz_error zerr = { 0 };
	struct ndz_io *src = NULL, *view = NULL, *zview = NULL;
	int progress = 0, info = 0, level = -1, cipher = 0, force = 0, c, rc;
	int from = 0, to_orig = 0;
	const char *orig_key = NULL, *upload = NULL, *image;
	int wait_s = 60;
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
			cipher = ndz_cipher_parse(optarg, &zerr);
			if (cipher < 0)
				cli_usage_error("--cipher: %s", ndz_error_msg(&zerr));
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
		case 0x203:
			upload = optarg;
			break;
		case 0x204:
			wait_s = cli_parse_int(optarg, "--wait", 1, 3600);
			break;
		case 0x205:
			index_path = optarg;
			break;
		case 0x206:
			no_index = 1;
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
	if (info && upload)
		cli_usage_error("--upload: not with -i");
	if (upload && argc - optind != 1)
		cli_usage_error("--upload: expected SOURCE only, got %d argument%s", argc - optind,
				argc - optind == 1 ? "" : "s");
	if (!info && !upload && argc - optind != 2)
		cli_usage_error("expected SOURCE and IMAGE, got %d argument%s", argc - optind,
				argc - optind == 1 ? "" : "s");
	/* IMAGE: a file, '-' (stdout) or, with --upload, the master's (no file here) */
	image = upload ? "-" : info ? NULL : argv[optind + 1];

	/* Before anything is read: IMAGE is not SOURCE, not a device, nor a file of other worth. */
	if (!info && strcmp(image, "-") != 0 &&
	    ndz_same_file(argv[optind], image))
		cli_usage_error("SOURCE %s and IMAGE %s are the same file (or a loop device "
				"and its file): write the image elsewhere", argv[optind],
				image);
	if (!info && strcmp(image, "-") != 0 &&
	    (rc = ndz_output_check(image, force, &zerr)) < 0)
		cli_die(EXIT_FAIL, "%s%s", ndz_error_msg(&zerr),
			rc == NDZ_ENOTFILE ? "" : "; use --force to replace it");
	if (manifest && !sign_path)
		cli_usage_error("--manifest: only with --sign");
	if (sign_path && !info) {
		if (!manifest && strcmp(image, "-") == 0)
			cli_usage_error("--sign: an image to stdout%s needs --manifest FILE",
					upload ? " or uploaded" : "");
		if (!manifest && ndz_manifest_path(image, mbuf, sizeof(mbuf), &zerr) < 0)
			cli_usage_error("%s", ndz_error_msg(&zerr));
		manifest = manifest ? manifest : mbuf;
		load_key(sign_path, NDZ_KEY_SIGN_SECRET, &sign_key);
		seal_opts.sign = 1;
	}
	if (index_path && no_index)
		cli_usage_error("--index and --no-index: one or the other");
	if (index_path && to_orig)
		cli_usage_error("--index: the original format has no content index (--to-orig)");
	/* The content index: beside a file image by default, where named otherwise. */
	if (!info && !no_index && !to_orig && !index_path && strcmp(image, "-") != 0) {
		if (ndz_index_path(image, ibuf, sizeof(ibuf), &zerr) < 0)
			cli_usage_error("%s", ndz_error_msg(&zerr));
		index_path = ibuf;
	}
	if (info || no_index || to_orig)
		index_path = NULL;
	if (index_path)
		zopts.index = &index;
	if (cipher && !crypt_path)
		cli_usage_error("--cipher: only with --encrypt");
	if (crypt_path && !info) {
		load_key(crypt_path, NDZ_KEY_CRYPT, &crypt_key);
		seal_opts.crypt = &crypt_key;
		seal_opts.cipher = cipher;
	}
	/* --sign and --encrypt: the sealer between the compressor and the image */
	if (!info) {
		if (ndz_seal_create(&seal_opts, &seal, &zerr) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&zerr));
		ndz_key_wipe(&crypt_key);
		zopts.reserve = ndz_seal_reserve(seal);
	}

	signal(SIGPIPE, SIG_IGN);
	if (from)
		src = from_image(argv[optind], image, orig_key, &scan);
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

	if (upload)
		open_upload(upload, wait_s, &out);
	else
		open_output(image, &out);
	cli_progress_init(&prog, progress, "reading", "disk", "read");
	cli_progress_total(&prog, ndz_ranges_total(&scan.alloc) * NDZ_SECTOR_SIZE, 0);
	zopts.progress = show_progress;
	zopts.progress_ctx = &prog;
	if (to_orig) {
		memset(&stats, 0, sizeof(stats));
		stats.in_bytes = ndz_ranges_total(&scan.alloc) * NDZ_SECTOR_SIZE;
		rc = ndz_orig_zip_v3(zview ? zview : view, scan.bytes, &scan.alloc,
				     level < 0 ? NDZ_ZLIB_DEFAULT_LEVEL : level, ndz_seal_chunk, seal,
				     &stats.chunks, &zerr);
		stats.out_bytes = (uint64_t)stats.chunks * NDZ_CHUNK_SIZE;
	} else {
		rc = ndz_zip(zview ? zview : view, scan.bytes, &scan.alloc, &zopts, ndz_seal_chunk,
			     seal, &stats, &zerr);
	}
	cli_progress_update(&prog, stats.in_bytes, 0);
	if (rc < 0)
		cli_progress_end(&prog, 0);    /* before the reason: the reason is the last line */
	/* an upload that ended first (the master refused, rejected, went away) is the cause */
	if (rc < 0 && upsink) {
		struct ndz_error uerr = { 0 };

		rc = ndz_upsink_finish(upsink, 1, NULL, &uerr);
		if (rc != NDZ_ECANCELED && uerr.code)
			zerr = uerr;
		rc = zerr.code ? zerr.code : NDZ_EIO;
		upsink = NULL;
	}
	if (rc < 0)
		cli_error("%s", ndz_error_msg(&zerr));
	if (rc == 0)
		cli_progress_phase(&prog, "flushing");
	/* The manifest is in place before the image is: a signed image never lacks it. */
	if (rc == 0 && seal_opts.sign &&
	    (rc = ndz_seal_finish(seal, &sign_key, manifest, &zerr)) < 0) {
		cli_error("%s", ndz_error_msg(&zerr));
		manifest = NULL;
	}
	/* The index too: an image whose index is in place before it never lacks it. */
	if (rc == 0 && index_path) {
		uint8_t *ib = NULL;
		size_t ilen = 0;

		rc = ndz_index_encode(&index, seal_opts.sign ? &sign_key : NULL, &ib, &ilen, &zerr);
		if (rc == 0)
			rc = ndz_index_save(index_path, ib, ilen, &zerr);
		free(ib);
		if (rc < 0) {
			cli_error("%s", ndz_error_msg(&zerr));
			index_path = NULL;
		}
	}
	if (rc == 0 && commit_output(&out) < 0)
		rc = NDZ_EIO;
	cli_progress_end(&prog, rc == 0);
	if (upsink)                    /* the manifest failed: the master must not store it */
		ndz_upsink_finish(upsink, 1, NULL, NULL);
	if (rc < 0)
		discard_output(&out);
	if (rc < 0 && seal_opts.sign && manifest)
		unlink(manifest);
	if (rc < 0 && index_path)
		unlink(index_path);
	ndz_index_release(&index);
	ndz_key_wipe(&sign_key);
	ndz_seal_free(seal);
	if (rc == 0 && cli_verbose)
		cli_info("%s: %llu of %llu bytes in use, imaged into %u chunks (%.1f%% of the "
			 "bytes in use), %.2f s, %s, flushed in %.2f s",
			 argv[optind], (unsigned long long)stats.in_bytes,
			 (unsigned long long)scan.bytes, stats.chunks,
			 stats.in_bytes ? 100.0 * (double)stats.out_bytes / (double)stats.in_bytes : 0.0,
			 cli_progress_elapsed(&prog), cli_progress_rate(&prog, rate, sizeof(rate)),
			 prog.flush_s);
	if (rc == 0 && cli_verbose && upload)
		cli_info("stored as image '%s' on %.*s", strrchr(upload, ':') + 1,
			 (int)(strrchr(upload, ':') - upload), upload);
	ndz_io_close(zview);
	ndz_scan_result_release(&scan);
	ndz_io_close(out.io);
	ndz_io_close(view);
	ndz_io_close(src);
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}
