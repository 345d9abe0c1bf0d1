/*
 * One frisbeed session without the network: packet admission, the client table,
 * the work queue (lib/serve), repair blocks (lib/fec), pacing (lib/pace), the rate
 * from the clients' losses (lib/adapt) and the statistics. The caller feeds it the
 * datagrams it receives (bytes as received, with the sender's address) and the time,
 * and sends the batches of datagrams it yields after the delay it says. No sockets,
 * threads, clock or printing here: its one driver, lib/mcast/sdrive, runs it for
 * frisbeed and for the simulation (test_mcsim) alike; test_server calls it directly.
 *
 * Not thread-safe: the caller serializes every call, with one exception made for a
 * sender that reads and encodes without holding its lock (frisbeed). The sender's
 * calls (plan, chunk_buf, check_chunk, build or build_vec, sent) come from one thread;
 * of those, ndz_server_chunk_buf, ndz_server_check_chunk and the builds touch only the
 * chunk buffer, the repair tables, the caller's batch and what no call of another
 * thread changes, so they may run beside the other calls without the lock.
 *
 * The sender's cycle: ndz_server_plan says what to do next; NDZ_SERVER_LOAD: read
 * the chunk's NDZ_CHUNK_SIZE bytes of the image into ndz_server_chunk_buf and call
 * ndz_server_check_chunk; NDZ_SERVER_SEND: ndz_server_build, wait delay_ns, send the
 * batch's datagrams (all with one call is best), ndz_server_sent; NDZ_SERVER_WAIT:
 * nothing is asked for, wait for a packet that ndz_server_packet says wakes it.
 */
#ifndef NDZ_SERVER_H
#define NDZ_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/io.h"
#include "adapt.h"
#include "net.h"
#include "proto.h"

#define NDZ_SERVER_BATCH 56u           /* blocks of one batch at most: 7 BLOCKS of 8 blocks
                                          (57,484 bytes) or 56 BLOCKs, one GSO send */
_Static_assert(NDZ_SERVER_BATCH <= NDZ_NET_SEND_MAX, "a batch is one ndz_net_send_vec");
#define NDZ_SERVER_WIRE_OVERHEAD 28u   /* IPv4 + UDP headers, counted against the rate */
#define NDZ_SERVER_MAX_CLIENTS 4096u   /* clients the table remembers (all are counted) */

struct ndz_server;

struct ndz_server_opts {
	const char *name;              /* the image's name in messages and JSON; copied */
	struct ndz_join_info info;     /* the image as JOIN_REPLY announces it: uuid, chunks,
					* sizes, idle_timeout (rate_bps is set from the rate) */
	uint32_t orig_version;         /* an original Frisbee image's version, else 0 */
	const uint8_t *manifest;       /* signed manifest served as the chunks after the
					* image's, copied; NULL: none */
	size_t manifest_len;
	const uint8_t *index;          /* content index served as the chunks from
					* ndz_server_index_base on, copied; NULL: none */
	size_t index_len;
	unsigned repair;               /* NDZ_FEAT_* repairs announced and sent; 0 none */
	uint64_t rate_bps;             /* the cap (>= 8000); with auto_rate the most */
	int auto_rate;                 /* find the rate from the clients' losses */
	unsigned burst_pkts;           /* with gap_us: bursts of this many packets instead */
	uint64_t gap_us;               /* between bursts */
	uint32_t lost_ms;              /* a client silent this long before it left is lost;
					* 0: NDZ_SERVER_LOST_MS */
	uint32_t gather_ms;            /* after a quiet spell (nothing sent for
					* NDZ_SERVER_QUIET_MS, or nothing yet), and on a first
					* request for never-sent blocks of the manifest or index,
					* wait this long (or until every client asked) before
					* sending, so that clients that start together share one
					* pass; 0: send at once */
	uint32_t max_payload;          /* the largest UDP payload the interface carries (its
					* MTU less 28); below NDZ_PKT_BLOCKS_LEN(2): BLOCKs only,
					* else BLOCKS of as many blocks as every client takes;
					* one that carries more than a BLOCK (1076 on): SPANs to
					* a group whose every client takes them */
};

#define NDZ_SERVER_LOST_MS 30000u      /* the default: 30 PROGRESS intervals */
#define NDZ_SERVER_GATHER_MS 100u      /* frisbeed's default gather_ms */
#define NDZ_SERVER_QUIET_MS 500u       /* nothing sent this long: the next request gathers */

