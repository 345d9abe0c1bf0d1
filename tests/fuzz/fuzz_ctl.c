/*
 * libFuzzer target for the control protocol's decoders (lib/ctl): no crash, a
 * request or reply that decodes re-encodes to the same bytes, and the stream
 * framing (ndz_ctl_*_need) agrees with the decoders on every message they accept.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep;
	int len;

	int need;

	for (size_t have = 0; have <= size && have <= NDZ_CTL_REQ_HDR + 2; have++) {
		need = ndz_ctl_req_need(data, have, NULL);
		if (need > 0 && need < NDZ_CTL_REQ_HDR)
			abort();       /* a message is never shorter than its header */
		need = ndz_ctl_rep_need(data, have, NULL);
		if (need > 0 && need < NDZ_CTL_REP_HDR)
			abort();
	}
	if (ndz_ctl_req_decode(data, size, &req, NULL) == 0) {
		len = ndz_ctl_req_encode(&req, out, sizeof(out), NULL);
		if (len != (int)size || memcmp(out, data, size) != 0)
			abort();
		if (ndz_ctl_req_need(data, size, NULL) != (int)size)
			abort();
	}
	if (ndz_ctl_rep_decode(data, size, &rep, NULL) == 0) {
		len = ndz_ctl_rep_encode(&rep, out, sizeof(out), NULL);
		if (len != (int)size || memcmp(out, data, size) != 0)
			abort();
		need = ndz_ctl_rep_need(data, size, NULL);
		if ((rep.type == NDZ_CTL_UPLOAD || rep.type == NDZ_CTL_DONE) && need != (int)size)
			abort();
	}
	return 0;
}
