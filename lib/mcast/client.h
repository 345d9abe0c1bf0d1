/*
 * The whole receiving session of the multicast protocol (doc/PROTOCOL.md) without
 * I/O: joining, the signed manifest's bytes, receiving chunks (blocks, repairs,
 * requests and their timing), giving up, leaving. It is fed the datagrams heard and
 * the time; it sends datagrams through a callback, tells what happens through
 * another, and hands out complete chunks for the caller to check and write. Its one
 * driver is lib/mcast/cdrive (frisbee over sockets and threads, test_mcsim on a
 * simulated LAN and clock); test_client calls it directly. It checks nothing of a chunk's content: that is the caller's trust policy.
 * Not thread-safe: the caller serializes every call.
 */
#ifndef NDZ_CLIENT_H
#define NDZ_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "trust/verify.h"
#include "fetch.h"
#include "proto.h"

struct ndz_client;

enum ndz_client_state {
	NDZ_CLIENT_JOINING,            /* asking until a server answers us */
	NDZ_CLIENT_JOINED,             /* the image is known: fetch the manifest, or start */
	NDZ_CLIENT_MANIFEST,           /* receiving the manifest's bytes */
	NDZ_CLIENT_MANIFEST_READY,     /* they are whole: the caller opens them */
	NDZ_CLIENT_RECEIVING,          /* receiving the image's chunks */
	NDZ_CLIENT_COMPLETE,           /* every chunk checked out (maybe not written yet) */
	NDZ_CLIENT_FAILED,             /* ndz_client_error says why */
	NDZ_CLIENT_INDEX,              /* receiving the content index's bytes */
	NDZ_CLIENT_INDEX_READY,        /* they are whole: the caller decodes them */
};

/* What happened, for the caller's messages (ndz_client_opts.note). */
enum ndz_client_what {
	NDZ_CLIENT_NOTE_JOIN,          /* a JOIN was sent */
	NDZ_CLIENT_NOTE_OTHERS,        /* a server answered another client: asking now */
	NDZ_CLIENT_NOTE_TRAFFIC,       /* a transfer is under way: asking to join now */
	NDZ_CLIENT_NOTE_IGNORED,       /* a JOIN_REPLY we cannot take: from, info, why */
	NDZ_CLIENT_NOTE_JOINED,        /* from, info */
	NDZ_CLIENT_NOTE_REPAIR,        /* the server sends repairs: count is NDZ_FEAT_* */
	NDZ_CLIENT_NOTE_REQUEST,       /* a request for chunk was sent: count is 0 for the
					  whole chunk, else the blocks missing; repairs set */
	NDZ_CLIENT_NOTE_SILENT,        /* the server is silent for ms: asking again */
	NDZ_CLIENT_NOTE_CAPS,          /* CAPS sent: count is the payload we take now,
					  repairs its flags (NDZ_CAPS_*); ms is not 0 when we
					  stepped down (to count: NDZ_PKT_STD_PAYLOAD, or one
					  block) after that long without a large datagram
					  (lost on the way) */
};

struct ndz_client_note {
	int what;                      /* enum ndz_client_what */
	uint32_t from;                 /* a server's address, network order */
	const struct ndz_join_info *info;
	int why;                       /* NOTE_IGNORED: NDZ_ERANGE or NDZ_ETOOSMALL (first of
					  a kind only) */
	uint32_t chunk;
	unsigned count;
	int repairs;
	uint64_t ms;
};

struct ndz_client_opts {
	uint32_t id;                   /* our client id (random) */
	uint32_t server;               /* accept blocks only from this address; 0: from the
					  one whose JOIN_REPLY we take */
	const uint8_t *want_uuid;      /* the image a master named: JOIN_REPLYs of another
					  UUID are dropped (NULL: any); stays the caller's */
	int no_repair;                 /* behave as a client without repairs */
	int no_whole;                  /* as one with stripe repairs only */
	int no_range;                  /* as one without range repairs (never asks for them) */
	int raw;                       /* the image itself goes to the target (room check) */
	int no_store;                  /* keep no block data (simulations): chunks come out
					  with a NULL buffer */
	uint64_t room;                 /* what the target holds; UINT64_MAX: no bound */
	uint32_t max_payload;          /* the largest UDP payload we take (the interface's
					  MTU less 28), said in CAPS to a server that sends
					  BLOCKS or SPANs; below NDZ_PKT_BLOCKS_LEN(2): no
					  BLOCKS; below NDZ_PKT_SPAN_LEN(1056): no SPAN either,
					  nothing said (as an older client) */
	unsigned give_up_s;            /* -T: without the server, or without a chunk that
					  checks out, this long (also the join's bound) */
	size_t slots;                  /* chunk buffers (1 MiB each) */
	unsigned request_ahead;        /* chunks kept requested */
	uint64_t redelay_ns;           /* the re-request delay (ndz_fetch_opts) */
	uint32_t seed;                 /* of the request order */
	struct ndz_bufpool *pool;      /* the image's chunks are received into its buffers
					  (ndz_fetch_opts.pool); NULL: the cache's own */
	const char *group;             /* "ADDR" of the group, and port, in messages */
	unsigned port;
	const char *target;            /* the target's name, in messages */
	/* send one datagram to the group: 0, or an errno value; must not call back */
	int (*send)(void *ctx, const uint8_t *dgram, size_t len);
	/* told what happens (may be NULL); must not call back */
	void (*note)(void *ctx, const struct ndz_client_note *n);
	void *ctx;
};

