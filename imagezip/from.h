/* imagezip --from-image (imagezip/from.c). */
#ifndef IMAGEZIP_FROM_H
#define IMAGEZIP_FROM_H

#include <stdint.h>

#include "core/io.h"
#include "core/orig.h"
#include "scan.h"

/*
 * from_image - restore the image at path (ours, or the original Frisbee's with
 * orig_key for an encrypted V4) into an unlinked sparse scratch file beside
 * out_path, and describe it in scan as a source to image whole. Dies on error.
 * Returns the scratch file, the source to compress. labels: NULL, or it gets the
 * original's FreeBSD disklabel relocations (ndz_unpacked.labels, free()) and
 * *nlabels their count, for --to-orig to keep; without, they are warned of.
 */
struct ndz_io *from_image(const char *path, const char *out_path, const char *orig_key,
			  struct ndz_scan_result *scan, struct ndz_orig_reloc **labels,
			  uint32_t *nlabels);

#endif
