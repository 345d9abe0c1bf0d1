/* Messages for the library's error codes, and the error context. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

const char *ndz_strerror(int code)
{
	switch (code) {
	case NDZ_OK:
		return "success";
#define NDZ_ERR(name, value, msg) case name: return msg;
#include "errors.def"
#undef NDZ_ERR
	}
	return "unknown error";
}

void ndz_error_clear(struct ndz_error *e)
{
	if (!e)
		return;
	e->code = 0;
	e->sys = 0;
	e->msg[0] = '\0';
}

int ndz_error_vset(struct ndz_error *e, int code, int sys, const char *fmt, va_list ap)
{
	size_t n;

	if (!e || e->code)
		return code;
	e->code = code;
	e->sys = sys;
	if (fmt)
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	else
		snprintf(e->msg, sizeof(e->msg), "%s", ndz_strerror(code));
	n = strlen(e->msg);
	if (sys && n < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - n, "%s%s", n ? ": " : "", strerror(sys));
	return code;
}

int ndz_error_set(struct ndz_error *e, int code, int sys, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	code = ndz_error_vset(e, code, sys, fmt, ap);
	va_end(ap);
	return code;
}

void ndz_error_prefix(struct ndz_error *e, const char *fmt, ...)
{
	char out[NDZ_ERRMSG_MAX];
	size_t n;
	va_list ap;
	int len;

	if (!e || !e->code)
		return;
	va_start(ap, fmt);
	len = vsnprintf(out, sizeof(out), fmt, ap);
	va_end(ap);
	n = len < 0 ? 0 : (size_t)len < sizeof(out) ? (size_t)len : sizeof(out) - 1;
	/* the old message after "head: ", cut to what is left of the room */
	if (n + 2 < sizeof(out)) {
		const char *old = ndz_error_msg(e);
		size_t k = strlen(old);

		memcpy(out + n, ": ", 2);
		n += 2;
		if (k > sizeof(out) - 1 - n)
			k = sizeof(out) - 1 - n;
		memcpy(out + n, old, k);
		out[n + k] = '\0';
	}
	memcpy(e->msg, out, sizeof(out));
}

int ndz_error_copy(struct ndz_error *dst, const struct ndz_error *src)
{
	if (dst && !dst->code && src->code)
		*dst = *src;
	return src->code;
}

const char *ndz_error_msg(const struct ndz_error *e)
{
	if (!e->code)
		return "success";
	return e->msg[0] ? e->msg : ndz_strerror(e->code);
}
