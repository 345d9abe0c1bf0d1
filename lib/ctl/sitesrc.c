/* A site's source of images: its parent master, an S3 object store, or both; one interface. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sitesrc.h"
#include "core/format.h"

int ndz_sitesrc_init(struct ndz_sitesrc *src, const char *spec, const struct ndz_s3_conf *store,
		     int wait_s, struct ndz_error *e)
{
	int rc;

	memset(src, 0, sizeof(*src));
	src->parent = spec && spec[0];
	ndz_site_link_init(&src->link, spec ? spec : "", wait_s);
	if (!store || !store->endpoint) {
		src->via_parent = 1;
		snprintf(src->name, sizeof(src->name), "%s", spec ? spec : "");
		return 0;
	}
	if ((rc = ndz_s3_open(store, wait_s, &src->s3, e)) != 0)
		return rc;
	snprintf(src->name, sizeof(src->name), "%s", ndz_s3_name(src->s3));
	return 0;
}

void ndz_sitesrc_release(struct ndz_sitesrc *src)
{
	ndz_site_link_close(&src->link);
	ndz_s3_free(src->s3);
	src->s3 = NULL;
}

int ndz_sitesrc_key(const char *name, int what, char *out, size_t cap, struct ndz_error *e)
{
	const char *suffix = what == NDZ_SITE_INDEX ? ".ndz.index" :
			     what == NDZ_SITE_MANIFEST ? ".ndz.manifest" : ".ndz";
	int n = snprintf(out, cap, "%s%s", name, suffix);

	if (n < 0 || (size_t)n >= cap)
		return ndz_error_set(e, NDZ_ERANGE, 0, "%s: name too long", name);
	return 0;
}

static int is_link(int rc)
{
	return rc == NDZ_ENET || rc == NDZ_ETIMEDOUT || rc == NDZ_ESHORTREAD || rc == NDZ_EPROTO;
}

/*
 * The store's answer rc (its message in e) did not do: to the parent, when there is
 * one (src->left says why). 1: ask the parent, 0: rc stands.
 */
static int leave_store(struct ndz_sitesrc *src, int rc, struct ndz_error *e)
{
	if (rc == 0 || !src->parent)
		return 0;
	snprintf(src->left, sizeof(src->left), "%s", ndz_error_msg(e));
	src->left_code = rc;
	ndz_error_clear(e);
	src->via_parent = 1;
	snprintf(src->name, sizeof(src->name), "%s", src->link.spec);
	return 1;
}

/* The parent's answer rc after the store's failure store_rc: both said, one code. */
static int both_failed(struct ndz_sitesrc *src, int rc, int store_rc, struct ndz_error *e)
{
	if (rc == 0)
		return 0;
	ndz_error_prefix(e, "%s; then", src->left);
	if (is_link(store_rc) && !is_link(rc)) {
		rc = store_rc;         /* worth another try: the store may come back */
		if (e)
			e->code = rc;
	}
	return rc;
}

int ndz_sitesrc_fetch(struct ndz_sitesrc *src, const struct ndz_site_req *r, uint8_t **out,
		      size_t *len, struct ndz_error *e)
{
	char key[NDZ_CTL_NAME_MAX + 32];
	int rc;

	*out = NULL;
	*len = 0;
	if (src->via_parent)
		return ndz_site_fetch(&src->link, r, out, len, e);
	if (r->what != NDZ_SITE_INDEX && r->what != NDZ_SITE_MANIFEST)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: not a file of an image", src->name);
	if ((rc = ndz_sitesrc_key(r->name, r->what, key, sizeof(key), e)) != 0)
		return rc;
	rc = ndz_s3_get(src->s3, key, 0, 0, NDZ_SITE_BLOB_MAX, out, len, e);
	if (rc == 0 && r->what == NDZ_SITE_INDEX)
		snprintf(src->tag, sizeof(src->tag), "%zu %s", *len, ndz_s3_etag(src->s3));
	if (r->what == NDZ_SITE_INDEX && leave_store(src, rc, e))
		return both_failed(src, ndz_site_fetch(&src->link, r, out, len, e), rc, e);
	return rc;
}

int ndz_sitesrc_fetch_chunks(struct ndz_sitesrc *src, const struct ndz_site_req *r,
			     int (*each)(void *arg, uint32_t k, const uint8_t *chunk), void *arg,
			     struct ndz_error *e)
{
	char key[NDZ_CTL_NAME_MAX + 32];
	uint8_t *b;
	size_t len;
	int rc;

	if (src->via_parent)
		return ndz_site_fetch_chunks(&src->link, r, each, arg, e);
	if (r->what != NDZ_SITE_CHUNKS_OF || r->count < 1 || r->count > NDZ_SITE_CHUNKS)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: not a run of chunks", src->name);
	if ((rc = ndz_sitesrc_key(r->name, r->what, key, sizeof(key), e)) != 0 ||
	    (rc = ndz_s3_get(src->s3, key, (uint64_t)r->first * NDZ_CHUNK_SIZE,
			     (uint64_t)r->count * NDZ_CHUNK_SIZE, 0, &b, &len, e)) != 0)
		return rc;
	for (uint32_t k = 0; rc == 0 && k < r->count; k++)
		rc = each(arg, k, b + (size_t)k * NDZ_CHUNK_SIZE);
	free(b);
	return rc;
}

int ndz_sitesrc_ident(struct ndz_sitesrc *src, const char *name, struct ndz_sitesrc_ident *out,
		      struct ndz_error *e)
{
	char key[NDZ_CTL_NAME_MAX + 32];
	uint64_t size = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (src->via_parent) {
		out->from_parent = 1;
		return ndz_site_ident(&src->link, name, &out->id, e);
	}
	if ((rc = ndz_sitesrc_key(name, NDZ_SITE_INDEX, key, sizeof(key), e)) != 0)
		return rc;
	rc = ndz_s3_head(src->s3, key, &size, e);
	if (rc == 0) {
		snprintf(out->tag, sizeof(out->tag), "%llu %s", (unsigned long long)size,
			 ndz_s3_etag(src->s3));
		return 0;
	}
	if (!leave_store(src, rc, e))
		return rc;
	out->from_parent = 1;
	return both_failed(src, ndz_site_ident(&src->link, name, &out->id, e), rc, e);
}
