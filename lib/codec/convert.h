/*
 * Converting images between our format and the original Frisbee's: an image
 * (either format) restored into a scratch file with the list of what it holds,
 * and a writer of the original V3 format from a source and its allocated ranges.
 */
#ifndef NDZ_CONVERT_H
#define NDZ_CONVERT_H

#include <stdint.h>

#include "core/err.h"
#include "core/io.h"
#include "core/orig.h"
#include "core/ranges.h"
#include "zip.h"

struct ndz_unpacked {
	uint64_t bytes;                /* the restore's size: the source's end */
	struct ndz_ranges alloc;       /* sectors the image holds (its regions) */
	uint32_t chunks;
	uint32_t orig_version;         /* 1-4 for an original image, else 0 */
	uint32_t disklabels;           /* original disklabel relocations met: */
	struct ndz_orig_reloc *labels; /* each, its sector from the image start (free()) */
};

/*
 * ndz_image_unpack - restore the image read from in (ours, or original with
 * okeys, which may be NULL) into scratch, an empty file the caller owns, as
 * imageunzip restores to a new file; u gets what it holds. Returns 0 or a
 * negative code with e set. Release u->alloc with ndz_ranges_release and free
 * u->labels.
 */
int ndz_image_unpack(struct ndz_io *in, const struct ndz_orig_keys *okeys,
		     struct ndz_io *scratch, struct ndz_unpacked *u, struct ndz_error *e);

/*
 * ndz_orig_zip_v3 - write src's allocated sectors (alloc, sorted, inside
 * ndz_sectors_of(source_bytes)) as an image in the original V3 format, the way
 * the original imagezip lays it out: 1 MiB chunks, a 36-byte header, at most
 * NDZ_ORIG_V3_REGIONS regions, one zlib stream at level level fed 128 KiB at a
 * time with Z_SYNC_FLUSH and finished when less than 8 KiB is left, zero
 * padding, and a short-sector relocation when source_bytes is not a whole
 * number of sectors. labels (nlabels of them, NULL when 0) are FreeBSD disklabel
 * relocations (ndz_unpacked.labels of an original source): each goes with the
 * chunk whose regions hold its bytes, so a restore at a slice's offset relocates
 * the label as the original's does (NDZ_EREGION when none does). out gets each
 * chunk in order. Refuses (NDZ_ERANGE) a source past 2^32 sectors, which V3
 * cannot address. Returns 0 or a code, e set.
 */
#define NDZ_ORIG_V3_REGIONS 469u
int ndz_orig_zip_v3(struct ndz_io *src, uint64_t source_bytes, const struct ndz_ranges *alloc,
		    const struct ndz_orig_reloc *labels, uint32_t nlabels, int level,
		    ndz_chunk_fn out, void *out_ctx, uint32_t *chunks, struct ndz_error *e);

#endif
