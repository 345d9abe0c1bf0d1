/* Unit tests for lib/core/json: the one escaper and the bounded writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/json.h"

static void test_escape(void **state)
{
	char buf[128];
	struct ndz_jbuf j;

	(void)state;
	ndz_jbuf_init(&j, buf, sizeof(buf));
	ndz_jbuf_string(&j, "a\"b\\c\n\t\x01\x1f d");
	assert_false(j.over);
	assert_string_equal(buf, "\"a\\\"b\\\\c\\u000a\\u0009\\u0001\\u001f d\"");
	assert_int_equal(j.len, strlen(buf));
	/* 0x7f and bytes from 0x80 (UTF-8 or not) go as they are, as they always did */
	ndz_jbuf_init(&j, buf, sizeof(buf));
	ndz_jbuf_string(&j, "\x7f" "caf\xc3\xa9 \xff");
	assert_string_equal(buf, "\"\x7f" "caf\xc3\xa9 \xff\"");
	ndz_jbuf_init(&j, buf, sizeof(buf));
	ndz_jbuf_string(&j, "");
	assert_string_equal(buf, "\"\"");
}

static void test_bounds(void **state)
{
	char buf[16];
	struct ndz_jbuf j;

	(void)state;
	ndz_jbuf_init(&j, buf, sizeof(buf));
	ndz_jbuf_printf(&j, "{\"n\":%d,", 12);
	assert_string_equal(buf, "{\"n\":12,");
	/* a string that does not fit leaves no half of itself */
	ndz_jbuf_string(&j, "\n\n\n");
	assert_true(j.over);
	assert_string_equal(buf, "{\"n\":12,");
	ndz_jbuf_printf(&j, "}");
	assert_string_equal(buf, "{\"n\":12,");
	/* exactly full: 15 bytes and the NUL */
	ndz_jbuf_init(&j, buf, sizeof(buf));
	ndz_jbuf_string(&j, "0123456789abc");
	assert_false(j.over);
	assert_int_equal(j.len, 15);
	ndz_jbuf_printf(&j, "%s", "");
	assert_false(j.over);
	ndz_jbuf_printf(&j, "x");
	assert_true(j.over);
	assert_int_equal(strlen(buf), 15);
	/* no room at all */
	ndz_jbuf_init(&j, buf, 0);
	ndz_jbuf_printf(&j, "x");
	assert_true(j.over);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
