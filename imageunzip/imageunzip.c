/* imageunzip: restore an image (file or stdin) onto a disk, partition or file. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/err.h"
#include "core/format.h"
#include "core/image.h"
#include "core/io.h"
#include "core/orig.h"
#include "part.h"
#include "core/target.h"
#include "trust/index.h"
#include "trust/verify.h"
#include "codec/job.h"
#include "codec/unzip.h"

static const char usage_text[] =
	"Usage: imageunzip [options] IMAGE TARGET\n"
	"       imageunzip -n [options] IMAGE\n"
	"Restore IMAGE ('-' for stdin) onto TARGET, a disk, partition or file.\n"
	"A TARGET file that does not exist is created at the image's size.\n"
	"\n"
	"  -s, --slice N      restore into partition N of TARGET (a partition image)\n"
	"  -z, --zero         write zeros to the space the image skips (default: leave it)\n"
	"  --discard          discard that space instead (BLKDISCARD; a hole in a file):\n"
	"                     quick on solid state disks, what it reads back is not promised\n"
	"  -n, --check        read, check and decompress everything, write nothing\n"
	"      --seed         write only the chunks TARGET does not hold already (as\n"
	"                     the content index says); from a file, read only those,\n"
	"                     and of a zstd chunk only the pieces (frames) that differ\n"
	"      --verify       after the flush, read every chunk back from TARGET (past\n"
	"                     the page cache) and check it against the content index;\n"
	"                     exit 1 when one differs\n"
	"      --index FILE   the content index (default IMAGE.index; needed when\n"
	"                     IMAGE is '-' with --seed or --verify)\n"
	"      --direct       write past the page cache (O_DIRECT) on a file too\n"
	"                     (default: on a block device only); a file system that\n"
	"                     refuses it is written through the cache\n"
	"      --no-direct    write through the page cache on a block device too\n"
	"  -f, --force        write to TARGET even while it is in use (mounted, swap,\n"
	"                     held, or the file behind a loop device in use)\n"
	"  -j, --threads N    decompression threads (default: online cores)\n"
	"  -m, --memory MIB   buffer memory in MiB (default 128, at least 16)\n"
	"  -o, --progress     show progress and the time left: a line redrawn on a\n"
	"                     terminal, else a plain line every few seconds\n"
	"      --progress=json  progress as one JSON object a line (see the man page)\n"
	"  -k, --key FILE     a public key: every chunk must be the one the image's\n"
	"                     signed manifest names, else nothing of it is written;\n"
	"                     an encryption key: decrypt the image (both may be given);\n"
	"                     --seed and --verify then trust only an index it signed\n"
	"      --manifest FILE  the signed manifest (default IMAGE.manifest; needed\n"
	"                     when IMAGE is '-')\n"
	"      --orig-key FILE    an original Frisbee V4 image's Blowfish key file\n"
	"      --orig-pubkey FILE an original V4 image's RSA public key (.skey): every\n"
	"                     chunk must carry a signature that verifies under it\n"
	"                     (RSA-512: no protection against forgery)\n"
	"  -q, --quiet        print errors only\n"
	"  -v, --verbose      print a summary at the end\n"
	"  -h, --help         show this help and exit\n"
	"  -V, --version      show the version and exit\n"
	"\n"
	"Exit status: 0 every chunk written (or held already) and flushed, and with\n"
	"--verify found on TARGET; 1 failure, 2 bad usage.\n";

static uint64_t slice_start;          /* -s N: the partition's first sector */

/*
 * -s N: a view of partition N of disk, so nothing outside it can be written.
 * Dies with a message naming the disk when there is no such partition or the
 * image does not fit.
 */
static struct ndz_io *partition_view(struct ndz_io *disk, int index,
				     const struct ndz_chunk_hdr *h)
{
	const struct ndz_part *p;
	struct ndz_ptable t;
	struct ndz_io *view;
	struct ndz_error err = { 0 };
	uint64_t bytes;
	int rc;

	ndz_ptable_init(&t);
	rc = ndz_part_read(disk, &t, &err);
	if (rc < 0) {
		ndz_error_prefix(&err, "%s", disk->name);
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&err));
	}
	p = ndz_part_find(&t, index);
	if (!p || p->container)
		cli_die(EXIT_FAIL, "%s: partition %d: %s", disk->name, index,
			t.scheme == NDZ_SCHEME_NONE ? "no partition table" :
			p ? "is an extended partition" : ndz_strerror(NDZ_ENOENT));
	bytes = p->count * NDZ_SECTOR_SIZE;
	if (h->source_bytes > bytes)
		cli_die(EXIT_FAIL, "%s: partition %d: %s (%llu bytes, the image needs %llu)",
			disk->name, index, ndz_strerror(NDZ_ETOOSMALL),
			(unsigned long long)bytes, (unsigned long long)h->source_bytes);
	slice_start = p->start;
	if (NDZ_IS_ORIG(h))
		;                      /* the original format does not say */
	else if (h->image_kind != NDZ_KIND_PARTITION)
		cli_warn("%s: not a partition image; restoring it into partition %d anyway",
			 disk->name, index);
	else if (h->part_type != p->type)
		cli_warn("%s: partition %d has type 0x%x, the image came from type 0x%x",
			 disk->name, index, p->type, h->part_type);
	rc = ndz_io_open_sub(disk, p->start * NDZ_SECTOR_SIZE, bytes, &view, NULL);
	if (rc < 0)
		cli_die(EXIT_FAIL, "%s: %s", disk->name, ndz_strerror(rc));
	ndz_ptable_release(&t);
	return view;
}