/* What the server makes of a client (ndz_server_client_state). */
enum ndz_rx_state {
	NDZ_RX_ACTIVE = 0,             /* heard within the lost timeout, not left */
	NDZ_RX_DONE = 1,               /* sent a LEAVE: image complete */
	NDZ_RX_FAILED = 2,             /* sent a LEAVE: failed */
	NDZ_RX_LOST = 3,               /* silent past the lost timeout without a LEAVE */
};

/* A client as the table holds it (the first NDZ_SERVER_MAX_CLIENTS heard). */
struct ndz_server_client {
	uint32_t id;                   /* its client id */
	uint32_t addr;                 /* IPv4 address it last sent from, network order */
	uint64_t first_ns, last_ns;    /* when first and last heard */
	uint64_t asked_ns;             /* when it last asked for something (0: never) */
	int left;                      /* it sent a LEAVE: 1 complete, 2 failed; 0 not yet */
	int reported;                  /* it sent a PROGRESS (or a LEAVE): progress is set */
	struct ndz_progress progress;  /* its last PROGRESS (a LEAVE's figures after it) */
	uint64_t rate_Bps;             /* bytes written per second, from its PROGRESS */
	uint32_t max_payload;          /* the largest datagram it takes (CAPS); 0: unsaid,
					* one block (an older client) */
	uint32_t caps_flags;           /* NDZ_CAPS_* its last CAPS said */
};

/* What frisbeed's statistics line and --stats-json say. */
struct ndz_server_stats {
	uint32_t chunks;               /* chunks of the image (the manifest's not counted) */
	uint64_t clients, joins, leaves;
	uint64_t requests, merged, dropped_current; /* as lib/serve counts them */
	uint64_t blocks_sent, distinct_sent, repairs_sent, whole_sent;
	uint64_t bytes_sent;           /* datagram payload bytes */
	uint64_t bad_packets, bad_version, wrong_image, bad_chunk; /* refused packets */
	double resent_share;           /* share of blocks_sent that were re-sends */
	double seconds_sending;        /* from the first datagram sent to the last */
	double seconds_to_first;       /* from creation to the first datagram sent */
	double seconds_empty;          /* while sending, with nothing asked for */
	double rate_bps;               /* mean rate on the wire while sending */
	uint64_t auto_rate_bps;        /* -W auto: the rate last chosen; 0 otherwise */
	uint64_t datagrams_sent;       /* BLOCKs, BLOCKSes and REPAIRs */
	uint64_t offloaded;            /* of them, sent in segmentation-offload runs (GSO) */
	unsigned group_blocks;         /* blocks a datagram carries now (1: BLOCKs) */
	uint64_t group_up, group_down; /* times that rose (the clients that took fewer left
					* or were lost) and fell (one that takes fewer came) */
	uint64_t range_requests;       /* RANGE_RREQUESTs taken (in requests too) */
	uint64_t range_sent;           /* RANGE_REPAIRs sent (not in repairs_sent) */
	uint64_t range_refused;        /* RANGE_RREQUESTs refused: too many ranges of a chunk */
	uint64_t range_ahead;          /* RANGE_RREQUESTs whose blocks all still went out */
	uint64_t range_cut;            /* range repairs not queued: their blocks still went out */
	uint64_t spans_sent;           /* of datagrams_sent, SPANs */
	unsigned span_size;            /* the bytes of a SPAN now (the group's); 0: none */
	unsigned span_min;             /* the fewest of them any SPANs were sent at; 0: none */
	uint64_t multi_repairs_sent;   /* of datagrams_sent, REPAIRSes (several repairs) */
	uint64_t gathers;              /* holds of gather_ms (a quiet spell's, the index's) */
};

/* Control datagrams to send now, unpaced (a JOIN_REPLY and a FEATURES at most). */
struct ndz_server_reply {
	unsigned count;
	size_t lens[2];
	uint8_t bufs[2][NDZ_PKT_JOIN_REPLY_LEN];
};

/* What ndz_server_plan says to do next. */
enum ndz_server_step {
	NDZ_SERVER_WAIT = 0,           /* nothing to send: wait for requests */
	NDZ_SERVER_LOAD = 1,           /* load the image's chunk batch.chunk, then plan again */
	NDZ_SERVER_SEND = 2,           /* build and send the batch, then ndz_server_sent */
};

