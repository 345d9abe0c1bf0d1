/*
 * frisbee's side of trust: a received chunk and a received manifest judged by
 * lib/trust's one verifier, and the manifest fetched from the server when the
 * verifier wants one.
 */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "frisbee.h"

/* --orig-key: an original Frisbee V4 image's Blowfish key (lib/orig.h) */
const char *orig_key_path;
const char *orig_pub_path;         /* --orig-pubkey */
struct ndz_orig_keys orig_keys;

/*
 * Check a complete chunk (the driver's checking thread, lib/mcast/cdrive.h) by the verifier's
 * verdict (lib/trust/verify.h): its header, its CRC or signed hash, that it is of
 * this image and this place, and with an encryption key its decryption in place,
 * so that a chunk whose tag fails is fetched again rather than stopping the
 * restore. *h gets its header (the plain one after decryption). NDZ_VERDICT_FATAL:
 * c->ferr says why.
 */
enum ndz_verdict check_chunk(struct client *c, uint8_t *buf, uint32_t chunk,
			     struct ndz_chunk_hdr *h, int *why, int *intact)
{
	struct ndz_error e = { 0 };
	enum ndz_verdict v = ndz_verify_chunk(c->verify, buf, chunk, h, intact, &e);

	*why = e.code;
	if (v == NDZ_VERDICT_FATAL)
		ndz_error_copy(&c->ferr, &e);
	return v;
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
		enum ndz_verdict r;

		if (ndz_cdrive_run(c->drv, NDZ_CLIENT_MANIFEST, &c->err) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c->err));
		if (ndz_client_state(c->cl) != NDZ_CLIENT_MANIFEST_READY)
			cli_die(EXIT_FAIL, "%s", ndz_error_msg(ndz_client_error(c->cl)));
		/* forged bytes got in (blocks spoofed): throw it all away, ask again */
		bytes = ndz_client_manifest(c->cl, &len);
		r = ndz_verify_manifest(c->verify, bytes, len, &c->err);
		if (r == NDZ_VERDICT_ACCEPT)
			break;
		/*
		 * Whole and shaped right, but naming another key: the image's own
		 * manifest signed with a key we were not given, far likelier than a
		 * forger who took the trouble; fetching it again would only bring
		 * it back. (A bad signature under our key's id is a forger's.)
		 */
		if (r == NDZ_VERDICT_FATAL)
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
		cli_info("signed manifest of %u chunks from %s: signature good",
			 ndz_verify_get_manifest(c->verify)->chunks, c->source);
}

/* The verifier's rule (lib/trust/verify.h), before the target is opened. */
void check_trust(struct client *c)
{
	struct ndz_image_id id = { .source_bytes = c->info.source_bytes,
				   .chunks = c->info.chunks };

	if (ndz_verify_wants_manifest(c->verify))
		fetch_manifest(c);
	memcpy(id.uuid, c->info.uuid, 16);
	if (ndz_verify_image(c->verify, &id, &c->err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c->err));
}
