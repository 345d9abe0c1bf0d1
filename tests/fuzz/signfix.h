/*
 * For fuzz targets of signed formats (index, manifest): a fresh Ed25519 key each run,
 * the input's bytes after its mode byte copied out, and a valid key id and signature
 * stamped on them, so that the checks behind the signature get explored. Without the
 * key's secret no input carries a valid signature, so an input behaves the same in
 * every run.
 */
#ifndef NDZ_FUZZ_SIGNFIX_H
#define NDZ_FUZZ_SIGNFIX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "trust/key.h"

#define OFF_KEY_ID 32

static struct ndz_key sec, pub;
static int ready;

/* Make the run's key pair once. */
static inline void setup(void)
{
	if (ready)
		return;
	if (ndz_key_generate(NDZ_KEY_SIGN_SECRET, &sec, NULL) < 0 ||
	    ndz_key_public(&sec, &pub, NULL) < 0)
		abort();
	ready = 1;
}

/* A malloc'd copy of data's size bytes after its first (mode) byte; size >= 1. */
static inline uint8_t *take(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size);

	if (!buf)
		abort();
	memcpy(buf, data + 1, size - 1);
	return buf;
}

/* The key's id at OFF_KEY_ID and a signature over the rest in the last sig bytes. */
static inline void stamp(uint8_t *buf, size_t size, size_t sig)
{
	memcpy(buf + OFF_KEY_ID, pub.id, NDZ_KEY_ID_LEN);
	crypto_sign_ed25519_detached(buf + size - sig, NULL, buf, size - sig, sec.sk);
}

#endif
