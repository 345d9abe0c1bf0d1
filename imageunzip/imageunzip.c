/* imageunzip: restore an image (file or stdin) onto a disk, partition or file. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "err.h"
#include "format.h"
#include "io.h"
#include "part.h"
#include "unzip.h"

static const char usage_text[] =
	"Usage: imageunzip [options] IMAGE TARGET\n"
	"       imageunzip -n [options] IMAGE\n"
	"Restore IMAGE ('-' for stdin) onto TARGET, a disk, partition or file.\n"
	"A TARGET file that does not exist is created at the image's size.\n"
	"\n"
	"  -s, --slice N      restore into partition N of TARGET (a partition image)\n"
	"  -z, --zero         write zeros to the space the image skips (default: leave it)\n"
	"  -n, --verify       read, check and decompress everything, write nothing\n"
	"  -j, --threads N    decompression threads (default: online cores)\n"
	"  -m, --memory MIB   buffer memory in MiB (default 128, at least 16)\n"
	"  -o, --progress     show progress on a terminal\n"
	"  -q, --quiet        print errors only\n"
	"  -v, --verbose      print a summary at the end\n"
	"  -h, --help         show this help and exit\n"
	"  -V, --version      show the version and exit\n"
	"\n"
	"Exit status: 0 every chunk written and flushed, 1 failure, 2 bad usage.\n";

struct input {
	int fd;
	const char *name;              /* for messages */
	uint64_t size;                 /* regular file size, or 0 */
	int seekable;
};

