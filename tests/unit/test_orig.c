/* Unit tests for lib/orig.c: the original Frisbee header parser, V4 checks, relocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <nettle/blowfish.h>
#include <nettle/cbc.h>
#include <nettle/sha1.h>
#include <openssl/bn.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/le.h"
#include "core/orig.h"

/* The V3 layout, written down independently of orig.c. */
enum { MAGIC = 0, SIZE = 4, INDEX = 8, RSIZE = 16, RCOUNT = 20, FIRST = 24, LAST = 28,
       NRELOC = 32, REGS = 36 };

static uint8_t *chunk;
static struct ndz_error why;

/* chunk: zeros but for a V3 header of size data bytes and nregions regions, sectors
 * from 0 to last */
static void v3_header(uint32_t size, uint32_t nregions, uint32_t last)
{
	memset(chunk, 0, NDZ_CHUNK_SIZE);
	put_le32(chunk + MAGIC, 0x6969696b);
	put_le32(chunk + SIZE, size);
	put_le32(chunk + RSIZE, 4096);
	put_le32(chunk + RCOUNT, nregions);
	put_le32(chunk + FIRST, 0);
	put_le32(chunk + LAST, last);
}

/* A V3 chunk 0 of sectors [0, 100): regions {0,10} {20,5} {50,50}, no relocation. */
static void v3(void)
{
	v3_header(1000, 3, 100);
	put_le32(chunk + REGS + 0, 0);
	put_le32(chunk + REGS + 4, 10);
	put_le32(chunk + REGS + 8, 20);
	put_le32(chunk + REGS + 12, 5);
	put_le32(chunk + REGS + 16, 50);
	put_le32(chunk + REGS + 20, 50);
}

static void reloc(uint32_t type, uint32_t sector, uint32_t off, uint32_t size)
{
	uint8_t *p = chunk + REGS + 8 * get_le32(chunk + RCOUNT) + 16 * get_le32(chunk + NRELOC);

	put_le32(p, type);
	put_le32(p + 4, sector);
	put_le32(p + 8, off);
	put_le32(p + 12, size);
	put_le32(chunk + NRELOC, get_le32(chunk + NRELOC) + 1);
}

static int decode(struct ndz_orig_hdr *oh)
{
	ndz_error_clear(&why);
	return ndz_orig_decode(chunk, oh, &why);
}

static void test_probe(void **state)
{
	uint8_t b[20] = { 0 };

	(void)state;
	for (uint32_t v = 1; v <= 4; v++) {
		put_le32(b, 0x69696969 + v - 1);
		put_le32(b + 16, 4096);
		assert_int_equal(ndz_orig_probe(b, sizeof(b), NULL), (int)v);
	}
	put_le32(b, 0x6b696969);                /* V3 written big-endian */
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_probe(b, sizeof(b), &why), NDZ_EBIGENDIAN);
	assert_string_equal(ndz_error_msg(&why), ndz_strerror(NDZ_EBIGENDIAN));
	put_le32(b, 0x69696969);                /* V1: the same magic, regionsize backwards */
	b[16] = 0, b[17] = 0, b[18] = 0x10, b[19] = 0;
	assert_int_equal(ndz_orig_probe(b, sizeof(b), NULL), NDZ_EBIGENDIAN);
	memcpy(b, "NDZIMAGE", 8);
	assert_int_equal(ndz_orig_probe(b, sizeof(b), NULL), 0);
	assert_int_equal(ndz_orig_probe(b, 3, NULL), 0);
}

static void test_valid(void **state)
{
	struct ndz_orig_hdr oh;
	struct ndz_region r;

	(void)state;
	v3();
	reloc(NDZ_ORIG_RELOC_SHORTSECTOR, 99, 0, 300);
	assert_int_equal(decode(&oh), 0);
	assert_int_equal(oh.version, 3);
	assert_int_equal(oh.hdrsize, 36);
	assert_int_equal(oh.nregions, 3);
	r = ndz_orig_region(chunk, &oh, 1);
	assert_int_equal(r.start, 20);
	assert_int_equal(r.count, 5);
	assert_int_equal(ndz_orig_get_reloc(chunk, &oh, 0).size, 300);
	assert_int_equal(ndz_orig_data_end(chunk, &oh), 99 * 512 + 300);
}

