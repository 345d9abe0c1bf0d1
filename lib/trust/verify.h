/*
 * The verifier: the one trust policy of every reader of images. From the keys
 * given and the signed manifest, it says of an image whether it may be restored,
 * and of each chunk whether to accept it, fetch it again (damaged or forged on the
 * way) or stop. imageunzip, the restore pipeline, frisbee, imagekey and the
 * master's upload check all ask it; none spells the rules itself.
 *
 * The rule an image must pass before anything is written (ndz_verify_image) is
 * the union of what the programs checked: the keys fit its encryption (encrypted:
 * the encryption key given and its id the image's; plain: no encryption key), and
 * with a public key its manifest is of this image: uuid, source size, chunk count
 * (when known), codec and encryption (as chunk 0's header or, before any chunk,
 * the manifest's flag says).
 */
#ifndef NDZ_VERIFY_H
#define NDZ_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "core/orig.h"
#include "key.h"
#include "manifest.h"

struct ndz_verify;

struct ndz_verify_opts {
	const struct ndz_key *pub;     /* NDZ_KEY_SIGN_PUBLIC: every chunk must be the one
					  the signed manifest names; NULL or NDZ_KEY_NONE: none */
	const struct ndz_key *crypt;   /* NDZ_KEY_CRYPT: chunks are decrypted and plain ones
					  refused; NULL or NDZ_KEY_NONE: encrypted ones refused */
	int stored;                    /* the chunks are kept as they are, not restored
					  (frisbee --raw): never decrypted nor refused for
					  their encryption; crypt is ignored */
	const struct ndz_orig_keys *orig;   /* with rsa_n_len, an original Frisbee V4
					  public key (--orig-pubkey): every chunk must be an
					  original one whose RSA signature verifies under it
					  (ndz_orig_check_signed); copied; NULL: none */
	const char *name;              /* the image in messages ("img.ndz", "server
					  10.0.0.1"; read when a message is written, so it may
					  be filled in later); NULL or "": "image" */
};

/* What ndz_verify_chunk and ndz_verify_manifest say of what was received. */
enum ndz_verdict {
	NDZ_VERDICT_ACCEPT = 0,        /* sound: use it */
	NDZ_VERDICT_DAMAGED,           /* damaged or stray on the way: fetch it again */
	NDZ_VERDICT_FORGED,            /* not what was signed, or its tag fails: fetch it
					  again (and count a forgery) */
	NDZ_VERDICT_FATAL,             /* it cannot come right: stop, e says why */
};

/*
 * ndz_verify_create - a verifier of o's policy; the keys are copied (wiped by
 * ndz_verify_free) and name must outlive it. 0 and *out, or NDZ_EINVAL (a key of
 * the wrong type) or NDZ_ENOMEM with e.
 */
int ndz_verify_create(const struct ndz_verify_opts *o, struct ndz_verify **out,
		      struct ndz_error *e);

/* ndz_verify_free - wipes the keys, releases the manifest; accepts NULL. */
void ndz_verify_free(struct ndz_verify *v);

/*
 * ndz_verify_wants_manifest - 1 when a public key was given and no manifest is
 * there yet (ndz_verify_load_manifest or ndz_verify_manifest must come first).
 */
int ndz_verify_wants_manifest(const struct ndz_verify *v);

/*
 * ndz_verify_load_manifest - the manifest file at path (untrusted), opened with the
 * public key. 0, or NDZ_EINVAL (no public key), NDZ_EUNSIGNED ("IMAGE: image is not
 * signed (PATH: no manifest)"), or a code of ndz_manifest_load with e naming path.
 * path must outlive v (messages name it).
 */
int ndz_verify_load_manifest(struct ndz_verify *v, const char *path, struct ndz_error *e);

/*
 * ndz_verify_manifest - manifest bytes received (untrusted): ACCEPT (v holds it),
 * FATAL for one signed by another key (the image's own manifest, signed with a key
 * we were not given: fetching it again would bring it back; and NDZ_EINVAL without
 * a public key), else FORGED (fetch it again). e has ndz_manifest_open's message,
 * without a name.
 */
enum ndz_verdict ndz_verify_manifest(struct ndz_verify *v, const uint8_t *buf, size_t len,
				     struct ndz_error *e);

/* ndz_verify_get_manifest - the manifest the verifier holds, or NULL. */
const struct ndz_manifest *ndz_verify_get_manifest(const struct ndz_verify *v);

