/* libFuzzer target for the packet decoder: no crash, and what decodes re-encodes to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcast/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ndz_pkt p;
	uint8_t out[NDZ_PKT_WIRE_MAX];   /* a BLOCKS is the largest */
	int len;

	if (ndz_pkt_decode(data, size, &p, NULL) != 0)
		return 0;
	len = ndz_pkt_encode(&p, out, sizeof(out), NULL);
	if (len != (int)size || memcmp(out, data, size) != 0)
		abort();
	return 0;
}
