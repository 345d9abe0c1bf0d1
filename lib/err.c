/* Messages for the library's error codes. */
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
