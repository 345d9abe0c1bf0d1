/* What mcforge and mcrogue share: the JOIN that learns the image, spoofed UDP. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcast/pace.h"
#include "pktbuild.h"

int pkt_learn(struct ndz_net *net, uint32_t client_id, unsigned ms, struct ndz_pkt *reply)
{
	uint64_t end = ndz_now_ns() + (uint64_t)ms * 1000000ull;
	uint8_t buf[2048];
	struct ndz_pkt p;
	uint32_t from;

	while (ndz_now_ns() < end) {
		int n, l;

		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_JOIN;
		p.client_id = client_id;
		l = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
		if (l > 0)
			ndz_net_send(net, buf, (size_t)l, NULL);
		n = ndz_net_recv(net, buf, sizeof(buf), 300, &from, NULL);
		if (n > 0 && ndz_pkt_decode(buf, (size_t)n, &p, NULL) == 0 &&
		    p.type == NDZ_PKT_JOIN_REPLY) {
			*reply = p;
			return 1;
		}
	}
	return 0;
}

int pkt_join(const char *prog, struct ndz_net_opts *o, const char *group, const char *port,
	     struct ndz_net **net, uint32_t *addr)
{
	struct ndz_error err = { 0 };

	o->group = group;
	o->port = (uint16_t)atoi(port);
	o->loop = 0;
	if (ndz_net_open(o, net, &err) < 0 || ndz_net_addr(group, addr, NULL) < 0) {
		fprintf(stderr, "%s: %s\n", prog, ndz_error_msg(&err));
		return -1;
	}
	return 0;
}

int pkt_raw_open(const char *spoof_addr, uint32_t *src)
{
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW), one = 1;

	if (fd < 0)
		return -1;
	if (ndz_net_addr(spoof_addr, src, NULL) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The IPv4 header checksum: ones' complement of the ones' complement sum. */
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

void pkt_spoof(int fd, uint32_t src, uint32_t dst, uint16_t port, const uint8_t *d, size_t n)
{
	uint8_t pkt[1600];
	struct iphdr *ip = (struct iphdr *)(void *)pkt;
	struct udphdr *u = (struct udphdr *)(void *)(pkt + sizeof(*ip));
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = dst };

	if (n > sizeof(pkt) - sizeof(*ip) - sizeof(*u))
		return;
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

void pkt_send(struct ndz_net *net, int raw, uint32_t src, uint32_t dst, uint16_t port,
	      const uint8_t *d, size_t n)
{
	if (raw >= 0)
		pkt_spoof(raw, src, dst, port, d, n);
	else
		ndz_net_send(net, d, n, NULL);
}
