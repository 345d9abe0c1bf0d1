/*
 * Wake-on-LAN: the magic packet (6 bytes 0xff, then the MAC 16 times) sent by UDP
 * broadcast on an interface. The one place the packet is made and sent.
 */
#ifndef NDZ_WOL_H
#define NDZ_WOL_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define NDZ_WOL_LEN  102               /* the magic packet's bytes */
#define NDZ_WOL_PORT 9                 /* "discard": what wake-up listeners expect */

/* ndz_wol_packet - the magic packet for mac into out. */
void ndz_wol_packet(const uint8_t mac[6], uint8_t out[NDZ_WOL_LEN]);

/*
 * ndz_wol_send - send the magic packet of each of the n MACs to port (0:
 * NDZ_WOL_PORT) at the broadcast address of iface (an interface name: its first
 * IPv4 address's broadcast), or at 255.255.255.255 when iface is NULL or "". The
 * socket is opened and closed here. Returns how many were sent (n), or NDZ_EINVAL
 * (iface has no IPv4 broadcast address) or NDZ_ENET with e naming the interface.
 */
int ndz_wol_send(const char *iface, const uint8_t (*macs)[6], size_t n, uint16_t port,
		 struct ndz_error *e);

#endif
