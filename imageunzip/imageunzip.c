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
#include "codec/seed.h"
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
	"                     the content index says); from a file, read only those\n"
	"      --verify       after the flush, read every chunk back from TARGET (past\n"
	"                     the page cache) and check it against the content index;\n"
	"                     exit 1 when one differs\n"
	"      --index FILE   the content index (default IMAGE.index; needed when\n"
	"                     IMAGE is '-' with --seed or --verify)\n"
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

/*
 * Progress counts disk bytes written (or zeroed), as the summary does; chunks give
 * the part done. -n writes nothing: it counts image bytes checked.
 */
static int verifying;

static void progress_cb(void *ctx, uint64_t bytes, uint32_t chunks)
{
	cli_progress_update(ctx, verifying ? (uint64_t)chunks * NDZ_CHUNK_SIZE : bytes, chunks);
}

static void flushing_cb(void *ctx)
{
	cli_progress_phase(ctx, "flushing");
}

/*
 * Before anything is written, the verifier's rule (lib/trust/verify.h): the keys
 * fit the image's encryption, and with a public key its signed manifest (mpath,
 * default IMAGE.manifest) is this image's. Dies with the reason.
 */
static void check_trust(struct ndz_verify *v, const char *image, const char *mpath,
			struct ndz_image_walk *walk)
{
	const struct ndz_chunk_hdr *h0 = ndz_image_walk_first(walk);
	struct ndz_image_id id = { .source_bytes = h0->source_bytes, .first = h0,
				   .chunks = ndz_image_walk_chunks(walk) };
	struct ndz_error e = { 0 };
	static char buf[4096];

