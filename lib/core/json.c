/* The one JSON writer (bounded appends, the one string escaper) and a small reader. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the reader ---- */

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static int hex4(const char *p, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (d < 0)
			return -1;
		*v = *v << 4 | (unsigned)d;
	}
	return 0;
}

/*
 * The string at p (at its '"'): past its closing quote, or NULL. With dst, decoded
 * into it (cap bytes; too long, or a \u0000: NULL).
 */
static const char *str(const char *p, char *dst, size_t cap)
{
	size_t n = 0;

	if (*p++ != '"')
		return NULL;
	for (;;) {
		unsigned char c = (unsigned char)*p++;
		char u[4];
		size_t k = 1;

		if (c == '"')
			break;
		if (c < 0x20)                  /* the NUL at the end too */
			return NULL;
		u[0] = (char)c;
		if (c == '\\') {
			unsigned v, lo;

			switch (*p++) {
			case '"': u[0] = '"'; break;
			case '\\': u[0] = '\\'; break;
			case '/': u[0] = '/'; break;
			case 'b': u[0] = '\b'; break;
			case 'f': u[0] = '\f'; break;
			case 'n': u[0] = '\n'; break;
			case 'r': u[0] = '\r'; break;
			case 't': u[0] = '\t'; break;
			case 'u':
				if (hex4(p, &v) != 0)
					return NULL;
				p += 4;
				if (v >= 0xd800 && v < 0xdc00) {    /* a pair's first half */
					if (p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) != 0 ||
					    lo < 0xdc00 || lo > 0xdfff)
						return NULL;
					p += 6;
					v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
				} else if (v >= 0xdc00 && v < 0xe000) {
					return NULL;
				}
				if (v == 0 && dst)
					return NULL;
				if (v < 0x80) {
					u[0] = (char)v;
				} else if (v < 0x800) {
					u[0] = (char)(0xc0 | v >> 6);
					u[1] = (char)(0x80 | (v & 0x3f));
					k = 2;
				} else if (v < 0x10000) {
					u[0] = (char)(0xe0 | v >> 12);
					u[1] = (char)(0x80 | (v >> 6 & 0x3f));
					u[2] = (char)(0x80 | (v & 0x3f));
					k = 3;
				} else {
					u[0] = (char)(0xf0 | v >> 18);
					u[1] = (char)(0x80 | (v >> 12 & 0x3f));
					u[2] = (char)(0x80 | (v >> 6 & 0x3f));
					u[3] = (char)(0x80 | (v & 0x3f));
					k = 4;
				}
				break;
			default:
				return NULL;
			}
		}
		if (dst) {
			if (n + k >= cap)
				return NULL;
			memcpy(dst + n, u, k);
			n += k;
		}
	}
	if (dst)
		dst[n] = 0;
	return p;
}

static const char *digits(const char *p)
{
	if (*p < '0' || *p > '9')
		return NULL;
	while (*p >= '0' && *p <= '9')
		p++;
	return p;
}

static const char *number(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (!(p = digits(p)))
		return NULL;
	if (*p == '.' && !(p = digits(p + 1)))
		return NULL;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(p = digits(p)))
			return NULL;
	}
	return p;
}

static const char *value(const char *p, int depth)
{
	p = ws(p);
	if (depth > NDZ_JSON_DEPTH)
		return NULL;
	switch (*p) {
	case '"':
		p = str(p, NULL, 0);
		break;
	case '{':
	case '[': {
		char close = *p == '{' ? '}' : ']';

		p = ws(p + 1);
		if (*p == close)
			return ws(p + 1);
		for (;;) {
			if (close == '}') {
				if (!(p = str(p, NULL, 0)) || *(p = ws(p)) != ':')
					return NULL;
				p++;
			}
			if (!(p = value(p, depth + 1)))
				return NULL;
			if (*p == close)
				break;
			if (*p != ',')
				return NULL;
			p = ws(p + 1);
		}
		p++;
		break;
	}
	case 't':
		p = strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
		break;
	case 'f':
		p = strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
		break;
	case 'n':
		p = strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
		break;
	default:
		p = number(p);
	}
	return p ? ws(p) : NULL;
}

const char *ndz_json_skip(const char *p)
{
	return value(p, 0);
}

int ndz_json_valid(const char *text, size_t len)
{
	const char *end = memchr(text, 0, len);

	if (end)                       /* a NUL inside: not JSON */
		return 0;
	/* the reader stops at a NUL: a copy that has one */
	{
		char *t = malloc(len + 1);
		const char *q;
		int ok;

		if (!t)
			return 0;
		memcpy(t, text, len);
		t[len] = 0;
		q = value(t, 0);
		ok = q && *q == 0;
		free(t);
		return ok;
	}
}

const char *ndz_json_string(const char *p, char *dst, size_t cap)
{
	p = ws(p);
	if (!cap || !(p = str(p, dst, cap)))
		return NULL;
	return ws(p);
}

const char *ndz_json_member(const char *p, const char *key)
{
	const char *found = NULL;

	p = ws(p);
	if (*p != '{')
		return NULL;
	p = ws(p + 1);
	if (*p == '}')
		return NULL;
	for (;;) {
		const char *k = p, *v;
		size_t kl = strlen(key);
		char name[256];

		if (!(p = str(p, NULL, 0)) || *(p = ws(p)) != ':')
			return NULL;
		v = ws(p + 1);
		if (!(p = value(v, 1)))
			return NULL;
		if (kl < sizeof(name) && str(k, name, sizeof(name)) && strcmp(name, key) == 0)
			found = v;
		if (*p == '}')
			return found;
		if (*p != ',')
			return NULL;
		p = ws(p + 1);
	}
}

const char *ndz_json_first(const char *p)
{
	p = ws(p);
	if (*p != '[')
		return NULL;
	p = ws(p + 1);
	return *p == ']' || !*p ? NULL : p;
}

const char *ndz_json_after(const char *p)
{
	if (!(p = value(p, 1)) || *p != ',')
		return NULL;
	return ws(p + 1);
}
