/* The one JSON writer: bounded appends and the one string escaper. */
#include <stdarg.h>
#include <stdio.h>

#include "json.h"

void ndz_jbuf_init(struct ndz_jbuf *j, char *buf, size_t cap)
{
	j->p = buf;
	j->len = 0;
	j->cap = cap;
	j->over = 0;
	if (cap)
		buf[0] = 0;
}

void ndz_jbuf_printf(struct ndz_jbuf *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!j->cap)
		j->over = 1;
	if (j->over)
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->p + j->len, j->cap - j->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= j->cap - j->len) {
		j->over = 1;
		j->p[j->len] = 0;
	} else {
		j->len += (size_t)n;
	}
}

/* one byte into j, or over */
static void put(struct ndz_jbuf *j, char c)
{
	if (j->over || j->len + 1 >= j->cap) {
		j->over = 1;
		return;
	}
	j->p[j->len++] = c;
}

void ndz_jbuf_string(struct ndz_jbuf *j, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = j->len;

	put(j, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			put(j, '\\');
			put(j, (char)c);
		} else if (c < 0x20) {
			put(j, '\\');
			put(j, 'u');
			put(j, '0');
			put(j, '0');
			put(j, hex[c >> 4]);
			put(j, hex[c & 15]);
		} else {
			put(j, (char)c);
		}
	}
	put(j, '"');
	if (j->over)
		j->len = start < j->cap ? start : j->len;     /* no half string */
	if (j->cap)
		j->p[j->len] = 0;
}
