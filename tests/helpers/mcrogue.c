/*
 * mcrogue GROUP PORT SECONDS PPS [SPOOF_ADDR|- [hostile | announce CHUNKS BYTES |
 * block FILE CHUNK]]: a hostile host for the multicast tests. With "announce": a
 * forged server, which answers every JOIN at once, and announces PPS times a second,
 * with a JOIN_REPLY of an image of CHUNKS chunks restoring to BYTES bytes (its own
 * address, or SPOOF_ADDR's), and sends nothing else. With "block": block 0 of FILE
 * (its first KiB, zero-padded) as block 0 of chunk CHUNK of the served image, PPS
 * times a second, asked for or not, and every JOIN answered with the served image's
 * JOIN_REPLY (so a client joins while the server is away). Otherwise it learns the image tag from a JOIN_REPLY on the group, then for
 * SECONDS sends, PPS packets a second, garbage, packets of another protocol version,
 * out-of-range requests and forged BLOCKs of random chunks; with SPOOF_ADDR the
 * forged BLOCKs carry that source address (a raw socket), so they pass the client's
 * source check and must be caught by the chunk checksum. With "hostile", 21 kinds
 * in turn (hostile_pkt), the server's own kinds spoofed from SPOOF_ADDR.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcast/net.h"
#include "mcast/pace.h"
#include "pktbuild.h"
#include "mcast/proto.h"

/* SIGTERM ends the sending (and the count is printed): tests stop it when done. */
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/*
 * Kind k (0-20) of the hostile mix into buf: returns its length (0: nothing) and
 * sets *spoof when it should carry the server's address.
 */
static int hostile_pkt(int k, uint32_t tag, const struct ndz_join_info *info,
		       uint8_t *buf, const uint8_t *data, int *spoof)
{
	struct ndz_pkt p;
	uint32_t chunks = info->chunks;
	int len;

	memset(&p, 0, sizeof(p));
	*spoof = 0;
	p.tag = tag;
	p.chunk = (uint32_t)random() % chunks;
	switch (k) {
	case 0:                         /* garbage */
		len = (int)(random() % 1500) + 1;
		memcpy(buf, data, (size_t)(len < 1024 ? len : 1024));
		return len;
	case 1: case 2: case 3:         /* a forged BLOCK from the server's address */
		p.type = NDZ_PKT_BLOCK;
		p.block = (uint16_t)(random() % 1024);
		p.data = data;
		*spoof = 1;
		break;
	case 4:                         /* a forged stripe repair */
		p.type = NDZ_PKT_REPAIR;
		p.stripe = (uint8_t)(random() % NDZ_FEC_STRIPES);
		p.index = (uint8_t)(random() % NDZ_FEC_REPAIRS);
		p.data = data;
		*spoof = 1;
		break;
	case 5:                         /* a forged whole-chunk repair */
		p.type = NDZ_PKT_REPAIR;
		p.stripe = NDZ_FEC_WHOLE;
		p.index = (uint8_t)(random() % NDZ_FEC_WREPAIRS);
		p.data = data;
		*spoof = 1;
		break;
	case 6:                         /* FEATURES: no repairs */
		p.type = NDZ_PKT_FEATURES;
		p.features = 0;
		*spoof = 1;
		break;
	case 7:                         /* FEATURES: every kind of repair */
		p.type = NDZ_PKT_FEATURES;
		p.features = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE;
		*spoof = 1;
		break;
	case 8: case 9:                 /* a JOIN_REPLY for another image, spoofed and not */
		p.type = NDZ_PKT_JOIN_REPLY;
		p.info = *info;
		p.info.uuid[0] ^= 0x55;
		p.tag = ndz_image_tag(p.info.uuid);
		*spoof = k == 8;
		break;
	case 10:                        /* the image's own JOIN_REPLY, spoofed */
		p.type = NDZ_PKT_JOIN_REPLY;
		p.info = *info;
		*spoof = 1;
		break;
	case 11:                        /* a whole-chunk REQUEST */
		p.type = NDZ_PKT_REQUEST;
		p.client_id = (uint32_t)random();
		p.count = 1024;
		break;
	case 12:                        /* a PREQUEST for every block */
		p.type = NDZ_PKT_PREQUEST;
		p.client_id = (uint32_t)random();
		memset(p.bitmap, 0xff, sizeof(p.bitmap));
		break;
	case 13:                        /* an RREQUEST for the most repairs */
		p.type = NDZ_PKT_RREQUEST;
		p.client_id = (uint32_t)random();
		memset(p.need, NDZ_FEC_REPAIRS, NDZ_FEC_STRIPES);
		p.need[NDZ_FEC_WHOLE] = 255;
		break;
	case 14:                        /* a JOIN */
		p.type = NDZ_PKT_JOIN;
		p.client_id = (uint32_t)random();
		break;
	case 15:                        /* a LEAVE */
		p.type = NDZ_PKT_LEAVE;
		p.client_id = (uint32_t)random();
		break;
	case 16:                        /* a BLOCK of another image's tag */
		p.type = NDZ_PKT_BLOCK;
		p.tag = tag ^ 0x1234567;
		p.data = data;
		*spoof = 1;
		break;
	case 17:                        /* a BLOCK past the image */
		p.type = NDZ_PKT_BLOCK;
		p.chunk = chunks + (uint32_t)(random() % 1000);
		p.data = data;
		*spoof = 1;
		break;
	case 18:                        /* a request past the image */
		p.type = NDZ_PKT_REQUEST;
		p.chunk = chunks + (uint32_t)(random() % 1000);
		p.count = 1024;
		break;
	case 19:                        /* another protocol version */
		p.type = NDZ_PKT_REQUEST;
		p.count = 1;
		len = ndz_pkt_encode(&p, buf, 2048, NULL);
		buf[4] = 99;
		return len;
	default:                        /* a valid BLOCK cut short */
		p.type = NDZ_PKT_BLOCK;
		p.data = data;
		len = ndz_pkt_encode(&p, buf, 2048, NULL);
		*spoof = 1;
		return len > 0 ? len - 1 - (int)(random() % 100) : len;
	}
	return ndz_pkt_encode(&p, buf, 2048, NULL);
}