	if (ndz_verify_wants_manifest(v)) {
		if (!mpath) {
			if (strcmp(image, "-") == 0)
				cli_usage_error("--key: an image from stdin needs --manifest FILE");
			if (ndz_manifest_path(image, buf, sizeof(buf), &e) < 0)
				cli_usage_error("%s", ndz_error_msg(&e));
			mpath = buf;
		}
		if (ndz_verify_load_manifest(v, mpath, &e) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	}
	memcpy(id.uuid, h0->uuid, 16);
	if (ndz_verify_image(v, &id, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
}

/*
 * --seed, --verify: the content index (ipath, default IMAGE.index), signed by pub
 * when a public key was given, and of this image. 1 when ix may be used; 0 when
 * not, with a warning (--seed restores every chunk); --verify cannot do without
 * it: dies before anything is written.
 */
static int load_index(const char *image, const char *ipath, const struct ndz_key *pub,
		      const struct ndz_chunk_hdr *h0, uint32_t chunks, int verify_after,
		      struct ndz_index *ix)
{
	struct ndz_error e = { 0 };
	static char buf[4096];

	if (!ipath) {
		if (strcmp(image, "-") == 0)
			cli_usage_error("--seed, --verify: an image from stdin needs --index FILE");
		if (ndz_index_path(image, buf, sizeof(buf), &e) < 0)
			cli_usage_error("%s", ndz_error_msg(&e));
		ipath = buf;
	}
	if (NDZ_IS_ORIG(h0))
		ndz_error_set(&e, NDZ_ENOTSUP, 0, "%s: an original-format image has no content "
			      "index", image);
	else if (ndz_index_load(ipath, pub->type == NDZ_KEY_SIGN_PUBLIC ? pub : NULL, ix,
				&e) == 0 &&
		 ndz_index_match(ix, h0->uuid, h0->source_bytes, chunks, &e) < 0)
		ndz_error_prefix(&e, "%s", ipath);
	if (!e.code)
		return 1;
	ndz_index_release(ix);
	if (verify_after)
		cli_die(EXIT_FAIL, "%s: --verify has nothing to check against; nothing written",
			ndz_error_msg(&e));
	cli_warn("%s: restoring every chunk", ndz_error_msg(&e));
	return 0;
}

/*
 * --verify: every chunk read back past the page cache and checked. 0 when the
 * target holds the image, else NDZ_ECORRUPT with e naming the first that differs
 * (or a read error's code).
 */
static int verify_target(struct ndz_io *target, const struct ndz_index *ix, int zero_fill,
			 struct ndz_error *e)
{
	struct ndz_seed_opts so = { 0, zero_fill, 1 };
	struct ndz_seed *s;
	uint32_t i, differ = 0, first = 0;
	int rc;

	if ((rc = ndz_seed_create(target, ix, &so, &s, e)) < 0)
		return rc;
	for (i = 0; i < ix->chunks; i++) {
		rc = ndz_seed_check(s, i, e);
		if (rc < 0) {
			ndz_seed_free(s);
			return rc;
		}
		if (!rc && !differ++)
			first = i;
	}
	ndz_seed_free(s);
	if (differ)
		return ndz_error_set(e, NDZ_ECORRUPT, 0, "%s: verify: %u of %u chunks differ from "
				     "the image after the restore (the first: chunk %u)",
				     target->name, differ, ix->chunks, first);
	if (cli_verbose)
		cli_info("%s: verified: every one of %u chunks as the index says", target->name,
			 ix->chunks);
	return 0;
}

/*
 * A seeded restore from a file: chunk i is read only when the target does not hold
 * it; a held one is only counted (ndz_unzip_held). The pipeline does the image's
 * rules on the chunks put. Returns 0 or a negative code with err set.
 */
static int seed_file(struct ndz_unzip *u, struct ndz_io *in, struct ndz_seed *s,
		     const struct ndz_index *ix, uint32_t *held, struct ndz_error *err)
{
	struct ndz_chunk_hdr h;
	uint32_t i;
	int rc;

	for (i = 0; i < ix->chunks; i++) {
		uint8_t *buf;

		rc = s ? ndz_seed_check(s, i, err) : 0;
		if (rc < 0)
			return rc;
		if (rc == 1) {
			rc = ndz_unzip_held(u, i, ix->e[i].first, ix->e[i].last, err);
			if (rc < 0)
				return rc;
			(*held)++;
			continue;
		}
		buf = ndz_unzip_get_buf(u, err);
		if (!buf)
			return err->code ? err->code : NDZ_ENOMEM;
		rc = ndz_io_read_full(in, buf, NDZ_CHUNK_SIZE, (uint64_t)i * NDZ_CHUNK_SIZE, NULL,
				      err);
		if (rc == 0 && (rc = ndz_hdr_decode(buf, &h, err)) < 0)
			ndz_error_prefix(err, "%s", in->name);
		if (rc == 0 && h.index != i)
			rc = ndz_error_set(err, NDZ_EREGION, 0, "%s: chunk %u: found at place %u: "
					   "chunks out of order", in->name, h.index, i);
		if (rc < 0) {
			ndz_unzip_put_buf(u, buf, NULL, 0, NULL);
			return rc;
		}
		rc = ndz_unzip_put_buf(u, buf, &h, 0, err);
		if (rc < 0)
			return rc;
	}
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
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	const struct ndz_chunk_hdr *h0;
	struct ndz_chunk_hdr h;
	struct ndz_unzip_opts uopts;
	struct ndz_unzip_stats stats;
	struct ndz_image_walk *walk;
	struct ndz_verify_opts vopts = { 0 };
	struct ndz_verify *verify;
	struct ndz_unzip *u = NULL;
	struct ndz_io *in, *target = NULL, *disk = NULL;
	struct ndz_error err = { 0 };
	struct cli_progress prog;
	const char *tpath = NULL, *mpath = NULL, *okey = NULL, *opub = NULL;
	struct ndz_orig_keys okeys = { 0 };
	struct ndz_key pub = { 0 }, crypt = { 0 };
	const struct ndz_manifest *m;
	int slice = 0, progress = 0, created = 0, force = 0, c, rc;
	int seed = 0, verify_after = 0, have_ix = 0;
	const char *ipath = NULL;
	struct ndz_index ix = { 0 };
	struct ndz_seed *seeder = NULL;
	uint32_t held = 0;
	char rate[64];

	cli_init(argv[0]);
	ndz_unzip_opts_init(&uopts);
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

	/* A file is judged whole before anything is written; a stream from chunk 0 on. */
	in = cli_open_image(argv[optind]);
	if ((okey || opub) && ndz_orig_load_keys(okey, opub, &okeys, &err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&err));
	vopts.orig = &okeys;           /* --orig-pubkey: the verifier's rule for each chunk */
	vopts.pub = &pub;
	vopts.crypt = &crypt;
	vopts.name = argv[optind];
	if (ndz_verify_create(&vopts, &verify, &err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&err));
	ndz_key_wipe(&crypt);
	/* A signed image is stored in order: a chunk out of place is refused. */
	if (ndz_image_walk_open(in, pub.type != NDZ_KEY_NONE ? NDZ_WALK_ORDER : 0, &walk,
				&err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&err));
	h0 = ndz_image_walk_first(walk);
	if (okey || opub) {
		if (!NDZ_IS_ORIG(h0))
			cli_usage_error("--orig-key and --orig-pubkey: only for an original "
					"Frisbee image");
		if (opub)
			cli_warn("%s: checking the original's RSA-512 signatures: a 512-bit key is "
				 "factored in hours, so they prove nothing against a forger; "
				 "convert the image and sign it (imagekey) for that", opub);
		uopts.orig_keys = &okeys;
	}
	if (NDZ_ORIG_ENCRYPTED(h0) && !okey)
		cli_die(EXIT_FAIL, "%s: %s: an original Blowfish-encrypted image; give its key "
			"file with --orig-key", argv[optind], ndz_strerror(NDZ_ENEEDKEY));
	if (NDZ_ORIG_SIGNED(h0) && !opub)
		cli_warn("%s: an original signed image: its signatures are not checked without "
			 "--orig-pubkey", argv[optind]);
	if (mpath && pub.type == NDZ_KEY_NONE)
		cli_usage_error("--manifest: only with a public --key");
	check_trust(verify, argv[optind], mpath, walk);
	if (tpath) {
		/* With -n a target is only measured, never written or created. */
		/* A partition's disk must exist; a whole-image target file may be created. */
		if (uopts.verify_only || slice) {
			rc = ndz_io_open_file(tpath, uopts.verify_only ? NDZ_IO_READ : NDZ_IO_WRITE,
					      &target, &err);
		} else {
			/* a file we create goes again if we fail or are stopped by a signal */
			cli_hold_signals(1);
			rc = ndz_io_open_target(tpath, h0->source_bytes, &created, &target, &err);
			if (rc == 0 && created)
				cli_own_file(tpath);
			cli_hold_signals(0);
		}
		if (rc < 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&err));
		/* A new file is all holes: zeros need not be written. */
		uopts.target_zeroed = created && !(NDZ_IS_ORIG(h0) && !h0->source_bytes);
		if (slice) {
			disk = target;
			target = partition_view(disk, slice, h0);
			uopts.orig_base = slice_start;
		} else if (h0->image_kind == NDZ_KIND_PARTITION && !uopts.verify_only) {
			warn_whole_disk(target, h0);
		}
		if (ndz_image_fits(h0, tpath, target->size, &err) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&err));
	}
	/* The content index, before anything is written (--verify dies without it). */
	if (seed || verify_after)
		have_ix = load_index(argv[optind], ipath, &pub, h0, ndz_image_walk_chunks(walk),
				     verify_after, &ix);
	/* A file we just made holds nothing worth a scan. */
	if (have_ix && seed && !created) {
		struct ndz_seed_opts so = { 0, uopts.zero_fill, 0 };

		if (ndz_seed_create(target, &ix, &so, &seeder, &err) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&err));
	}
	uopts.progress = progress_cb;
	uopts.flushing = flushing_cb;
	uopts.progress_ctx = &prog;
	uopts.name = in->name;
	uopts.expect_chunks = ndz_image_walk_chunks(walk);
	if (have_ix && seed && !uopts.expect_chunks)
		uopts.expect_chunks = ix.chunks;           /* a stream: the index says */
	m = ndz_verify_get_manifest(verify);
	if (m) {
		uopts.expect_chunks = m->chunks;
		uopts.expect_uuid_set = 1;
		memcpy(uopts.expect_uuid, m->uuid, 16);
	}
	uopts.verify = verify;
	verifying = uopts.verify_only;
	if (verifying)
		cli_progress_init(&prog, progress, "checking", "image", "checked");
	else
		cli_progress_init(&prog, progress, "writing", "disk", "written");
	cli_progress_total(&prog, (uint64_t)verifying * uopts.expect_chunks * NDZ_CHUNK_SIZE,
			   uopts.expect_chunks);
	rc = ndz_unzip_create(target, &uopts, &u, NULL);
	if (rc < 0)
		cli_die(EXIT_FAIL, "%s", ndz_strerror(rc));

