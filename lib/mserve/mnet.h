/*
 * The master's sockets: its control address (UDP for GET, TCP for uploads and
 * STATUS) and the address its sessions send from. Opened here for lib/mserve/mserve.
 */
#ifndef NDZ_MNET_H
#define NDZ_MNET_H

#include <stdint.h>

#include "core/err.h"

/*
 * ndz_mnet_listen - bind the control address spec ("ADDR[:PORT]", port NDZ_CTL_PORT
 * by default): a UDP socket (1 MiB receive buffer) into *udp and a listening,
 * non-blocking TCP socket into *tcp, both close-on-exec. 0, or NDZ_EINVAL (a bad
 * spec) or NDZ_ENET with e naming the address; nothing stays open on failure.
 */
int ndz_mnet_listen(const char *spec, int *udp, int *tcp, struct ndz_error *e);

/*
 * ndz_mnet_source - the address (network order) sessions on the pool address
 * pool_base (host order), port, will send from: iface's (a name or an address)
 * when given, else that of the route to the pool. 0 when it cannot be told (then
 * clients learn it from the JOIN_REPLY). Nothing is sent.
 */
uint32_t ndz_mnet_source(const char *iface, uint32_t pool_base, uint16_t port);

#endif