/*
 * A batch of datagrams of one chunk, owned by the caller (about 66 KiB: keep one per
 * sender). ndz_server_plan fills chunk, count (blocks and repairs), items, ndgrams
 * (the datagrams they go in: a run of blocks cut into SPANs when the group takes
 * them, else in one BLOCKS when it takes those, else one each) and delay_ns; ndz_server_build fills bufs and lens (ndgrams
 * of each). A control batch (a FEATURES every second while repairs or BLOCKS are
 * on) has control set and its one datagram built already: send it without waiting.
 */
struct ndz_server_batch {
	uint32_t chunk;
	unsigned count;
	unsigned ndgrams;
	uint8_t dg_first[NDZ_SERVER_BATCH], dg_n[NDZ_SERVER_BATCH]; /* a datagram's items */
	/* a SPAN's bytes of the chunk (dg_len 0: not a SPAN); dg_first, dg_n: the items
	 * it touches */
	uint32_t dg_off[NDZ_SERVER_BATCH], dg_len[NDZ_SERVER_BATCH];
	unsigned spans;                /* of ndgrams, SPANs */
	unsigned multi_repairs;        /* of ndgrams, REPAIRSes */
	int control;
	unsigned offloaded;            /* the sender's: datagrams that went in offload runs
					* (ndz_net_send_vec), for the statistics; plan sets 0 */
	uint64_t delay_ns;             /* wait this long from the plan's now_ns, then send */
	uint64_t wire_bytes;           /* the batch's bytes on the wire, for the pacing */
	struct {
		int repair;            /* 0, NDZ_SERVE_SET or NDZ_SERVE_RANGE */
		unsigned block, set, index;
		unsigned first, count; /* NDZ_SERVE_RANGE: the range */
	} items[NDZ_SERVER_BATCH];
	const uint8_t *bufs[NDZ_SERVER_BATCH];
	size_t lens[NDZ_SERVER_BATCH];
	/* ndz_server_build_vec: each datagram as its head and its data where they lie (the
	 * chunk buffer's blocks, or rep), ndgrams of them */
	struct ndz_net_out out[NDZ_SERVER_BATCH];
	uint8_t head[NDZ_SERVER_BATCH][NDZ_PKT_HEAD_MAX];
	/* the datagrams' bytes, one after the other (each holds no more than its blocks
	 * as BLOCKs would) */
	uint8_t pkt[NDZ_SERVER_BATCH][NDZ_PKT_MAX];
	uint8_t rep[NDZ_SERVER_BATCH][NDZ_BLOCK_SIZE];
};

/*
 * ndz_server_create - a session per o at now_ns: nothing asked for, no client.
 * Returns 0 and *out, or NDZ_EINVAL (no chunks, rate below 8000 bits/s, a burst
 * without a gap, auto rate with bursts) or NDZ_ENOMEM, with e saying which; *out is NULL then. Free with ndz_server_free.
 */
int ndz_server_create(const struct ndz_server_opts *o, uint64_t now_ns, struct ndz_server **out,
		      struct ndz_error *e);
/* ndz_server_free - free s; accepts NULL. */
void ndz_server_free(struct ndz_server *s);

/*
 * ndz_server_packet - a datagram of len bytes from addr (IPv4, network order) arrived
 * at now_ns. Admission: a packet that does not decode, of another protocol version,
 * of a server's type (ours looped back, or another server's), a repair request when
 * repairs (of whole chunks) are off, another image's (tag) or a request for a chunk
 * past the image and its manifest is dropped and counted. An admitted packet notes
 * its client, queues what it asks for, tells the rate controller of losses and, for
 * a JOIN, puts the JOIN_REPLY (and FEATURES) to send into *out (count 0 otherwise;
 * out may be NULL only when the caller sends nothing back). p (may be NULL) gets the
 * decoded packet when admitted, for the caller's messages.
 * Returns 2 when admitted and the sender may have new work (wake it), 1 when
 * admitted, 0 when dropped. Infallible: a hostile packet is only counted.
 */
int ndz_server_packet(struct ndz_server *s, const uint8_t *buf, size_t len, uint32_t addr,
		      uint64_t now_ns, struct ndz_server_reply *out, struct ndz_pkt *p);

