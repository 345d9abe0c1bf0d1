/* Key files, key ids and cipher names: the only code that knows a key file's bytes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "key.h"

static const char id_label[] = "ndz-key-id";
static const char key_head[] = "ndz-key 1\n";

int ndz_trust_init(struct ndz_error *e)
{
	if (sodium_init() < 0)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "libsodium failed to start");
	return 0;
}

int ndz_cipher_parse(const char *name, struct ndz_error *e)
{
	if (!strcmp(name, "aes256gcm") || !strcmp(name, "aes-256-gcm"))
		return NDZ_CIPHER_AES256GCM;
	if (!strcmp(name, "xchacha20") || !strcmp(name, "xchacha20poly1305"))
		return NDZ_CIPHER_XCHACHA20;
	return ndz_error_set(e, NDZ_EINVAL, 0, "cipher '%s': aes256gcm or xchacha20", name);
}

const char *ndz_cipher_name(int cipher)
{
	return cipher == NDZ_CIPHER_AES256GCM ? "aes256gcm" :
	       cipher == NDZ_CIPHER_XCHACHA20 ? "xchacha20" : "none";
}

int ndz_chunk_cipher(const struct ndz_chunk_hdr *h)
{
	if (!(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED))
		return 0;
	return h->incompat_flags & NDZ_INCOMPAT_AES256GCM ? NDZ_CIPHER_AES256GCM :
	       NDZ_CIPHER_XCHACHA20;
}

static void key_id_of(struct ndz_key *k)
{
	uint8_t h[32];

	if (k->type == NDZ_KEY_CRYPT) {
		crypto_generichash(h, sizeof(h), (const uint8_t *)id_label, sizeof(id_label) - 1,
				   k->sk, 32);
	} else {
		crypto_generichash_state st;

		crypto_generichash_init(&st, NULL, 0, sizeof(h));
		crypto_generichash_update(&st, (const uint8_t *)id_label, sizeof(id_label) - 1);
		crypto_generichash_update(&st, k->pk, sizeof(k->pk));
		crypto_generichash_final(&st, h, sizeof(h));
	}
	memcpy(k->id, h, NDZ_KEY_ID_LEN);
}

int ndz_key_generate(enum ndz_key_type type, struct ndz_key *k, struct ndz_error *e)
{
	memset(k, 0, sizeof(*k));
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	k->type = type;
	if (type == NDZ_KEY_SIGN_SECRET)
		crypto_sign_ed25519_keypair(k->pk, k->sk);
	else if (type == NDZ_KEY_CRYPT)
		crypto_aead_xchacha20poly1305_ietf_keygen(k->sk);
	else
		return ndz_error_set(e, NDZ_EINVAL, 0, "a %s key cannot be generated",
				     ndz_key_type_name(type));
	key_id_of(k);
	return 0;
}

int ndz_key_public(const struct ndz_key *sec, struct ndz_key *pub, struct ndz_error *e)
{
	if (sec->type != NDZ_KEY_SIGN_SECRET)
		return ndz_error_set(e, NDZ_EINVAL, 0, "a %s key has no public half",
				     ndz_key_type_name(sec->type));
	memset(pub, 0, sizeof(*pub));
	pub->type = NDZ_KEY_SIGN_PUBLIC;
	memcpy(pub->pk, sec->pk, sizeof(pub->pk));
	memcpy(pub->id, sec->id, sizeof(pub->id));
	return 0;
}

void ndz_key_wipe(struct ndz_key *k)
{
	sodium_memzero(k, sizeof(*k));
}

const char *ndz_key_type_name(enum ndz_key_type type)
{
	switch (type) {
	case NDZ_KEY_SIGN_SECRET:
		return "ed25519-secret";
	case NDZ_KEY_SIGN_PUBLIC:
		return "ed25519-public";
	case NDZ_KEY_CRYPT:
		return "xchacha20poly1305";
	default:
		return "none";
	}
}

void ndz_key_id_hex(const uint8_t id[NDZ_KEY_ID_LEN], char out[17])
{
	sodium_bin2hex(out, 17, id, NDZ_KEY_ID_LEN);
}

/* The key bytes a file of type holds, and where they are in k. */
static size_t key_bytes(const struct ndz_key *k, const uint8_t **p)
{
	if (k->type == NDZ_KEY_SIGN_PUBLIC) {
		*p = k->pk;
		return 32;
	}
	*p = k->sk;
	return k->type == NDZ_KEY_SIGN_SECRET ? 64 : 32;
}

