/* Multicast socket setup and datagram send/receive. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/err.h"
#include "net.h"

struct ndz_net {
	int fd;
	struct sockaddr_in group;
	uint32_t local;
	int rcvbuf;
	int no_gso;                    /* the kernel refused UDP_SEGMENT: sendmmsg only */
	int gro;                       /* the kernel took UDP_GRO */
	uint8_t *arena;                /* ndz_net_recv_many's buffers: nslots of slot bytes */
	size_t slot;
	unsigned nslots;
};

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define GRO_SLOT 65536u                /* one coalesced buffer: up to 64 KiB */
#define GRO_SLOTS 16u                  /* read at once with GRO (up to 64 datagrams each) */
#define PLAIN_SLOTS 64u                /* read at once without it */
#define GSO_MAX 60                     /* segments in one send: 60 BLOCKs stay under 64 KiB */
#define GSO_BYTES 65000u               /* and their bytes (8 BLOCKSes of 8 blocks would not) */

int ndz_net_addr(const char *s, uint32_t *out, struct ndz_error *e)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: not an IPv4 address", s ? s : "(none)");
	*out = a.s_addr;
	return 0;
}

const char *ndz_net_ntoa(uint32_t a, char *buf)
{
	struct in_addr ia = { .s_addr = a };

	if (!inet_ntop(AF_INET, &ia, buf, 16))
		strcpy(buf, "?");
	return buf;
}

/* Resolve an interface name or address into its index and IPv4 address. */
static int find_iface(const char *spec, int *index, uint32_t *addr)
{
	struct ifaddrs *ifa, *i;
	uint32_t want = 0;
	int by_addr = ndz_net_addr(spec, &want, NULL) == 0;
	int found = 0;

	if (getifaddrs(&ifa) != 0)
		return NDZ_ENET;
	for (i = ifa; i && !found; i = i->ifa_next) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)i->ifa_addr;

		if (!sin || sin->sin_family != AF_INET)
			continue;
		if (by_addr ? sin->sin_addr.s_addr == want : strcmp(i->ifa_name, spec) == 0) {
			*index = (int)if_nametoindex(i->ifa_name);
			*addr = sin->sin_addr.s_addr;
			found = *index > 0;
		}
	}
	freeifaddrs(ifa);
	return found ? 0 : NDZ_EINVAL;
}

const char *ndz_net_group_why(uint32_t g)
{
	if (!IN_MULTICAST(g))
		return "not an IPv4 multicast address (224.0.0.0 to 239.255.255.255)";
	if ((g & 0xffffff00u) == 0xe0000000u)
		return "in 224.0.0.0/24, the link-local control block (all-hosts, routers): "
		       "every host on the link would take the session's datagrams";
	return NULL;
}

int ndz_net_group(const char *s, uint32_t *out, struct ndz_error *e)
{
	const char *why;

	if (!s || ndz_net_addr(s, out, NULL) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: not an IPv4 address",
				     s ? s : "(none)");
	why = ndz_net_group_why(ntohl(*out));
	if (why)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: %s; choose a group in 239.0.0.0/8 "
				     "(administratively scoped)", s, why);
	return 0;
}

