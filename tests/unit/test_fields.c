/* Unit tests for lib/core/fields: number suffixes, hex, splitting lines, numbered lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/fields.h"

static void test_suffix(void **state)
{
	/* each number read both ways: powers of 1000 (rates) and of 1024 (sizes) */
	static const struct {
		const char *s;
		uint64_t dec, bin;
	} good[] = {
		{ "0", 0, 0 }, { "5", 5, 5 }, { "0T", 0, 0 }, { "8000", 8000, 8000 },
		{ "5k", 5000, 5120 }, { "5K", 5000, 5120 }, { "2k", 2000, 2048 },
		{ "3m", 3000000, 3u << 20 }, { "3M", 3000000, 3u << 20 },
		{ "100m", 100000000, 100ull << 20 },           /* mfrisbeed.conf refused it */
		{ "3g", 3000000000ull, 3ull << 30 }, { "2G", 2000000000ull, 2ull << 30 },
		{ "1t", 1000000000000ull, 1ull << 40 }, { "2T", 2000000000000ull, 2ull << 40 },
		{ "17179869183G", 17179869183000000000ull, 17179869183ull << 30 },
		{ "18446744073709551615", UINT64_MAX, UINT64_MAX },
	};
	static const char *const bad[] = {
		"", "k", "m", "-5", "+5", " 5", " -5", "5 ", "1 ", "5x", "5p", "5kk", "5mm",
		"5kB", "5Mb", "1.5G", "0x10",
	};
	/* too large: 1 powers of 1024 only, 2 both */
	static const struct {
		const char *s;
		int both;
	} big[] = {
		{ "18446744073709551616", 1 }, { "18446744073709552T", 1 }, { "17179869184G", 0 },
		{ "16777216T", 0 },
	};
	uint64_t v;

	(void)state;
	assert_int_equal(ndz_parse_u64(NULL, 0, NULL, NULL), NDZ_EINVAL);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		for (int bin = 0; bin < 2; bin++)
			if (ndz_parse_u64(good[i].s, bin, &v, NULL) != 0 ||
			    v != (bin ? good[i].bin : good[i].dec))
				fail_msg("\"%s\" binary %d: %llu", good[i].s, bin,
					 (unsigned long long)v);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 777;
		for (int bin = 0; bin < 2; bin++)
			if (ndz_parse_u64(bad[i], bin, &v, NULL) != NDZ_EINVAL || v != 777)
				fail_msg("\"%s\" binary %d: taken", bad[i], bin);
	}
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		assert_int_equal(ndz_parse_u64(big[i].s, 1, &v, NULL), NDZ_ERANGE);
		assert_int_equal(ndz_parse_u64(big[i].s, 0, &v, NULL), big[i].both ? NDZ_ERANGE : 0);
	}
}

