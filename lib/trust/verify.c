/* The verifier: keys + manifest -> accept, fetch again or stop; the one trust policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/image.h"
#include "core/orig.h"
#include "seal.h"
#include "verify.h"

/* Chunks in a row that carry another key's id or none before that is fatal (unsigned). */
#define KEY_STREAK_MAX 8

struct ndz_verify {
	struct ndz_key pub, crypt;     /* NDZ_KEY_NONE: not given */
	struct ndz_orig_keys orig;     /* orig.rsa_n_len 0: no original public key */
	int stored;
	const char *name;
	struct ndz_manifest m;         /* m.hash: a manifest is there */
	const char *mpath;             /* where it came from; NULL: received */
	struct ndz_image_id id;        /* ndz_verify_image's (first NULL) */
	int key_streak;
};

/* The image's name in messages (read each time: a caller may fill it in late). */
static const char *vname(const struct ndz_verify *v)
{
	return v->name[0] ? v->name : "image";
}

/* The manifest's name in messages: its file, or the image it came with. */
static const char *mname(const struct ndz_verify *v)
{
	return v->mpath ? v->mpath : vname(v);
}

int ndz_verify_create(const struct ndz_verify_opts *o, struct ndz_verify **out,
		      struct ndz_error *e)
{
	struct ndz_verify *v;

	*out = NULL;
	if (o->pub && o->pub->type != NDZ_KEY_NONE && o->pub->type != NDZ_KEY_SIGN_PUBLIC)
		return ndz_error_set(e, NDZ_EINVAL, 0, "a %s key where a public signing key "
				     "is wanted", ndz_key_type_name(o->pub->type));
	if (o->crypt && o->crypt->type != NDZ_KEY_NONE && o->crypt->type != NDZ_KEY_CRYPT)
		return ndz_error_set(e, NDZ_EINVAL, 0, "a %s key where an encryption key is "
				     "wanted", ndz_key_type_name(o->crypt->type));
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	v = calloc(1, sizeof(*v));
	if (!v)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "verifier: %s", ndz_strerror(NDZ_ENOMEM));
	if (o->pub)
		v->pub = *o->pub;
	if (o->crypt && !o->stored)
		v->crypt = *o->crypt;
	if (o->orig && o->orig->rsa_n_len) {
		v->orig.rsa_n_len = o->orig->rsa_n_len;
		v->orig.rsa_e_len = o->orig->rsa_e_len;
		memcpy(v->orig.rsa_n, o->orig->rsa_n, sizeof(v->orig.rsa_n));
		memcpy(v->orig.rsa_e, o->orig->rsa_e, sizeof(v->orig.rsa_e));
	}
	v->stored = o->stored;
	v->name = o->name ? o->name : "";
	*out = v;
	return 0;
}

void ndz_verify_free(struct ndz_verify *v)
{
	if (!v)
		return;
	ndz_key_wipe(&v->pub);
	ndz_key_wipe(&v->crypt);
	memset(&v->orig, 0, sizeof(v->orig));
	ndz_manifest_release(&v->m);
	free(v);
}

int ndz_verify_wants_manifest(const struct ndz_verify *v)
{
	return v->pub.type == NDZ_KEY_SIGN_PUBLIC && !v->m.hash;
}

const struct ndz_manifest *ndz_verify_get_manifest(const struct ndz_verify *v)
{
	return v->m.hash ? &v->m : NULL;
}

int ndz_verify_load_manifest(struct ndz_verify *v, const char *path, struct ndz_error *e)
{
	struct ndz_error mine = { 0 };
	int rc;

	if (v->pub.type != NDZ_KEY_SIGN_PUBLIC)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: a manifest is checked with a public "
				     "key, and none was given", path);
	ndz_manifest_release(&v->m);
	rc = ndz_manifest_load(path, &v->pub, &v->m, &mine);
	if (rc == NDZ_EUNSIGNED)
		return ndz_error_set(e, rc, 0, "%s: %s (%s)", vname(v), ndz_strerror(rc),
				     ndz_error_msg(&mine));
	if (rc < 0)
		return ndz_error_copy(e, &mine);
	v->mpath = path;
	return 0;
}