/* Each damage: a code, and a reason. */
static void test_damage(void **state)
{
	struct ndz_orig_hdr oh;
	static const struct { uint32_t off, val; int code; const char *what; } c[] = {
		{ MAGIC, 0x12345678, NDZ_EBADMAGIC, "magic" },
		{ SIZE, 0, NDZ_EHEADER, "data size" },
		{ SIZE, 1044481, NDZ_EHEADER, "data size" },
		{ RSIZE, 8192, NDZ_EHEADER, "header area" },
		{ RCOUNT, 0, NDZ_EHEADER, "do not fit" },
		{ RCOUNT, 508, NDZ_EHEADER, "do not fit" },
		{ NRELOC, 300, NDZ_EHEADER, "do not fit" },
		{ FIRST, 200, NDZ_EREGION, "past last" },
		{ REGS + 12, 0, NDZ_EREGION, "empty" },
		{ REGS + 8, 5, NDZ_EREGION, "overlaps" },
		{ REGS + 20, 51, NDZ_EREGION, "past the chunk's last sector" },
		{ FIRST, 1, NDZ_EREGION, "before the chunk's first sector" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		v3();
		put_le32(chunk + c[i].off, c[i].val);
		assert_int_equal(decode(&oh), c[i].code);
		assert_non_null(strstr(ndz_error_msg(&why), c[i].what));
	}
	v3();
	reloc(3, 5, 0, 100);                    /* a LILO relocation: not applied */
	assert_int_equal(decode(&oh), NDZ_ENOTSUP);
	v3();
	reloc(NDZ_ORIG_RELOC_FBSDDISKLABEL, 12, 0, 276);   /* in the gap: outside */
	assert_int_equal(decode(&oh), NDZ_EREGION);
	assert_non_null(strstr(ndz_error_msg(&why), "outside the chunk's regions"));
	v3();
	reloc(NDZ_ORIG_RELOC_FBSDDISKLABEL, 9, 300, 276);  /* runs past its region */
	assert_int_equal(decode(&oh), NDZ_EREGION);
	v3();
	reloc(NDZ_ORIG_RELOC_SHORTSECTOR, 98, 0, 300);     /* not the last sector */
	assert_int_equal(decode(&oh), NDZ_EREGION);
	v3();
	reloc(NDZ_ORIG_RELOC_FBSDDISKLABEL, 1, 0, 100);    /* too small for a label */
	assert_int_equal(decode(&oh), NDZ_EREGION);
}

/* A V4 header over the V3 one: SHA-1 checked; Blowfish-CBC decrypted, padding checked. */
static void v4(uint16_t cipher, uint16_t csum)
{
	v3();
	put_le32(chunk + MAGIC, 0x6969696c);
	memmove(chunk + 344, chunk + REGS, 24);
	memset(chunk + REGS, 0, 344 - REGS);
	put_le16(chunk + 36, cipher);
	put_le16(chunk + 38, csum);
}

static void test_v4(void **state)
{
	struct ndz_orig_keys k = { 0 };
	struct ndz_orig_hdr oh;
	struct sha1_ctx s;
	struct blowfish_ctx bf;
	uint8_t iv[8], plain[1000];
	uint32_t len;
	size_t i;

	(void)state;
	v4(0, NDZ_ORIG_CSUM_SHA1);
	for (i = 0; i < 1000; i++)
		chunk[4096 + i] = (uint8_t)(i * 7);
	sha1_init(&s);
	sha1_update(&s, 4096 + 1000, chunk);    /* the checksum field is zero now */
	sha1_digest(&s, 20, chunk + 72);
	assert_int_equal(decode(&oh), 0);
	assert_int_equal(ndz_orig_open_chunk(chunk, &oh, NULL, &len, &why), 0);
	assert_int_equal(len, 1000);
	chunk[4096 + 500] ^= 1;
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_open_chunk(chunk, &oh, NULL, &len, &why),
			 NDZ_EORIGSUM);
	assert_string_equal(ndz_error_msg(&why), "bad checksum or signature in an "
			    "original-format chunk: SHA-1 does not match");

	/* 1000 bytes padded to 1008, encrypted */
	v4(NDZ_ORIG_CIPHER_BF_CBC, 0);
	put_le32(chunk + SIZE, 1008);
	for (i = 0; i < 1000; i++)
		plain[i] = chunk[4096 + i] = (uint8_t)(i * 13);
	memset(chunk + 4096 + 1000, 8, 8);
	memset(k.bf_key, 0x42, 32);
	k.have_bf = 1;
	memcpy(chunk + 40, "initvect", 8);
	memcpy(iv, "initvect", 8);
	blowfish_set_key(&bf, 32, k.bf_key);
	cbc_encrypt(&bf, (nettle_cipher_func *)blowfish_encrypt, 8, iv, 1008, chunk + 4096,
		    chunk + 4096);
	assert_int_equal(decode(&oh), 0);
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_open_chunk(chunk, &oh, NULL, &len, &why),
			 NDZ_ENEEDKEY);
	assert_int_equal(why.code, NDZ_ENEEDKEY);
	assert_non_null(strstr(ndz_error_msg(&why), ": Blowfish-encrypted; give the"));
	assert_int_equal(ndz_orig_open_chunk(chunk, &oh, &k, &len, &why), 0);
	assert_int_equal(len, 1000);
	assert_memory_equal(chunk + 4096, plain, 1000);
	/* a size that is not whole blocks */
	put_le32(chunk + SIZE, 1001);
	assert_int_equal(decode(&oh), NDZ_EHEADER);
}

