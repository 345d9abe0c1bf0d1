/*
 * The cost of a manifest's chunk hash: CPU time to hash a 1 MiB chunk with
 * libsodium's BLAKE2b-256 and SHA-256 and with OpenSSL libcrypto's SHA-256 (EVP,
 * which uses SHA-NI), and of XChaCha20-Poly1305 decryption, on one thread. Built
 * and run by bench/trust.sh. Usage: trust-hash [CHUNKS] (default 300)
 */
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHUNK (1u << 20)

static double cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "libsodium BLAKE2b-256", "libsodium SHA-256",
				       "libcrypto SHA-256 (EVP)",
				       "libsodium XChaCha20-Poly1305 open" };
	int n = argc > 1 ? atoi(argv[1]) : 300;
	uint8_t *b = malloc(CHUNK), *c = malloc(CHUNK), *p = malloc(CHUNK), out[32];
	uint8_t key[32], nonce[24];
	unsigned long long clen;
	unsigned ol;

	if (!b || !c || !p || n < 1 || sodium_init() < 0)
		return 1;
	randombytes_buf(b, CHUNK);
	randombytes_buf(key, sizeof(key));
	randombytes_buf(nonce, sizeof(nonce));
	crypto_aead_xchacha20poly1305_ietf_encrypt(c, &clen, b, CHUNK - 16, NULL, 0, NULL, nonce,
						   key);
	for (int a = 0; a < 4; a++) {
		double t0 = cpu_s(), t;

		for (int i = 0; i < n; i++) {
			b[0] = (uint8_t)i;
			if (a == 0)
				crypto_generichash(out, 32, b, CHUNK, NULL, 0);
			else if (a == 1)
				crypto_hash_sha256(out, b, CHUNK);
			else if (a == 2)
				EVP_Digest(b, CHUNK, out, &ol, EVP_sha256(), NULL);
			else if (crypto_aead_xchacha20poly1305_ietf_decrypt(p, &clen, NULL, c,
									     CHUNK, NULL, 0, nonce,
									     key) != 0)
				return 1;
		}
		t = cpu_s() - t0;
		printf("%-36s %6.0f MB/s  %6.3f ms CPU per 1 MiB chunk\n", names[a],
		       (double)n * CHUNK / 1e6 / t, t * 1e3 / n);
	}
	free(b);
	free(c);
	free(p);
	return 0;
}
