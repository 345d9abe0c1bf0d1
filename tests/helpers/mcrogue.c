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
 * source check and must be caught by the chunk checksum. With "hostile", 37 kinds
 * in turn (hostile_pkt), the server's own kinds spoofed from SPOOF_ADDR: 0-20 of
 * BLOCK, REPAIR, FEATURES, JOIN_REPLY and the requests, 21-34 of SPAN, REPAIRS and
 * RANGE_REPAIR, 35-36 malformed CAPS and RANGE_RREQUESTs (for the server: its socket
 * filter keeps the server's own kinds from it). MCROGUE_KINDS=MASK sends only the
 * kinds of its set bits. The JOIN it learns the image by is followed by a LEAVE, so
 * that it does not hold the group at one block a datagram (it sends no CAPS).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/le.h"
#include "mcast/net.h"
#include "mcast/pace.h"
#include "pktbuild.h"
#include "mcast/proto.h"

#define KINDS 37                /* hostile kinds (hostile_pkt) */
#define HBUF 12288              /* the largest hostile datagram's room */

/* SIGTERM ends the sending (and the count is printed): tests stop it when done. */
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* A SPAN as the server would send it: len bytes of data at off of chunk into buf. */
static int span_pkt(uint32_t tag, uint32_t chunk, uint32_t off, uint32_t len, const uint8_t *data,
		    uint8_t *buf)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_SPAN;
	p.tag = tag;
	p.chunk = chunk;
	p.offset = off;
	p.length = len;
	p.data = data;
	return ndz_pkt_encode(&p, buf, HBUF, NULL);
}

/* A random 32-byte-granular span of a chunk: *off and *len, at most 1440 bytes. */
static void any_span(uint32_t *off, uint32_t *len)
{
	*len = ((uint32_t)random() % 45 + 1) * NDZ_PKT_SPAN_GRAIN;
	*off = (uint32_t)random() % ((NDZ_CHUNK_SIZE - *len) / NDZ_PKT_SPAN_GRAIN + 1) *
	       NDZ_PKT_SPAN_GRAIN;
}

/*
 * Kinds 21-34 of the hostile mix (SPAN, REPAIRS, RANGE_REPAIR), as hostile_pkt. The
 * malformed ones are a valid packet with one field broken after encoding (the
 * encoder refuses to make them): each must be dropped as malformed, nothing stored.
 */
