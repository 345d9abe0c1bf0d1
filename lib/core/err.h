/*
 * Library errors: negative codes, each with one message (lib/errors.def), and the
 * one error context every fallible library call fills: code, errno, message.
 */
#ifndef NDZ_ERR_H
#define NDZ_ERR_H

#include <stdarg.h>
#include <stddef.h>

enum ndz_err {
	NDZ_OK = 0,
#define NDZ_ERR(name, value, msg) name = value,
#include "errors.def"
#undef NDZ_ERR
};

/*
 * ndz_strerror - the message for a library error code.
 * Returns a static string; never NULL (unknown codes get a generic message).
 */
const char *ndz_strerror(int code);

#define NDZ_ERRMSG_MAX 512

/*
 * struct ndz_error - what failed, the first time something did.
 * code is 0 (nothing failed) or a negative NDZ_E* code; sys is the errno of the
 * failing system call or 0; msg names the object and says what went wrong, lower
 * case, without a full stop ("img.ndz: chunk 17: bad header checksum"). A program
 * prints ndz_error_msg() as it is. Zero-initialised or ndz_error_clear()ed: no error.
 * Not locked: a context shared by threads is guarded by its owner.
 */
struct ndz_error {
	int code;
	int sys;
	char msg[NDZ_ERRMSG_MAX];
};

/* ndz_error_clear - back to "no error"; e may be NULL. */
void ndz_error_clear(struct ndz_error *e);

/*
 * ndz_error_set - record code with a message from fmt (printf-style; NULL: the
 * code's own message), followed by ": strerror(sys)" when sys is not 0. The first
 * error wins: when e already holds one, nothing changes. e may be NULL.
 * Returns code, so that a caller can write `return ndz_error_set(e, ...)`.
 */
int ndz_error_set(struct ndz_error *e, int code, int sys, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ndz_error_vset - ndz_error_set with a va_list, for functions that format for it. */
int ndz_error_vset(struct ndz_error *e, int code, int sys, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));

/*
 * ndz_error_prefix - put "what: " (printf-style) in front of the message, to name
 * the object an inner call did not know ("img.ndz: "). No effect on a clear
 * context. e may be NULL.
 */
void ndz_error_prefix(struct ndz_error *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * ndz_error_copy - record src in dst as ndz_error_set would (first error wins).
 * Returns src->code. dst may be NULL.
 */
int ndz_error_copy(struct ndz_error *dst, const struct ndz_error *src);

/* ndz_error_msg - the message; "success" for a clear context. Never NULL. */
const char *ndz_error_msg(const struct ndz_error *e);

#endif