/* The announce mode: see the top of the file. */
static int announce(struct ndz_net *net, int raw, uint32_t src, uint32_t group, uint16_t port,
		    unsigned seconds, unsigned pps, uint32_t chunks, uint64_t bytes)
{
	uint64_t now = ndz_now_ns(), end = now + seconds * 1000000000ull, next = now;
	unsigned long sent = 0, answered = 0;
	struct ndz_pkt p, q;
	uint8_t buf[2048];

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN_REPLY;
	for (int i = 0; i < 16; i++)
		p.info.uuid[i] = (uint8_t)random();
	p.info.uuid[6] = (uint8_t)((p.info.uuid[6] & 0x0f) | 0x40);
	p.tag = ndz_image_tag(p.info.uuid);
	p.info.chunks = chunks;
	p.info.block_size = NDZ_BLOCK_SIZE;
	p.info.blocks_per_chunk = NDZ_BLOCKS_PER_CHUNK;
	p.info.image_bytes = (uint64_t)chunks * NDZ_CHUNK_SIZE;
	p.info.source_bytes = bytes;
	while (!stop && (now = ndz_now_ns()) < end) {
		uint32_t from;
		int n = ndz_net_recv(net, buf, sizeof(buf), 5, &from, NULL), len;

		if (n > 0 && ndz_pkt_decode(buf, (size_t)n, &q, NULL) == 0 && q.type == NDZ_PKT_JOIN) {
			p.client_id = q.client_id;
			answered++;
		} else if (now < next) {
			continue;
		} else {
			p.client_id = 0;
			next = now + 1000000000ull / (pps ? pps : 1);
		}
		len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
		if (len <= 0) {
			fprintf(stderr, "mcrogue: cannot encode the announcement\n");
			return 1;
		}
		pkt_send(net, raw, src, group, port, buf, (size_t)len);
		sent++;
	}
	printf("mcrogue: sent %lu announcements, %lu of them answering a JOIN\n", sent, answered);
	return 0;
}