int ndz_net_open(const struct ndz_net_opts *o, struct ndz_net **out, struct ndz_error *e)
{
	struct ndz_net *n;
	struct ip_mreqn mr;
	uint32_t g;
	int one = 1, zero = 0, ttl = o->ttl > 0 ? o->ttl : 5;
	int loop = !!o->loop, rb = o->rcvbuf > 0 ? o->rcvbuf : 4 << 20, ifindex = 0, r;
	socklen_t sl = sizeof(n->rcvbuf);

	*out = NULL;
	if ((r = ndz_net_group(o->group, &g, e)) != 0)
		return r;
	n = calloc(1, sizeof(*n));
	if (!n)
		return ndz_error_set(e, NDZ_ENOMEM, 0, NULL);
	if (o->iface && find_iface(o->iface, &ifindex, &n->local) != 0) {
		free(n);
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: no such interface with an IPv4 address",
				     o->iface);
	}
	n->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0) {
		free(n);
		return ndz_error_set(e, NDZ_ENET, errno, "socket");
	}
	n->group.sin_family = AF_INET;
	n->group.sin_port = htons(o->port);
	n->group.sin_addr.s_addr = g;
	memset(&mr, 0, sizeof(mr));
	mr.imr_multiaddr.s_addr = g;
	mr.imr_address.s_addr = n->local;
	mr.imr_ifindex = ifindex;
	setsockopt(n->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* As root, exceed rmem_max; otherwise take what the system allows. */
	/* GRO where offered: an older kernel refuses the option, and reads go one by one */
	n->gro = o->gro && setsockopt(n->fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	if (setsockopt(n->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rb, sizeof(rb)) != 0)
		setsockopt(n->fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
	if (o->sndbuf > 0 &&
	    setsockopt(n->fd, SOL_SOCKET, SO_SNDBUFFORCE, &o->sndbuf, sizeof(o->sndbuf)) != 0)
		setsockopt(n->fd, SOL_SOCKET, SO_SNDBUF, &o->sndbuf, sizeof(o->sndbuf));
	getsockopt(n->fd, SOL_SOCKET, SO_RCVBUF, &n->rcvbuf, &sl);
	/* Only this group's datagrams, even when other sockets joined other groups. */
	setsockopt(n->fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
	r = bind(n->fd, (const struct sockaddr *)&n->group, sizeof(n->group));
	if (r != 0)
		goto err;
	r = setsockopt(n->fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr));
	if (r != 0)
		goto err;
	if (ifindex) {
		r = setsockopt(n->fd, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr));
		if (r != 0)
			goto err;
	}
	if (setsockopt(n->fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) != 0 ||
	    setsockopt(n->fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof(loop)) != 0)
		goto err;
	*out = n;
	return 0;
err:
	r = ndz_error_set(e, NDZ_ENET, errno, "multicast group %s port %u%s%s", o->group, o->port,
			  o->iface ? " on " : "", o->iface ? o->iface : "");
	close(n->fd);
	free(n);
	return r;
}

static int net_send(struct ndz_net *n, const void *buf, size_t len)
{
	ssize_t r;

	do {
		r = sendto(n->fd, buf, len, 0, (const struct sockaddr *)&n->group,
			   sizeof(n->group));
	} while (r < 0 && errno == EINTR);
	/* A full send queue is a drop on a lossy medium, not a failure. */
	if (r < 0 && (errno == ENOBUFS || errno == EAGAIN))
		return 0;
	return r == (ssize_t)len ? 0 : NDZ_ENET;
}

/* The two parts of d as iovecs at iov (empty parts left out); how many. */
static unsigned parts(const struct ndz_net_out *d, struct iovec *iov)
{
	unsigned k = 0;

	if (d->head_len) {
		iov[k].iov_base = (void *)d->head;
		iov[k++].iov_len = d->head_len;
	}
	if (d->body_len) {
		iov[k].iov_base = (void *)d->body;
		iov[k++].iov_len = d->body_len;
	}
	return k;
}

static size_t out_len(const struct ndz_net_out *d)
{
	return d->head_len + d->body_len;
}

/*
 * count datagrams as one UDP_SEGMENT send: all of seg bytes but the last, which may
 * be shorter. The kernel builds one large buffer straight from the parts (no copy of
 * ours) and cuts it into the datagrams only at the device (or the NIC does), so a
 * run costs one trip through the stack and one device kick instead of one each.
 * 0, 1 (not supported here: use sendmmsg) or NDZ_ENET.
 */
static int send_gso(struct ndz_net *n, const struct ndz_net_out *d, size_t seg, unsigned count)
{
	struct iovec iov[2 * GSO_MAX];
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh;
	struct cmsghdr *cm;
	uint16_t seg16 = (uint16_t)seg;
	size_t total = 0;
	unsigned niov = 0;
	ssize_t r;

	memset(&mh, 0, sizeof(mh));
	memset(&ctl, 0, sizeof(ctl));
	for (unsigned i = 0; i < count; i++) {
		niov += parts(&d[i], iov + niov);
		total += out_len(&d[i]);
	}
	mh.msg_name = &n->group;
	mh.msg_namelen = sizeof(n->group);
	mh.msg_iov = iov;
	mh.msg_iovlen = niov;
	mh.msg_control = ctl.buf;
	mh.msg_controllen = sizeof(ctl.buf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = IPPROTO_UDP;
	cm->cmsg_type = UDP_SEGMENT;
	cm->cmsg_len = CMSG_LEN(sizeof(seg16));
	memcpy(CMSG_DATA(cm), &seg16, sizeof(seg16));
	do {
		r = sendmsg(n->fd, &mh, 0);
	} while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == ENOBUFS || errno == EAGAIN))
		return 0;              /* a drop on a lossy medium, not a failure */
	if (r < 0 && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT ||
		      errno == EOPNOTSUPP || errno == EMSGSIZE)) {
		n->no_gso = 1;         /* an old kernel, or a device that cannot */
		return 1;
	}
	return r == (ssize_t)total ? 0 : NDZ_ENET;
}