enum ndz_verdict ndz_verify_manifest(struct ndz_verify *v, const uint8_t *buf, size_t len,
				     struct ndz_error *e)
{
	int rc;

	if (v->pub.type != NDZ_KEY_SIGN_PUBLIC) {
		ndz_error_set(e, NDZ_EINVAL, 0, "a manifest is checked with a public key, and "
			      "none was given");
		return NDZ_VERDICT_FATAL;
	}
	ndz_manifest_release(&v->m);
	rc = ndz_manifest_open(buf, len, &v->pub, &v->m, e);
	if (rc == 0) {
		v->mpath = NULL;
		return NDZ_VERDICT_ACCEPT;
	}
	/*
	 * Whole and shaped right, but naming another key: the image's own manifest
	 * signed with a key we were not given, far likelier than a forger who took the
	 * trouble. (A bad signature under our key's id is a forger's.)
	 */
	return rc == NDZ_EWRONGKEY || rc == NDZ_ENOTSUP ? NDZ_VERDICT_FATAL : NDZ_VERDICT_FORGED;
}

/* The keys against the image's encryption (enc: it is encrypted; key_id: whose). */
static int check_keys(const struct ndz_verify *v, int enc, const uint8_t *key_id,
		      const char *how, struct ndz_error *e)
{
	char want[17], got[17];

	if (v->stored)
		return 0;
	if (enc && v->crypt.type == NDZ_KEY_NONE) {
		if (!key_id)
			return ndz_error_set(e, NDZ_ENEEDKEY, 0, "%s: %s (%s)", vname(v),
					     ndz_strerror(NDZ_ENEEDKEY), how);
		ndz_key_id_hex(key_id, want);
		return ndz_error_set(e, NDZ_ENEEDKEY, 0, "%s: %s (it needs encryption key %s: "
				     "--key FILE)", vname(v), ndz_strerror(NDZ_ENEEDKEY), want);
	}
	if (enc && key_id && memcmp(v->crypt.id, key_id, NDZ_KEY_ID_LEN) != 0) {
		ndz_key_id_hex(key_id, want);
		ndz_key_id_hex(v->crypt.id, got);
		return ndz_error_set(e, NDZ_EWRONGKEY, 0, "%s: %s: encrypted with key %s, not "
				     "with key %s", vname(v), ndz_strerror(NDZ_EWRONGKEY), want, got);
	}
	if (!enc && v->crypt.type != NDZ_KEY_NONE)
		return ndz_error_set(e, NDZ_ENOTENC, 0, "%s: %s", vname(v),
				     ndz_strerror(NDZ_ENOTENC));
	return 0;
}

int ndz_verify_image(struct ndz_verify *v, const struct ndz_image_id *id, struct ndz_error *e)
{
	const struct ndz_chunk_hdr *h0 = id->first;
	const struct ndz_manifest *m = ndz_verify_get_manifest(v);
	const char *what;
	int rc;

	v->id = *id;
	v->id.first = NULL;
	if (h0)
		rc = check_keys(v, !!(h0->incompat_flags & NDZ_INCOMPAT_ENCRYPTED), h0->key_id,
				NULL, e);
	else if (m)
		rc = check_keys(v, !!(m->flags & NDZ_MANIFEST_ENCRYPTED), NULL,
				"its signed manifest says it is encrypted", e);
	else
		rc = 0;
	if (rc < 0)
		return rc;
	/* an original public key: chunk 0 must say it is signed (each is checked later) */
	if (h0 && v->orig.rsa_n_len && !NDZ_ORIG_SIGNED(h0)) {
		char why[64];

		if (!NDZ_IS_ORIG(h0))
			snprintf(why, sizeof(why), "not an original-format image");
		else if (h0->version < NDZ_ORIG_HVERSION(4))
			snprintf(why, sizeof(why), "an original version %u image cannot be signed",
				 h0->version - NDZ_ORIG_HVERSION(0));
		else
			snprintf(why, sizeof(why), "chunk 0 has no signature");
		return ndz_error_set(e, NDZ_EUNSIGNED, 0, "%s: %s (%s, and an original public key "
				     "was given)", vname(v), ndz_strerror(NDZ_EUNSIGNED), why);
	}
	if (ndz_verify_wants_manifest(v))
		return ndz_error_set(e, NDZ_EUNSIGNED, 0, "%s: %s (a public key, and no manifest)",
				     vname(v), ndz_strerror(NDZ_EUNSIGNED));
	if (!m)
		return 0;
	what = memcmp(m->uuid, id->uuid, 16) ? "uuid" :
	       m->source_bytes != id->source_bytes ? "source size" : NULL;
	if (!what && h0 && ndz_manifest_match(m, h0, NULL) < 0)
		what = m->codec != h0->codec ? "codec" : "encryption";
	if (what)
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "%s: the manifest is of another image "
				     "(%s differs)", mname(v), what);
	if (id->chunks && id->chunks != m->chunks)
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "%s: %s: %u chunks, the manifest %s "
				     "signs %u", vname(v), ndz_strerror(NDZ_EMISMATCH), id->chunks,
				     mname(v), m->chunks);
	return 0;
}

