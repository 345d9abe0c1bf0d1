/* imagezip --from-image (imagezip/from.c). */
#ifndef IMAGEZIP_FROM_H
#define IMAGEZIP_FROM_H

#include "core/io.h"
#include "scan.h"

/*
 * from_image - restore the image at path (ours, or the original Frisbee's with
 * orig_key for an encrypted V4) into an unlinked sparse scratch file beside
 * out_path, and describe it in scan as a source to image whole. Dies on error.
 * Returns the scratch file, the source to compress.
 */
struct ndz_io *from_image(const char *path, const char *out_path, const char *orig_key,
			  struct ndz_scan_result *scan);

#endif