/* count datagrams, one each, with sendmmsg (the parts gathered by the kernel). */
static int send_mmsg(struct ndz_net *n, const struct ndz_net_out *d, unsigned count)
{
	struct mmsghdr mh[NDZ_NET_SEND_MAX];
	struct iovec iov[2 * NDZ_NET_SEND_MAX];
	unsigned done = 0;

	memset(mh, 0, sizeof(mh[0]) * count);
	for (unsigned i = 0; i < count; i++) {
		mh[i].msg_hdr.msg_iov = &iov[2 * i];
		mh[i].msg_hdr.msg_iovlen = parts(&d[i], &iov[2 * i]);
		mh[i].msg_hdr.msg_name = &n->group;
		mh[i].msg_hdr.msg_namelen = sizeof(n->group);
	}
	while (done < count) {
		int r = sendmmsg(n->fd, mh + done, count - done, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == ENOBUFS || errno == EAGAIN))
			return 0;      /* a drop on a lossy medium, not a failure */
		if (r <= 0)
			return NDZ_ENET;
		for (int i = 0; i < r; i++)
			if (mh[done + (unsigned)i].msg_len != out_len(&d[done + (unsigned)i]))
				return NDZ_ENET;
		done += (unsigned)r;
	}
	return 0;
}

/*
 * The longest run from d that one GSO send carries: datagrams of d[0]'s length, and
 * then one shorter one (the kernel's last segment may be short), within GSO_MAX and
 * GSO_BYTES. 1: no run.
 */
static unsigned gso_run(const struct ndz_net_out *d, unsigned count)
{
	size_t seg = out_len(d), total = seg;
	unsigned k = 1;

	if (!seg || GSO_BYTES / seg < 2)
		return 1;
	while (k < count && k < GSO_MAX && total + out_len(&d[k]) <= GSO_BYTES) {
		size_t l = out_len(&d[k]);

		if (l > seg || !l)
			break;
		total += l;
		if (l < seg) {
			k++;
			break;         /* a short one ends the run */
		}
		k++;
	}
	return k;
}

/*
 * Runs of equal datagrams as GSO sends, the rest gathered into sendmmsg calls, in
 * order. The datagrams that went in GSO runs, or NDZ_ENET.
 */
static int send_vec(struct ndz_net *n, const struct ndz_net_out *d, unsigned count)
{
	unsigned i = 0, lone = 0;      /* d[lone..i) wait for a sendmmsg */
	int r, runs = 0;

	if (count > NDZ_NET_SEND_MAX)
		count = NDZ_NET_SEND_MAX;
	while (i < count) {
		unsigned k = n->no_gso ? 1 : gso_run(d + i, count - i);

		if (k < 2) {
			i++;
			continue;
		}
		if (i > lone && (r = send_mmsg(n, d + lone, i - lone)) < 0)
			return r;
		r = send_gso(n, d + i, out_len(&d[i]), k);
		if (r < 0)
			return r;
		if (r > 0) {           /* unsupported: this run and the rest by sendmmsg */
			lone = i;
			break;
		}
		i += k;
		lone = i;
		runs += (int)k;
	}
	r = count > lone ? send_mmsg(n, d + lone, count - lone) : 0;
	return r < 0 ? r : runs;
}

static int ignore(struct ndz_net *n, unsigned offset, const uint8_t *values, unsigned count)
{
	struct sock_filter code[4 + 16];
	struct sock_fprog prog;
	unsigned k = 0;

	if (count > 16 || offset > 65000)
		return NDZ_EINVAL;
	/* the program sees the UDP header first (8 bytes), then the payload */
	code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0);
	/* too short to hold the byte: keep it (the reader reports it as malformed) */
	code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 8 + offset + 1, 0,
						 (uint8_t)(count + 1));
	code[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 8 + offset);
	for (unsigned i = 0; i < count; i++)
		code[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, values[i],
							 (uint8_t)(count - i), 0);
	code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
	code[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
	prog.len = (unsigned short)k;
	prog.filter = code;
	if (setsockopt(n->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) != 0)
		return NDZ_ENET;
	return 0;
}

