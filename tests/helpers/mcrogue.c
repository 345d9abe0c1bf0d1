/*
 * mcrogue GROUP PORT SECONDS PPS [SPOOF_ADDR]: a hostile host for the multicast tests.
 * Learns the image tag from a JOIN_REPLY on the group, then for SECONDS sends, PPS packets a second,
 * garbage, packets of another protocol version, out-of-range requests and forged
 * BLOCKs of random chunks; with SPOOF_ADDR the forged BLOCKs carry that source
 * address (a raw socket), so they pass the client's source check and must be
 * caught by the chunk checksum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "pace.h"
#include "pktbuild.h"
#include "proto.h"

int main(int argc, char **argv)
{
	struct ndz_net_opts o = { 0 };
	struct ndz_net *net;
	struct ndz_pkt p;
	struct ndz_pace pace;
	uint8_t buf[2048], data[1024];
	uint32_t tag = 0, chunks = 1, group, src = 0;
	uint64_t end;
	unsigned long sent = 0;
	int raw = -1;
	struct ndz_error err = { 0 };

	if (argc < 5) {
		fprintf(stderr, "usage: mcrogue GROUP PORT SECONDS PPS [SPOOF_ADDR]\n");
		return 2;
	}
	o.group = argv[1];
	o.port = (uint16_t)atoi(argv[2]);
	o.loop = 0;
	if (ndz_net_open(&o, &net, &err) < 0 || ndz_net_addr(argv[1], &group) < 0) {
		fprintf(stderr, "mcrogue: %s\n", ndz_error_msg(&err));
		return 1;
	}
	if (argc > 5) {
		raw = pkt_raw_open(argv[5], &src);
		if (raw < 0) {
			perror("mcrogue: raw socket");
			return 1;
		}
	}
	/* learn the image from a JOIN_REPLY (ask for one ourselves) */
	if (pkt_learn(net, 0xbadc0de, 5000, &p)) {
		tag = p.tag;
		chunks = p.info.chunks;
	}
	srandom((unsigned)getpid());
	/* 1000 "bytes" a packet: the bucket paces packets, not bits */
	ndz_pace_init(&pace, (uint64_t)atoi(argv[4]) * 8000, 0, ndz_now_ns());
	end = ndz_now_ns() + (uint64_t)atoi(argv[3]) * 1000000000ull;
	while (ndz_now_ns() < end) {
		int len, kind = (int)(random() % 8);

		memset(&p, 0, sizeof(p));
		for (size_t i = 0; i < sizeof(data); i++)
			data[i] = (uint8_t)random();
		if (kind < 5) {                 /* a forged block */
			p.type = NDZ_PKT_BLOCK;
			p.tag = tag;
			p.chunk = (uint32_t)random() % chunks;
			p.block = (uint16_t)(random() % 1024);
			p.data = data;
			len = ndz_pkt_encode(&p, buf, sizeof(buf));
		} else if (kind == 5) {         /* garbage of random length */
			len = (int)(random() % 1500) + 1;
			memcpy(buf, data, (size_t)(len < 1024 ? len : 1024));
		} else if (kind == 6) {         /* another protocol version */
			p.type = NDZ_PKT_REQUEST;
			p.tag = tag;
			p.count = 1;
			len = ndz_pkt_encode(&p, buf, sizeof(buf));
			buf[4] = 99;
		} else {                        /* a request past the image */
			p.type = NDZ_PKT_REQUEST;
			p.tag = tag;
			p.chunk = chunks + (uint32_t)(random() % 1000);
			p.count = 1024;
			len = ndz_pkt_encode(&p, buf, sizeof(buf));
		}
		if (len <= 0)
			continue;
		if (raw >= 0 && kind < 5)
			pkt_spoof(raw, src, group, o.port, buf, (size_t)len);
		else
			ndz_net_send(net, buf, (size_t)len);
		sent++;
		ndz_pace_wait(&pace, 1000);
	}
	printf("mcrogue: sent %lu packets (tag %08x)\n", sent, tag);
	if (raw >= 0)
		close(raw);
	ndz_net_free(net);
	return 0;
}