/* Read a whole chunk; returns bytes read (0 at a clean end) or -1 on error. */
static ssize_t read_chunk(struct input *in, uint8_t *buf)
{
	size_t done = 0;

	while (done < NDZ_CHUNK_SIZE) {
		ssize_t n = read(in->fd, buf + done, NDZ_CHUNK_SIZE - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

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
	char err[400];
	uint64_t bytes;
	int rc;

	ndz_ptable_init(&t);
	rc = ndz_part_read(disk, &t, err, sizeof(err));
	if (rc < 0)
		cli_die(EXIT_FAIL, "%s", rc == NDZ_EPART ? err : ndz_strerror(rc));
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
	if (h->image_kind != NDZ_KIND_PARTITION)
		cli_warn("%s: not a partition image; restoring it into partition %d anyway",
			 disk->name, index);
	else if (h->part_type != p->type)
		cli_warn("%s: partition %d has type 0x%x, the image came from type 0x%x",
			 disk->name, index, p->type, h->part_type);
	rc = ndz_io_open_sub(disk, p->start * NDZ_SECTOR_SIZE, bytes, &view);
	if (rc < 0)
		cli_die(EXIT_FAIL, "%s: %s", disk->name, ndz_strerror(rc));
	ndz_ptable_release(&t);
	return view;
}

/* A partition image about to overwrite a disk's partition table deserves a word. */
static void warn_whole_disk(struct ndz_io *target, const struct ndz_chunk_hdr *h)
{
	struct ndz_ptable t;
	char err[400];

	ndz_ptable_init(&t);
	if (ndz_part_read(target, &t, err, sizeof(err)) == 0 && t.scheme != NDZ_SCHEME_NONE)
		cli_warn("%s: holds a partition table; the image is of partition %u alone and "
			 "goes to its start (imageunzip -s N restores into partition N)",
			 target->name, h->part_index);
	ndz_ptable_release(&t);
}

static void progress_cb(void *ctx, uint64_t bytes)
{
	cli_progress_update(ctx, bytes);
}

/* The first min(len, 8) bytes match the magic. */
static int looks_like_image(const uint8_t *buf, uint64_t len)
{
	return memcmp(buf, ndz_magic, len < sizeof(ndz_magic) ? (size_t)len :
				      sizeof(ndz_magic)) == 0;
}

/* For a file image, look at its length and last header before writing anything. */
static void precheck_file(struct input *in, uint8_t *buf)
{
	static struct ndz_chunk_hdr h;
	uint64_t n = in->size / NDZ_CHUNK_SIZE;
	int rc;

	if (in->size == 0)
		cli_die(EXIT_FAIL, "%s: empty file, not an image", in->name);
	/* A short file that is not an image at all is not a "truncated chunk". */
	if (pread(in->fd, buf, sizeof(ndz_magic), 0) < 0)
		cli_die(EXIT_FAIL, "%s: read error: %s", in->name, strerror(errno));
	if (!looks_like_image(buf, in->size))
		cli_die(EXIT_FAIL, "%s: chunk 0: %s", in->name, ndz_strerror(NDZ_EBADMAGIC));
	if (in->size % NDZ_CHUNK_SIZE) {
		if (n == 0)
			cli_die(EXIT_FAIL, "%s: chunk 0: %s (%llu of %u bytes)", in->name,
				ndz_strerror(NDZ_ETRUNC), (unsigned long long)in->size,
				NDZ_CHUNK_SIZE);
		cli_die(EXIT_FAIL, "%s: chunk %llu: %s (%llu of %u bytes)", in->name,
			(unsigned long long)n, ndz_strerror(NDZ_ETRUNC),
			(unsigned long long)(in->size % NDZ_CHUNK_SIZE), NDZ_CHUNK_SIZE);
	}
	if (pread(in->fd, buf, NDZ_HDR_SIZE, (off_t)((n - 1) * NDZ_CHUNK_SIZE)) != NDZ_HDR_SIZE)
		cli_die(EXIT_FAIL, "%s: read error: %s", in->name, strerror(errno));
	rc = ndz_hdr_decode(buf, &h);
	if (rc < 0)
		cli_die(EXIT_FAIL, "%s: chunk %llu: %s", in->name, (unsigned long long)(n - 1),
			ndz_strerror(rc));
	if (h.index != n - 1 || !(h.chunk_flags & NDZ_CHUNK_LAST))
		cli_die(EXIT_FAIL, "%s: %s: the file holds %llu chunks but its last one says "
			"it is chunk %u%s", in->name, ndz_strerror(h.index < n - 1 ? NDZ_EDUP :
								   NDZ_EMISSING),
			(unsigned long long)n, h.index,
			(h.chunk_flags & NDZ_CHUNK_LAST) ? "" : " and is not the image's last");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "zero", no_argument, NULL, 'z' },
		{ "slice", required_argument, NULL, 's' },
		{ "verify", no_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 'j' },
		{ "memory", required_argument, NULL, 'm' },
		{ "progress", no_argument, NULL, 'o' },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 },
	};
	static struct ndz_chunk_hdr h, prev;
	struct ndz_unzip_opts uopts;
	struct ndz_unzip_stats stats;
	struct ndz_unzip *u = NULL;
	struct ndz_io *target = NULL, *disk = NULL;
	int slice = 0;
	struct input in = { STDIN_FILENO, "stdin", 0, 0 };
	struct cli_progress prog;
	const char *tpath = NULL;
	static uint8_t *buf;           /* static: still reachable when we die() */
	uint32_t expect = 0;
	ssize_t got;
	int progress = 0, created = 0, c, rc, frc, saw_last = 0, put_failed = 0, reported;
	double t0;

	cli_init(argv[0]);
	ndz_unzip_opts_init(&uopts);
	while ((c = getopt_long(argc, argv, "zs:nj:m:oqvhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'z':
			uopts.zero_fill = 1;
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
			progress = 1;
			break;
		default:
			cli_common_option(c, usage_text);
			break;
		}
	}
	if (argc - optind != 2 && !(uopts.verify_only && argc - optind == 1))
		cli_usage_error(uopts.verify_only ? "expected IMAGE [TARGET]" :
				"expected IMAGE and TARGET");
	if (argc - optind == 2)
		tpath = argv[optind + 1];
	signal(SIGPIPE, SIG_IGN);

	buf = malloc(NDZ_CHUNK_SIZE);
	if (!buf)
		cli_die(EXIT_FAIL, "%s", ndz_strerror(NDZ_ENOMEM));
	if (strcmp(argv[optind], "-") != 0) {
		struct stat st;

		in.name = argv[optind];
		in.fd = open(in.name, O_RDONLY | O_CLOEXEC);
		if (in.fd < 0 || fstat(in.fd, &st) < 0)
			cli_die(EXIT_FAIL, "%s: %s", in.name, strerror(errno));
		if (S_ISREG(st.st_mode)) {
			in.size = (uint64_t)st.st_size;
			in.seekable = 1;
			precheck_file(&in, buf);
			posix_fadvise(in.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		}
	} else if (isatty(STDIN_FILENO)) {
		cli_usage_error("refusing to read an image from a terminal");
	}

	/* The first chunk says how big the target must be. */
	got = read_chunk(&in, buf);
	if (got < 0)
		cli_die(EXIT_FAIL, "%s: read error: %s", in.name, strerror(errno));
	if (got == 0)
		cli_die(EXIT_FAIL, "%s: empty input, not an image", in.name);
	if (!looks_like_image(buf, (uint64_t)got))
		cli_die(EXIT_FAIL, "%s: chunk 0: %s", in.name, ndz_strerror(NDZ_EBADMAGIC));
	if (got >= (ssize_t)NDZ_HDR_SIZE && (rc = ndz_hdr_decode(buf, &h)) < 0)
		cli_die(EXIT_FAIL, "%s: chunk 0: %s", in.name, ndz_strerror(rc));
	if (got < (ssize_t)NDZ_CHUNK_SIZE)
		cli_die(EXIT_FAIL, "%s: chunk 0: %s (%zd of %u bytes)", in.name,
			ndz_strerror(NDZ_ETRUNC), got, NDZ_CHUNK_SIZE);
	if (tpath) {
		/* With -n a target is only measured, never written or created. */
		/* A partition's disk must exist; a whole-image target file may be created. */
		if (uopts.verify_only || slice)
			rc = ndz_io_open_file(tpath, uopts.verify_only ? NDZ_IO_READ : NDZ_IO_WRITE,
					      &target);
		else
			rc = ndz_io_open_target(tpath, h.source_bytes, &created, &target);
		if (rc < 0)
			cli_die(EXIT_FAIL, "%s: %s", tpath,
				rc == NDZ_ENOTSUP ? "not a regular file or block device" :
				strerror(errno));
		/* A new file is all holes: zeros need not be written. */
		uopts.target_zeroed = created;
		if (slice) {
			disk = target;
			target = partition_view(disk, slice, &h);
		} else if (h.image_kind == NDZ_KIND_PARTITION && !uopts.verify_only) {
			warn_whole_disk(target, &h);
		}
		if (ndz_check_target(&h, target->size) < 0) {
			cli_error("%s: %s (%llu bytes, the image needs %llu)", tpath,
				  ndz_strerror(NDZ_ETOOSMALL), (unsigned long long)target->size,
				  (unsigned long long)h.source_bytes);
			ndz_io_close(target);
			free(buf);
			ndz_io_close(disk);
			return EXIT_FAIL;
		}
	}
	rc = ndz_unzip_create(target, &uopts, &u);
	if (rc < 0)
		cli_die(EXIT_FAIL, "%s", ndz_strerror(rc));
	cli_progress_init(&prog, "imageunzip", h.source_bytes,
			  progress && isatty(STDERR_FILENO) && !cli_quiet);
	uopts.progress = progress_cb;
	t0 = cli_now();

	/* Chunks must come in order, each exactly once, the last one flagged. */
	for (;;) {
		if (expect > 0) {
			got = read_chunk(&in, buf);
			if (got < 0) {
				cli_error("%s: read error: %s", in.name, strerror(errno));
				rc = NDZ_EIO;
				break;
			}
			if (got == 0) {
				if (!saw_last) {
					cli_error("%s: chunk %u: %s (the input ends before the "
						  "image's last chunk)", in.name, expect,
						  ndz_strerror(NDZ_EMISSING));
					rc = NDZ_EMISSING;
				}
				break;
			}
			if (saw_last) {
				cli_error("%s: data after the image's last chunk (chunk %u)",
					  in.name, expect - 1);
				rc = NDZ_EHEADER;
				break;
			}
			if (got < (ssize_t)NDZ_CHUNK_SIZE) {
				cli_error("%s: chunk %u: %s (%zd of %u bytes)", in.name, expect,
					  ndz_strerror(NDZ_ETRUNC), got, NDZ_CHUNK_SIZE);
				rc = NDZ_ETRUNC;
				break;
			}
			rc = ndz_hdr_decode(buf, &h);
			if (rc < 0) {
				cli_error("%s: chunk %u: %s", in.name, expect, ndz_strerror(rc));
				break;
			}
		}
		if (h.index != expect) {
			rc = h.index < expect ? NDZ_EDUP : NDZ_EMISSING;
			cli_error("%s: chunk %u: %s (found chunk %u)", in.name,
				  h.index < expect ? h.index : expect, ndz_strerror(rc), h.index);
			break;
		}
		if ((expect == 0 && h.first != 0) || (expect > 0 && h.first != prev.last)) {
			rc = NDZ_EREGION;
			cli_error("%s: chunk %u: does not start where chunk %u ends", in.name,
				  expect, expect ? expect - 1 : 0);
			break;
		}
		rc = ndz_unzip_put(u, buf);
		if (rc < 0) {
			put_failed = 1;
			break;
		}
		prev = h;
		saw_last = !!(h.chunk_flags & NDZ_CHUNK_LAST);
		expect++;
	}
	/* Errors found above were reported; the pipeline's own are reported here. */
	reported = rc < 0 && !put_failed;
	frc = ndz_unzip_finish(u, &stats);
	if (rc == 0)
		rc = frc;
	if (frc < 0 && !reported)
		cli_error("%s: %s", in.name, ndz_unzip_errmsg(u));
	cli_progress_end(&prog, stats.bytes_written + stats.bytes_zeroed);
	ndz_unzip_free(u);
	if (rc < 0 && created)
		unlink(tpath);
	ndz_io_close(target);
	ndz_io_close(disk);
	if (in.fd != STDIN_FILENO)
		close(in.fd);
	free(buf);
	if (rc == 0 && cli_verbose) {
		double secs = cli_now() - t0;

		cli_info("%s: %u chunks, %llu bytes written, %llu zeroed, %.2f s, %.1f MB/s%s",
			 in.name, stats.chunks, (unsigned long long)stats.bytes_written,
			 (unsigned long long)stats.bytes_zeroed, secs,
			 secs > 0 ? (double)stats.bytes_written / 1e6 / secs : 0.0,
			 uopts.verify_only ? " (verified, nothing written)" : "");
	}
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}