/* The session's counts (ndz_client_get_stats). */
struct ndz_client_stats {
	struct ndz_fetch_stats fetch;  /* the image's cache (zero before ndz_client_start) */
	uint64_t requests;             /* requests sent */
	uint64_t joins;                /* JOINs sent */
	uint64_t bad;                  /* malformed datagrams, or of a kind we do not take */
	uint64_t bad_version;          /* of another protocol version */
	uint64_t foreign;              /* of another server, image or session */
	uint64_t crc_fail;             /* chunks that failed their checksum (ndz_client_verdict) */
	uint64_t forged;               /* forged chunks and manifests */
	uint64_t multi;                /* BLOCKS received (datagrams of several blocks) */
	uint64_t spans;                /* SPANs received */
	uint64_t multi_repairs;        /* REPAIRSes received (datagrams of several repairs) */
	uint32_t held;                 /* chunks the target held (ndz_client_have) */
	uint64_t range_requests;       /* of requests, RANGE_RREQUESTs */
	uint64_t steps_std;            /* step-downs to a standard MTU's payload (SPANs of
					  1440 bytes; NDZ_PKT_STD_PAYLOAD) */
	uint64_t steps_block;          /* step-downs to one block a datagram */
};

/*
 * ndz_client_create - a session per o, begun at now_ns, in state JOINING (its first
 * JOIN goes at the first ndz_client_tick). Returns 0 and *out (ndz_client_free),
 * NDZ_EINVAL (no send callback) or NDZ_ENOMEM, with e (may be NULL) saying so.
 * o's strings and want_uuid stay the caller's and must outlive the session.
 */
int ndz_client_create(const struct ndz_client_opts *o, uint64_t now_ns,
		      struct ndz_client **out, struct ndz_error *e);
/* ndz_client_free - free c with its caches; accepts NULL. */
void ndz_client_free(struct ndz_client *c);

/* ndz_client_state - where the session is (enum ndz_client_state). */
int ndz_client_state(const struct ndz_client *c);
/* ndz_client_error - why it failed (clear otherwise); c's, valid until it is freed. */
const struct ndz_error *ndz_client_error(const struct ndz_client *c);

/*
 * ndz_client_input - a datagram of len bytes from address from (network order) was
 * heard at now_ns. Malformed ones and those of others are counted and dropped.
 * Returns how many chunks became ready (ndz_client_ready): 0 or 1.
 */
int ndz_client_input(struct ndz_client *c, const uint8_t *buf, size_t len, uint32_t from,
		     uint64_t now_ns);
/* ndz_client_input_pkt - as ndz_client_input, for a packet already decoded. */
int ndz_client_input_pkt(struct ndz_client *c, const struct ndz_pkt *p, uint32_t from,
			 uint64_t now_ns);

/*
 * ndz_client_tick - what is due at now_ns: a JOIN again (backing off from 0.5 s to
 * 2 s, at once when a transfer is heard), requests (looked at every 5 ms and when
 * the server moves on; when the server has been silent for 40 ms, everything again,
 * backing off to 2 s), and the -T bounds, which fail the session. Call it after
 * each batch of input and at least every 20 ms. Returns the state.
 */
int ndz_client_tick(struct ndz_client *c, uint64_t now_ns);

/* ndz_client_info, ndz_client_server - the joined image, and its server's address. */
const struct ndz_join_info *ndz_client_info(const struct ndz_client *c);
uint32_t ndz_client_server(const struct ndz_client *c);
/* ndz_client_source - "server ADDR", the image in messages (after the join). */
const char *ndz_client_source(const struct ndz_client *c);

