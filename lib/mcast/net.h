/* UDP multicast sockets: join a group on an interface, send to it, receive with a timeout. */
#ifndef NDZ_NET_H
#define NDZ_NET_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct ndz_net;

struct ndz_net_opts {
	const char *group;             /* dotted IPv4 multicast address */
	uint16_t port;
	const char *iface;             /* interface name or one of its addresses; NULL: by route */
	int ttl;                       /* multicast TTL; 0: 5 */
	int loop;                      /* deliver our own sends to sockets on this host */
	int rcvbuf;                    /* socket receive buffer bytes; 0: 4 MiB */
	int sndbuf;                    /* socket send buffer bytes; 0: system default */
	int gro;                       /* receive with UDP GRO where the kernel offers it:
					  datagrams of one sender coalesced into one buffer,
					  one trip up the stack for many (ndz_net_recv_many) */
};

/*
 * ndz_net_open - a socket bound to group:port, member of group on the interface,
 * sending to group:port from it. Returns 0 and *out, or NDZ_EINVAL (bad address or
 * interface), NDZ_ENET or NDZ_ENOMEM with e (may be NULL) naming what failed.
 */
int ndz_net_open(const struct ndz_net_opts *o, struct ndz_net **out, struct ndz_error *e);

/*
 * Every call below that can fail fills e (may be NULL: the hot path) with the group and
 * what failed, errno included.
 */

/* ndz_net_send - one datagram to the group. 0 or NDZ_ENET (errno set). */
int ndz_net_send(struct ndz_net *n, const void *buf, size_t len, struct ndz_error *e);

/* One datagram to send as two parts, head then body (either may be empty). */
struct ndz_net_out {
	const uint8_t *head;
	size_t head_len;
	const uint8_t *body;
	size_t body_len;
};
#define NDZ_NET_SEND_MAX 64u           /* datagrams of one ndz_net_send_vec at most */

/*
 * ndz_net_send_vec - count (at most NDZ_NET_SEND_MAX) datagrams to the group, each
 * gathered from its two parts by the kernel (a header of ours and a chunk's bytes
 * where they lie: no copy). Runs of datagrams of one length (the last of a run may
 * be shorter) go as UDP segmentation offload sends (one buffer the kernel or the
 * NIC cuts into datagrams: one trip through the stack per run), the rest, and all
 * on a kernel without it, with sendmmsg. The receivers see the same datagrams
 * either way. Returns how many went in offload runs (>= 0), or NDZ_ENET (errno
 * set); as with ndz_net_send, a full send queue drops the rest rather than failing.
 */
int ndz_net_send_vec(struct ndz_net *n, const struct ndz_net_out *d, unsigned count,
		     struct ndz_error *e);

/* ndz_net_send_many - ndz_net_send_vec of count whole datagrams (bufs[i], lens[i] bytes):
 * 0 or NDZ_ENET. */
int ndz_net_send_many(struct ndz_net *n, const uint8_t *const *bufs, const size_t *lens,
		      unsigned count, struct ndz_error *e);

/*
 * ndz_net_ignore - have the kernel drop, before they are queued, datagrams whose
 * payload byte at offset is one of values (count <= 16): a server need not read
 * back its own looped-back blocks. Datagrams too short to hold that byte are kept.
 * 0, NDZ_EINVAL or NDZ_ENET (errno set).
 */
int ndz_net_ignore(struct ndz_net *n, unsigned offset, const uint8_t *values, unsigned count,
		   struct ndz_error *e);

/*
 * ndz_net_recv - one datagram, waiting at most timeout_ms (< 0: forever).
 * Returns its length (> 0), 0 on timeout, or NDZ_ENET; *from gets the sender's
 * IPv4 address in network byte order.
 */
int ndz_net_recv(struct ndz_net *n, void *buf, size_t cap, int timeout_ms, uint32_t *from,
		 struct ndz_error *e);

/*
 * One received datagram of a batch (ndz_net_recv_many): its bytes are the socket's,
 * valid until the next receive on it (no copy: with GRO one buffer of the kernel's
 * holds many datagrams, and each entry points into it).
 */
#define NDZ_NET_DGRAM_MAX 9216         /* larger datagrams are reported as oversize (the
					  largest of ours, a BLOCKS of 8 blocks, is 8212) */
#define NDZ_NET_BATCH_MAX 1024u        /* datagrams one ndz_net_recv_many gives at most */
struct ndz_dgram {
	const uint8_t *data;
	int len;                       /* its length; > NDZ_NET_DGRAM_MAX: it was larger */
	uint32_t from;                 /* sender's IPv4 address, network byte order */
};

/*
 * ndz_net_recv_many - up to max datagrams into d[]: those already waiting, else
 * the first to arrive within timeout_ms (< 0: forever) and, after a pause of
 * nap_us (0: none) so that more can gather, all that are waiting then. One wake-up
 * and one call (recvmmsg) for many datagrams: at hundreds of Mbit/s a receiver that
 * takes them one at a time spends most of its time being woken. With GRO on, each
 * buffer read may hold up to 64 datagrams (cut by the segment size the kernel
 * tells), so max should be NDZ_NET_BATCH_MAX; without it, at most 64 are read.
 * Returns how many (0 on timeout) or NDZ_ENET. The pause must stay well below what
 * the socket buffer holds (ndz_net_rcvbuf) at the sender's rate.
 */
int ndz_net_recv_many(struct ndz_net *n, struct ndz_dgram *d, unsigned max, int timeout_ms,
		      unsigned nap_us, struct ndz_error *e);

/* ndz_net_local - the sending interface's IPv4 address (network order), 0 if unknown. */
uint32_t ndz_net_local(const struct ndz_net *n);

/*
 * ndz_net_mtu - the MTU of the interface the group is sent on (the one given, else
 * the one the route to the group picks), or 0 when it cannot be told.
 */
unsigned ndz_net_mtu(const struct ndz_net *n);

/* ndz_net_gro - whether the kernel took UDP GRO for the socket (ndz_net_opts.gro). */
int ndz_net_gro(const struct ndz_net *n);

/* ndz_net_rcvbuf - the receive buffer size the kernel granted. */
int ndz_net_rcvbuf(const struct ndz_net *n);

/*
 * ndz_net_group_why - why the multicast group g (host byte order) may not carry a
 * session, or NULL when it may: not a multicast address, or one of 224.0.0.0/24,
 * the link-local control block (all-hosts, all-routers, routing protocols), whose
 * every member host would take our datagrams.
 */
const char *ndz_net_group_why(uint32_t g);

/*
 * ndz_net_group - parse s as a group that may carry a session (ndz_net_group_why)
 * into *out (network order). 0, or NDZ_EINVAL with e (may be NULL) saying
 * "S: why; choose a group in 239.0.0.0/8 ...".
 */
int ndz_net_group(const char *s, uint32_t *out, struct ndz_error *e);

/* ndz_net_addr - parse a dotted IPv4 address into network order. 0 or NDZ_EINVAL (e). */
int ndz_net_addr(const char *s, uint32_t *out, struct ndz_error *e);

/* ndz_net_ntoa - format a network-order address into buf (>= 16 bytes); returns buf. */
const char *ndz_net_ntoa(uint32_t a, char *buf);

/* ndz_net_free - close and free; NULL ok. */
void ndz_net_free(struct ndz_net *n);

#endif