	/* Each chunk is read straight into a buffer of the pipeline. */
	if (have_ix && seed && !in->is_stream) {
		seed_file(u, in, seeder, &ix, &held, &err);
	} else {
		for (;;) {
			uint8_t *buf = ndz_unzip_get_buf(u, NULL);

			if (!buf)
				break;
			rc = ndz_image_walk_next(walk, buf, &h, &err);
			if (rc <= 0) {
				ndz_unzip_put_buf(u, buf, NULL, 0, NULL);
				break;
			}
			/* a stream is read whole; a chunk the target holds is not written */
			rc = seeder && h.index < ix.chunks && h.first == ix.e[h.index].first &&
			     h.last == ix.e[h.index].last ? ndz_seed_check(seeder, h.index, &err) : 0;
			if (rc != 0) {
				ndz_unzip_put_buf(u, buf, NULL, 0, NULL);
				if (rc < 0 || ndz_unzip_held(u, h.index, h.first, h.last, &err) < 0)
					break;
				held++;
				continue;
			}
			if (ndz_unzip_put_buf(u, buf, &h, 0, NULL) < 0)
				break;
		}
	}
	/* The first error wins: the reader's above, or the pipeline's. */
	rc = ndz_unzip_finish(u, &stats, &err);
	if (err.code)
		rc = err.code;
	progress_cb(&prog, stats.bytes_written + stats.bytes_zeroed, stats.chunks);
	if (rc == 0 && verify_after) {
		cli_progress_phase(&prog, "verifying");
		rc = verify_target(target, &ix, uopts.zero_fill, &err);
	}
	cli_progress_end(&prog, rc == 0);
	if (rc < 0)
		cli_error("%s", ndz_error_msg(&err));
	ndz_seed_free(seeder);
	ndz_index_release(&ix);
	ndz_unzip_free(u);
	ndz_image_walk_free(walk);
	ndz_verify_free(verify);
	memset(&okeys, 0, sizeof(okeys));
	if (rc < 0)
		cli_drop_file();
	else
		cli_own_file(NULL);
	ndz_io_close(target);
	ndz_io_close(disk);
	ndz_io_close(in);
	if (rc == 0 && cli_verbose) {
		char flushed[48] = "", held_s[64];

		snprintf(held_s, sizeof(held_s), " (%u held by the target, %u restored)", held,
			 stats.chunks);

		if (prog.flush_s >= 0)
			snprintf(flushed, sizeof(flushed), ", flushed in %.2f s", prog.flush_s);
		cli_info("%s: %u chunks%s, %llu bytes written, %llu zeroed, %.2f s, %s%s%s",
			 argv[optind], stats.chunks + held, seed ? held_s : "",
			 (unsigned long long)stats.bytes_written,
			 (unsigned long long)stats.bytes_zeroed, cli_progress_elapsed(&prog),
			 cli_progress_rate(&prog, rate, sizeof(rate)), flushed,
			 uopts.verify_only ? " (verified, nothing written)" : "");
	}
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}
