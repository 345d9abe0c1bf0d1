/*
 * The suite's one JSON writer: text appended into a caller's buffer, past its end only
 * noted. Every JSON producer (the master's HTTP and status replies, frisbeed's
 * statistics, the programs' --progress=json) writes its strings through
 * ndz_jbuf_string, so there is one escaping rule.
 */
#ifndef NDZ_JSON_H
#define NDZ_JSON_H

#include <stddef.h>

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

#endif
