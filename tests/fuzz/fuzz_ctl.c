/*
 * libFuzzer target for the control protocol's decoders (lib/ctl): no crash, and a
 * request or reply that decodes re-encodes to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep;
	int len;

	if (ndz_ctl_req_decode(data, size, &req) == 0) {
		len = ndz_ctl_req_encode(&req, out, sizeof(out));
		if (len != (int)size || memcmp(out, data, size) != 0)
			abort();
	}
	if (ndz_ctl_rep_decode(data, size, &rep) == 0) {
		len = ndz_ctl_rep_encode(&rep, out, sizeof(out));
		if (len != (int)size || memcmp(out, data, size) != 0)
			abort();
	}
	return 0;
}
