/*
 * The cost of a manifest's chunk hash and of a chunk's decryption: CPU time to hash
 * a 1 MiB chunk with libsodium's BLAKE2b-256 and SHA-256 and with OpenSSL libcrypto's
 * SHA-256 (EVP, which uses SHA-NI), to decrypt it with libsodium's XChaCha20-Poly1305
 * and with libcrypto's AES-256-GCM (EVP, AES-NI/VAES and PCLMUL) as lib/trust.c does
 * (a BLAKE2b subkey and a fresh context per chunk), and zlib's CRC-32 that a plain
 * chunk pays instead, on one thread. Built and run by bench/trust.sh.
 * Usage: trust-hash [CHUNKS] (default 300)
 */
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zlib.h>

#define CHUNK (1u << 20)
#define AD 4096

static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* AES-256-GCM over n bytes of in into out, as lib/trust.c: subkey, AD, tag. */
static int gcm(int enc, const uint8_t key[32], const uint8_t nonce[24], const uint8_t *ad,
	       const uint8_t *in, uint8_t *out, int n, uint8_t tag[16])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	crypto_generichash_state st;
	uint8_t sub[32];
	int l, ok;

	crypto_generichash_init(&st, key, 32, sizeof(sub));
	crypto_generichash_update(&st, (const uint8_t *)"ndz aes-256-gcm", 16);
	crypto_generichash_update(&st, nonce, 12);
	crypto_generichash_final(&st, sub, sizeof(sub));
	ok = c && EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1 &&
	     EVP_CipherInit_ex(c, NULL, NULL, sub, nonce + 12, enc) == 1 &&
	     EVP_CipherUpdate(c, NULL, &l, ad, AD) == 1 &&
	     EVP_CipherUpdate(c, out, &l, in, n) == 1 &&
	     (enc || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, tag) == 1) &&
	     EVP_CipherFinal_ex(c, out + n, &l) == 1 &&
	     (!enc || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1);
	EVP_CIPHER_CTX_free(c);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "libsodium BLAKE2b-256", "libsodium SHA-256",
				       "libcrypto SHA-256 (EVP)",
				       "libsodium XChaCha20-Poly1305 open",
				       "libcrypto AES-256-GCM open (+subkey)",
				       "zlib CRC-32 (a plain chunk's check)" };
	int n = argc > 1 ? atoi(argv[1]) : 300;
	uint8_t *b = malloc(CHUNK), *c = malloc(CHUNK), *g = malloc(CHUNK), *p = malloc(CHUNK);
	uint8_t key[32], nonce[24], out[32], ad[AD], tag[16];
	unsigned long long clen;
	unsigned ol;
	uLong crc = 0;

	if (!b || !c || !g || !p || n < 1 || sodium_init() < 0)
		return 1;
	randombytes_buf(b, CHUNK);
	randombytes_buf(key, sizeof(key));
	randombytes_buf(nonce, sizeof(nonce));
	randombytes_buf(ad, sizeof(ad));
	crypto_aead_xchacha20poly1305_ietf_encrypt(c, &clen, b, CHUNK - 16, ad, AD, NULL, nonce,
						   key);
	if (gcm(1, key, nonce, ad, b, g, CHUNK - 16, tag) != 0)
		return 1;
	for (int a = 0; a < 6; a++) {
		double t0 = cpu_s(), t;

		for (int i = 0; i < n; i++) {
			b[0] = (uint8_t)i;
			if (a == 0)
				crypto_generichash(out, 32, b, CHUNK, NULL, 0);
			else if (a == 1)
				crypto_hash_sha256(out, b, CHUNK);
			else if (a == 2)
				EVP_Digest(b, CHUNK, out, &ol, EVP_sha256(), NULL);
			else if (a == 3 && crypto_aead_xchacha20poly1305_ietf_decrypt(p, &clen,
					NULL, c, CHUNK, ad, AD, nonce, key) != 0)
				return 1;
			else if (a == 4 && gcm(0, key, nonce, ad, g, p, CHUNK - 16, tag) != 0)
				return 1;
			else if (a == 5)
				crc ^= crc32(crc32(0L, Z_NULL, 0), b, CHUNK);
		}
		t = cpu_s() - t0;
		printf("%-38s %6.0f MB/s  %6.3f ms CPU per 1 MiB chunk\n", names[a],
		       (double)n * CHUNK / 1e6 / t, t * 1e3 / n);
	}
	free(b);
	free(c);
	free(g);
	free(p);
	return crc == 1;
}
