/* Lines of fields, number suffixes and hex: one spelling for every line-oriented file. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"

int ndz_parse_u64(const char *s, int binary, uint64_t *out, struct ndz_error *e)
{
	uint64_t mult = 1, base = binary ? 1024 : 1000;
	unsigned long long v;
	char *end;

	/* strtoull would skip spaces and then accept a sign: " -5" is UINT64_MAX - 4 */
	if (!s || *s < '0' || *s > '9')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		goto big;
	switch (*end) {
	case '\0':
		break;
	case 't': case 'T':
		mult *= base;
		/* fall through */
	case 'g': case 'G':
		mult *= base;
		/* fall through */
	case 'm': case 'M':
		mult *= base;
		/* fall through */
	case 'k': case 'K':
		mult *= base;
		end++;
		break;
	default:
		goto bad;
	}
	if (*end != '\0')
		goto bad;
	if (v && mult > UINT64_MAX / v)
		goto big;
	*out = (uint64_t)v * mult;
	return 0;
bad:
	return ndz_error_set(e, NDZ_EINVAL, 0, "bad number '%.40s'", s ? s : "");
big:
	return ndz_error_set(e, NDZ_ERANGE, 0, "number too large '%.40s'", s);
}

int ndz_parse_dec(const char *s, uint64_t max, uint64_t *out, struct ndz_error *e)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; s && s[i]; i++) {
		if (s[i] < '0' || s[i] > '9' || (i == 1 && s[0] == '0') ||
		    v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			goto bad;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0 || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	return ndz_error_set(e, NDZ_EINVAL, 0, "bad number '%.40s'", s ? s : "");
}

int ndz_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ndz_hex_decode(const char *s, uint8_t *out, size_t n, struct ndz_error *e)
{
	for (size_t i = 0; i < n; i++) {
		int hi = ndz_hexval((unsigned char)s[2 * i]), lo;

		if (hi < 0 || (lo = ndz_hexval((unsigned char)s[2 * i + 1])) < 0)
			return ndz_error_set(e, NDZ_EINVAL, 0, "bad hex digit at %zu",
					     2 * i + (hi >= 0));
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int ndz_fields_split(char *line, const char *seps, int strict, char **f, int max,
		     char **rest)
{
	char *p = line;
	int n = 0;

	if (rest)
		*rest = NULL;
	for (;;) {
		size_t len;

		if (n == max && rest) {
			*rest = *p ? p : NULL;
			return n;
		}
		if (!strict) {
			p += strspn(p, seps);
			if (!*p)
				return n;
		}
		if (n == max)
			return -1;
		len = strcspn(p, seps);
		f[n++] = p;
		if (!p[len])
			return n;
		p[len] = '\0';
		p += len + 1;
		if (strict && !*p) {           /* a separator at the end: one empty field */
			if (n == max)
				return rest ? n : -1;
			f[n++] = p;
			return n;
		}
	}
}

void ndz_lines_init(struct ndz_lines *r, const char *fname, const char *text, size_t len)
{
	r->at = text;
	r->end = text + len;
	r->fname = fname;
	r->line = 0;
	r->unterminated = 0;
}

int ndz_lines_error(const struct ndz_lines *r, struct ndz_error *e, int code, const char *fmt,
		    ...)
{
	char what[NDZ_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ndz_error_set(e, code, 0, "%s:%u: %s", r->fname, r->line, what);
}

int ndz_lines_next(struct ndz_lines *r, char *buf, size_t cap, int comment,
		   struct ndz_error *e)
{
	const char *nl;
	size_t n;
	char *hash;

	if (r->at >= r->end)
		return 0;
	nl = memchr(r->at, '\n', (size_t)(r->end - r->at));
	n = nl ? (size_t)(nl - r->at) : (size_t)(r->end - r->at);
	r->line++;
	r->unterminated = !nl;
	if (n >= cap) {
		r->at += n + (nl ? 1 : 0);
		return ndz_lines_error(r, e, NDZ_EINVAL, "line too long");
	}
	memcpy(buf, r->at, n);
	buf[n] = '\0';
	r->at += n + (nl ? 1 : 0);
	if (memchr(buf, 0, n))
		return ndz_lines_error(r, e, NDZ_EINVAL, "NUL byte in line");
	if (comment && (hash = strchr(buf, '#')))
		*hash = '\0';
	return 1;
}