/* What is known of an image before its chunks are read. */
struct ndz_image_id {
	uint8_t uuid[16];
	uint64_t source_bytes;
	uint32_t chunks;                       /* 0: not known (a stream) */
	const struct ndz_chunk_hdr *first;     /* chunk 0's header; NULL: not known yet
						  (a multicast client) */
};

/*
 * ndz_verify_image - the rule above, before anything is written; v keeps id (not
 * first) for ndz_verify_chunk. 0, or NDZ_ENEEDKEY, NDZ_EWRONGKEY, NDZ_ENOTENC,
 * NDZ_EUNSIGNED (a public key and no manifest) or NDZ_EMISMATCH, with e naming
 * the image (or the manifest) and what differs.
 */
int ndz_verify_image(struct ndz_verify *v, const struct ndz_image_id *id, struct ndz_error *e);

/* ndz_verify_data flags */
#define NDZ_VERIFY_CHECKED 0x1u        /* ndz_chunk_check passed on these very bytes */

/*
 * ndz_verify_header - a chunk's header against the policy, before its data is
 * looked at (cheap): encrypted without an encryption key (NDZ_ENEEDKEY), plain
 * with one (NDZ_ENOTENC), another image than the manifest's (NDZ_EMISMATCH);
 * nothing of encryption for a stored verifier. v may be NULL (no keys). 0 or that
 * code with e naming the chunk ("chunk 3: ..."). Thread-safe.
 */
int ndz_verify_header(const struct ndz_verify *v, const struct ndz_chunk_hdr *h,
		      struct ndz_error *e);

/*
 * ndz_verify_data - a chunk that passed ndz_verify_header, for a restore: the hash
 * its manifest signs (NDZ_EFORGED, NDZ_ERANGE), else (unless NDZ_VERIFY_CHECKED)
 * its data CRC and padding, or only the padding of an encrypted one (its tag
 * stands for the CRC); then an encrypted chunk is decrypted in place and h made
 * its plain header (ndz_chunk_decrypt's codes). An original-format chunk gets the
 * hash check and, with an original public key, its signature (NDZ_EUNSIGNED,
 * NDZ_EORIGSUM; any other chunk is then NDZ_EUNSIGNED); its checksum and decryption
 * are the decoder's. v may be NULL (no keys).
 * 0 or a code with e naming the chunk. Thread-safe.
 */
int ndz_verify_data(const struct ndz_verify *v, uint8_t *chunk, struct ndz_chunk_hdr *h,
		    unsigned flags, struct ndz_error *e);

/*
 * ndz_verify_stored - a chunk to be kept as it is (an upload, imagekey verify):
 * the hash its manifest signs, else its data CRC and padding, whatever its
 * encryption. v may be NULL (no keys). 0 or a code with e naming the chunk.
 * Thread-safe.
 */
int ndz_verify_stored(const struct ndz_verify *v, const uint8_t *chunk,
		      const struct ndz_chunk_hdr *h, struct ndz_error *e);

/*
 * ndz_verify_walk - the stored image in, read whole (ndz_image_walk, in order and
 * with the image's rules): with a manifest, chunk 0 of its image and every chunk
 * the one it signs, and as many; without, every chunk's CRC. 0 or a code with e
 * naming in and the chunk. v may be NULL (no keys). (imagekey verify)
 */
int ndz_verify_walk(const struct ndz_verify *v, struct ndz_io *in, struct ndz_error *e);

/*
 * ndz_verify_chunk - a chunk received whole for place (after ndz_verify_image):
 * its header (ours or the original format's), that it is this image's chunk place,
 * its integrity (ndz_verify_data's rules), the header policy, and with an
 * encryption key its decryption in place (h then its plain header). ACCEPT;
 * DAMAGED (bad header or CRC, another place or image); FORGED (not the hash the
 * manifest signs; unsigned: a bad tag, or another key's id or a plain chunk fewer
 * than 8 times in a row); FATAL (an authentic chunk the key cannot open, an
 * encrypted one without a key, 8 in a row of another key, or an original chunk
 * that cannot be read). e's code says why; FATAL's message names v's image and
 * the chunk. With an original public key: an original chunk whose signature fails
 * is FORGED, an unsigned one FORGED until KEY_STREAK_MAX in a row then FATAL, and a
 * chunk of ours FATAL. *intact is set to 0 when the chunk's bytes were changed (a failed
 * decryption), else left alone. Not thread-safe: one receiver (it counts).
 */
enum ndz_verdict ndz_verify_chunk(struct ndz_verify *v, uint8_t *chunk, uint32_t place,
				  struct ndz_chunk_hdr *h, int *intact, struct ndz_error *e);

#endif
