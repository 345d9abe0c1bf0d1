/*
 * What to image: partition tables and filesystems turned into the list of
 * allocated sectors. The one entry point imagezip calls.
 */
#ifndef NDZ_SCAN_H
#define NDZ_SCAN_H

#include <stdint.h>

#include "io.h"
#include "ranges.h"

struct ndz_scan_opts {
	int partition;                 /* -s N: image partition N alone; 0: whole source */
	int raw;                       /* take the whole source raw, no filesystem awareness */
	uint64_t min_free;             /* -F: free runs shorter than this (bytes) are kept */
	/* a warning for the user (raw fallback and the like); may be NULL */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

struct ndz_scan_result {
	struct ndz_ranges alloc;       /* sectors to image, relative to base */
	uint64_t base;                 /* byte offset of the image's sector 0 in the source */
	uint64_t bytes;                /* bytes the image covers from base */
	uint16_t image_kind;           /* NDZ_KIND_* (lib/format.h) */
	uint16_t part_index;
	uint32_t part_type;
	uint64_t part_start;           /* sectors */
};

/* ndz_scan_opts_init - defaults: whole source, filesystem-aware, min_free 32 KiB. */
void ndz_scan_opts_init(struct ndz_scan_opts *o);

/*
 * ndz_scan - decide what of src to image. Returns 0 and fills res (release with
 * ndz_scan_result_release), or a negative code with a message in err.
 */
int ndz_scan(struct ndz_io *src, const struct ndz_scan_opts *o, struct ndz_scan_result *res,
	     char *err, size_t errlen);

/* ndz_scan_result_release - free what res holds; accepts a zeroed res. */
void ndz_scan_result_release(struct ndz_scan_result *res);

#endif
