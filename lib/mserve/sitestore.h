/* An upload stored at a master with an object store, sent on to the store (doc/SITES.md). */
#ifndef NDZ_SITESTORE_H
#define NDZ_SITESTORE_H

#include "ctl/s3.h"
#include "core/err.h"

/*
 * ndz_sitestore_push - the image at path put in the store s3 as NAME.ndz, then its
 * signed manifest (when there is one beside it; else an older one in the store is
 * deleted) as NAME.ndz.manifest, then its content
 * index as NAME.ndz.index: the index beside it, else one made from the image now
 * (unsigned; each chunk's data checked on the way). The index goes last: a site that
 * finds it finds the rest. 0, or a code of the store (lib/ctl/s3), of reading the
 * files, or of the index's making, with e set.
 */
int ndz_sitestore_push(struct ndz_s3 *s3, const char *name, const char *path,
		       struct ndz_error *e);

#endif