static int hostile_new(int k, uint32_t tag, uint32_t chunks, uint8_t *buf, const uint8_t *data,
		       int *spoof)
{
	uint32_t chunk = (uint32_t)random() % chunks, off, len;
	struct ndz_pkt p;
	int n;

	*spoof = 1;
	any_span(&off, &len);
	switch (k) {
	case 21:                        /* SPAN: offset off the grain */
		n = span_pkt(tag, chunk, off, len, data, buf);
		if (n > 0)
			put_le32(buf + 16, off + (uint32_t)(random() % 31) + 1);
		return n;
	case 22:                        /* SPAN: length off the grain (a datagram cut) */
		n = span_pkt(tag, chunk, off, len, data, buf);
		return n > 0 ? n - (int)(random() % 31) - 1 : n;
	case 23:                        /* SPAN: empty (the head alone) */
		n = span_pkt(tag, chunk, off, len, data, buf);
		return n > 0 ? (int)NDZ_PKT_SPAN_HDR : n;
	case 24:                        /* SPAN: past the chunk's end */
		n = span_pkt(tag, chunk, 0, 1440, data, buf);
		if (n > 0)
			put_le32(buf + 16, NDZ_CHUNK_SIZE - 32 * ((uint32_t)random() % 44 + 1));
		return n;
	case 25:                        /* SPAN: offset + length past 2^32 */
		n = span_pkt(tag, chunk, 0, 64, data, buf);
		if (n > 0)
			put_le32(buf + 16, 0xffffffe0u - 32 * ((uint32_t)random() % 4));
		return n;
	case 26:                        /* SPAN: another image's tag, valid else */
		return span_pkt(tag ^ 0x1234567, chunk, off, len, data, buf);
	case 27:                        /* SPAN: forged bytes into chunk 0 (done first) */
		return span_pkt(tag, 0, off, len, data, buf);
	case 28:                        /* SPAN: forged bytes, any chunk, any span */
		return span_pkt(tag, chunk, off, len, data, buf);
	case 29:                        /* SPAN: longer than a SPAN may be (9216 bytes) */
		*spoof = 0;     /* (larger than the raw socket's room; fragmented) */
		n = span_pkt(tag, chunk, 0, NDZ_PKT_SPAN_MAX, data, buf);
		return n > 0 ? n + 32 : n;
	case 30:                        /* a SPAN head on a datagram larger than a receiver reads */
		*spoof = 0;
		n = span_pkt(tag, chunk, 0, 32, data, buf);
		return n > 0 ? HBUF - 288 : n;
	case 31:                        /* REPAIRS: forged, one repair (a valid packet) */
	case 32:                        /* REPAIRS: malformed, in turn */
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_REPAIRS;
		p.tag = tag;
		p.chunk = chunk;
		p.stripe = (uint8_t)(random() % NDZ_FEC_STRIPES);
		p.index = (uint8_t)(random() % (NDZ_FEC_REPAIRS - 1));
		p.nrep = 1;
		p.data = data;
		n = ndz_pkt_encode(&p, buf, HBUF, NULL);
		if (n <= 0 || k == 31)
			return n;
		switch (random() % 5) {
		case 0: buf[18] = 0; break;                     /* no repairs */
		case 1: buf[18] = 9; break;                     /* more than 8 */
		case 2: buf[16] = NDZ_FEC_SETS; break;          /* no such set */
		case 3: buf[17] = NDZ_FEC_REPAIRS; break;       /* past the set's repairs */
		default: buf[18] = 2; break;                    /* 2 said, 1 there */
		}
		return n;
	case 35:                        /* CAPS: malformed, in turn */
		*spoof = 0;
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_CAPS;
		p.tag = tag;
		p.client_id = (uint32_t)random();
		p.max_payload = 1472;
		p.caps_flags = NDZ_CAPS_SPAN;
		n = ndz_pkt_encode(&p, buf, HBUF, NULL);
		if (n <= 0)
			return n;
		if (random() % 2)
			put_le32(buf + 16, NDZ_PKT_BLOCK_LEN - 1 - (uint32_t)(random() % 1000));
		else
			put_le32(buf + 20, 4u << (random() % 29));     /* an unknown flag */
		return n;
	case 36:                        /* RANGE_RREQUEST: malformed, in turn */
		*spoof = 0;
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_RANGE_RREQUEST;
		p.tag = tag;
		p.client_id = (uint32_t)random();
		p.chunk = chunk;
		p.block = 0;
		p.count = 16;
		p.wanted = 4;
		n = ndz_pkt_encode(&p, buf, HBUF, NULL);
		if (n <= 0)
			return n;
		switch (random() % 4) {
		case 0: put_le16(buf + 22, 0); break;           /* no blocks */
		case 1: put_le16(buf + 20, 1020); break;        /* past block 1023 */
		case 2: buf[24] = (uint8_t)(random() % 2 ? 0 : 33); break; /* 0, > 32 */
		default: buf[26] = 1; break;                    /* reserved not zero */
		}
		return n;
	case 33:                        /* RANGE_REPAIR: forged (a valid packet) */
	default:                        /* RANGE_REPAIR: malformed, in turn */
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_RANGE_REPAIR;
		p.tag = tag;
		p.chunk = chunk;
		p.block = (uint16_t)(random() % 1000);
		p.count = (uint16_t)(random() % 16 + 1);
		p.index = (uint8_t)(random() % NDZ_FEC_WREPAIRS);
		p.data = data;
		n = ndz_pkt_encode(&p, buf, HBUF, NULL);
		if (n <= 0 || k == 33)
			return n;
		switch (random() % 4) {
		case 0: put_le16(buf + 18, 0); break;           /* no blocks */
		case 1: put_le16(buf + 16, 1020);               /* past block 1023 */
			put_le16(buf + 18, 8); break;
		case 2: buf[20] = 255; break;                   /* no such repair */
		default: buf[22] = 1; break;                    /* reserved not zero */
		}
		return n;
	}
}

/*
 * Kind k (0-34) of the hostile mix into buf (HBUF bytes): returns its length (0:
 * nothing) and sets *spoof when it should carry the server's address.
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
	if (k > 20)
		return hostile_new(k, tag, chunks, buf, data, spoof);
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
	default:                        /* (20) a valid BLOCK cut short */
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
	static uint8_t buf[HBUF], data[NDZ_PKT_SPAN_MAX];
	uint32_t tag = 0, chunks = 1, group, src = 0;
	struct ndz_join_info info = { 0 };
	int hostile = argc > 6 && !strcmp(argv[6], "hostile");
	/* MCROGUE_KINDS: a mask of the hostile kinds to send (bench/hostile.sh), default all */
	unsigned long kinds = getenv("MCROGUE_KINDS") ? strtoul(getenv("MCROGUE_KINDS"), NULL, 0) :
			      (1ul << KINDS) - 1, turn = 0;
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
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)random();
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
		if (!bf || fread(data, 1, NDZ_BLOCK_SIZE, bf) == 0 || !pkt_learn(net, 0xb10cb10c, 5000, &p)) {
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
		/* gone again: a client of ours without CAPS would hold the group at BLOCKs */
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_LEAVE;
		p.client_id = 0xbadc0de;
		p.tag = tag;
		len = ndz_pkt_encode(&p, buf, HBUF, NULL);
		if (len > 0)
			ndz_net_send(net, buf, (size_t)len, NULL);
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
		for (size_t i = 0; i < 1536; i++)
			data[i] = (uint8_t)random();
		if (hostile) {
			int k = (int)(turn++ % KINDS);

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