/*
 * ndz_server_announce - the JOIN_REPLY (to client 0) and FEATURES that announce the
 * session to clients already waiting, into *out.
 */
void ndz_server_announce(struct ndz_server *s, struct ndz_server_reply *out);

/*
 * ndz_server_plan - what the sender does next at now_ns (enum ndz_server_step),
 * filling b. For NDZ_SERVER_SEND the blocks and repairs in b are taken as sent: the
 * next plan goes on from them.
 */
enum ndz_server_step ndz_server_plan(struct ndz_server *s, uint64_t now_ns,
				     struct ndz_server_batch *b);

/* ndz_server_chunk_buf - the NDZ_CHUNK_SIZE bytes to load a chunk into (the server's). */
uint8_t *ndz_server_chunk_buf(struct ndz_server *s);

/*
 * ndz_server_check_chunk - the chunk buffer holds chunk (as read from the image, or
 * read_err a negative NDZ_E* code when the read failed): check it as a client will,
 * with the clients' verifier (lib/trust/verify, no keys): whole, its header and data
 * checksums, its place and the image's UUID (an original image's chunk: its header,
 * version, place and image id; version 1, which no client takes out of order, that
 * it still is one). A file cut or changed
 * while served fails here and is never served. Returns 0, or the code with e saying
 * "NAME: chunk N: why (the file changed while served)".
 */
int ndz_server_check_chunk(struct ndz_server *s, uint32_t chunk, int read_err,
			   struct ndz_error *e);

/*
 * ndz_server_build_vec - b's datagrams as b->out (ndgrams), repairs computed here:
 * each one's head encoded into b->head, its data left where it lies, in the chunk
 * buffer (valid until the next LOAD) or b->rep. For a sender that gathers
 * (ndz_net_send_vec): the blocks are not copied. A control batch's one datagram is
 * whole in out[0].
 */
void ndz_server_build_vec(struct ndz_server *s, struct ndz_server_batch *b);

/* ndz_server_build - ndz_server_build_vec, and each datagram whole in b->bufs, b->lens. */
void ndz_server_build(struct ndz_server *s, struct ndz_server_batch *b);

/* ndz_server_sent - b went out at now_ns: statistics, pacing and the rate controller. */
void ndz_server_sent(struct ndz_server *s, const struct ndz_server_batch *b, uint64_t now_ns);

/*
 * ndz_server_set_rate - a fixed rate of rate_bps from now_ns on (the master dividing
 * its cap): the rate controller and bursts end. 0, or NDZ_EINVAL below 8000 bits/s.
 */
int ndz_server_set_rate(struct ndz_server *s, uint64_t rate_bps, uint64_t now_ns,
			struct ndz_error *e);

/* ndz_server_rate - the rate sent at now (bits/s). */
uint64_t ndz_server_rate(const struct ndz_server *s);

/*
 * ndz_server_rate_step - with the rate controller on, its latest interval's decision
 * into *st when not reported by an earlier call: 1; 0 otherwise.
 */
int ndz_server_rate_step(struct ndz_server *s, struct ndz_adapt_step *st);

/*
 * ndz_server_rate_trace - as ndz_server_rate_step, the decision as one line of text
 * into buf (cap bytes, NUL-terminated, cut to fit): 1; 0 when there is none new.
 */
int ndz_server_rate_trace(struct ndz_server *s, char *buf, size_t cap);

/*
 * ndz_server_idle - whether the session is over at now_ns: nothing queued or being
 * sent and no packet admitted (nor hold) for the idle timeout (never with timeout
 * 0). Once it has said 1 it says 1 from then on: the caller stops serving.
 */
int ndz_server_idle(struct ndz_server *s, uint64_t now_ns);

/*
 * ndz_server_hold - a client was just sent here (the image master answered a GET
 * with this session): 1, and ndz_server_idle says 0 until the idle timeout has
 * passed anew from now_ns; 0 when ndz_server_idle has already said 1 (the session
 * is over: the client must go elsewhere). Called under the same lock as
 * ndz_server_idle, a 1 is never followed by an exit before the client could come.
 */
int ndz_server_hold(struct ndz_server *s, uint64_t now_ns);

/* ndz_server_get_stats - the statistics so far into *st. */
void ndz_server_get_stats(const struct ndz_server *s, struct ndz_server_stats *st);