/*
 * ndz_client_fetch_manifest - in state JOINED: receive the len bytes that follow the
 * image's chunks (its signed manifest, doc/PROTOCOL.md) until they are whole (state
 * MANIFEST_READY). The session fails when the server sends none of it within -T (at
 * most 10 s) of silence, or within -T. Returns 0, NDZ_EINVAL (not JOINED, len 0 or
 * more chunks than an image has) or NDZ_ENOMEM, with e (may be NULL) saying so.
 */
int ndz_client_fetch_manifest(struct ndz_client *c, size_t len, uint64_t now_ns,
			      struct ndz_error *e);
/* ndz_client_manifest - in MANIFEST_READY: the bytes (c's) and their length. */
const uint8_t *ndz_client_manifest(const struct ndz_client *c, size_t *len);
/*
 * ndz_client_manifest_verdict - the caller opened the bytes: good (state JOINED), or
 * forged: fetched again (0) unless -T is over since the fetch began: NDZ_ETIMEDOUT
 * (the caller fails with its reason); NDZ_EINVAL when not in MANIFEST_READY,
 * NDZ_ENOMEM (the session fails); e (may be NULL) says which.
 */
int ndz_client_manifest_verdict(struct ndz_client *c, int good, uint64_t now_ns,
				struct ndz_error *e);

/*
 * ndz_client_index_base - the first chunk number of an image's content index on the
 * wire (doc/PROTOCOL.md, "Content index over multicast"): right after the range of
 * its manifest's chunks, whether or not a manifest is served, from its chunk count.
 */
uint32_t ndz_client_index_base(uint32_t chunks);

/*
 * ndz_client_index_size - told the first bytes of an index (a whole chunk's, or
 * fewer), the index's total length in bytes; 0 when they are not an index's.
 */
typedef uint64_t (*ndz_client_index_size)(const uint8_t *first, size_t len);

/*
 * ndz_client_fetch_index - in state JOINED: receive the image's content index (the
 * bytes the server serves from ndz_client_index_base on): its first block, whose
 * bytes size() tells the total length of (at most max bytes), then the blocks the
 * index fills, not the padding of its last chunk (state INDEX, then INDEX_READY). A server that serves none (an older frisbeed, or no
 * index beside the image) never answers: after 2 s without a block of it (or -T,
 * if shorter), or first bytes that are not an index's, the session goes back to
 * JOINED without one (the caller restores in full). Returns 0, NDZ_EINVAL (not
 * JOINED, no size function) or NDZ_ENOMEM, with e (may be NULL) saying so.
 */
int ndz_client_fetch_index(struct ndz_client *c, ndz_client_index_size size, uint64_t max,
			   uint64_t now_ns, struct ndz_error *e);
/* ndz_client_index - in INDEX_READY: the bytes (c's) and their length; else NULL. */
const uint8_t *ndz_client_index(const struct ndz_client *c, size_t *len);
/*
 * ndz_client_index_done - the caller took what it needs of the index: its bytes are
 * freed, the state is JOINED again. 0, or NDZ_EINVAL (not INDEX_READY) with e.
 */
int ndz_client_index_done(struct ndz_client *c, struct ndz_error *e);

/*
 * ndz_client_have - the target already holds chunk (a seeded restore): in JOINED
 * (from the join on, before ndz_client_start) or RECEIVING, it is never requested
 * and counts as complete and written without being handed out (a chunk already
 * complete and with the caller is not taken). When every chunk is, the state is
 * COMPLETE. Returns 1 when chunk was taken as held, 0 when not (out of range, done,
 * with the caller, or in another state).
 */
int ndz_client_have(struct ndz_client *c, uint32_t chunk, uint64_t now_ns);

/*
 * ndz_client_needs - chunk is still to come: not held, not complete, not written
 * (a seed scan reads only those; a chunk the server is sending anyway is not re-read
 * once it has come). 0 past the image or before the join.
 */
int ndz_client_needs(const struct ndz_client *c, uint32_t chunk);

/*
 * ndz_client_scan - a seed scan walking the chunks in order has decided (held or
 * not) every chunk below front: chunks at or past it are not asked for until it
 * passes them, so that the server sends only what the target lacks. UINT32_MAX: no
 * scan (as at creation), or it ended; every chunk may be asked for. The scan's
 * progress counts as the server's for the -T bound.
 */
void ndz_client_scan(struct ndz_client *c, uint32_t front, uint64_t now_ns);

