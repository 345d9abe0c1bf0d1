/*
 * libFuzzer target for the server session's admission and queue: the input is a
 * byte choosing the repairs (none, stripes, whole chunks too: the tables cost time, so
 * most runs can go without) and a stream of datagrams (2-byte little-endian length,
 * then the bytes), fed to one ndz_server, each as it is and, when it decodes, again with the
 * image's tag (a fuzzer would not find the 32 bits); then the sender's plan runs until
 * it waits (64 batches at most). No crash, and nothing past the image and its
 * manifest is ever planned.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcast/proto.h"
#include "mcast/server.h"

#define CHUNKS 3u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ndz_server_batch b;
	static const uint8_t manifest[100] = { 1 };
	static const unsigned repairs[] = { 0, NDZ_FEAT_REPAIR, NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE };
	struct ndz_server_opts o = { .name = "fuzz", .rate_bps = 100000000,
				     .manifest = manifest, .manifest_len = sizeof(manifest) };
	struct ndz_server_reply rp;
	struct ndz_server *s;
	uint64_t now = 1000000;
	size_t off = 1;

	memcpy(o.info.uuid, "fuzz-image-uuid!", 16);
	o.info.chunks = CHUNKS;
	o.info.idle_timeout = 1;
	if (!size)
		return 0;
	o.repair = repairs[data[0] % 3];
	if (ndz_server_create(&o, now, &s, NULL) < 0)
		abort();
	while (off + 2 <= size) {
		size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;

		off += 2;
		if (len > size - off)
			len = size - off;
		struct ndz_pkt p;
		uint8_t re[NDZ_PKT_MAX];
		int n;

		(void)ndz_server_packet(s, data + off, len, 0x0100007fu, now += 1000, &rp, NULL);
		if (ndz_pkt_decode(data + off, len, &p, NULL) == 0) {
			p.tag = ndz_image_tag(o.info.uuid);
			n = ndz_pkt_encode(&p, re, sizeof(re), NULL);
			if (n > 0)
				(void)ndz_server_packet(s, re, (size_t)n, 0x0100007fu, now += 1000,
							&rp, NULL);
		}
		off += len;
	}
	/* a few batches: encoding (a whole-chunk repair is a pass over the chunk) is slow
	 * under the sanitizers and not what is fuzzed here */
	for (int k = 0; k < 64; k++) {
		enum ndz_server_step st = ndz_server_plan(s, now, &b);

		if (st == NDZ_SERVER_WAIT)
			break;
		if (b.chunk >= CHUNKS + 1)
			abort();       /* the manifest is one chunk */
		if (st == NDZ_SERVER_LOAD) {
			memset(ndz_server_chunk_buf(s), 0, 1u << 20);
			if (ndz_server_check_chunk(s, b.chunk, 0, NULL) == 0)
				abort();        /* zeros are no chunk */
			break;
		}
		if (k < 4)
			ndz_server_build(s, &b);
		now += b.delay_ns + 1000;
		ndz_server_sent(s, &b, now);
	}
	ndz_server_free(s);
	return 0;
}
