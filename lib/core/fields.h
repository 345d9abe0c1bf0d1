/*
 * Lines of fields: the one reader of the suite's line-oriented files (mfrisbeed.conf,
 * the sessions' and the lab's state files) and of the numbers in them: one rule for
 * number suffixes (shared with the programs' options) and one hex decoder.
 */
#ifndef NDZ_FIELDS_H
#define NDZ_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/*
 * ndz_parse_u64 - a decimal number with an optional one-letter suffix, k, m, g or t
 * in either case (powers of 1024 when binary, else of 1000): "100m" is 100000000
 * (binary: 104857600). No sign, no spaces, nothing after the suffix.
 * Returns 0 with *out set, or NDZ_EINVAL (malformed) / NDZ_ERANGE (over 2^64 - 1)
 * with e (may be NULL) saying "bad number 'S'" / "number too large 'S'".
 */
int ndz_parse_u64(const char *s, int binary, uint64_t *out, struct ndz_error *e);

/*
 * ndz_parse_dec - a field of a file we write: decimal digits only, no suffix, no
 * leading zero (but "0"), at most max. Returns 0 with *out set, or NDZ_EINVAL with e
 * (may be NULL) saying "bad number 'S'".
 */
int ndz_parse_dec(const char *s, uint64_t max, uint64_t *out, struct ndz_error *e);

/* ndz_hexval - the value of one hex digit (0-9, a-f, A-F), or -1. */
int ndz_hexval(int c);

/*
 * ndz_hex_decode - exactly 2 * n hex digits at s (either case; s need not end
 * there) into out[n]. Returns 0, or NDZ_EINVAL at the first non-digit (out partly
 * written) with e (may be NULL) saying "bad hex digit at N".
 */
int ndz_hex_decode(const char *s, uint8_t *out, size_t n, struct ndz_error *e);

/*
 * ndz_fields_split - cut line in place into fields separated by the bytes of seps.
 * Loose (strict 0): runs of separators are one, and leading and trailing ones make no
 * field. Strict: each separator ends a field, so "a  b" has an empty middle field.
 * At most max fields go into f; with rest not NULL, what follows the separator after
 * the max-th field is *rest (NULL when nothing follows). Returns the number of
 * fields, or -1 when there are more than max and rest is NULL.
 */
int ndz_fields_split(char *line, const char *seps, int strict, char **f, int max,
		     char **rest);

/*
 * Lines of a text in memory, numbered from 1, for error messages that name
 * "FILE:LINE". The text is not copied: it must outlive the reader.
 */
struct ndz_lines {
	const char *at, *end;
	const char *fname;             /* in messages */
	unsigned line;                 /* the number of the last line returned */
	int unterminated;              /* the last line returned had no newline (the text's end) */
};

/* ndz_lines_init - read text (len bytes) named fname from its first line. */
void ndz_lines_init(struct ndz_lines *r, const char *fname, const char *text, size_t len);

/*
 * ndz_lines_next - the next line, without its newline, as a string in buf (cap
 * bytes); with comment set, a '#' and what follows it are cut. Returns 1 (a line),
 * 0 (no more lines), or NDZ_EINVAL with e set to "FILE:LINE: line too long" (cap - 1
 * bytes at most) or "FILE:LINE: NUL byte in line"; the reader is then past that line,
 * so a caller that skips bad lines may go on.
 */
int ndz_lines_next(struct ndz_lines *r, char *buf, size_t cap, int comment,
		   struct ndz_error *e);

/*
 * ndz_lines_error - set e to "FILE:LINE: " followed by fmt, for the line last
 * returned. Returns code.
 */
int ndz_lines_error(const struct ndz_lines *r, struct ndz_error *e, int code, const char *fmt,
		    ...) __attribute__((format(printf, 4, 5)));

#endif
