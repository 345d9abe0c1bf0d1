/*
 * libFuzzer target for chunk decryption (lib/trust/seal.c), both ciphers. Input: one
 * byte of mode (bit 0: the cipher, bit 1: what to do), then bytes.
 * Forge: the bytes are a chunk, made to claim encryption with that cipher under a
 * fixed key and given right CRCs; whatever its header checks pass, decryption must
 * refuse it, as nobody without the key can make a tag. Round trip: the bytes are
 * a chunk's data (and 4 bytes naming a position); the chunk is encrypted, must
 * check and decrypt to the same data, then with that one byte changed (CRCs made
 * right again) it must be refused.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "chunkfix.h"
#include "core/err.h"
#include "core/format.h"
#include "core/le.h"
#include "trust/key.h"
#include "trust/seal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OFF_INCOMPAT 20
#define OFF_KEY_ID 120
#define MAX_PLAIN 16384

static uint8_t *chunk, *copy;
static struct ndz_key key;

static void setup(void)
{
	size_t i;

	chunk = calloc(1, NDZ_CHUNK_SIZE);
	copy = calloc(1, NDZ_CHUNK_SIZE);
	if (!chunk || !copy || ndz_trust_init(NULL) < 0)
		abort();
	key.type = NDZ_KEY_CRYPT;
	for (i = 0; i < 32; i++)
		key.sk[i] = (uint8_t)(i * 37 + 11);
	memcpy(key.id, "fuzzkey!", NDZ_KEY_ID_LEN);
}

static void forge(int cipher, const uint8_t *d, size_t n)
{
	struct ndz_chunk_hdr h;
	int rc;

	memcpy(chunk, d, n);
	put_le32(chunk + OFF_INCOMPAT, NDZ_INCOMPAT_ENCRYPTED |
		 (cipher == NDZ_CIPHER_AES256GCM ? NDZ_INCOMPAT_AES256GCM : 0));
	memcpy(chunk + OFF_KEY_ID, key.id, NDZ_KEY_ID_LEN);
	fix_crcs(chunk);
	if (ndz_chunk_check(chunk, &h, NULL) != 0)
		return;
	if (ndz_chunk_cipher(&h) != cipher)
		abort();
	rc = ndz_chunk_decrypt(&key, chunk, &h, NULL);
	if (rc != NDZ_EDECRYPT)
		abort();
}

static void roundtrip(int cipher, const uint8_t *d, size_t n)
{
	struct ndz_chunk_hdr h;
	uint32_t len, at, sel;
	size_t span;
	int rc;

	if (n < 4)
		return;
	at = sel = get_le32(d);
	d += 4;
	n -= 4;
	len = n < MAX_PLAIN ? (uint32_t)n : MAX_PLAIN;
	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.index = at & 7;
	memcpy(h.uuid, "0123456789abcdef", 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = at & 8 ? NDZ_CODEC_ZSTD : NDZ_CODEC_ZLIB;
	h.source_bytes = 1000 * 512;
	h.source_sectors = 1000;
	h.first = 10 * h.index;
	h.last = h.first + 10;
	h.nregions = 1;
	ndz_hdr_set_region(chunk, 0, (struct ndz_region){ h.first, 10 });
	memcpy(chunk + NDZ_HDR_SIZE, d, len);
	h.data_len = len;
	h.data_crc = crc(chunk + NDZ_HDR_SIZE, len);
	if (ndz_hdr_encode(&h, chunk, NULL) != 0)
		abort();
	if (ndz_chunk_encrypt(&key, cipher, chunk, NULL) != 0 || ndz_chunk_check(chunk, &h, NULL) != 0 ||
	    ndz_chunk_cipher(&h) != cipher || h.data_len != len + NDZ_CRYPT_OVERHEAD)
		abort();
	span = NDZ_HDR_SIZE + h.data_len;
	memcpy(copy, chunk, span);
	if (ndz_chunk_decrypt(&key, copy, &h, NULL) != 0 || h.data_len != len ||
	    memcmp(copy + NDZ_HDR_SIZE, d, len) != 0)
		abort();
	/* one byte changed: the CRC fields are made again, so changing them is no change */
	at = (at >> 4) % span;
	if ((at >= OFF_DATA_CRC && at < OFF_DATA_CRC + 4) || (at >= OFF_HDR_CRC && at < OFF_HDR_CRC + 4))
		return;
	memcpy(copy, chunk, span);
	copy[at] ^= (uint8_t)(sel >> 24 | 1);
	fix_crcs(copy);
	if (ndz_chunk_check(copy, &h, NULL) != 0)
		return;
	rc = ndz_chunk_decrypt(&key, copy, &h, NULL);
	if (rc != NDZ_EDECRYPT && rc != NDZ_EWRONGKEY && !(rc == 0 && !ndz_chunk_cipher(&h)))
		abort();
	if (rc == 0 && h.incompat_flags & NDZ_INCOMPAT_ENCRYPTED)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int cipher;

	if (!chunk)
		setup();
	if (size < 1 || size - 1 > NDZ_HDR_SIZE + MAX_PLAIN + 4)
		return 0;
	memset(chunk, 0, NDZ_HDR_SIZE + MAX_PLAIN + NDZ_CRYPT_OVERHEAD + 4);
	cipher = data[0] & 1 ? NDZ_CIPHER_AES256GCM : NDZ_CIPHER_XCHACHA20;
	if (data[0] & 2)
		roundtrip(cipher, data + 1, size - 1);
	else
		forge(cipher, data + 1, size - 1);
	return 0;
}
