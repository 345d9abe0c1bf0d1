/* Wake-on-LAN: the magic packet, sent by UDP broadcast. */
#include <errno.h>
#include <ifaddrs.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "wol.h"

void ndz_wol_packet(const uint8_t mac[6], uint8_t out[NDZ_WOL_LEN])
{
	memset(out, 0xff, 6);
	for (int k = 0; k < 16; k++)
		memcpy(out + 6 + 6 * k, mac, 6);
}

/* The IPv4 broadcast address of iface (network order), or 0. */
static uint32_t broadcast_of(const char *iface)
{
	struct ifaddrs *all, *a;
	uint32_t b = 0;

	if (getifaddrs(&all) != 0)
		return 0;
	for (a = all; a && !b; a = a->ifa_next)
		if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET &&
		    strcmp(a->ifa_name, iface) == 0 && (a->ifa_flags & IFF_BROADCAST) &&
		    a->ifa_broadaddr)
			b = ((const struct sockaddr_in *)a->ifa_broadaddr)->sin_addr.s_addr;
	freeifaddrs(all);
	return b;
}

int ndz_wol_send(const char *iface, const uint8_t (*macs)[6], size_t n, uint16_t port,
		 struct ndz_error *e)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port ? port : NDZ_WOL_PORT),
				  .sin_addr.s_addr = htonl(INADDR_BROADCAST) };
	const char *name = iface && *iface ? iface : "the broadcast address";
	int fd, one = 1;

	if (iface && *iface && !(to.sin_addr.s_addr = broadcast_of(iface)))
		return ndz_error_set(e, NDZ_EINVAL, 0, "wake-on-lan: interface '%s' has no IPv4 "
				     "broadcast address", iface);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ndz_error_set(e, NDZ_ENET, errno, "wake-on-lan: socket");
	if (setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)) != 0) {
		int err = errno;

		close(fd);
		return ndz_error_set(e, NDZ_ENET, err, "wake-on-lan on %s: SO_BROADCAST", name);
	}
	for (size_t k = 0; k < n; k++) {
		uint8_t pkt[NDZ_WOL_LEN];

		ndz_wol_packet(macs[k], pkt);
		if (sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&to, sizeof(to)) !=
		    (ssize_t)sizeof(pkt)) {
			int err = errno;

			close(fd);
			return ndz_error_set(e, NDZ_ENET, err, "wake-on-lan on %s", name);
		}
	}
	close(fd);
	return (int)n;
}
