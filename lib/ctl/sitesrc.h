/*
 * Where a site master's images come from (doc/SITES.md): its parent master (SITE requests,
 * lib/ctl/sitecall) or an S3-compatible object store (lib/ctl/s3), behind one pair of
 * calls, so that the fetch (lib/mserve/site) does not know which. In the store an
 * image NAME is three objects under the store's prefix: NAME.ndz (read by range, a
 * run of chunks at a time), NAME.ndz.index and NAME.ndz.manifest (read whole).
 */
#ifndef NDZ_SITESRC_H
#define NDZ_SITESRC_H

#include "s3.h"
#include "sitecall.h"

struct ndz_sitesrc {
	struct ndz_site_link link;     /* the parent's, when s3 is NULL */
	struct ndz_s3 *s3;             /* the store's handle, or NULL */
	char name[700];                /* "PARENT" or "store ENDPOINT/BUCKET/PREFIX" */
};

/*
 * ndz_sitesrc_init - a source: the store (when store is not NULL and its endpoint set),
 * else the parent at spec ("HOST[:PORT]"), waiting at most wait_s seconds each step.
 * 0, or ndz_s3_open's codes with e set. ndz_sitesrc_release - its connection and
 * handle gone (it may be initialised again).
 */
int ndz_sitesrc_init(struct ndz_sitesrc *src, const char *spec, const struct ndz_s3_conf *store,
		     int wait_s, struct ndz_error *e);
void ndz_sitesrc_release(struct ndz_sitesrc *src);

/*
 * ndz_sitesrc_fetch - the index or manifest r asks for (ndz_site_fetch's contract; from
 * a store: its NAME.ndz.index or NAME.ndz.manifest object, NDZ_ENOIMAGE when there is none).
 * ndz_sitesrc_fetch_chunks - the chunks r asks for, each given to each() as
 * ndz_site_fetch_chunks does (from a store: one GET of their byte range).
 * Link failures (NDZ_ENET, NDZ_ETIMEDOUT, NDZ_ESHORTREAD, NDZ_EPROTO) are worth
 * another try later; the rest are answers.
 */
int ndz_sitesrc_fetch(struct ndz_sitesrc *src, const struct ndz_site_req *r, uint8_t **out,
		      size_t *len, struct ndz_error *e);
int ndz_sitesrc_fetch_chunks(struct ndz_sitesrc *src, const struct ndz_site_req *r,
			     int (*each)(void *arg, uint32_t k, const uint8_t *chunk), void *arg,
			     struct ndz_error *e);

/*
 * ndz_sitesrc_key - the store's key of image name's part what (NDZ_SITE_CHUNKS_OF: the
 * image, NDZ_SITE_INDEX, NDZ_SITE_MANIFEST) into out (cap bytes): 0 or NDZ_ERANGE.
 */
int ndz_sitesrc_key(const char *name, int what, char *out, size_t cap, struct ndz_error *e);

#endif
