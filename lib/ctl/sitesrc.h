/*
 * Where a site master's images come from (doc/SITES.md): its parent master (SITE requests,
 * lib/ctl/sitecall), an S3-compatible object store (lib/ctl/s3), or both (the store first,
 * the parent for an image the store lacks or when the store fails), behind one set of
 * calls, so that the fetch (lib/mserve/site) does not know which. In the store an
 * image NAME is three objects under the store's prefix: NAME.ndz (read by range, a
 * run of chunks at a time), NAME.ndz.index and NAME.ndz.manifest (read whole).
 */
#ifndef NDZ_SITESRC_H
#define NDZ_SITESRC_H

#include "s3.h"
#include "sitecall.h"

struct ndz_sitesrc {
	struct ndz_site_link link;     /* the parent's, when parent is 1 */
	struct ndz_s3 *s3;             /* the store's handle, or NULL */
	int parent;                    /* 1: there is a parent */
	int via_parent;                /* 1: this image comes from the parent (the store lacked
					* it or failed, or there is no store) */
	char name[700];                /* the one in use: "PARENT" or "store ENDPOINT/BUCKET/PREFIX" */
	char left[400];                /* why the store was left for the parent ("": it was not) */
	int left_code;                 /* ... the store's code then */
	char tag[200];                 /* the store: "SIZE ETAG" of the last index asked ("": none) */
};

/*
 * ndz_sitesrc_init - a source: the store (when store is not NULL and its endpoint set)
 * and the parent at spec ("HOST[:PORT]"; NULL or "": none), at least one of them, waiting
 * at most wait_s seconds each step. 0, or ndz_s3_open's codes with e set.
 * ndz_sitesrc_release - its connection and handle gone (it may be initialised again).
 */
int ndz_sitesrc_init(struct ndz_sitesrc *src, const char *spec, const struct ndz_s3_conf *store,
		     int wait_s, struct ndz_error *e);
void ndz_sitesrc_release(struct ndz_sitesrc *src);

/*
 * ndz_sitesrc_fetch - the index or manifest r asks for (ndz_site_fetch's contract; from
 * a store: its NAME.ndz.index or NAME.ndz.manifest object, NDZ_ENOIMAGE when there is none).
 * With both a store and a parent, the index comes from the store, else (the store has no
 * such object, or fails: any code) from the parent, and what follows (the manifest, the
 * chunks) from the same one (via_parent, name and left say which and why); when both
 * fail, e says both and the code is a link failure's if either was one, else the parent's.
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
 * What upstream says of an image without sending its index (a recheck, doc/SITES.md
 * "Updates"): from a parent its identity (an IDENT request: the image's size, the SHA-256
 * of its index and manifest), to compare with the held files' (ndz_site_ident_files);
 * from a store the size and ETag of its index object (a HEAD), to compare with the tag
 * the fetch of that index left (src->tag).
 */
struct ndz_sitesrc_ident {
	int from_parent;               /* 1: id is set; 0: tag is */
	struct ndz_site_ident id;
	char tag[200];                 /* "SIZE ETAG" */
};

/*
 * ndz_sitesrc_ident - image name's identity, from the store first as ndz_sitesrc_fetch's
 * index. 0 with *out; NDZ_ENOTSUP (an older parent that has no IDENT: ask for the index),
 * else as ndz_sitesrc_fetch.
 */
int ndz_sitesrc_ident(struct ndz_sitesrc *src, const char *name, struct ndz_sitesrc_ident *out,
		      struct ndz_error *e);

/*
 * ndz_sitesrc_key - the store's key of image name's part what (NDZ_SITE_CHUNKS_OF: the
 * image, NDZ_SITE_INDEX, NDZ_SITE_MANIFEST) into out (cap bytes): 0 or NDZ_ERANGE.
 */
int ndz_sitesrc_key(const char *name, int what, char *out, size_t cap, struct ndz_error *e);

#endif
