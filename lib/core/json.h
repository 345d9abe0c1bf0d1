/*
 * The suite's one JSON writer: text appended into a caller's buffer, past its end only
 * noted. Every JSON producer (the master's HTTP and status replies, frisbeed's
 * statistics, the programs' --progress=json) writes its strings through
 * ndz_jbuf_string, so there is one escaping rule. And a small reader (RFC 8259) for
 * JSON another program of the suite wrote: whole values checked and skipped, an
 * object's member found by key, an array walked, strings decoded.
 */
#ifndef NDZ_JSON_H
#define NDZ_JSON_H

#include <stddef.h>
#include <stdint.h>

struct ndz_jbuf {
	char *p;                       /* the caller's buffer, always NUL-terminated */
	size_t len, cap;
	int over;                      /* something did not fit: the text is cut */
};

/* ndz_jbuf_init - write into buf (cap >= 1 bytes), empty. */
void ndz_jbuf_init(struct ndz_jbuf *j, char *buf, size_t cap);

/* ndz_jbuf_printf - append printf-style; what does not fit sets over and is dropped. */
void ndz_jbuf_printf(struct ndz_jbuf *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * ndz_jbuf_string - append s as a JSON string: quoted, '"' and '\\' backslashed, bytes
 * below 0x20 as \u00XX; every other byte (0x7f, and bytes of 0x80 and up, UTF-8 or not)
 * as it is. All of it or nothing: a string that does not fit sets over.
 */
void ndz_jbuf_string(struct ndz_jbuf *j, const char *s);

/*
 * The reader works on a NUL-terminated text; every function takes p at a value (white
 * space before it is skipped) and never reads past the text's NUL. A value nested deeper
 * than NDZ_JSON_DEPTH is malformed.
 */
#define NDZ_JSON_DEPTH 64

/*
 * ndz_json_skip - the value at p checked (strings, escapes, numbers, literals,
 * nesting) and skipped: past it and the white space after it, or NULL when it is
 * malformed.
 */
const char *ndz_json_skip(const char *p);

/*
 * ndz_json_valid - 1 when the len bytes at text are one JSON value (white space around
 * it allowed) and no NUL byte, else 0.
 */
int ndz_json_valid(const char *text, size_t len);

/*
 * ndz_json_string - the string at p decoded into dst (cap bytes, NUL-terminated;
 * \uXXXX as UTF-8, surrogate pairs joined): past it (and its white space), or NULL
 * when p is no string, is malformed, decodes to a NUL, or does not fit.
 */
const char *ndz_json_string(const char *p, char *dst, size_t cap);

/*
 * ndz_json_member - in the object at p (checked as ndz_json_skip does), the value of
 * the member named key (the last, when there are several): at that value, or NULL
 * when p is no object, is malformed or has no such member.
 */
const char *ndz_json_member(const char *p, const char *key);

/*
 * ndz_json_first - the first element of the array at p (at its value), or NULL when
 * p is no array or an empty one. ndz_json_after - the element after the one at p, or
 * NULL at the array's end or when what follows p's value is malformed. Check the
 * whole array first (ndz_json_skip) to tell the two NULLs apart.
 */
const char *ndz_json_first(const char *p);
const char *ndz_json_after(const char *p);

#endif
