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

#include "core/err.h"
#include "core/le.h"
#include "trust/key.h"
#include "trust/manifest.h"
#include "signfix.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ndz_error e = { 0 };
	struct ndz_manifest m;
	struct ndz_key k;
	uint8_t *buf;
	int rc;

	setup();
	if (size < 1)
		return 0;
	buf = take(data, size--);
	switch (data[0] % 3) {
	case 2:
		rc = ndz_key_parse((const char *)buf, size, &k, NULL);
		if (rc != 0 && rc != NDZ_EKEY)
			abort();
		if (rc == 0 && k.type == NDZ_KEY_NONE)
			abort();
		break;
	case 1:
		if (size >= NDZ_MANIFEST_FIXED + NDZ_SIG_LEN)
			stamp(buf, size, NDZ_SIG_LEN);
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
