/* A bounded JSON writer for the master's and the sessions' status replies. */
#include <stdarg.h>
#include <stdio.h>

#include "jbuf.h"

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

	if (j->over || j->len >= j->cap)
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

void ndz_jbuf_string(struct ndz_jbuf *j, const char *s)
{
	ndz_jbuf_printf(j, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			ndz_jbuf_printf(j, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			ndz_jbuf_printf(j, "\\u%04x", (unsigned char)*s);
		else
			ndz_jbuf_printf(j, "%c", *s);
	}
	ndz_jbuf_printf(j, "\"");
}