int ndz_verify_header(const struct ndz_verify *v, const struct ndz_chunk_hdr *h,
		      struct ndz_error *e)
{
	int enc = !!(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED);
	int rc;

	if (v && v->stored)
		return 0;
	if (enc && (!v || v->crypt.type == NDZ_KEY_NONE))
		return ndz_error_set(e, NDZ_ENEEDKEY, 0, "chunk %u: %s", h->index,
				     ndz_strerror(NDZ_ENEEDKEY));
	/* with a key, a plain chunk would be one nobody authenticated: refused */
	if (!enc && v && v->crypt.type != NDZ_KEY_NONE)
		return ndz_error_set(e, NDZ_ENOTENC, 0, "chunk %u: %s", h->index,
				     ndz_strerror(NDZ_ENOTENC));
	if (v && v->m.hash && (rc = ndz_manifest_match(&v->m, h, e)) < 0) {
		ndz_error_prefix(e, "chunk %u", h->index);
		return rc;
	}
	return 0;
}

/*
 * An original public key's rule (ndz_orig_check_signed): 0, or NDZ_EUNSIGNED (a
 * chunk of ours, or one without a signature) or NDZ_EORIGSUM with e naming the chunk.
 */
static int orig_signed(const struct ndz_verify *v, const uint8_t *chunk, uint32_t index,
		       struct ndz_error *e)
{
	struct ndz_error oe = { 0 };
	int rc;

	if (!v || !v->orig.rsa_n_len)
		return 0;
	if (ndz_orig_probe(chunk, NDZ_ORIG_HDR_AREA, NULL) <= 0)
		return ndz_error_set(e, NDZ_EUNSIGNED, 0, "chunk %u: %s (not an original-format "
				     "chunk, and an original public key was given)", index,
				     ndz_strerror(NDZ_EUNSIGNED));
	rc = ndz_orig_check_signed(chunk, &v->orig, &oe);
	if (rc < 0) {
		ndz_error_set(e, rc, 0, "chunk %u: %s", index, ndz_error_msg(&oe));
		return rc;
	}
	return 0;
}

/* The chunk's integrity: the signed hash, or its CRC (only the padding of one we decrypt). */
static int integrity(const struct ndz_verify *v, const uint8_t *chunk,
		     const struct ndz_chunk_hdr *h, unsigned flags, struct ndz_error *e)
{
	int rc;

	if (v && v->m.hash)
		return ndz_manifest_check_chunk(&v->m, chunk, h, e);
	if (NDZ_IS_ORIG(h) || (flags & NDZ_VERIFY_CHECKED))
		return 0;
	if ((h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) && v && v->crypt.type != NDZ_KEY_NONE)
		rc = ndz_chunk_check_padding(chunk, h, NULL);
	else
		rc = ndz_chunk_check_data(chunk, h, NULL);
	return rc < 0 ? ndz_error_set(e, rc, 0, "chunk %u: %s", h->index, ndz_strerror(rc)) : 0;
}

