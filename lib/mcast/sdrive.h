/*
 * The one driver of the serving session (lib/mcast/server): its lock, its receiving
 * and sending threads and the order of its calls, over a table of I/O (receive,
 * send, read, clock). frisbeed runs it over a multicast socket and the image file
 * (ndz_sdrive_net_io) with its two threads; test_mcsim over a simulated LAN and
 * clock, calling ndz_sdrive_receive and ndz_sdrive_send_step itself. Like e2fsprogs'
 * io_manager: one driver, several tables.
 *
 * The sender's cycle (server.h): plan; LOAD: read the chunk without the lock and
 * check it; SEND: build the batch without the lock, wait until its time, send it,
 * say it went; WAIT: idle until a packet brings work (or 200 ms pass).
 */
#ifndef NDZ_SDRIVE_H
#define NDZ_SDRIVE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/io.h"
#include "net.h"
#include "proto.h"
#include "server.h"

struct ndz_sdrive;

/* The session's I/O. Every function must not call back into the driver. */
struct ndz_sdrive_io {
	/* one datagram into buf (cap bytes), waiting at most timeout_ms: its length, 0 on
	 * timeout, or a negative NDZ_E* code with e set; *from the sender, network order */
	int (*recv)(void *ctx, uint8_t *buf, size_t cap, int timeout_ms, uint32_t *from,
		    struct ndz_error *e);
	/* one control datagram to the group, unpaced: 0 or an errno value */
	int (*send)(void *ctx, const uint8_t *dgram, size_t len);
	/* a batch's datagrams to the group (ndz_net_send_many): 0 or a code with e */
	int (*send_many)(void *ctx, const uint8_t *const *bufs, const size_t *lens,
			 unsigned count, struct ndz_error *e);
	/* NDZ_CHUNK_SIZE bytes of the image's chunk into buf: 0 or a negative code */
	int (*read)(void *ctx, uint8_t *buf, uint32_t chunk);
	/* the monotonic clock in nanoseconds (ndz_now_ns's with threads: pacing sleeps) */
	uint64_t (*now)(void *ctx);
	void *ctx;
	/* a batch's datagrams, each gathered from its head and its data (ndz_net_send_vec):
	 * how many went in offload runs (>= 0) or a code with e. May be NULL: send_many
	 * then gets them whole (a copy) */
	int (*send_vec)(void *ctx, const struct ndz_net_out *d, unsigned count,
			struct ndz_error *e);
};

struct ndz_sdrive_opts {
	struct ndz_sdrive_io io;
	/* told of each admitted packet, without the lock (may be NULL) */
	void (*packet)(void *ctx, const struct ndz_pkt *p, uint32_t from);
	/* told of a batch that could not be sent (may be NULL) */
	void (*warn)(void *ctx, const struct ndz_error *e);
	/* told of each -W auto decision as a line of text, under the lock (may be NULL) */
	void (*trace)(void *ctx, const char *line);
	void *ctx;
};

/*
 * ndz_sdrive_create - a driver of srv (stays the caller's, outlives the driver) per
 * o. 0 and *out (ndz_sdrive_free), or NDZ_EINVAL (a function missing), NDZ_ENOMEM.
 */
int ndz_sdrive_create(struct ndz_server *srv, const struct ndz_sdrive_opts *o,
		      struct ndz_sdrive **out, struct ndz_error *e);
/* ndz_sdrive_free - stop (ndz_sdrive_stop) and free d; NULL ok. */
void ndz_sdrive_free(struct ndz_sdrive *d);

/*
 * ndz_sdrive_start - the receiving and the sending thread. 0, or NDZ_ENOMEM with e.
 * ndz_sdrive_stop - stop them and join them; idempotent.
 */
int ndz_sdrive_start(struct ndz_sdrive *d, struct ndz_error *e);
void ndz_sdrive_stop(struct ndz_sdrive *d);

/*
 * ndz_sdrive_receive - one datagram received (waiting at most timeout_ms) and given
 * to the server; its answers sent, the sender woken when it brings work. Returns 1
 * with *admitted (ndz_server_packet's 0, 1 or 2; may be NULL), 0 when none came, or
 * a negative code with e.
 */
int ndz_sdrive_receive(struct ndz_sdrive *d, int timeout_ms, int *admitted,
		       struct ndz_error *e);

/* What ndz_sdrive_send_step did, and when to call it again. */
enum ndz_sdrive_next {
	NDZ_SDRIVE_AGAIN = 0,          /* at once */
	NDZ_SDRIVE_IDLE = 1,           /* nothing asked for: at *at, or when woken */
	NDZ_SDRIVE_PACE = 2,           /* a batch waits for its time: at *at */
	NDZ_SDRIVE_STOP = 3,           /* a chunk failed its check: ndz_sdrive_fatal */
};

/* ndz_sdrive_send_step - the sender's next move (see above); *at as said. */
enum ndz_sdrive_next ndz_sdrive_send_step(struct ndz_sdrive *d, uint64_t *at);

/* ndz_sdrive_woken - a packet brought the idle sender work since its last plan. */
int ndz_sdrive_woken(struct ndz_sdrive *d);

/* ndz_sdrive_announce - send the announcement (JOIN_REPLY and FEATURES) once. */
void ndz_sdrive_announce(struct ndz_sdrive *d);

/* ndz_sdrive_idle - locked ndz_server_idle at the table's now. */
int ndz_sdrive_idle(struct ndz_sdrive *d);

/* ndz_sdrive_fatal - what stopped a thread into *e: its code, or 0 when none did. */
int ndz_sdrive_fatal(struct ndz_sdrive *d, struct ndz_error *e);

/* ndz_sdrive_stats, ndz_sdrive_status_json - locked server.h calls at the table's now. */
void ndz_sdrive_stats(struct ndz_sdrive *d, struct ndz_server_stats *st);
int ndz_sdrive_status_json(struct ndz_sdrive *d, char *buf, size_t cap, struct ndz_error *e);

/*
 * ndz_sdrive_lock, ndz_sdrive_wake - the lock every call into the server is made
 * under, and the condition the idle sender waits on, for another thread that calls
 * into the server (the image master's control socket, lib/master/sessctl).
 */
pthread_mutex_t *ndz_sdrive_lock(struct ndz_sdrive *d);
pthread_cond_t *ndz_sdrive_wake(struct ndz_sdrive *d);

/*
 * ndz_sdrive_net_io - the table over a multicast socket and an image file, as
 * frisbeed uses it (the clock: CLOCK_MONOTONIC).
 */
struct ndz_sdrive_net {
	struct ndz_net *net;
	struct ndz_io *img;
};
struct ndz_sdrive_io ndz_sdrive_net_io(struct ndz_sdrive_net *n);

#endif
