/*
 * libFuzzer target for the lab's messages (lib/ctl/ctl.c, "Lab messages"): no
 * crash, a request or reply that decodes re-encodes to the same bytes, and the
 * stream framing (ndz_ctl_lab_need) agrees with the decoders on what they accept.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[NDZ_CTL_LABREP_MAX];
	struct ndz_ctl_labreq req;
	struct ndz_ctl_labrep rep;
	int len, need;

	for (size_t have = 0; have <= size && have <= NDZ_CTL_REP_HDR + 2; have++)
		for (int reply = 0; reply < 2; reply++) {
			need = ndz_ctl_lab_need(data, have, reply, NULL);
			if (need > 0 && need < NDZ_CTL_REQ_HDR)
				abort();       /* a message is never shorter than its header */
		}
	if (ndz_ctl_lab_decode(data, size, &req, NULL) == 0) {
		len = ndz_ctl_lab_encode(&req, out, sizeof(out), NULL);
		if (len != (int)size || memcmp(out, data, size) != 0)
			abort();
		if (ndz_ctl_lab_need(data, size, 0, NULL) != (int)size || !ndz_ctl_is_lab(data, size))
			abort();
	}
	if (ndz_ctl_labrep_decode(data, size, &rep, NULL) == 0) {
		len = ndz_ctl_labrep_encode(&rep, out, sizeof(out), NULL);
		if (len != (int)size || memcmp(out, data, size) != 0)
			abort();
		if (ndz_ctl_lab_need(data, size, 1, NULL) != (int)size)
			abort();
	}
	return 0;
}