int ndz_verify_data(const struct ndz_verify *v, uint8_t *chunk, struct ndz_chunk_hdr *h,
		    unsigned flags, struct ndz_error *e)
{
	int rc = orig_signed(v, chunk, h->index, e);

	if (rc == 0)
		rc = integrity(v, chunk, h, flags, e);
	if (rc < 0 || NDZ_IS_ORIG(h) || !(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) ||
	    (v && v->stored))
		return rc;
	return ndz_chunk_decrypt(v && v->crypt.type != NDZ_KEY_NONE ? &v->crypt : NULL, chunk,
				 h, e);
}

int ndz_verify_stored(const struct ndz_verify *v, const uint8_t *chunk,
		      const struct ndz_chunk_hdr *h, struct ndz_error *e)
{
	int rc;

	if (v && v->m.hash)
		return ndz_manifest_check_chunk(&v->m, chunk, h, e);
	rc = ndz_chunk_check_data(chunk, h, NULL);
	return rc < 0 ? ndz_error_set(e, rc, 0, "chunk %u: %s", h->index, ndz_strerror(rc)) : 0;
}

int ndz_verify_walk(const struct ndz_verify *v, struct ndz_io *in, struct ndz_error *e)
{
	const struct ndz_manifest *m = v ? ndz_verify_get_manifest(v) : NULL;
	struct ndz_image_walk *w = NULL;
	struct ndz_chunk_hdr h;
	uint8_t *buf = malloc(NDZ_CHUNK_SIZE);
	int rc;

	if (!buf)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", in->name, ndz_strerror(NDZ_ENOMEM));
	rc = ndz_image_walk_open(in, NDZ_WALK_ORDER | NDZ_WALK_RULES, &w, e);
	while (rc >= 0 && (rc = ndz_image_walk_next(w, buf, &h, e)) == 1) {
		if (m && h.index == 0 && (rc = ndz_manifest_match(m, &h, e)) < 0)
			ndz_error_prefix(e, "%s", in->name);
		else if ((rc = ndz_verify_stored(v, buf, &h, e)) < 0)
			ndz_error_prefix(e, "%s", in->name);
	}
	if (rc == 0 && m && ndz_image_walk_count(w) != m->chunks)
		rc = ndz_error_set(e, NDZ_EMISMATCH, 0, "%s: %u chunks, the manifest signs %u: %s",
				   in->name, ndz_image_walk_count(w), m->chunks,
				   ndz_strerror(NDZ_EMISMATCH));
	ndz_image_walk_free(w);
	free(buf);
	return rc;
}

/* A verdict other than ACCEPT: e gets code, named "NAME: chunk N: ..." when fatal. */
static enum ndz_verdict reject(struct ndz_verify *v, enum ndz_verdict how, uint32_t place,
			       int code, const char *more, struct ndz_error *e)
{
	if (how == NDZ_VERDICT_FATAL)
		ndz_error_set(e, code, 0, "%s: chunk %u: %s%s", vname(v), place, ndz_strerror(code),
			      more);
	else
		ndz_error_set(e, code, 0, "chunk %u: %s", place, ndz_strerror(code));
	return how;
}

enum ndz_verdict ndz_verify_chunk(struct ndz_verify *v, uint8_t *chunk, uint32_t place,
				  struct ndz_chunk_hdr *h, int *intact, struct ndz_error *e)
{
	/* an original Frisbee chunk (lib/orig.h): its V4 checksum is the decoder's */
	int orig = ndz_orig_probe(chunk, NDZ_ORIG_HDR_AREA, NULL) != 0;
	int signed_ = v->m.hash != NULL;
	struct ndz_error oe = { 0 };
	int r = orig ? ndz_orig_chunk_hdr(chunk, v->id.chunks, v->id.source_bytes, h, &oe) :
		ndz_hdr_decode(chunk, h, NULL);

