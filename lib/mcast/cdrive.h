/*
 * The one driver of the receiving session (lib/mcast/client): its lock, its
 * checking thread and the order of its calls, over a table of I/O (receive, send,
 * clock) and a chunk sink (check, write). frisbee runs it over a multicast socket
 * (ndz_cdrive_net_io) with a checking thread; test_mcsim over a simulated LAN and
 * clock, each chunk checked and written inline. Like e2fsprogs' io_manager: one
 * driver, several tables.
 *
 * Threads: the caller's (ndz_cdrive_run, ndz_cdrive_step), the checker's (with
 * opts.threaded, from ndz_cdrive_start to ndz_cdrive_stop) and any of the caller's
 * own (a seed scan) through the calls marked "locked". Every call into the session
 * is made under the driver's lock; check and write run without it.
 */
#ifndef NDZ_CDRIVE_H
#define NDZ_CDRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "trust/verify.h"
#include "client.h"
#include "net.h"

struct ndz_cdrive;

/* The session's I/O. Every function must not call back into the driver. */
struct ndz_cdrive_io {
	/*
	 * up to max datagrams into d[]: those waiting, else the first within timeout_ms
	 * (0: none waiting is no wait) and after nap_us what gathered (ndz_net_recv_many).
	 * Returns how many, 0 on timeout, or a negative NDZ_E* code with e set.
	 */
	int (*recv)(void *ctx, struct ndz_dgram *d, unsigned max, int timeout_ms,
		    unsigned nap_us, struct ndz_error *e);
	/* one datagram to the group: 0, or an errno value */
	int (*send)(void *ctx, const uint8_t *dgram, size_t len);
	/* the monotonic clock in nanoseconds */
	uint64_t (*now)(void *ctx);
	void *ctx;
};

/* Where complete chunks go. Called without the lock; must not call back. */
struct ndz_cdrive_sink {
	/*
	 * check a complete chunk (buf NDZ_CHUNK_SIZE bytes, NULL with no_store; it may be
	 * decrypted in place): the verdict (trust/verify.h), *h its header, *why the
	 * code a check failed with, *intact 0 when buf was changed. FATAL stops the load.
	 */
	enum ndz_verdict (*check)(void *ctx, uint8_t *buf, uint32_t chunk,
				  struct ndz_chunk_hdr *h, int *why, int *intact);
	/*
	 * write an accepted chunk: buf (and h from check) are the sink's from here on
	 * (give buf back to the session's pool); 0, or < 0: the load fails (the sink
	 * keeps its reason).
	 */
	int (*write)(void *ctx, uint32_t chunk, uint8_t *buf, const struct ndz_chunk_hdr *h);
	/* told of a chunk fetched again (may be NULL): how, why, and ndz_client_verdict's
	 * answer (1: the blocks in doubt, 2: each block compared with this copy) */
	void (*refetch)(void *ctx, uint32_t chunk, enum ndz_verdict how, int why, int partial);
	/* told the session's counts after each batch while receiving (may be NULL) */
	void (*progress)(void *ctx, const struct ndz_client_stats *st);
	void *ctx;
	/*
	 * patch the target with a chunk received in part (ndz_cdrive_want; may be NULL:
	 * such a chunk is fetched whole): buf holds the chunk's blocks set in blocks (the
	 * others are not its bytes). NDZ_CDRIVE_PATCHED: done, it counts as written;
	 * NDZ_CDRIVE_PATCH_WHOLE: those blocks are not enough, receive the rest;
	 * NDZ_CDRIVE_PATCH_BAD: they are damaged (*why), receive them again; another
	 * value: the load fails (the sink keeps its reason).
	 */
	int (*patch)(void *ctx, uint32_t chunk, const uint8_t *buf, const uint8_t *blocks,
		     int *why);
};
#define NDZ_CDRIVE_PATCHED 0
#define NDZ_CDRIVE_PATCH_WHOLE 1
#define NDZ_CDRIVE_PATCH_BAD 2

struct ndz_cdrive_opts {
	struct ndz_cdrive_io io;
	struct ndz_cdrive_sink sink;
	int threaded;                  /* check and write on the driver's thread (else
					  inline, in ndz_cdrive_step) */
	unsigned batch;                /* datagrams taken at once; 0: NDZ_NET_BATCH_MAX */
};

