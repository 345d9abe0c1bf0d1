/*
 * mcrogue GROUP PORT SECONDS PPS [SPOOF_ADDR]: a hostile host for the multicast tests.
 * Learns the image tag from a JOIN_REPLY on the group, then for SECONDS sends, PPS packets a second,
 * garbage, packets of another protocol version, out-of-range requests and forged
 * BLOCKs of random chunks; with SPOOF_ADDR the forged BLOCKs carry that source
 * address (a raw socket), so they pass the client's source check and must be
 * caught by the chunk checksum.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "pace.h"
#include "proto.h"

static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* One UDP datagram with a forged source address, checksum left 0 (allowed for IPv4). */
static void spoof(int fd, uint32_t src, uint32_t dst, uint16_t port, const uint8_t *d, size_t n)
{
	uint8_t pkt[1600];
	struct iphdr *ip = (struct iphdr *)(void *)pkt;
	struct udphdr *u = (struct udphdr *)(void *)(pkt + sizeof(*ip));
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = dst };

	memset(pkt, 0, sizeof(*ip) + sizeof(*u));
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 5;
	ip->protocol = IPPROTO_UDP;
	ip->saddr = src;
	ip->daddr = dst;
	ip->tot_len = htons((uint16_t)(sizeof(*ip) + sizeof(*u) + n));
	ip->check = 0;
	ip->check = htons(csum(pkt, sizeof(*ip)));
	u->source = htons(port);
	u->dest = htons(port);
	u->len = htons((uint16_t)(sizeof(*u) + n));
	memcpy(pkt + sizeof(*ip) + sizeof(*u), d, n);
	sendto(fd, pkt, sizeof(*ip) + sizeof(*u) + n, 0, (struct sockaddr *)&to, sizeof(to));
}

int main(int argc, char **argv)
{
	struct ndz_net_opts o = { 0 };
	struct ndz_net *net;
	struct ndz_pkt p;
	struct ndz_pace pace;
	uint8_t buf[2048], data[1024];
	uint32_t from, tag = 0, chunks = 1, group, src = 0;
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
		int one = 1;

		raw = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
		if (raw < 0 || ndz_net_addr(argv[5], &src) < 0 ||
		    setsockopt(raw, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one)) < 0) {
			perror("mcrogue: raw socket");
			return 1;
		}
	}
	/* learn the image from a JOIN_REPLY (ask for one ourselves) */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN;
	p.client_id = 0xbadc0de;
	end = ndz_now_ns() + 5000000000ull;
	while (!tag && ndz_now_ns() < end) {
		int n, len = ndz_pkt_encode(&p, buf, sizeof(buf));

		ndz_net_send(net, buf, (size_t)len);
		n = ndz_net_recv(net, buf, sizeof(buf), 300, &from);
		if (n > 0 && ndz_pkt_decode(buf, (size_t)n, &p) == 0 && p.type == NDZ_PKT_JOIN_REPLY) {
			tag = p.tag;
			chunks = p.info.chunks;
		}
		p.type = NDZ_PKT_JOIN;
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
			spoof(raw, src, group, o.port, buf, (size_t)len);
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