	if (orig && r == NDZ_ENOTSUP) {
		/* the reader's message is "what: detail"; reject names what itself */
		const char *more = ndz_error_msg(&oe);
		size_t k = strlen(ndz_strerror(r));

		if (strncmp(more, ndz_strerror(r), k) == 0)
			more += k;
		return reject(v, NDZ_VERDICT_FATAL, place, r, more, e);
	}
	/* the signed hash, or the tag of a chunk we decrypt, stands for the data CRC */
	if (r == 0 && !signed_ && !orig)
		r = integrity(v, chunk, h, 0, NULL);
	/* blocks sent for this chunk number and this image, else spoofed or stray */
	if (r == 0 && (h->index != place || memcmp(h->uuid, v->id.uuid, 16) != 0))
		r = NDZ_EMISMATCH;
	if (r < 0)
		return reject(v, NDZ_VERDICT_DAMAGED, place, r, "", e);
	/*
	 * An original public key: a signature that fails is a forger's; a chunk
	 * without one is likelier the image itself (unsigned, or V1-V3) when it comes
	 * KEY_STREAK_MAX times in a row; a chunk of ours can never carry one.
	 */
	ndz_error_clear(&oe);
	if (v->orig.rsa_n_len && (r = orig_signed(v, chunk, place, &oe)) < 0) {
		/* the detail after "chunk N: <code's message>": ": detail" or " (detail)" */
		const char *more = strstr(ndz_error_msg(&oe), ndz_strerror(r));
		char why[200] = "";

		more = more ? more + strlen(ndz_strerror(r)) : "";
		if (more[0] == ':' && more[1] == ' ')
			snprintf(why, sizeof(why), " (%s)", more + 2);
		else
			snprintf(why, sizeof(why), "%s", more);
		if (r == NDZ_EUNSIGNED && (!orig || ++v->key_streak >= KEY_STREAK_MAX))
			return reject(v, NDZ_VERDICT_FATAL, place, r, why, e);
		return reject(v, NDZ_VERDICT_FORGED, place, r, "", e);
	}
	if (v->orig.rsa_n_len)
		v->key_streak = 0;
	if (signed_ && (r = ndz_manifest_check_chunk(&v->m, chunk, h, NULL)) < 0)
		return reject(v, r == NDZ_ENOMEM ? NDZ_VERDICT_DAMAGED : NDZ_VERDICT_FORGED, place,
			      r, "", e);
	if (v->stored)
		return NDZ_VERDICT_ACCEPT;
	/* an authentic chunk the policy refuses: nothing fetched again can change it */
	if ((h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) && v->crypt.type == NDZ_KEY_NONE)
		return reject(v, NDZ_VERDICT_FATAL, place, NDZ_ENEEDKEY, "", e);
	if (signed_ && !orig && ndz_manifest_match(&v->m, h, NULL) < 0)
		return reject(v, NDZ_VERDICT_FATAL, place, NDZ_EMISMATCH,
			      " (its signed manifest is of another image)", e);
	if (v->crypt.type == NDZ_KEY_NONE)
		return NDZ_VERDICT_ACCEPT;
	*intact = 0;                   /* a failed decryption may leave part of it decrypted */
	r = (h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) ?
	    ndz_chunk_decrypt(&v->crypt, chunk, h, NULL) : NDZ_ENOTENC;
	if (r == 0) {
		v->key_streak = 0;
		return NDZ_VERDICT_ACCEPT;
	}
	/*
	 * Signed: the chunk is authentic, the key is the wrong one. Unsigned: a bad
	 * tag is a forger's; another key's id or a plain chunk is likelier the image
	 * itself than a forger when it comes KEY_STREAK_MAX times in a row.
	 */
	if (signed_ || (r != NDZ_EDECRYPT && ++v->key_streak >= KEY_STREAK_MAX)) {
		char more[64] = "";

		if (r == NDZ_EWRONGKEY) {
			char id[17];

			ndz_key_id_hex(h->key_id, id);
			snprintf(more, sizeof(more), " (encrypted with key %s)", id);
		}
		return reject(v, NDZ_VERDICT_FATAL, place, r, more, e);
	}
	return reject(v, NDZ_VERDICT_FORGED, place, r, "", e);
}