/*
 * ndz_server_stats_json - st as one line of JSON (with a newline) naming the image
 * name, into buf (cap bytes, NUL-terminated). Returns its length, or NDZ_ERANGE (e
 * set) when cap is too small.
 */
int ndz_server_stats_json(const struct ndz_server_stats *st, const char *name, char *buf,
			  size_t cap, struct ndz_error *e);

/* ndz_server_clients - how many clients the table holds. */
size_t ndz_server_clients(const struct ndz_server *s);
/* ndz_server_client - the i-th client heard into *c: 0, or NDZ_ENOENT past the last (e). */
int ndz_server_client(const struct ndz_server *s, size_t i, struct ndz_server_client *c,
		      struct ndz_error *e);

/* ndz_server_client_state - what c (from ndz_server_client) is at now_ns. */
enum ndz_rx_state ndz_server_client_state(const struct ndz_server *s,
					      const struct ndz_server_client *c, uint64_t now_ns);

/* ndz_server_client_state_name - "active", "done", "failed" or "lost". */
const char *ndz_server_client_state_name(enum ndz_rx_state st);

struct ndz_sessctl_client;

/*
 * ndz_server_states - its clients by state at now_ns into counts (indexed by enum
 * ndz_rx_state, the same numbers as enum ndz_sessctl_rx) and up to max of them, the
 * most recently heard first, into list (what STATUS carries). Returns the entries
 * written (0 also when the list cannot be sorted for want of memory).
 */
size_t ndz_server_states(const struct ndz_server *s, uint64_t now_ns, uint64_t counts[4],
			 struct ndz_sessctl_client *list, size_t max);

/*
 * ndz_server_status_json - the session's status at now_ns as one line of JSON (with a
 * newline) into buf (cap bytes, NUL-terminated): ndz_server_stats_json's fields, then
 * "receivers" (clients active now), "active", "done", "failed", "lost" (counts over
 * the table) and "client_list": per client id, address, state, chunks_done,
 * chunks_total, bytes_written, write_bps (bits/s written, from its PROGRESS), age_s
 * since last heard; the most recently heard first, as many as fit, "clients_listed"
 * saying how many. Returns its length, or NDZ_ERANGE (e set) when not even the counts fit.
 */
int ndz_server_status_json(const struct ndz_server *s, uint64_t now_ns, char *buf, size_t cap,
			   struct ndz_error *e);

/*
 * ndz_server_image - check that img is a whole image (lib/image.h: its size, first and
 * last chunk) and fill o->info (but rate and idle timeout) and o->orig_version from it.
 * 0, or a negative code with e naming the image.
 */
int ndz_server_image(struct ndz_io *img, struct ndz_server_opts *o, struct ndz_error *e);

/*
 * ndz_server_manifest - read the signed manifest to serve with image (o->info.chunks
 * set): the file path, or with path NULL IMAGE.manifest when there is one. The server
 * has no key: the shape is checked, clients check the signature. Returns 0 with
 * o->manifest (the caller's to free) and o->manifest_len set, or left NULL when there
 * is none; 1 when the file found beside the image is not its manifest (none is served;
 * e says why, for a warning); a negative code (e set) for a given path that fails.
 */
int ndz_server_manifest(const char *image, const char *path, struct ndz_server_opts *o,
			struct ndz_error *e);

/*
 * ndz_server_index_base - the first chunk number of the content index on the wire
 * for an image of chunks chunks: right after its manifest's range, whether or not a
 * manifest is served (doc/PROTOCOL.md, "Content index over multicast").
 */
uint32_t ndz_server_index_base(uint32_t chunks);

/*
 * ndz_server_index - read the content index to serve with image (o->info set): the
 * file path, or with path NULL IMAGE.index when there is one. It is decoded and
 * matched against the image (its signature is the clients' to check). Returns 0 with
 * o->index (the caller's to free) and o->index_len set, or left NULL when there is
 * none; 1 when the file found beside the image is not its index (none is served; e
 * says why, for a warning); a negative code (e set) for a given path that fails.
 */
int ndz_server_index(const char *image, const char *path, struct ndz_server_opts *o,
		     struct ndz_error *e);

/* ndz_server_name, ndz_server_info - the image's name and what JOIN_REPLY announces. */
const char *ndz_server_name(const struct ndz_server *s);
const struct ndz_join_info *ndz_server_info(const struct ndz_server *s);

#endif