static void test_dec(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(ndz_parse_dec("0", 10, &v, NULL), 0);
	assert_int_equal(v, 0);
	assert_int_equal(ndz_parse_dec("18446744073709551615", UINT64_MAX, &v, NULL), 0);
	assert_int_equal(v, UINT64_MAX);
	assert_int_equal(ndz_parse_dec("18446744073709551616", UINT64_MAX, &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_dec("65535", 65535, &v, NULL), 0);
	assert_int_equal(ndz_parse_dec("65536", 65535, &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_dec("01", 10, &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_dec("", 10, &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_dec("1k", UINT64_MAX, &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_dec("-1", UINT64_MAX, &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_dec(" 1", UINT64_MAX, &v, NULL), NDZ_EINVAL);
	assert_int_equal(v, 65535);
}

static void test_hex(void **state)
{
	uint8_t b[4] = { 0 };
	uint64_t b64[1];

	(void)state;
	assert_int_equal(ndz_hexval('0'), 0);
	assert_int_equal(ndz_hexval('9'), 9);
	assert_int_equal(ndz_hexval('a'), 10);
	assert_int_equal(ndz_hexval('F'), 15);
	assert_int_equal(ndz_hexval('g'), -1);
	assert_int_equal(ndz_hexval(':'), -1);
	assert_int_equal(ndz_hexval(0), -1);
	assert_int_equal(ndz_hex_decode("00fFa59cXX", b, 4, NULL), 0);   /* only 8 digits read */
	assert_int_equal(b[0], 0x00);
	assert_int_equal(b[1], 0xff);
	assert_int_equal(b[2], 0xa5);
	assert_int_equal(b[3], 0x9c);
	assert_int_equal(ndz_hex_decode("0g", b, 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_hex_decode("0", b, 1, NULL), NDZ_EINVAL);    /* the NUL is no digit */
	assert_int_equal(ndz_hex_decode(" 1", b, 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_hex_decode("", b, 0, NULL), 0);
	{
		struct ndz_error e = { 0 };

		assert_int_equal(ndz_hex_decode("00a", b, 2, &e), NDZ_EINVAL);
		assert_string_equal(ndz_error_msg(&e), "bad hex digit at 3");
		ndz_error_clear(&e);
		assert_int_equal(ndz_parse_u64("5x", 0, b64, &e), NDZ_EINVAL);
		assert_string_equal(ndz_error_msg(&e), "bad number '5x'");
		ndz_error_clear(&e);
		assert_int_equal(ndz_parse_u64("99999999999T", 0, b64, &e), NDZ_ERANGE);
		assert_string_equal(ndz_error_msg(&e), "number too large '99999999999T'");
	}
}

static void test_split(void **state)
{
	char line[128], *f[4], *rest;

	(void)state;
	/* loose: runs of separators are one, none at either end makes a field */
	strcpy(line, "  image\t a  b \r");
	assert_int_equal(ndz_fields_split(line, " \t\r", 0, f, 4, NULL), 3);
	assert_string_equal(f[0], "image");
	assert_string_equal(f[1], "a");
	assert_string_equal(f[2], "b");
	strcpy(line, "a b c d e");
	assert_int_equal(ndz_fields_split(line, " ", 0, f, 4, NULL), -1);
	strcpy(line, "a b c d   ");
	assert_int_equal(ndz_fields_split(line, " ", 0, f, 4, NULL), 4);
	strcpy(line, "   ");
	assert_int_equal(ndz_fields_split(line, " ", 0, f, 4, NULL), 0);
	/* the rest of the line after max fields, as it is */
	strcpy(line, "a b c d  free  text");
	assert_int_equal(ndz_fields_split(line, " ", 0, f, 4, &rest), 4);
	assert_string_equal(f[3], "d");
	assert_string_equal(rest, " free  text");
	strcpy(line, "a b c d");
	assert_int_equal(ndz_fields_split(line, " ", 0, f, 4, &rest), 4);
	assert_null(rest);
	/* strict: every separator ends a field */
	strcpy(line, "a  b");
	assert_int_equal(ndz_fields_split(line, " ", 1, f, 4, NULL), 3);
	assert_string_equal(f[1], "");
	strcpy(line, " a b");
	assert_int_equal(ndz_fields_split(line, " ", 1, f, 4, NULL), 3);
	assert_string_equal(f[0], "");
	strcpy(line, "a b ");
	assert_int_equal(ndz_fields_split(line, " ", 1, f, 4, NULL), 3);
	assert_string_equal(f[2], "");
	strcpy(line, "a b c d ");
	assert_int_equal(ndz_fields_split(line, " ", 1, f, 4, NULL), -1);
	strcpy(line, "");
	assert_int_equal(ndz_fields_split(line, " ", 1, f, 4, NULL), 1);
	assert_string_equal(f[0], "");
}

static void test_lines(void **state)
{
	static const char text[] = "one # a comment\n\n#all comment\n"
				   "0123456789abcdef\nnul\0byte\nlast";
	struct ndz_lines r;
	struct ndz_error e = { 0 };
	char buf[16];

	(void)state;
	ndz_lines_init(&r, "x.conf", text, sizeof(text) - 1);
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 1, &e), 1);
	assert_string_equal(buf, "one ");
	assert_int_equal(r.line, 1);
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 1, &e), 1);
	assert_string_equal(buf, "");
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 1, &e), 1);
	assert_string_equal(buf, "");
	/* 16 bytes do not fit 16 bytes with the NUL: an error naming file and line */
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 1, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "x.conf:4: line too long");
	ndz_error_clear(&e);
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 1, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "x.conf:5: NUL byte in line");
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 0, NULL), 1);
	assert_string_equal(buf, "last");
	assert_int_equal(r.line, 6);
	assert_true(r.unterminated);
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 0, NULL), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_lines_error(&r, &e, NDZ_ERANGE, "bad %s", "thing"), NDZ_ERANGE);
	assert_string_equal(ndz_error_msg(&e), "x.conf:6: bad thing");
	/* a text ending in a newline has no empty last line */
	ndz_lines_init(&r, "y", "a\n", 2);
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 0, NULL), 1);
	assert_false(r.unterminated);
	assert_int_equal(ndz_lines_next(&r, buf, sizeof(buf), 0, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_suffix),
		cmocka_unit_test(test_dec),
		cmocka_unit_test(test_hex),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