/* A disklabel in a slice at sector 2048: offsets of used partitions move, checksum holds. */
static void test_disklabel(void **state)
{
	struct ndz_orig_hdr oh;
	uint8_t *l, *out = calloc(1, 100 * 512);
	uint16_t x = 0;
	size_t i;

	(void)state;
	assert_non_null(out);
	v3_header(10, 1, 100);
	put_le32(chunk + REGS + 4, 100);
	reloc(NDZ_ORIG_RELOC_FBSDDISKLABEL, 1, 0, 276);
	assert_int_equal(decode(&oh), 0);
	l = out + 512;
	put_le32(l, NDZ_BSDLABEL_MAGIC);
	put_le32(l + 132, NDZ_BSDLABEL_MAGIC);
	put_le16(l + 138, 8);
	put_le32(l + 148, 24576);               /* a: size, offset 0 */
	put_le32(l + 164, 8192);                /* b: size, offset 24576 */
	put_le32(l + 168, 24576);
	put_le32(l + 184, 0);                   /* c unused: size 0, offset 7 stays */
	put_le32(l + 188, 7);
	assert_int_equal(ndz_orig_relocate(chunk, &oh, out, 100 * 512, 2048, &why), 0);
	assert_int_equal(get_le32(l + 152), 2048);
	assert_int_equal(get_le32(l + 168), 26624);
	assert_int_equal(get_le32(l + 188), 7);
	for (i = 0; i < 276; i += 2)
		x ^= get_le16(l + i);
	assert_int_equal(x, 0);
	put_le32(l, 0);                         /* not a label: refused */
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_relocate(chunk, &oh, out, 100 * 512, 2048, &why),
			 NDZ_EREGION);
	assert_string_equal(ndz_error_msg(&why), "region outside the image or out of order: "
			    "relocation 0: not a disklabel of at most 276 bytes");
	free(out);
}

/* A V4 chunk signed with an RSA key made here (n, e, d), as the original signs. */
static void sign(BIGNUM *n, BIGNUM *d)
{
	uint8_t m[128] = { 0 }, digest[20];
	struct sha1_ctx c;
	int len = BN_num_bytes(n);
	BN_CTX *ctx = BN_CTX_new();
	BIGNUM *x, *y = BN_new();

	memset(chunk + 72, 0, 256);
	sha1_init(&c);
	sha1_update(&c, 4096 + get_le32(chunk + SIZE), chunk);
	sha1_digest(&c, 20, digest);
	/* PKCS#1 type 1 of a 53-byte message, the digest then zeros: 00 01 ff.. 00 msg */
	assert_true(len >= 64);
	m[1] = 1;
	memset(m + 2, 0xff, (size_t)len - 2 - 54);
	memcpy(m + len - 53, digest, 20);
	x = BN_bin2bn(m, len, NULL);
	assert_true(x && y && ctx && BN_mod_exp(y, x, d, n, ctx));
	assert_int_equal(BN_bn2binpad(y, chunk + 72, len), len);
	BN_free(x);
	BN_free(y);
	BN_CTX_free(ctx);
}