/*
 * ndz_cdrive_create - a session per co (its send is the table's: co->send and
 * co->ctx are ignored) driven per o, begun at io.now. Returns 0 and *out
 * (ndz_cdrive_free), or as ndz_client_create, with e.
 */
int ndz_cdrive_create(const struct ndz_client_opts *co, const struct ndz_cdrive_opts *o,
		      struct ndz_cdrive **out, struct ndz_error *e);
/* ndz_cdrive_free - stop (ndz_cdrive_stop) and free d with its session; NULL ok. */
void ndz_cdrive_free(struct ndz_cdrive *d);

/*
 * ndz_cdrive_client - the session, for the calls the driver does not wrap (info,
 * manifest, index): from the caller's thread while no checking thread runs (before
 * ndz_cdrive_start, after ndz_cdrive_stop); never from the sink's callbacks.
 */
struct ndz_client *ndz_cdrive_client(struct ndz_cdrive *d);

/*
 * ndz_cdrive_step - one round: up to a batch of datagrams received (waiting at most
 * timeout_ms), fed to the session, the time given (ndz_client_tick); without a
 * checking thread, every complete chunk checked and written. Returns the state, or
 * a negative NDZ_E* code with e set when receiving failed.
 */
int ndz_cdrive_step(struct ndz_cdrive *d, int timeout_ms, struct ndz_error *e);

/*
 * ndz_cdrive_run - rounds (20 ms at most each) while the session is in state and
 * the sink has not failed. Returns the state it left for, or a negative NDZ_E* code
 * with e set when receiving failed.
 */
int ndz_cdrive_run(struct ndz_cdrive *d, int state, struct ndz_error *e);

/*
 * ndz_cdrive_start - in JOINED: receive the image's chunks (ndz_client_start) and,
 * with opts.threaded, start the checking thread. 0, or a negative code with e.
 */
int ndz_cdrive_start(struct ndz_cdrive *d, struct ndz_error *e);

/*
 * ndz_cdrive_stop - no more chunks are checked or written: abandon 0 lets the
 * checking thread write what is complete and checked first, 1 drops it. Joins the
 * thread. Idempotent.
 */
void ndz_cdrive_stop(struct ndz_cdrive *d, int abandon);

/* ndz_cdrive_failed - the sink failed (a FATAL verdict, a write, ndz_cdrive_fail). */
int ndz_cdrive_failed(struct ndz_cdrive *d);
/* ndz_cdrive_fail - locked: the load fails (the caller keeps its reason). */
void ndz_cdrive_fail(struct ndz_cdrive *d);

/* Locked calls for the caller's other threads (a seed scan), as client.h's. */
void ndz_cdrive_scan(struct ndz_cdrive *d, uint32_t front);
/* ndz_client_scan_next, or UINT32_MAX when the load is stopping or failed */
uint32_t ndz_cdrive_scan_next(struct ndz_cdrive *d);
int ndz_cdrive_scanned(struct ndz_cdrive *d, uint32_t chunk);
/* ndz_client_needs, or -1 when the load is stopping or failed */
int ndz_cdrive_needs(struct ndz_cdrive *d, uint32_t chunk);
int ndz_cdrive_have(struct ndz_cdrive *d, uint32_t chunk);
/* ndz_client_want, or 0 when the load is stopping or failed */
int ndz_cdrive_want(struct ndz_cdrive *d, uint32_t chunk, const uint8_t *blocks);
/* ndz_cdrive_state, ndz_cdrive_stats - locked ndz_client_state, ndz_client_get_stats */
int ndz_cdrive_state(struct ndz_cdrive *d);
void ndz_cdrive_stats(struct ndz_cdrive *d, struct ndz_client_stats *st);

/*
 * ndz_cdrive_leave - after ndz_cdrive_stop: LEAVE with status (0 complete, 1 failed).
 * 0 or NDZ_ENET with e.
 */
int ndz_cdrive_leave(struct ndz_cdrive *d, int status, struct ndz_error *e);

/*
 * ndz_cdrive_net_io - the table over a multicast socket (ndz_net) and CLOCK_MONOTONIC,
 * as frisbee uses it.
 */
struct ndz_cdrive_io ndz_cdrive_net_io(struct ndz_net *n);

#endif
