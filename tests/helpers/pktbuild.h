/*
 * What the hostile multicast helpers (mcforge, mcrogue) share: learning the
 * served image from a JOIN_REPLY, and sending UDP datagrams with a forged
 * source address through a raw socket.
 */
#ifndef NDZ_PKTBUILD_H
#define NDZ_PKTBUILD_H

#include <stddef.h>
#include <stdint.h>

#include "mcast/net.h"
#include "mcast/proto.h"

/*
 * pkt_join - fill *o for group:port (port a decimal string; our own datagrams not
 * looped back), open *net on it and put the group's address (network order) in
 * *addr. Returns 0, or -1 after printing "prog: why" on stderr.
 */
int pkt_join(const char *prog, struct ndz_net_opts *o, const char *group, const char *port,
	     struct ndz_net **net, uint32_t *addr);

/*
 * pkt_learn - send a JOIN as client_id every 300 ms on net until a JOIN_REPLY
 * comes, for at most ms. Returns 1 with the reply in *reply, 0 when none came.
 */
int pkt_learn(struct ndz_net *net, uint32_t client_id, unsigned ms, struct ndz_pkt *reply);

/*
 * pkt_raw_open - a raw IPv4 socket that takes our own IP headers, and in *src
 * the address spoof_addr names. Returns the socket, or -1 (errno set when a
 * call failed) for the caller to report.
 */
int pkt_raw_open(const char *spoof_addr, uint32_t *src);

/*
 * pkt_spoof - one UDP datagram d[0..n) from src to dst (network order), both
 * ports port, through raw socket fd; the UDP checksum is left 0 (allowed for
 * IPv4). n must leave room for the headers in 1600 bytes.
 */
void pkt_spoof(int fd, uint32_t src, uint32_t dst, uint16_t port, const uint8_t *d, size_t n);

/*
 * pkt_send - d[0..n) to dst:port: through raw socket raw from src (pkt_spoof) when
 * raw >= 0, else as ourselves on net.
 */
void pkt_send(struct ndz_net *net, int raw, uint32_t src, uint32_t dst, uint16_t port,
	      const uint8_t *d, size_t n);

#endif