/* --orig-pubkey's rule: every chunk signed, and the signature good. */
static void test_signed(void **state)
{
	struct ndz_orig_keys k = { 0 };
	BIGNUM *p = BN_new(), *q = BN_new(), *n = BN_new(), *e = BN_new(), *d = BN_new();
	BIGNUM *phi = BN_new(), *p1 = BN_new(), *q1 = BN_new();
	BN_CTX *ctx = BN_CTX_new();
	size_t i;

	(void)state;
	assert_true(p && q && n && e && d && phi && p1 && q1 && ctx);
	assert_true(BN_generate_prime_ex(p, 256, 0, NULL, NULL, NULL));
	assert_true(BN_generate_prime_ex(q, 256, 0, NULL, NULL, NULL));
	assert_true(BN_set_word(e, 65537) && BN_mul(n, p, q, ctx));
	assert_true(BN_sub(p1, p, BN_value_one()) && BN_sub(q1, q, BN_value_one()) &&
		    BN_mul(phi, p1, q1, ctx) && BN_mod_inverse(d, e, phi, ctx));
	k.rsa_n_len = (size_t)BN_bn2bin(n, k.rsa_n);
	k.rsa_e_len = (size_t)BN_bn2bin(e, k.rsa_e);

	/* no key: nothing asked */
	v3();
	assert_int_equal(ndz_orig_check_signed(chunk, NULL, &why), 0);
	/* V3 cannot be signed; V4 unsigned, or with a plain SHA-1, is not */
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_check_signed(chunk, &k, &why), NDZ_EUNSIGNED);
	assert_string_equal(ndz_error_msg(&why), "image is not signed: chunk has no "
			    "signature (a version 3 image cannot be signed)");
	v4(0, 0);
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_check_signed(chunk, &k, &why), NDZ_EUNSIGNED);
	assert_non_null(strstr(ndz_error_msg(&why), "(no checksum)"));
	v4(0, NDZ_ORIG_CSUM_SHA1);
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_check_signed(chunk, &k, &why), NDZ_EUNSIGNED);
	assert_non_null(strstr(ndz_error_msg(&why), "(a plain SHA-1 checksum)"));
	/* signed: good; a data byte changed, or another key: refused */
	v4(0, NDZ_ORIG_CSUM_SIGNED | NDZ_ORIG_CSUM_SHA1);
	for (i = 0; i < 1000; i++)
		chunk[4096 + i] = (uint8_t)(i * 3);
	sign(n, d);
	assert_int_equal(ndz_orig_check_signed(chunk, &k, &why), 0);
	chunk[4096 + 999] ^= 0x10;
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_check_signed(chunk, &k, &why), NDZ_EORIGSUM);
	assert_non_null(strstr(ndz_error_msg(&why), "RSA signature does not match"));
	chunk[4096 + 999] ^= 0x10;
	k.rsa_n[k.rsa_n_len - 1] ^= 2;
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_check_signed(chunk, &k, &why), NDZ_EORIGSUM);
	/* a damaged header is the header's error */
	put_le32(chunk + SIZE, 0);
	ndz_error_clear(&why);
	assert_int_equal(ndz_orig_check_signed(chunk, &k, &why), NDZ_EHEADER);
	BN_free(p); BN_free(q); BN_free(n); BN_free(e); BN_free(d);
	BN_free(phi); BN_free(p1); BN_free(q1);
	BN_CTX_free(ctx);
}

/* The decoder's one view: an original chunk's regions, sizes and fixes. */
static void test_view(void **state)
{
	struct ndz_chunk_view v;
	struct ndz_chunk_hdr h = { 0 };
	struct ndz_region r;

	(void)state;
	v3();
	reloc(NDZ_ORIG_RELOC_SHORTSECTOR, 99, 0, 100);
	assert_int_equal(ndz_orig_chunk_hdr(chunk, 1, 0, &h, &why), 0);
	assert_int_equal(ndz_chunk_view_open(chunk, &h, NULL, &v, &why), 0);
	assert_int_equal(v.want, 65 * 512);
	assert_int_equal(v.h.nregions, 3);
	assert_int_equal(v.h.data_len, 1000);
	assert_ptr_equal(v.data, chunk + 4096);
	r = ndz_chunk_view_region(&v, 2);
	assert_int_equal(r.start, 50);
	assert_int_equal(r.count, 50);
	assert_int_equal(v.clip, 99 * 512 + 100);      /* the short sector's end */
	assert_int_equal(v.end, UINT64_MAX);           /* a stream's: not known */
	assert_int_equal(v.fixups, 1);
	/* its checks are the view's too */
	put_le32(chunk + LAST, 10);
	ndz_error_clear(&why);
	assert_int_equal(ndz_chunk_view_open(chunk, &h, NULL, &v, &why), NDZ_EREGION);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_v4),
		cmocka_unit_test(test_disklabel),
		cmocka_unit_test(test_signed),
		cmocka_unit_test(test_view),
	};
	int rc;

	chunk = malloc(NDZ_CHUNK_SIZE);
	if (!chunk)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	free(chunk);
	return rc;
}