/*
 * ndz_client_scan_next - for a seed scan: a chunk at or past its front that others'
 * blocks came for (ndz_fetch_deferred), to decide next, out of order, so that the
 * blocks are kept when the target lacks them (not dropped, then asked for again);
 * UINT32_MAX when there is none (or no scan, or not RECEIVING).
 */
uint32_t ndz_client_scan_next(struct ndz_client *c);
/*
 * ndz_client_scanned - the seed scan decided chunk out of order (after its
 * ndz_client_have or ndz_client_want, if any): it is not deferred any longer, though
 * at or past the front. The scan's progress counts as the server's, as
 * ndz_client_scan. 1, or 0 (out of range, or no memory for the bitmap, chunks / 8
 * bytes: it stays deferred until the front passes it).
 */
int ndz_client_scanned(struct ndz_client *c, uint32_t chunk, uint64_t now_ns);

/*
 * ndz_client_want - the target holds chunk but for some pieces (a seeded restore,
 * issue 32): receive only the blocks in blocks (NDZ_BITMAP_BYTES, copied) of it,
 * asked for by PREQUEST; it is handed out (ndz_client_ready) once those came, and
 * ndz_client_slot_want tells the caller to patch the target with them rather than
 * check and write a chunk. A chunk already filling as a whole one keeps the blocks
 * it holds (ndz_fetch_want). From the join on, before or after ndz_client_start.
 * 1 when taken, 0 when not (no blocks, out of range, done or with the caller, no
 * memory: it comes whole).
 */
int ndz_client_want(struct ndz_client *c, uint32_t chunk, const uint8_t *blocks);
/* ndz_client_slot_want - of a slot ndz_client_ready gave: its wanted blocks, or NULL */
const uint8_t *ndz_client_slot_want(const struct ndz_client *c, int slot);
/*
 * ndz_client_whole - the chunk in slot, received in part, is needed whole after all
 * (the target differs from what the scan saw): the blocks received are kept, the rest
 * asked for at once, and it comes out again as a whole chunk.
 */
void ndz_client_whole(struct ndz_client *c, int slot);

/*
 * ndz_client_start - in state JOINED: receive the image's chunks from now_ns on (-T
 * runs from here). Returns 0, NDZ_EINVAL (not JOINED) or NDZ_ENOMEM, with e.
 */
int ndz_client_start(struct ndz_client *c, uint64_t now_ns, struct ndz_error *e);

/*
 * ndz_client_ready - the next complete chunk for the caller to check: returns its
 * slot with *chunk and *buf (NDZ_CHUNK_SIZE bytes, c's, NULL with no_store), or -1
 * when none is. Nothing more is stored in that buffer until the verdict.
 */
int ndz_client_ready(struct ndz_client *c, uint32_t *chunk, uint8_t **buf);

/*
 * ndz_client_verdict - the chunk in slot (from ndz_client_ready) was checked at
 * now_ns: how (the verifier's verdict, trust/verify.h), why (the code the check
 * failed with), intact (its buffer is as received, not decrypted in part). ACCEPT:
 * it goes to be written (call ndz_client_written after); when every chunk has, the
 * state is COMPLETE. DAMAGED or FORGED: fetched again, the blocks in doubt only
 * when intact (returns ndz_fetch_retry's 1 or 2, else 0); with -T of such and none
 * accepted the session fails.
 * FATAL: dropped (the caller stops). Returns 0 but as said.
 */
int ndz_client_verdict(struct ndz_client *c, int slot, enum ndz_verdict how, int why,
		       int intact, uint64_t now_ns);
/*
 * ndz_client_take_buf - after an ACCEPT verdict: the chunk's buffer, now the caller's
 * (give it back to opts.pool, e.g. through ndz_unzip_put_owned; without a pool,
 * free it), so that it goes on without a copy. NULL with no_store.
 */
uint8_t *ndz_client_take_buf(struct ndz_client *c, int slot);
/* ndz_client_written - the accepted chunk in slot is written: its slot is free. */
void ndz_client_written(struct ndz_client *c, int slot);

/*
 * ndz_client_leave - send LEAVE with the session's figures at now_ns; status 0: the
 * image is complete, 1: failed. Returns 0 or NDZ_ENET with e (may be NULL).
 */
int ndz_client_leave(struct ndz_client *c, int status, uint64_t now_ns, struct ndz_error *e);

void ndz_client_get_stats(const struct ndz_client *c, struct ndz_client_stats *st);

#endif
