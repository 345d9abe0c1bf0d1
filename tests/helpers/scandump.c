/* Test helper: print what ndz_scan finds in a disk or filesystem image. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "scan.h"

/* Bytes of src outside the ranges that are not zero (-Z), or that differ from other (-X). */
static uint64_t check_bytes(struct ndz_io *src, const struct ndz_scan_result *res,
			    struct ndz_io *other, int inside)
{
	static uint8_t a[1 << 16], b[1 << 16];
	uint64_t bad = 0, sectors = res->bytes / NDZ_SECTOR_SIZE, s = 0;
	size_t k = 0;

	while (s < sectors) {
		int in = k < res->alloc.n && res->alloc.v[k].start <= s;
		uint64_t end = in ? res->alloc.v[k].start + res->alloc.v[k].count :
			       k < res->alloc.n ? res->alloc.v[k].start : sectors;

		if (end > sectors)
			end = sectors;
		if (in == inside) {
			for (uint64_t x = s; x < end;) {
				uint64_t n = end - x > sizeof(a) / NDZ_SECTOR_SIZE ?
					     sizeof(a) / NDZ_SECTOR_SIZE : end - x;
				size_t len = (size_t)n * NDZ_SECTOR_SIZE;
				uint64_t off = res->base + x * NDZ_SECTOR_SIZE;

				if (ndz_io_read_full(src, a, len, off, NULL, NULL) < 0)
					return UINT64_MAX;
				if (other && ndz_io_read_full(other, b, len,
							      x * NDZ_SECTOR_SIZE, NULL, NULL) < 0)
					return UINT64_MAX;
				for (size_t i = 0; i < len; i++)
					bad += other ? a[i] != b[i] : a[i] != 0;
				x += n;
			}
		}
		if (in)
			k++;
		s = end;
	}
	return bad;
}

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "scandump: warning: %s\n", msg);
}

int main(int argc, char **argv)
{
	struct ndz_scan_opts o;
	struct ndz_scan_report rep;
	struct ndz_scan_result res;
	struct ndz_io *io;
	struct ndz_error err = { 0 };
	int c, rc, ranges = 0, zcheck = 0;
	const char *xfile = NULL;

	ndz_scan_opts_init(&o);
	o.warn = warn_cb;
	o.report = &rep;
	while ((c = getopt(argc, argv, "s:S:R:I:F:rklZX:")) != -1) {
		switch (c) {
		case 's': o.partition = atoi(optarg); break;
		case 'S': rc = ndz_scan_override_parse(&o, NDZ_SCAN_FORCE, optarg); goto ov;
		case 'R': rc = ndz_scan_override_parse(&o, NDZ_SCAN_RAW, optarg); goto ov;
		case 'I': rc = ndz_scan_override_parse(&o, NDZ_SCAN_IGNORE, optarg); goto ov;
		case 'F': o.min_free = strtoull(optarg, NULL, 0); break;
		case 'r': o.raw = 1; break;
		case 'k': o.keep_pagefile = 1; break;
		case 'l': ranges = 1; break;
		case 'Z': zcheck = 1; break;
		case 'X': xfile = optarg; break;
		default: return 2;
		}
		continue;
ov:
		if (rc < 0) {
			fprintf(stderr, "scandump: bad override %s\n", optarg);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: scandump [-l] [-Z] [-X OTHER] [-s N] [-S N=T] [-R N] [-I N] [-F B] [-r] [-k] SRC\n");
		return 2;
	}
	rc = ndz_io_open_file(argv[optind], NDZ_IO_READ, &io, NULL);
	if (rc < 0) {
		fprintf(stderr, "scandump: %s: %s\n", argv[optind], ndz_strerror(rc));
		return 1;
	}
	rc = ndz_scan(io, &o, &res, &err);
	if (rc < 0) {
		fprintf(stderr, "scandump: %s\n", ndz_error_msg(&err));
		ndz_io_close(io);
		return 1;
	}
	printf("scheme %s base %llu bytes %llu kind %u index %u type 0x%x start %llu\n",
	       rep.scheme, (unsigned long long)res.base, (unsigned long long)res.bytes,
	       res.image_kind, res.part_index, res.part_type, (unsigned long long)res.part_start);
	for (size_t i = 0; i < rep.n; i++) {
		const struct ndz_scan_entry *e = &rep.v[i];

		printf("part %d%s%c start %llu count %llu type %s how %s fs %s used %llu free %llu"
		       " detail '%s' note '%s'\n",
		       e->index, e->sub ? "." : "", e->sub ? 'a' + e->sub - 1 : ' ',
		       (unsigned long long)e->start, (unsigned long long)e->count, e->type_name,
		       ndz_scan_how_name(e->how), e->fs, (unsigned long long)e->used_bytes,
		       (unsigned long long)e->free_bytes, e->detail, e->note);
	}
	printf("image %llu\n", (unsigned long long)rep.image_bytes);
	if (ranges)
		for (size_t i = 0; i < res.alloc.n; i++)
			printf("range %llu %llu\n", (unsigned long long)res.alloc.v[i].start,
			       (unsigned long long)res.alloc.v[i].count);
	if (zcheck)
		printf("nonzero-free %llu\n", (unsigned long long)check_bytes(io, &res, NULL, 0));
	if (xfile) {
		struct ndz_io *other;

		if (ndz_io_open_file(xfile, NDZ_IO_READ, &other, NULL) < 0) {
			fprintf(stderr, "scandump: %s: cannot open\n", xfile);
			return 1;
		}
		printf("alloc-diff %llu\n", (unsigned long long)check_bytes(io, &res, other, 1));
		ndz_io_close(other);
	}
	ndz_scan_report_release(&rep);
	ndz_scan_result_release(&res);
	ndz_io_close(io);
	return 0;
}
