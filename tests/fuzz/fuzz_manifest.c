/*
 * libFuzzer target for the parsers of lib/trust (manifest.c, key.c): signed manifests
 * and key files.
 * Input: one mode byte, then the bytes. Mode 0 opens them as a manifest with a fixed
 * public key as they are; mode 1 first stamps the key's id and a valid signature
 * on them, so the checks behind the signature get explored; mode 2 parses them as
 * a key file. Whatever is accepted must satisfy the documented invariants.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "core/err.h"
#include "core/le.h"
#include "trust/key.h"
#include "trust/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OFF_KEY_ID 32

static struct ndz_key sec, pub;
static int ready;

/*
 * A fresh key each run: mode 1 signs with it, and without its secret nothing in
 * mode 0 can carry a valid signature, so an input behaves the same in every run.
 */
static void setup(void)
{
	if (ndz_key_generate(NDZ_KEY_SIGN_SECRET, &sec, NULL) < 0 ||
	    ndz_key_public(&sec, &pub, NULL) < 0)
		abort();
	ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ndz_error e = { 0 };
	struct ndz_manifest m;
	struct ndz_key k;
	uint8_t *buf;
	int rc;

	if (!ready)
		setup();
	if (size < 1)
		return 0;
	buf = malloc(size);
	if (!buf)
		abort();
	memcpy(buf, data + 1, size - 1);
	size--;
	switch (data[0] % 3) {
	case 2:
		rc = ndz_key_parse((const char *)buf, size, &k, NULL);
		if (rc != 0 && rc != NDZ_EKEY)
			abort();
		if (rc == 0 && k.type == NDZ_KEY_NONE)
			abort();
		break;
	case 1:
		if (size >= NDZ_MANIFEST_FIXED + NDZ_SIG_LEN) {
			memcpy(buf + OFF_KEY_ID, pub.id, NDZ_KEY_ID_LEN);
			crypto_sign_ed25519_detached(buf + size - NDZ_SIG_LEN, NULL, buf,
						     size - NDZ_SIG_LEN, sec.sk);
		}
		/* fall through */
	default:
		rc = ndz_manifest_open(buf, size, &pub, &m, &e);
		if (rc > 0 || strcmp(ndz_strerror(rc), "unknown error") == 0)
			abort();
		if (rc == 0) {
			if (m.chunks == 0 || m.chunks > NDZ_MANIFEST_MAX_CHUNKS ||
			    ndz_manifest_size(m.chunks) != size || !m.hash ||
			    memcmp(m.key_id, pub.id, NDZ_KEY_ID_LEN) != 0 ||
			    (m.hash_alg != NDZ_HASH_SHA256 && m.hash_alg != NDZ_HASH_BLAKE2B_256))
				abort();
			ndz_manifest_release(&m);
		} else if (m.hash || !e.code) {
			abort();
		}
		break;
	}
	free(buf);
	return 0;
}
