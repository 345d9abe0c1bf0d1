/*
 * labnode: a fake lab node (the boot environment's side of doc/PROTOCOL.md, "Lab
 * messages", through lib/mserve/labsrv), and a Wake-on-LAN catcher.
 *   labnode MASTER MAC ask            print "reload IMAGE OPTS", "capture IMAGE",
 *                                     "local" or "wait MS"
 *   labnode MASTER MAC ask-until MS   ask again while told to wait (at most MS ms)
 *   labnode MASTER MAC progress BYTES TOTAL
 *   labnode MASTER MAC ok BYTES MS SKIPPED
 *   labnode MASTER MAC fail REASON    print "ok" or the refusal's status
 *   labnode wolcatch PORT COUNT SECONDS  print the first COUNT datagrams to UDP
 *                                     PORT (any address) in hex, one a line
 *   labnode flood MASTER MAC COUNT    send COUNT asks back to back from one socket,
 *                                     print "replies N": those answered within a second
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "ctl/labcall.h"

static int wolcatch(int port, int count, int secs)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
	uint64_t end = ndz_now_ms() + (uint64_t)secs * 1000;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("wolcatch: bind");
		return 2;
	}
	printf("listening\n");
	fflush(stdout);
	while (count > 0 && ndz_now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint8_t b[2048];
		ssize_t n;

		if (poll(&p, 1, (int)(end - ndz_now_ms())) <= 0)
			continue;
		n = recv(fd, b, sizeof(b), 0);
		for (ssize_t k = 0; k < n; k++)
			printf("%02x", b[k]);
		printf("\n");
		fflush(stdout);
		count--;
	}
	return count ? 1 : 0;
}

static int flood(const char *master, const char *mac, int count)
{
	struct ndz_ctl_labreq r = { .type = NDZ_CTL_ASK };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(NDZ_CTL_PORT) };
	int fd = socket(AF_INET, SOCK_DGRAM, 0), replies = 0, n;
	uint8_t b[NDZ_CTL_LAB_MAX];
	uint64_t end;

	if (fd < 0 || inet_pton(AF_INET, master, &to.sin_addr) != 1 ||
	    ndz_labcall_parse_mac(mac, r.mac, NULL) != 0)
		return 2;
	for (int k = 0; k < count; k++) {
		r.id = (uint32_t)k + 1;
		n = ndz_ctl_lab_encode(&r, b, sizeof(b), NULL);
		if (n < 0 || sendto(fd, b, (size_t)n, 0, (struct sockaddr *)&to, sizeof(to)) < 0)
			return 1;
	}
	end = ndz_now_ms() + 1000;
	while (ndz_now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, (int)(end - ndz_now_ms())) > 0 && recv(fd, b, sizeof(b), 0) > 0)
			replies++;
	}
	printf("replies %d\n", replies);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t buf[NDZ_CTL_LABREP_MAX];
	struct ndz_ctl_labreq r = { .id = (uint32_t)getpid() };
	struct ndz_ctl_labrep rep;
	struct ndz_error e = { 0 };
	uint64_t until = 0;

	if (argc == 5 && strcmp(argv[1], "flood") == 0)
		return flood(argv[2], argv[3], atoi(argv[4]));
	if (argc == 5 && strcmp(argv[1], "wolcatch") == 0)
		return wolcatch(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (argc < 4 || ndz_labcall_parse_mac(argv[2], r.mac, &e) != 0) {
		fprintf(stderr, "usage: labnode MASTER MAC ask|ask-until MS|progress|ok|fail ...\n");
		return 2;
	}
	if (strcmp(argv[3], "ask") == 0 || strcmp(argv[3], "ask-until") == 0) {
		r.type = NDZ_CTL_ASK;
		if (argc == 5)
			until = ndz_now_ms() + strtoull(argv[4], NULL, 10);
	} else {
		r.type = NDZ_CTL_REPORT;
		if (strcmp(argv[3], "progress") == 0 && argc == 6) {
			r.kind = NDZ_LAB_PROGRESS;
			r.bytes = strtoull(argv[4], NULL, 10);
			r.total = strtoull(argv[5], NULL, 10);
		} else if (strcmp(argv[3], "ok") == 0 && argc == 7) {
			r.kind = NDZ_LAB_OK;
			r.bytes = r.total = strtoull(argv[4], NULL, 10);
			r.ms = strtoull(argv[5], NULL, 10);
			r.skipped = strtoull(argv[6], NULL, 10);
		} else if (strcmp(argv[3], "fail") == 0 && argc == 5) {
			r.kind = NDZ_LAB_FAIL;
			snprintf(r.text, sizeof(r.text), "%s", argv[4]);
		} else {
			fprintf(stderr, "labnode: bad report\n");
			return 2;
		}
	}
	for (;;) {
		if (ndz_labcall_node(argv[1], &r, buf, sizeof(buf), &rep, &e) != 0) {
			fprintf(stderr, "labnode: %s\n", ndz_error_msg(&e));
			return 1;
		}
		if (rep.status != NDZ_CTL_OK) {
			printf("%s\n", ndz_ctl_strstatus(rep.status));
			return 1;
		}
		if (r.type == NDZ_CTL_REPORT) {
			printf("ok\n");
			return 0;
		}
		if (rep.task != NDZ_LAB_WAIT || ndz_now_ms() >= until)
			break;
		nanosleep(&(struct timespec){ rep.wait_ms / 1000, (long)(rep.wait_ms % 1000) * 1000000 },
			  NULL);
	}
	if (rep.task == NDZ_LAB_WAIT)
		printf("wait %u\n", rep.wait_ms);
	else if (rep.task == NDZ_LAB_RELOAD || rep.task == NDZ_LAB_CAPTURE)
		printf("%s %s %u\n", ndz_labcall_strtask(rep.task), rep.name, rep.opts);
	else
		printf("%s\n", ndz_labcall_strtask(rep.task));
	return 0;
}
