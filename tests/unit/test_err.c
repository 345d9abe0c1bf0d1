/* Unit tests for lib/err.c: every error code has its own well-formed message. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"

struct code {
	int value;
	const char *name;
	const char *msg;
};

static const struct code codes[] = {
#define NDZ_ERR(name, value, msg) { name, #name, msg },
#include "errors.def"
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_negative_and_distinct),
		cmocka_unit_test(test_messages_distinct),
		cmocka_unit_test(test_messages_well_formed),
		cmocka_unit_test(test_strerror_maps_each_code),
		cmocka_unit_test(test_strerror_other_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
