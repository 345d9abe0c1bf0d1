/* Deciding what to image. Until filesystems are understood, everything is raw. */
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "format.h"
#include "scan.h"

void ndz_scan_opts_init(struct ndz_scan_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->min_free = 32 * 1024;
}

int ndz_scan(struct ndz_io *src, const struct ndz_scan_opts *o, struct ndz_scan_result *res,
	     char *err, size_t errlen)
{
	uint64_t sectors = (src->size + NDZ_SECTOR_SIZE - 1) / NDZ_SECTOR_SIZE;
	int rc;

	memset(res, 0, sizeof(*res));
	ndz_ranges_init(&res->alloc);
	if (o->partition) {
		snprintf(err, errlen, "%s: partition %d: %s", src->name, o->partition,
			 ndz_strerror(NDZ_ENOENT));
		return NDZ_ENOENT;
	}
	res->bytes = src->size;
	res->image_kind = NDZ_KIND_WHOLE;
	rc = ndz_ranges_add(&res->alloc, 0, sectors);
	if (rc < 0)
		snprintf(err, errlen, "%s", ndz_strerror(rc));
	return rc;
}

void ndz_scan_result_release(struct ndz_scan_result *res)
{
	ndz_ranges_release(&res->alloc);
}
