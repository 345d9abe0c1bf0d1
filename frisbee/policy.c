/*
 * frisbee's trust policy: what a received chunk and a received manifest must be.
 * Kept as it was, in one place, for lib/trust's one verifier to replace.
 */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "frisbee.h"

#define MS 1000000ull

/* ==== trust policy: begin ==== */

/* How a received chunk fared in check_chunk. */
enum { CHUNK_OK = NDZ_CHUNK_OK, CHUNK_CRC = NDZ_CHUNK_CRC, CHUNK_FORGED = NDZ_CHUNK_FORGED,
       CHUNK_FATAL = NDZ_CHUNK_FATAL };

/* --orig-key: an original Frisbee V4 image's Blowfish key (lib/orig.h) */
const char *orig_key_path;
struct ndz_orig_keys orig_keys;

/* Chunks in a row that carry another key's id or none before that is fatal. */
#define KEY_STREAK_MAX 8

/*
 * Check a complete chunk (feeder thread, without the lock): its header, its data
 * CRC, or with a manifest its signed hash (the signer checked the CRC), or when we
 * decrypt it its AEAD tag (checked by the decryption below), that it is
 * of this image and this place; then, with an encryption key, decrypt it in place
 * so that a chunk whose tag fails is fetched again rather than stopping the
 * restore. *h gets its header (the plain one after decryption). CHUNK_FATAL: an
 * authentic chunk the key cannot open (or without a manifest, KEY_STREAK_MAX in a
 * row of another key or none), with c->ferr saying why.
 */
int check_chunk(struct client *c, uint8_t *buf, uint32_t chunk,
		struct ndz_chunk_hdr *h, int *key_streak, int *why, int *intact)
{
	int decrypt = !c->raw && c->crypt.type != NDZ_KEY_NONE;
	struct ndz_error oe = { 0 };
	/* an original Frisbee chunk (lib/orig.h): its V4 checksum is the decoder's */
	int orig = ndz_orig_probe(buf, NDZ_ORIG_HDR_AREA, NULL) != 0;
	int r = orig ? ndz_orig_chunk_hdr(buf, c->info.chunks, c->info.source_bytes, h, &oe) :
		ndz_hdr_decode(buf, h, NULL);

	/* the signed hash, or the tag of a chunk we decrypt, stands for the data CRC */
	if (r == 0 && !c->m.hash && !orig)
		r = decrypt && (h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) ?
		    ndz_chunk_check_padding(buf, h, NULL) : ndz_chunk_check_data(buf, h, NULL);

	if (orig && r == NDZ_ENOTSUP) {
		ndz_error_set(&c->ferr, r, 0, "%s: chunk %u: %s", c->source, chunk,
			      ndz_error_msg(&oe));
		return CHUNK_FATAL;
	}
	/* blocks sent for this chunk number and this image, else spoofed or stray */
	if (r == 0 && (h->index != chunk || memcmp(h->uuid, c->info.uuid, 16) != 0))
		r = NDZ_EMISMATCH;
	*why = r;
	if (r < 0)
		return CHUNK_CRC;
	if (c->m.hash && (*why = r = ndz_manifest_check_chunk(&c->m, buf, h)) < 0)
		return r == NDZ_ENOMEM ? CHUNK_CRC : CHUNK_FORGED;
	if (!decrypt)
		return CHUNK_OK;       /* without a key the pipeline refuses encrypted ones */
	*intact = 0;                   /* a failed decryption may leave part of it decrypted */
	*why = r = (h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) ?
		   ndz_chunk_decrypt(&c->crypt, buf, h) : NDZ_ENOTENC;
	if (r == 0) {
		*key_streak = 0;
		return CHUNK_OK;
	}
	/*
	 * Signed: the chunk is authentic, the key is the wrong one. Unsigned: a bad
	 * tag is a forger's; another key's id or a plain chunk is likelier the image
	 * itself than a forger when it comes KEY_STREAK_MAX times in a row.
	 */
	if (c->m.hash || (r != NDZ_EDECRYPT && ++*key_streak >= KEY_STREAK_MAX)) {
		char id[17];

		ndz_key_id_hex(h->key_id, id);
		if (r == NDZ_EWRONGKEY)
			ndz_error_set(&c->ferr, r, 0, "%s: chunk %u: %s (encrypted with key %s)",
				      c->source, chunk, ndz_strerror(r), id);
		else
			ndz_error_set(&c->ferr, r, 0, "%s: chunk %u: %s", c->source, chunk,
				      ndz_strerror(r));
		return CHUNK_FATAL;
	}
	return CHUNK_FORGED;
}


/*
 * With a public key and no --manifest: fetch the image's signed manifest from the
 * server first, as the chunks numbered from the image's chunk count on (doc/
 * PROTOCOL.md), and check its signature; the session gives up when the server sends
 * none (lib/mcast/client.h).
 */
static void fetch_manifest(struct client *c)
{
	size_t len = ndz_manifest_size(c->info.chunks);

	if (c->info.chunks > NDZ_MANIFEST_MAX_CHUNKS)
		cli_die(EXIT_FAIL, "%s: %u chunks, more than a manifest holds", c->source,
			c->info.chunks);
	if (ndz_client_fetch_manifest(c->cl, len, ndz_now_ns(), &c->err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c->err));
	for (;;) {
		const uint8_t *bytes;
		int r;

		pump(c, NDZ_CLIENT_MANIFEST);
		if (c->netfail)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c->err));
		if (ndz_client_state(c->cl) != NDZ_CLIENT_MANIFEST_READY)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(ndz_client_error(c->cl)));
		/* forged bytes got in (blocks spoofed): throw it all away, ask again */
		bytes = ndz_client_manifest(c->cl, &len);
		r = ndz_manifest_open(bytes, len, &c->pub, &c->m, &c->err);
		if (r == 0)
			break;
		/*
		 * Whole and shaped right, but naming another key: the image's own
		 * manifest signed with a key we were not given, far likelier than a
		 * forger who took the trouble; fetching it again would only bring
		 * it back. (A bad signature under our key's id is a forger's.)
		 */
		if (r == NDZ_EWRONGKEY)
			cli_die(EXIT_FAIL, "the manifest from %s: %s", c->source,
				ndz_error_msg(&c->err));
		if (ndz_client_manifest_verdict(c->cl, 0, ndz_now_ns(), NULL) < 0)
			cli_die(EXIT_FAIL, "the manifest from %s: %s", c->source,
				ndz_error_msg(&c->err));
		if (cli_verbose)
			cli_warn("the manifest from %s: %s; fetching it again", c->source,
				 ndz_error_msg(&c->err));
		ndz_error_clear(&c->err);
	}
	ndz_client_manifest_verdict(c->cl, 1, ndz_now_ns(), NULL);
	if (cli_verbose)
		cli_info("signed manifest of %u chunks from %s: signature good", c->m.chunks,
			 c->source);
}

/* The manifest is the served image's, before the target is opened. */
void check_trust(struct client *c)
{
	if (c->pub.type != NDZ_KEY_NONE && !c->m.hash)
		fetch_manifest(c);
	if (!c->m.hash)
		return;
	if (memcmp(c->m.uuid, c->info.uuid, 16) != 0 ||
	    c->m.source_bytes != c->info.source_bytes || c->m.chunks != c->info.chunks)
		cli_die(EXIT_FAIL, "%s: the manifest is of another image than the one %s serves "
			"(%s differs)", c->manifest_path, c->source,
			memcmp(c->m.uuid, c->info.uuid, 16) ? "uuid" :
			c->m.chunks != c->info.chunks ? "chunk count" : "source size");
}

/* ==== trust policy: end ==== */