static int recv_one(struct ndz_net *n, void *buf, size_t cap, int timeout_ms, uint32_t *from)
{
	struct pollfd pfd = { .fd = n->fd, .events = POLLIN };
	struct sockaddr_in sin;
	socklen_t sl;
	ssize_t r;
	int pr, waited = 0;

	for (;;) {
		/* Try first: under load a datagram is usually waiting, and poll costs a call. */
		sl = sizeof(sin);
		r = recvfrom(n->fd, buf, cap, MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&sin, &sl);
		if (r >= 0)
			break;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return NDZ_ENET;
		if (waited)
			return 0;
		pr = poll(&pfd, 1, timeout_ms);
		if (pr < 0 && errno != EINTR)
			return NDZ_ENET;
		if (pr <= 0)
			return 0;
		waited = 1;
	}
	*from = sin.sin_addr.s_addr;
	if (r == 0 || (size_t)r > cap)
		return (int)(cap + 1 > 0x7fffffff ? 0x7fffffff : cap + 1); /* caller sees oversize */
	return (int)r;
}

/*
 * What is waiting now, without blocking: the count, or -1 with errno. Each buffer
 * read with GRO on holds datagrams of one length (the last may be shorter), the
 * length the UDP_GRO control message tells; each becomes an entry pointing into it.
 */
