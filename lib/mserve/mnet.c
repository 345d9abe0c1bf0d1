/* The master's sockets: the control address, UDP and TCP, and the sessions' source address. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "mnet.h"
#include "mcast/net.h"

static int bind_one(const struct sockaddr_in *sa, int type, const char *spec, struct ndz_error *e)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), one = 1, rb = 1 << 20;

	if (fd < 0)
		return ndz_error_set(e, NDZ_ENET, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (type == SOCK_DGRAM)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 ||
	    (type != SOCK_DGRAM && listen(fd, 16) != 0)) {
		int err = errno;

		close(fd);
		return ndz_error_set(e, NDZ_ENET, err, "bind %s%s", spec,
				     type == SOCK_DGRAM ? "" : " (TCP)");
	}
	return fd;
}

int ndz_mnet_listen(const char *spec, int *udp, int *tcp, struct ndz_error *e)
{
	struct sockaddr_in sa;
	char host[64];
	uint16_t port;

	*udp = *tcp = -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	if (ndz_ctl_hostport(spec, NDZ_CTL_PORT, host, sizeof(host), &port, NULL) != 0 ||
	    ndz_net_addr(host, &sa.sin_addr.s_addr, NULL) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "--listen: bad address '%s'", spec);
	sa.sin_port = htons(port);
	if ((*udp = bind_one(&sa, SOCK_DGRAM, spec, e)) < 0)
		return *udp;
	if ((*tcp = bind_one(&sa, SOCK_STREAM | SOCK_NONBLOCK, spec, e)) < 0) {
		int rc = *tcp;

		close(*udp);
		*udp = *tcp = -1;
		return rc;
	}
	return 0;
}

uint32_t ndz_mnet_source(const char *iface, uint32_t pool_base, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t len = sizeof(sa);
	uint32_t a = 0;
	int fd;

	if (iface) {
		struct ndz_net_opts no = { .iface = iface, .port = port };
		struct ndz_net *net;
		char g[16];

		no.group = ndz_net_ntoa(htonl(pool_base), g);
		if (ndz_net_open(&no, &net, NULL) == 0) {
			a = ndz_net_local(net);
			ndz_net_free(net);
		}
		return a;
	}
	/* a connected UDP socket sends nothing: the kernel only picks the route */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sa.sin_addr.s_addr = htonl(pool_base);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		a = sa.sin_addr.s_addr;
	if (fd >= 0)
		close(fd);
	return a;
}
