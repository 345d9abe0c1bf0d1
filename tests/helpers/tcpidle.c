/*
 * tcpidle HOST PORT N WAIT_S [dribble]: open N TCP connections to a master one
 * after another, send nothing on any (dribble: a STATUS request a byte a second on
 * each), and watch them for up to WAIT_S seconds. One line each:
 * "conn K: closed after S s, status X" (the master's refusal status, "-" when it
 * closed without one), "conn K: open" (still open at the end) or "conn K: no connection";
 * before them "connected" once every connection is made.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ctl/ctl.h"

#define MAXC 256

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	int fd[MAXC], n, wait_s, status[MAXC];
	double t0[MAXC], gone[MAXC], end;
	uint8_t buf[MAXC][64], req[NDZ_CTL_REQ_MAX];
	size_t have[MAXC], sent = 0;
	struct ndz_ctl_req sr = { .type = NDZ_CTL_STATUS, .id = 1 };
	int reqlen = ndz_ctl_req_encode(&sr, req, sizeof(req), NULL), dribble = argc == 6;
	double next;

	if ((argc != 5 && (argc != 6 || strcmp(argv[5], "dribble") != 0)) || reqlen < 0 ||
	    inet_pton(AF_INET, argv[1], &to.sin_addr) != 1 ||
	    (n = atoi(argv[3])) < 1 || n > MAXC || (wait_s = atoi(argv[4])) < 0) {
		fprintf(stderr, "usage: tcpidle HOST PORT N WAIT_S [dribble]\n");
		return 2;
	}
	to.sin_port = htons((uint16_t)atoi(argv[2]));
	for (int k = 0; k < n; k++) {
		struct timeval tv = { .tv_sec = 3 };

		fd[k] = socket(AF_INET, SOCK_STREAM, 0);
		if (fd[k] >= 0)
			setsockopt(fd[k], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (fd[k] >= 0 && connect(fd[k], (struct sockaddr *)&to, sizeof(to)) != 0) {
			close(fd[k]);
			fd[k] = -1;
		}
		t0[k] = now();
		gone[k] = -1;
		status[k] = -1;
		have[k] = 0;
	}
	printf("connected\n");       /* a test waits for this before it goes on */
	fflush(stdout);
	end = now() + wait_s;
	next = now();
	for (;;) {
		struct pollfd p[MAXC];
		int open = 0;
		double left = end - now();

		for (int k = 0; k < n; k++) {
			p[k].fd = gone[k] < 0 ? fd[k] : -1;
			p[k].events = POLLIN;
			p[k].revents = 0;
			open += p[k].fd >= 0;
		}
		if (!open || left <= 0)
			break;
		if (dribble && now() >= next && sent < (size_t)reqlen) {
			for (int k = 0; k < n; k++)
				if (p[k].fd >= 0)
					(void)!send(fd[k], req + sent, 1, MSG_NOSIGNAL);
			sent++;
			next += 1.0;
		}
		if (dribble && sent < (size_t)reqlen && next - now() < left)
			left = next - now();
		if (poll(p, (nfds_t)n, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return 2;
		for (int k = 0; k < n; k++) {
			ssize_t got;

			if (!p[k].revents)
				continue;
			got = recv(fd[k], buf[k] + have[k], sizeof(buf[k]) - have[k], 0);
			if (got > 0) {
				struct ndz_ctl_rep rep;

				have[k] += (size_t)got;
				if (have[k] >= NDZ_CTL_REP_HDR &&
				    ndz_ctl_rep_decode(buf[k], NDZ_CTL_REP_HDR, &rep, NULL) == 0)
					status[k] = rep.status;
				if (have[k] < sizeof(buf[k]))
					continue;
			}
			gone[k] = now() - t0[k];
		}
	}
	for (int k = 0; k < n; k++) {
		if (fd[k] < 0)
			printf("conn %d: no connection\n", k + 1);
		else if (gone[k] < 0)
			printf("conn %d: open\n", k + 1);
		else if (status[k] >= 0)
			printf("conn %d: closed after %.1f s, status %d\n", k + 1, gone[k], status[k]);
		else
			printf("conn %d: closed after %.1f s, status -\n", k + 1, gone[k]);
		if (fd[k] >= 0)
			close(fd[k]);
	}
	return 0;
}
