/* Unit tests for lib/core/json: the one escaper, the bounded writer, the reader. */
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

static void test_read(void **state)
{
	const char *doc = " {\"nodes\": [ {\"name\": \"n\\u00e9 \\\"1\\\"\", \"mac\": "
			  "\"02:00:00:00:00:01\", \"n\": -1.5e3, \"h\": [[], {}], "
			  "\"x\": null}, {\"name\": \"b\", \"t\": true, \"f\": false} ], "
			  "\"nodes2\": \"\\ud83d\\ude00\"} ";
	const char *v, *e;
	char s[64];

	(void)state;
	assert_non_null(v = ndz_json_skip(doc));
	assert_int_equal(*v, 0);
	assert_true(ndz_json_valid(doc, strlen(doc)));
	assert_non_null(v = ndz_json_member(doc, "nodes"));
	assert_non_null(e = ndz_json_first(v));
	assert_non_null(ndz_json_string(ndz_json_member(e, "name"), s, sizeof(s)));
	assert_string_equal(s, "n\xc3\xa9 \"1\"");
	assert_null(ndz_json_member(e, "group"));
	assert_non_null(e = ndz_json_after(e));
	assert_non_null(ndz_json_string(ndz_json_member(e, "name"), s, sizeof(s)));
	assert_string_equal(s, "b");
	assert_null(ndz_json_after(e));
	/* a key inside a value is not a member: no substring match */
	assert_null(ndz_json_member(doc, "name"));
	assert_non_null(ndz_json_string(ndz_json_member(doc, "nodes2"), s, sizeof(s)));
	assert_string_equal(s, "\xf0\x9f\x98\x80");
	assert_null(ndz_json_string(ndz_json_member(doc, "nodes2"), s, 4));  /* no room */
	assert_null(ndz_json_first("[]"));
	assert_null(ndz_json_first("{}"));
}

static void test_read_bad(void **state)
{
	static const char *const bad[] = {
		"", "{", "[1,]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "\"abc", "\"a\\x\"",
		"\"\\u12\"", "\"\\udc00\"", "\"\\ud800x\"", "01x", "-", "1.", "1e", "tru",
		"nul", "[1 2]", "\"a\tb\"", "{1:2}", "1 2",
	};
	char deep[2 * NDZ_JSON_DEPTH + 8], s[8];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(ndz_json_valid(bad[i], strlen(bad[i])));
	assert_false(ndz_json_valid("1\0", 2));
	memset(deep, '[', NDZ_JSON_DEPTH + 2);
	memset(deep + NDZ_JSON_DEPTH + 2, ']', NDZ_JSON_DEPTH + 2);
	assert_false(ndz_json_valid(deep, 2 * NDZ_JSON_DEPTH + 4));
	assert_true(ndz_json_valid(deep + 2, 2 * NDZ_JSON_DEPTH));
	assert_null(ndz_json_string("\"a\\u0000\"", s, sizeof(s)));
	assert_null(ndz_json_string("12", s, sizeof(s)));
	assert_null(ndz_json_member("{\"a\":1,\"b\":[}", "a"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_read_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