/* A partition image about to overwrite a disk's partition table deserves a word. */
static void warn_whole_disk(struct ndz_io *target, const struct ndz_chunk_hdr *h)
{
	struct ndz_ptable t;

	ndz_ptable_init(&t);
	if (ndz_part_read(target, &t, NULL) == 0 && t.scheme != NDZ_SCHEME_NONE)
		cli_warn("%s: holds a partition table; the image is of partition %u alone and "
			 "goes to its start (imageunzip -s N restores into partition N)",
			 target->name, h->part_index);
	ndz_ptable_release(&t);
}

/* Where the restore writes (the job's target): TARGET, or partition N of it. */
struct target {
	const char *path;
	int slice, verify_only;
	int direct;                    /* --direct 1, --no-direct 0, else -1: devices only */
	struct ndz_io *io, *disk;
};

/*
 * Opened once the image's first header is known: with -n only measured; a
 * partition's disk must exist; a whole-image target file may be created (and goes
 * again if we fail or are stopped by a signal).
 */
static int open_target(void *ctx, const struct ndz_chunk_hdr *h0, struct ndz_io **io,
		       int *created, uint64_t *base, struct ndz_error *e)
{
	struct target *t = ctx;
	int rc;

	*created = 0;
	if (t->verify_only || t->slice) {
		rc = ndz_io_open_file(t->path, t->verify_only ? NDZ_IO_READ : NDZ_IO_WRITE, &t->io,
				      e);
	} else {
		cli_hold_signals(1);
		rc = ndz_io_open_target(t->path, h0->source_bytes, created, &t->io, e);
		if (rc == 0 && *created)
			cli_own_file(t->path);
		cli_hold_signals(0);
	}
	if (rc < 0)
		return rc;
	/* past the page cache: a copy and its writeback less (a refusal is no error) */
	if (!t->verify_only && (t->direct > 0 || (t->direct < 0 && t->io->is_blockdev)) &&
	    (rc = ndz_io_direct(t->io, e)) < 0)
		return rc;
	if (t->slice) {
		t->disk = t->io;
		t->io = partition_view(t->disk, t->slice, h0);
		*base = slice_start;
	} else if (h0->image_kind == NDZ_KIND_PARTITION && !t->verify_only) {
		warn_whole_disk(t->io, h0);
	}
	*io = t->io;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "zero", no_argument, NULL, 'z' },
		{ "discard", no_argument, NULL, 0x100 },
		{ "force", no_argument, NULL, 'f' },
		{ "slice", required_argument, NULL, 's' },
		{ "check", no_argument, NULL, 'n' },
		{ "verify", no_argument, NULL, 0x104 },
		{ "seed", no_argument, NULL, 0x103 },
		{ "index", required_argument, NULL, 0x105 },
		{ "threads", required_argument, NULL, 'j' },
		{ "memory", required_argument, NULL, 'm' },
		{ "progress", optional_argument, NULL, 'o' },
		{ "key", required_argument, NULL, 'k' },
		{ "manifest", required_argument, NULL, 'M' },
		{ "orig-key", required_argument, NULL, 0x101 },
		{ "orig-pubkey", required_argument, NULL, 0x102 },
		{ "direct", no_argument, NULL, 0x106 },
		{ "no-direct", no_argument, NULL, 0x107 },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	struct ndz_unzip_opts uopts;
	struct ndz_restore_opts jo = { 0 };
	struct ndz_restore_result res;
	struct target tgt = { 0 };
	struct cli_job job = { 0 };
	struct ndz_error err = { 0 };
	const char *tpath = NULL, *mpath = NULL, *okey = NULL, *opub = NULL;
	struct ndz_key pub = { 0 }, crypt = { 0 };
	int slice = 0, progress = 0, force = 0, c, rc;
	int seed = 0, verify_after = 0;
	const char *ipath = NULL;
	char rate[64], direct_s[200];

	cli_init(argv[0]);
	ndz_unzip_opts_init(&uopts);
	tgt.direct = -1;
	while ((c = getopt_long(argc, argv, "zs:nfj:m:ok:qvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'z':
			uopts.zero_fill = 1;
			break;
		case 0x100:
			uopts.discard = 1;
			break;
		case 'f':
			force = 1;
			break;
		case 's':
			slice = cli_parse_int(optarg, "-s", 1, 65535);
			break;
		case 'n':
			uopts.verify_only = 1;
			break;
		case 'j':
			uopts.threads = cli_parse_int(optarg, "-j", 1, 32);
			break;
		case 'm':
			uopts.mem_limit = (size_t)cli_parse_int(optarg, "-m", 16, 1 << 20) << 20;
			break;
		case 'o':
			progress = cli_progress_option(optarg);
			break;
		case 'k':
			cli_add_key(optarg, &pub, &crypt);
			break;
		case 'M':
			mpath = optarg;
			break;
		case 0x101:
			okey = optarg;
			break;
		case 0x102:
			opub = optarg;
			break;
		case 0x103:
			seed = 1;
			break;
		case 0x104:
			verify_after = 1;
			break;
		case 0x105:
			ipath = optarg;
			break;
		case 0x106:
			tgt.direct = 1;
			break;
		case 0x107:
			tgt.direct = 0;
			break;
		default:
			cli_common_option(c, usage_text);
			break;
		}
	}
	if (uopts.zero_fill && uopts.discard)
		cli_usage_error("-z and --discard exclude each other");
	if ((seed || verify_after) && uopts.verify_only)
		cli_usage_error("--seed and --verify restore onto TARGET: not with -n");
	if (ipath && !seed && !verify_after)
		cli_usage_error("--index: only with --seed or --verify");
	if (argc - optind != 2 && !(uopts.verify_only && argc - optind == 1))
		cli_usage_error(uopts.verify_only ? "expected IMAGE [TARGET]" :
				"expected IMAGE and TARGET");
	if (argc - optind == 2)
		tpath = argv[optind + 1];
	signal(SIGPIPE, SIG_IGN);
	/* Nothing in use is written to, and nothing is read before that is known. */
	if (tpath && !uopts.verify_only &&
	    ndz_same_file(strcmp(argv[optind], "-") == 0 ? "/dev/stdin" : argv[optind], tpath))
		cli_usage_error("IMAGE %s and TARGET %s are the same file (or a loop device and "
				"its file): restoring would overwrite the image as it is read",
				argv[optind], tpath);
	if (tpath && !uopts.verify_only && !force && ndz_target_check(tpath, &err) < 0)
		cli_die(EXIT_FAIL, "%s; use --force to write anyway", ndz_error_msg(&err));

	if (mpath && pub.type == NDZ_KEY_NONE)
		cli_usage_error("--manifest: only with a public --key");

	/* The job: the image's rules, then TARGET opened, written, flushed (and read back). */
	jo.in = cli_open_image(argv[optind]);
	jo.name = argv[optind];
	jo.target = (struct ndz_job_target){ tpath ? open_target : NULL, &tgt };
	jo.unzip = uopts;
	jo.pub = &pub;
	jo.crypt = &crypt;
	jo.manifest = mpath;
	jo.orig_key = okey;
	jo.orig_pub = opub;
	jo.seed = seed;
	jo.verify_after = verify_after;
	jo.index = ipath;
	jo.report = cli_job_report;
	jo.report_ctx = &job;
	job.mode = progress;
	tgt.path = tpath;
	tgt.slice = slice;
	tgt.verify_only = uopts.verify_only;
	rc = ndz_restore(&jo, &res, &err);
	ndz_key_wipe(&crypt);
	if (rc < 0 && res.usage)
		cli_usage_error("%s", ndz_error_msg(&err));
	if (rc < 0)
		cli_error("%s", ndz_error_msg(&err));
	if (rc < 0)
		cli_drop_file();
	else
		cli_own_file(NULL);
	if (rc == 0 && cli_verbose && tpath && !uopts.verify_only)
		cli_info("%s: %s", tpath, ndz_io_direct_describe(tgt.disk ? tgt.disk : tgt.io,
								 direct_s, sizeof(direct_s)));
	ndz_io_close(tgt.io);
	ndz_io_close(tgt.disk);
	ndz_io_close(jo.in);
	if (rc == 0 && cli_verbose) {
		char flushed[48] = "", held_s[224];

		snprintf(held_s, sizeof(held_s), " (%u held by the target, %u restored, %u "
			 "patched: %u of %u pieces written, %llu bytes of them read)", res.held,
			 res.stats.chunks, res.patch.chunks, res.patch.pieces_written,
			 res.patch.pieces, (unsigned long long)res.patch.image_bytes);

		if (job.prog.flush_s >= 0)
			snprintf(flushed, sizeof(flushed), ", flushed in %.2f s", job.prog.flush_s);
		cli_info("%s: %u chunks%s, %llu bytes written, %llu zeroed, %.2f s, %s%s%s",
			 argv[optind], res.stats.chunks + res.held + res.patch.chunks,
			 seed ? held_s : "",
			 (unsigned long long)(res.stats.bytes_written + res.patch.bytes_written),
			 (unsigned long long)res.stats.bytes_zeroed, cli_progress_elapsed(&job.prog),
			 cli_progress_rate(&job.prog, rate, sizeof(rate)), flushed,
			 uopts.verify_only ? " (verified, nothing written)" : "");
	}
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}
