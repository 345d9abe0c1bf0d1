/*
 * libFuzzer target for the JSON reader (lib/core/json), which the parent runs over a
 * site's reports: no crash, no read past the text; a text ndz_json_valid accepts is
 * skipped whole by ndz_json_skip; members and array elements walk and decode.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *t = malloc(size + 1), s[64];
	const char *p, *e;
	int valid = ndz_json_valid((const char *)data, size);

	if (!t)
		return 0;
	memcpy(t, data, size);
	t[size] = 0;
	p = ndz_json_skip(t);
	if (valid && (!p || *p))
		abort();               /* valid: one value, nothing after it */
	if (valid && memchr(data, 0, size))
		abort();
	ndz_json_string(t, s, sizeof(s));
	if ((p = ndz_json_member(t, "nodes")) != NULL) {
		for (e = ndz_json_first(p); e; e = ndz_json_after(e)) {
			const char *v = ndz_json_member(e, "mac");

			if (v && ndz_json_string(v, s, sizeof(s)) && strlen(s) >= sizeof(s))
				abort();
		}
	}
	for (e = ndz_json_first(t); e; e = ndz_json_after(e))
		ndz_json_skip(e);
	free(t);
	return 0;
}