static int drain(struct ndz_net *n, struct ndz_dgram *d, unsigned max)
{
	struct mmsghdr mh[PLAIN_SLOTS];
	struct iovec iov[PLAIN_SLOTS];
	struct sockaddr_in sin[PLAIN_SLOTS];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl[PLAIN_SLOTS];
	unsigned msgs = n->gro ? max / 64 : max, k = 0;
	int r;

	if (!n->arena) {
		n->slot = n->gro ? GRO_SLOT : NDZ_NET_DGRAM_MAX;
		n->nslots = n->gro ? GRO_SLOTS : PLAIN_SLOTS;
		if (!(n->arena = malloc(n->slot * n->nslots))) {
			errno = ENOMEM;
			return -1;
		}
	}
	if (msgs < 1)
		msgs = 1;
	if (msgs > n->nslots)
		msgs = n->nslots;
	memset(mh, 0, sizeof(mh[0]) * msgs);
	for (unsigned i = 0; i < msgs; i++) {
		iov[i].iov_base = n->arena + (size_t)i * n->slot;
		iov[i].iov_len = n->slot;
		mh[i].msg_hdr.msg_iov = &iov[i];
		mh[i].msg_hdr.msg_iovlen = 1;
		mh[i].msg_hdr.msg_name = &sin[i];
		mh[i].msg_hdr.msg_namelen = sizeof(sin[i]);
		if (n->gro) {
			mh[i].msg_hdr.msg_control = ctl[i].buf;
			mh[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
		}
	}
	do {
		r = recvmmsg(n->fd, mh, msgs, MSG_DONTWAIT, NULL);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	for (int i = 0; i < r && k < max; i++) {
		const uint8_t *base = n->arena + (size_t)i * n->slot;
		size_t len = mh[i].msg_len, seg = len;
		struct cmsghdr *cm;

		for (cm = n->gro ? CMSG_FIRSTHDR(&mh[i].msg_hdr) : NULL; cm;
		     cm = CMSG_NXTHDR(&mh[i].msg_hdr, cm))
			if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO) {
				int gs;

				memcpy(&gs, CMSG_DATA(cm), sizeof(gs));
				if (gs > 0 && (size_t)gs < len)
					seg = (size_t)gs;
			}
		if ((mh[i].msg_hdr.msg_flags & MSG_TRUNC) || len == 0) {
			/* a truncated datagram (or an empty one) is reported as oversize */
			d[k].data = base;
			d[k].len = NDZ_NET_DGRAM_MAX + 1;
			d[k++].from = sin[i].sin_addr.s_addr;
			continue;
		}
		for (size_t off = 0; off < len && k < max; off += seg) {
			d[k].data = base + off;
			d[k].len = (int)(len - off < seg ? len - off : seg);
			d[k++].from = sin[i].sin_addr.s_addr;
		}
	}
	return (int)k;
}

static int recv_many(struct ndz_net *n, struct ndz_dgram *d, unsigned max, int timeout_ms,
		     unsigned nap_us)
{
	struct pollfd pfd = { .fd = n->fd, .events = POLLIN };
	int r, pr;

	if (!max)
		return 0;
	if ((r = drain(n, d, max)) != 0)
		return r < 0 ? NDZ_ENET : r;
	pr = poll(&pfd, 1, timeout_ms);
	if (pr < 0 && errno != EINTR)
		return NDZ_ENET;
	if (pr <= 0)
		return 0;
	if (nap_us) {
		struct timespec ts = { 0, (long)nap_us * 1000 };

		nanosleep(&ts, NULL);
	}
	r = drain(n, d, max);
	return r < 0 ? NDZ_ENET : r;
}

/* r < 0 from a socket call (errno set): e says what failed on which group. */
static int failed(const struct ndz_net *n, int r, struct ndz_error *e, const char *what)
{
	int sys = errno;
	char a[16];

	if (r >= 0 || !e)
		return r;
	return ndz_error_set(e, r, r == NDZ_ENET ? sys : 0, "multicast group %s port %u: %s",
			     ndz_net_ntoa(n->group.sin_addr.s_addr, a), ntohs(n->group.sin_port),
			     what);
}

int ndz_net_send(struct ndz_net *n, const void *buf, size_t len, struct ndz_error *e)
{
	return failed(n, net_send(n, buf, len), e, "send");
}

int ndz_net_send_many(struct ndz_net *n, const uint8_t *const *bufs, const size_t *lens,
		      unsigned count, struct ndz_error *e)
{
	struct ndz_net_out d[NDZ_NET_SEND_MAX];

	if (count > NDZ_NET_SEND_MAX)
		count = NDZ_NET_SEND_MAX;
	for (unsigned i = 0; i < count; i++)
		d[i] = (struct ndz_net_out){ bufs[i], lens[i], NULL, 0 };
	int r = send_vec(n, d, count);

	return r < 0 ? failed(n, r, e, "send") : 0;
}

int ndz_net_send_vec(struct ndz_net *n, const struct ndz_net_out *d, unsigned count,
		     struct ndz_error *e)
{
	return failed(n, send_vec(n, d, count), e, "send");
}

int ndz_net_ignore(struct ndz_net *n, unsigned offset, const uint8_t *values, unsigned count,
		   struct ndz_error *e)
{
	return failed(n, ignore(n, offset, values, count), e, "socket filter");
}

int ndz_net_recv(struct ndz_net *n, void *buf, size_t cap, int timeout_ms, uint32_t *from,
		 struct ndz_error *e)
{
	return failed(n, recv_one(n, buf, cap, timeout_ms, from), e, "receive");
}

int ndz_net_recv_many(struct ndz_net *n, struct ndz_dgram *d, unsigned max, int timeout_ms,
		      unsigned nap_us, struct ndz_error *e)
{
	return failed(n, recv_many(n, d, max, timeout_ms, nap_us), e, "receive");
}

int ndz_net_gro(const struct ndz_net *n)
{
	return n->gro;
}

uint32_t ndz_net_local(const struct ndz_net *n)
{
	return n->local;
}

unsigned ndz_net_mtu(const struct ndz_net *n)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct ifaddrs *ifa, *i;
	struct ifreq ifr;
	uint32_t local = n->local;
	unsigned mtu = 0;
	int fd;

	if (!local) {
		/* the address the route to the group sends from names the interface */
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return 0;
		if (connect(fd, (const struct sockaddr *)&n->group, sizeof(n->group)) == 0 &&
		    getsockname(fd, (struct sockaddr *)&sin, &sl) == 0)
			local = sin.sin_addr.s_addr;
		close(fd);
	}
	if (!local || getifaddrs(&ifa) != 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	for (i = ifa; i; i = i->ifa_next) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)i->ifa_addr;

		if (a && a->sin_family == AF_INET && a->sin_addr.s_addr == local) {
			snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", i->ifa_name);
			break;
		}
	}
	freeifaddrs(ifa);
	if (ifr.ifr_name[0] && ioctl(n->fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
		mtu = (unsigned)ifr.ifr_mtu;
	return mtu;
}

int ndz_net_rcvbuf(const struct ndz_net *n)
{
	return n->rcvbuf;
}

void ndz_net_free(struct ndz_net *n)
{
	if (!n)
		return;
	close(n->fd);
	free(n->arena);
	free(n);
}
