/* Unit tests for lib/err.c: every error code has its own well-formed message; the error context. */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"

struct code {
	int value;
	const char *name;
	const char *msg;
};

static const struct code codes[] = {
#define NDZ_ERR(name, value, msg) { name, #name, msg },
#include "core/errors.def"
#undef NDZ_ERR
};

#define NCODES (sizeof(codes) / sizeof(codes[0]))

static void test_values_negative_and_distinct(void **state)
{
	size_t i, j;

	(void)state;
	assert_true(NCODES > 0);
	for (i = 0; i < NCODES; i++) {
		assert_true(codes[i].value < 0);
		for (j = i + 1; j < NCODES; j++) {
			if (codes[i].value == codes[j].value)
				fail_msg("%s and %s share value %d", codes[i].name,
					 codes[j].name, codes[i].value);
		}
	}
}

static void test_messages_distinct(void **state)
{
	size_t i, j;

	(void)state;
	for (i = 0; i < NCODES; i++)
		for (j = i + 1; j < NCODES; j++)
			if (strcmp(codes[i].msg, codes[j].msg) == 0)
				fail_msg("%s and %s share message \"%s\"", codes[i].name,
					 codes[j].name, codes[i].msg);
}

/* Messages are spliced into "object: message" lines: lower case, no full stop. */
static void test_messages_well_formed(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < NCODES; i++) {
		const char *m = codes[i].msg;
		size_t len = strlen(m), k;

		if (len == 0)
			fail_msg("%s has an empty message", codes[i].name);
		for (k = 0; k < len; k++)
			if (isupper((unsigned char)m[k]) || m[k] == '\n' || m[k] == '\t')
				fail_msg("%s: \"%s\" is not lower case on one line",
					 codes[i].name, m);
		if (m[len - 1] == '.' || m[len - 1] == '!' || isspace((unsigned char)m[len - 1]))
			fail_msg("%s: \"%s\" ends with punctuation or space", codes[i].name, m);
		if (isspace((unsigned char)m[0]))
			fail_msg("%s: \"%s\" starts with a space", codes[i].name, m);
	}
}

static void test_strerror_maps_each_code(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < NCODES; i++) {
		const char *s = ndz_strerror(codes[i].value);

		assert_non_null(s);
		assert_string_equal(s, codes[i].msg);
	}
}

static void test_strerror_other_values(void **state)
{
	const char *unknown;
	size_t i;
	int v;

	(void)state;
	assert_string_equal(ndz_strerror(NDZ_OK), "success");
	unknown = ndz_strerror(-100000);
	assert_non_null(unknown);
	assert_true(strlen(unknown) > 0);
	assert_string_equal(ndz_strerror(12345), unknown);
	assert_string_equal(ndz_strerror(INT32_MIN), unknown);
	/* the generic message must not pass for any real one */
	for (i = 0; i < NCODES; i++)
		assert_string_not_equal(codes[i].msg, unknown);
	/* a value just past the list is unknown too */
	v = 0;
	for (i = 0; i < NCODES; i++)
		if (codes[i].value < v)
			v = codes[i].value;
	assert_string_equal(ndz_strerror(v - 1), unknown);
}

static void test_error_context(void **state)
{
	struct ndz_error e = { 0 };

	(void)state;
	assert_string_equal(ndz_error_msg(&e), "success");
	ndz_error_prefix(&e, "ignored");
	assert_int_equal(e.code, 0);
	assert_int_equal(ndz_error_set(&e, NDZ_EHDRCRC, 0, "chunk %u: %s", 17u,
				       ndz_strerror(NDZ_EHDRCRC)), NDZ_EHDRCRC);
	assert_string_equal(ndz_error_msg(&e), "chunk 17: bad header checksum");
	/* the first error wins */
	assert_int_equal(ndz_error_set(&e, NDZ_EIO, 5, "later"), NDZ_EIO);
	assert_int_equal(e.code, NDZ_EHDRCRC);
	ndz_error_prefix(&e, "%s", "img.ndz");
	assert_string_equal(ndz_error_msg(&e), "img.ndz: chunk 17: bad header checksum");
	ndz_error_clear(&e);
	assert_int_equal(e.code, 0);
	/* errno's text is appended; no format: the code's own message */
	ndz_error_set(&e, NDZ_EIO, ENOSPC, "t.img: write at byte %d", 4096);
	assert_int_equal(e.sys, ENOSPC);
	assert_string_equal(ndz_error_msg(&e), "t.img: write at byte 4096: No space left on device");
	ndz_error_clear(&e);
	ndz_error_set(&e, NDZ_EMISSING, 0, NULL);
	assert_string_equal(ndz_error_msg(&e), "missing chunk");
	ndz_error_clear(&e);
	ndz_error_set(&e, NDZ_EIO, EIO, NULL);
	assert_string_equal(ndz_error_msg(&e), "input/output error: Input/output error");
	/* a NULL context only passes the code through */
	assert_int_equal(ndz_error_set(NULL, NDZ_ETRUNC, 0, "x"), NDZ_ETRUNC);
}

static void test_error_copy_and_long_messages(void **state)
{
	struct ndz_error a = { 0 }, b = { 0 };
	char longname[2 * NDZ_ERRMSG_MAX];

	(void)state;
	assert_int_equal(ndz_error_copy(&a, &b), 0);
	assert_int_equal(a.code, 0);
	ndz_error_set(&b, NDZ_EDUP, 0, "chunk 3: duplicate");
	assert_int_equal(ndz_error_copy(&a, &b), NDZ_EDUP);
	assert_string_equal(ndz_error_msg(&a), "chunk 3: duplicate");
	assert_int_equal(ndz_error_copy(NULL, &b), NDZ_EDUP);
	/* overlong names are cut, never overrun */
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ndz_error_prefix(&a, "%s", longname);
	assert_int_equal(strlen(ndz_error_msg(&a)), NDZ_ERRMSG_MAX - 1);
	ndz_error_clear(&a);
	ndz_error_set(&a, NDZ_EIO, EIO, "%s", longname);
	assert_int_equal(strlen(ndz_error_msg(&a)), NDZ_ERRMSG_MAX - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_negative_and_distinct),
		cmocka_unit_test(test_messages_distinct),
		cmocka_unit_test(test_messages_well_formed),
		cmocka_unit_test(test_strerror_maps_each_code),
		cmocka_unit_test(test_strerror_other_values),
		cmocka_unit_test(test_error_context),
		cmocka_unit_test(test_error_copy_and_long_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