int main(int argc, char **argv)
{
	struct ndz_net_opts o = { 0 };
	struct ndz_net *net;
	struct ndz_pkt p;
	struct ndz_pace pace;
	uint8_t buf[2048], data[1024];
	uint32_t tag = 0, chunks = 1, group, src = 0;
	struct ndz_join_info info = { 0 };
	int hostile = argc > 6 && !strcmp(argv[6], "hostile");
	/* MCROGUE_KINDS: a mask of the hostile kinds to send (bench/hostile.sh), default all */
	unsigned long kinds = getenv("MCROGUE_KINDS") ? strtoul(getenv("MCROGUE_KINDS"), NULL, 0) :
			      0x1ffffful, turn = 0;
	uint64_t end;
	unsigned long sent = 0;
	int raw = -1, len;

	if (argc < 5) {
		fprintf(stderr, "usage: mcrogue GROUP PORT SECONDS PPS [SPOOF_ADDR|- [hostile | announce CHUNKS BYTES]]\n");
		return 2;
	}
	if (pkt_join("mcrogue", &o, argv[1], argv[2], &net, &group) < 0)
		return 1;
	srandom((unsigned)getpid());
	signal(SIGTERM, on_term);
	if (argc > 5 && strcmp(argv[5], "-") != 0) {
		raw = pkt_raw_open(argv[5], &src);
		if (raw < 0) {
			perror("mcrogue: raw socket");
			return 1;
		}
	}
	if (argc == 9 && !strcmp(argv[6], "block")) {
		FILE *bf = fopen(argv[7], "rb");
		uint64_t until;

		memset(data, 0, sizeof(data));
		if (!bf || fread(data, 1, sizeof(data), bf) == 0 || !pkt_learn(net, 0xb10cb10c, 5000, &p)) {
			fprintf(stderr, "mcrogue: %s: cannot read it, or no JOIN_REPLY\n", argv[7]);
			return 1;
		}
		fclose(bf);
		tag = p.tag;
		info = p.info;
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_BLOCK;
		p.tag = tag;
		p.chunk = (uint32_t)strtoul(argv[8], NULL, 10);
		p.data = data;
		len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
		ndz_pace_init(&pace, (uint64_t)atoi(argv[4]) * 8000, 0, ndz_now_ns());
		until = ndz_now_ns() + (uint64_t)atoi(argv[3]) * 1000000000ull;
		while (len > 0 && !stop && ndz_now_ns() < until) {
			uint8_t in[2048], out[256];
			struct ndz_pkt q;
			uint32_t from;
			int n = ndz_net_recv(net, in, sizeof(in), 0, &from, NULL), l;

			if (n > 0 && ndz_pkt_decode(in, (size_t)n, &q, NULL) == 0 && q.type == NDZ_PKT_JOIN) {
				uint32_t id = q.client_id;

				memset(&q, 0, sizeof(q));
				q.type = NDZ_PKT_JOIN_REPLY;
				q.client_id = id;
				q.tag = tag;
				q.info = info;
				l = ndz_pkt_encode(&q, out, sizeof(out), NULL);
				if (l > 0)
					pkt_send(net, raw, src, group, o.port, out, (size_t)l);
			}
			pkt_send(net, raw, src, group, o.port, buf, (size_t)len);
			sent++;
			ndz_pace_wait(&pace, 1000);
		}
		printf("mcrogue: sent %lu blocks (tag %08x)\n", sent, tag);
		goto out;
	}
	if (argc == 9 && !strcmp(argv[6], "announce")) {
		int rc = announce(net, raw, src, group, o.port, (unsigned)atoi(argv[3]),
				  (unsigned)atoi(argv[4]), (uint32_t)strtoul(argv[7], NULL, 10),
				  strtoull(argv[8], NULL, 10));

		if (raw >= 0)
			close(raw);
		ndz_net_free(net);
		return rc;
	}
	/* learn the image from a JOIN_REPLY (ask for one ourselves) */
	if (pkt_learn(net, 0xbadc0de, 5000, &p)) {
		tag = p.tag;
		chunks = p.info.chunks;
		info = p.info;
	}
	if (hostile && !tag) {
		fprintf(stderr, "mcrogue: no JOIN_REPLY heard\n");
		return 1;
	}
	/* 1000 "bytes" a packet: the bucket paces packets, not bits */
	ndz_pace_init(&pace, (uint64_t)atoi(argv[4]) * 8000, 0, ndz_now_ns());
	end = ndz_now_ns() + (uint64_t)atoi(argv[3]) * 1000000000ull;
	while (!stop && ndz_now_ns() < end) {
		int spoof, kind = (int)(random() % 8);

		memset(&p, 0, sizeof(p));
		for (size_t i = 0; i < sizeof(data); i++)
			data[i] = (uint8_t)random();
		if (hostile) {
			int k = (int)(turn++ % 21);

			if (!(kinds >> k & 1))
				continue;
			len = hostile_pkt(k, tag, &info, buf, data, &spoof);
			if (len > 0)
				pkt_send(net, spoof ? raw : -1, src, group, o.port, buf, (size_t)len);
			sent++;
			ndz_pace_wait(&pace, 1000);
			continue;
		}
		if (kind < 5) {                 /* a forged block */
			p.type = NDZ_PKT_BLOCK;
			p.tag = tag;
			p.chunk = (uint32_t)random() % chunks;
			p.block = (uint16_t)(random() % 1024);
			p.data = data;
			len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
		} else if (kind == 5) {         /* garbage of random length */
			len = (int)(random() % 1500) + 1;
			memcpy(buf, data, (size_t)(len < 1024 ? len : 1024));
		} else if (kind == 6) {         /* another protocol version */
			p.type = NDZ_PKT_REQUEST;
			p.tag = tag;
			p.count = 1;
			len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
			buf[4] = 99;
		} else {                        /* a request past the image */
			p.type = NDZ_PKT_REQUEST;
			p.tag = tag;
			p.chunk = chunks + (uint32_t)(random() % 1000);
			p.count = 1024;
			len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
		}
		if (len <= 0)
			continue;
		pkt_send(net, kind < 5 ? raw : -1, src, group, o.port, buf, (size_t)len);
		sent++;
		ndz_pace_wait(&pace, 1000);
	}
	printf("mcrogue: sent %lu packets (tag %08x)\n", sent, tag);
out:
	if (raw >= 0)
		close(raw);
	ndz_net_free(net);
	return 0;
}