int ndz_key_format(const struct ndz_key *k, char *buf, size_t len, struct ndz_error *e)
{
	char id[17], hex[129];
	const uint8_t *p;
	size_t n = key_bytes(k, &p);
	int w;

	if (k->type == NDZ_KEY_NONE)
		return ndz_error_set(e, NDZ_EINVAL, 0, "no key to format");
	ndz_key_id_hex(k->id, id);
	sodium_bin2hex(hex, sizeof(hex), p, n);
	w = snprintf(buf, len, "%stype %s\nid %s\nkey %s\n", key_head,
		     ndz_key_type_name(k->type), id, hex);
	sodium_memzero(hex, sizeof(hex));
	if (w < 0 || (size_t)w >= len)
		return ndz_error_set(e, NDZ_EINVAL, 0, "key file text: %zu bytes of room are "
				     "too few", len);
	return w;
}

/* One line "word value\n" at *pos: value into out (at most cap - 1 chars). */
static int take_line(const char *t, size_t len, size_t *pos, const char *word, char *out,
		     size_t cap)
{
	size_t wl = strlen(word), i = *pos, n;
	const char *nl;

	if (len - i < wl + 1 || memcmp(t + i, word, wl) != 0 || t[i + wl] != ' ')
		return -1;
	i += wl + 1;
	nl = memchr(t + i, '\n', len - i);
	if (!nl)
		return -1;
	n = (size_t)(nl - (t + i));
	if (n == 0 || n >= cap || memchr(t + i, '\0', n))
		return -1;
	memcpy(out, t + i, n);
	out[n] = '\0';
	*pos = i + n + 1;
	return 0;
}

static int unhex(const char *hex, uint8_t *out, size_t n)
{
	size_t got = 0;
	const char *end = NULL;

	if (strlen(hex) != 2 * n)
		return -1;
	if (sodium_hex2bin(out, n, hex, 2 * n, NULL, &got, &end) != 0 || got != n ||
	    *end != '\0')
		return -1;
	return 0;
}

static int parse(const char *t, size_t len, struct ndz_key *k)
{
	char type[32], id[32], hex[160];
	uint8_t idb[NDZ_KEY_ID_LEN], pk[32];
	const uint8_t *p;
	size_t pos = sizeof(key_head) - 1;
	int rc = -1;

	memset(k, 0, sizeof(*k));
	if (len < pos || memcmp(t, key_head, pos) != 0)
		return -1;
	if (take_line(t, len, &pos, "type", type, sizeof(type)) < 0 ||
	    take_line(t, len, &pos, "id", id, sizeof(id)) < 0 ||
	    take_line(t, len, &pos, "key", hex, sizeof(hex)) < 0 || pos != len)
		goto out;
	if (!strcmp(type, "ed25519-secret"))
		k->type = NDZ_KEY_SIGN_SECRET;
	else if (!strcmp(type, "ed25519-public"))
		k->type = NDZ_KEY_SIGN_PUBLIC;
	else if (!strcmp(type, "xchacha20poly1305"))
		k->type = NDZ_KEY_CRYPT;
	else
		goto out;
	if (unhex(id, idb, sizeof(idb)) < 0 || unhex(hex, k->type == NDZ_KEY_SIGN_PUBLIC ?
						   k->pk : k->sk, key_bytes(k, &p)) < 0)
		goto out;
	if (k->type == NDZ_KEY_SIGN_SECRET) {
		/* the public half must be the one the seed makes */
		if (crypto_sign_ed25519_sk_to_pk(pk, k->sk) != 0)
			goto out;
		{
			uint8_t pk2[32], sk2[64];

			crypto_sign_ed25519_seed_keypair(pk2, sk2, k->sk);
			rc = sodium_memcmp(pk2, pk, 32);
			sodium_memzero(sk2, sizeof(sk2));
			if (rc != 0)
				goto out;
			rc = -1;
		}
		memcpy(k->pk, pk, 32);
	}
	key_id_of(k);
	if (memcmp(k->id, idb, sizeof(idb)) != 0)
		goto out;
	rc = 0;
out:
	sodium_memzero(hex, sizeof(hex));
	if (rc < 0)
		ndz_key_wipe(k);
	return rc;
}

int ndz_key_parse(const char *text, size_t len, struct ndz_key *k, struct ndz_error *e)
{
	memset(k, 0, sizeof(*k));
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	if (parse(text, len, k) < 0)
		return ndz_error_set(e, NDZ_EKEY, 0, "%s", ndz_strerror(NDZ_EKEY));
	return 0;
}

#define KEY_FILE_MAX 512

