/*
 * ctlask HOST PORT NAME[,NAME...] [COUNT]: ask a master for images over the control
 * protocol. With COUNT (a burst), send COUNT GET requests back to back cycling through
 * the names, then print how many replies came within a second; without, ask for NAME
 * once and print "ok GROUP PORT SERVER" or the refusal's message. With NAME "--junk",
 * send a datagram that is no request and one with a request header but an unknown
 * type, and print the reply to each ("none" when there is none).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ctl/ctl.h"
#include "mcast/net.h"

static int burst(const char *host, uint16_t port, char *names, int count)
{
	char *list[64];
	int n = 0, replies = 0, fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port) };

	for (char *s = strtok(names, ","); s && n < 64; s = strtok(NULL, ","))
		list[n++] = s;
	if (fd < 0 || n == 0 || inet_pton(AF_INET, host, &to.sin_addr) != 1)
		return 2;
	for (int i = 0; i < count; i++) {
		struct ndz_ctl_req r = { .type = NDZ_CTL_GET, .id = (uint32_t)i + 1 };
		uint8_t b[NDZ_CTL_REQ_MAX];
		int len;

		snprintf(r.name, sizeof(r.name), "%s", list[i % n]);
		len = ndz_ctl_req_encode(&r, b, sizeof(b), NULL);
		if (len < 0 || sendto(fd, b, (size_t)len, 0, (struct sockaddr *)&to, sizeof(to)) < 0)
			return 1;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint8_t b[NDZ_CTL_REP_MAX];
		struct ndz_ctl_rep rep;
		ssize_t got;

		if (poll(&p, 1, 1000) <= 0)
			break;
		got = recv(fd, b, sizeof(b), 0);
		if (got > 0 && ndz_ctl_rep_decode(b, (size_t)got, &rep, NULL) == 0)
			replies++;
	}
	printf("%d replies\n", replies);
	close(fd);
	return 0;
}

static int junk(const char *host, uint16_t port)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct ndz_ctl_req r = { .type = NDZ_CTL_STATUS, .id = 5 };
	uint8_t b[NDZ_CTL_REP_MAX];
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || inet_pton(AF_INET, host, &to.sin_addr) != 1 ||
	    ndz_ctl_req_encode(&r, b, sizeof(b), NULL) < 0)
		return 2;
	b[5] = 9;                      /* no such request type */
	for (int k = 0; k < 2; k++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct ndz_ctl_rep rep;
		ssize_t got;

		if (sendto(fd, k ? (const void *)b : "hello, master", k ? NDZ_CTL_REQ_HDR : 13, 0,
			   (struct sockaddr *)&to, sizeof(to)) < 0)
			return 1;
		if (poll(&p, 1, 500) <= 0) {
			printf("none\n");
			continue;
		}
		got = recv(fd, b + 64, sizeof(b) - 64, 0);
		if (got > 0 && ndz_ctl_rep_decode(b + 64, (size_t)got, &rep, NULL) == 0)
			printf("%s\n", ndz_ctl_strstatus(rep.status));
		else
			printf("bad reply\n");
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t buf[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req = { .type = NDZ_CTL_GET };
	struct ndz_ctl_rep rep;
	struct ndz_error e = { 0 };
	char g[16], a[16];
	int port = argc > 2 ? atoi(argv[2]) : 0;

	if (argc < 4 || argc > 5 || port <= 0 || port > 65535) {
		fprintf(stderr, "usage: ctlask HOST PORT NAME[,NAME...] [COUNT]\n");
		return 2;
	}
	if (strcmp(argv[3], "--junk") == 0)
		return junk(argv[1], (uint16_t)port);
	if (argc == 5)
		return burst(argv[1], (uint16_t)port, argv[3], atoi(argv[4]));
	snprintf(req.name, sizeof(req.name), "%s", argv[3]);
	if (ndz_ctl_query(argv[1], (uint16_t)port, &req, 3, 500, buf, sizeof(buf), &rep, &e) != 0) {
		printf("%s\n", ndz_error_msg(&e));
		return 1;
	}
	if (rep.status != NDZ_CTL_OK) {
		printf("%s\n", ndz_ctl_strstatus(rep.status));
		return 1;
	}
	printf("ok %s %u %s\n", ndz_net_ntoa(rep.group, g), rep.port, ndz_net_ntoa(rep.server, a));
	return 0;
}
