/* Library error codes: negative integers, each with one message (lib/errors.def). */
#ifndef NDZ_ERR_H
#define NDZ_ERR_H

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

#endif