int ndz_key_load(const char *path, struct ndz_key *k, struct ndz_error *e)
{
	char buf[KEY_FILE_MAX];
	struct stat st;
	ssize_t n;
	int fd, rc;

	memset(k, 0, sizeof(*k));
	if (ndz_trust_init(e) < 0) {
		ndz_error_prefix(e, "%s", path);
		return NDZ_ENOTSUP;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return ndz_error_set(e, NDZ_EIO, errno, "%s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return ndz_error_set(e, NDZ_EKEY, 0, "%s: %s (not a regular file)", path,
				     ndz_strerror(NDZ_EKEY));
	}
	n = read(fd, buf, sizeof(buf));
	rc = errno;
	close(fd);
	if (n < 0)
		return ndz_error_set(e, NDZ_EIO, rc, "%s", path);
	if ((size_t)n == sizeof(buf) || ndz_key_parse(buf, (size_t)n, k, NULL) < 0) {
		sodium_memzero(buf, sizeof(buf));
		return ndz_error_set(e, NDZ_EKEY, 0, "%s: %s", path, ndz_strerror(NDZ_EKEY));
	}
	sodium_memzero(buf, sizeof(buf));
	if (k->type != NDZ_KEY_SIGN_PUBLIC && (st.st_mode & 077)) {
		ndz_key_wipe(k);
		return ndz_error_set(e, NDZ_EKEYPERM, 0, "%s: %s (mode %04o; chmod 600 it)", path,
				     ndz_strerror(NDZ_EKEYPERM), (unsigned)(st.st_mode & 07777));
	}
	return 0;
}

int ndz_trust_read_fd(int fd, const char *path, uint64_t max, int code, uint8_t **out,
		      size_t *len, struct ndz_error *e)
{
	uint8_t *b = NULL;
	size_t got = 0;
	struct stat st;

	*out = NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return ndz_error_set(e, code, 0, "%s: %s (not a regular file of at most "
				     "%llu bytes)", path, ndz_strerror(code),
				     (unsigned long long)max);
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		close(fd);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", path, ndz_strerror(NDZ_ENOMEM));
	}
	while (got <= (size_t)st.st_size) {
		ssize_t n = read(fd, b + got, (size_t)st.st_size + 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int rc = ndz_error_set(e, NDZ_EIO, errno, "%s: read error", path);

			close(fd);
			free(b);
			return rc;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got > (size_t)st.st_size) {
		free(b);
		return ndz_error_set(e, code, 0, "%s: %s (grew while read)", path,
				     ndz_strerror(code));
	}
	*out = b;
	*len = got;
	return 0;
}

int ndz_key_load_as(const char *path, unsigned want, struct ndz_key *k, struct ndz_error *e)
{
	enum ndz_key_type t;
	int rc = ndz_key_load(path, k, e);

	if (rc < 0)
		return rc;
	if (want & NDZ_KEY_BIT(k->type))
		return 0;
	t = k->type;
	ndz_key_wipe(k);
	if (t == NDZ_KEY_SIGN_SECRET && (want & NDZ_KEY_BIT(NDZ_KEY_SIGN_PUBLIC)))
		return ndz_error_set(e, NDZ_EKEY, 0, "%s: a secret signing key, where its public "
				     "half is wanted (the .pub file)", path);
	return ndz_error_set(e, NDZ_EKEY, 0, "%s: a %s key, not the %s key wanted", path,
			     ndz_key_type_name(t),
			     ndz_key_type_name(want & NDZ_KEY_BIT(NDZ_KEY_SIGN_PUBLIC) ?
					       NDZ_KEY_SIGN_PUBLIC : want & NDZ_KEY_BIT(NDZ_KEY_CRYPT) ?
					       NDZ_KEY_CRYPT : NDZ_KEY_SIGN_SECRET));
}

int ndz_key_add(const char *path, struct ndz_key *pub, struct ndz_key *crypt,
		struct ndz_error *e)
{
	struct ndz_key k, *to;
	int rc = ndz_key_load_as(path, NDZ_KEY_BIT(NDZ_KEY_SIGN_PUBLIC) |
				 NDZ_KEY_BIT(NDZ_KEY_CRYPT), &k, e);

	if (rc < 0)
		return rc;
	to = k.type == NDZ_KEY_SIGN_PUBLIC ? pub : crypt;
	if (to->type != NDZ_KEY_NONE) {
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "%s: a second %s key (give at most one of "
				   "each type)", path, ndz_key_type_name(k.type));
		ndz_key_wipe(&k);
		return rc;
	}
	*to = k;
	ndz_key_wipe(&k);
	return 0;
}

int ndz_key_save(const char *path, const struct ndz_key *k, struct ndz_error *e)
{
	char buf[KEY_FILE_MAX];
	mode_t mode = k->type == NDZ_KEY_SIGN_PUBLIC ? 0644 : 0600;
	int fd, n, rc = 0;

	n = ndz_key_format(k, buf, sizeof(buf), e);
	if (n < 0) {
		ndz_error_prefix(e, "%s", path);
		return n;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s", path);
		goto out;
	}
	/* exactly this mode, whatever the umask took away from open's */
	if (fchmod(fd, mode) < 0 || write(fd, buf, (size_t)n) != n || fsync(fd) < 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: write error", path);
	if (close(fd) < 0 && rc == 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: write error", path);
	if (rc < 0)
		unlink(path);
out:
	sodium_memzero(buf, sizeof(buf));
	return rc;
}

