/*
 * The sending side of the multicast protocol without the network: the FIFO work
 * queue of chunk requests, how requests merge, what to send next and which blocks
 * were ever sent. frisbeed feeds it the requests it hears and sends the blocks it
 * chooses. Holds no lock and reads no clock: not thread-safe, the caller
 * serializes every call (frisbeed: under its lock).
 *
 * The queue holds each chunk at most once, with a bitmap of its wanted blocks; one
 * entry per chunk is allocated up front, so a request is never lost for memory.
 * The chunk being sent (the current chunk) has its own bitmap and a position: the
 * next block the sender looks at. Blocks at or past the position are "ahead".
 *
 * Repair blocks (lib/fec.h): a queue entry also holds how many repairs of each
 * set (the 8 stripes and the whole chunk) are wanted, sent after the chunk's data
 * blocks, round robin over the sets. Any repair heals any one loss in its set, so
 * requests for repairs merge by taking the largest count per set, and each repair
 * sent is one no client has seen: the server keeps, per chunk and set, the next
 * index.
 */
#ifndef NDZ_SERVE_H
#define NDZ_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "fec.h"

struct ndz_serve;

struct ndz_serve_stats {
	uint64_t requests;             /* requests accepted (REQUEST and PREQUEST) */
	uint64_t merged;               /* requests merged into a queued or the current chunk */
	uint64_t dropped_current;      /* requests for the current chunk not queued (see request) */
	uint64_t blocks_sent;          /* blocks sent, re-sends included */
	uint64_t repairs_sent;         /* repair blocks sent */
	uint64_t whole_sent;           /* of which whole-chunk repairs */
	uint64_t distinct_sent;        /* blocks sent at least once */
	uint64_t range_requests;       /* of the requests, for range repairs */
	uint64_t range_sent;           /* range repairs sent (not in repairs_sent) */
	uint64_t range_ahead;          /* of range_requests, those whose blocks all still
					* go out (this pass's rest or the queue): no repair */
	uint64_t range_cut;            /* repairs not queued, their blocks still going out */
};

/*
 * Range repairs (lib/fec.h, doc/PROTOCOL.md "Range repairs"): per chunk at most this
 * many block ranges have repairs wanted at once, each with its own count (merged by
 * the largest, as a set's) and next index; they go round robin with the sets'.
 */
#define NDZ_SERVE_RANGES NDZ_FEC_RANGES_MAX

/* ndz_serve_create - a server state for an image of chunks (>= 1) chunks, queue empty,
 * nothing sent; NDZ_EINVAL for 0 chunks, NDZ_ENOMEM (e may be NULL). *out is NULL on
 * error. */
int ndz_serve_create(uint32_t chunks, struct ndz_serve **out, struct ndz_error *e);
/* ndz_serve_free - free s; accepts NULL. */
void ndz_serve_free(struct ndz_serve *s);

/*
 * ndz_serve_request - a REQUEST for count blocks of chunk from block first.
 * The blocks still ahead of the sender join the current chunk when it is chunk;
 * a whole-chunk REQUEST (first 0, count NDZ_BLOCKS_PER_CHUNK) for the current
 * chunk then stops there (dropped_current): the requester gets those blocks now
 * and asks for the part it missed with a PREQUEST when the server moves on;
 * usually it is a client lagging behind its own socket buffer, which holds the
 * earlier blocks already. Otherwise as ndz_serve_prequest.
 * Returns 1 when the chunk was newly queued (a waiting sender has work), 0 when
 * the request merged or was dropped, NDZ_EINVAL for chunk or block range out of
 * range (nothing changes, not counted), with e (may be NULL: the hot path) saying so.
 */
int ndz_serve_request(struct ndz_serve *s, uint32_t chunk, unsigned first, unsigned count,
		      struct ndz_error *e);

/*
 * ndz_serve_prequest - a PREQUEST for the blocks in bits (NDZ_BITMAP_BYTES) of
 * chunk. When chunk is the current chunk, its blocks ahead of the sender join it;
 * if none is left over, the request stops there (dropped_current). What is left
 * (blocks behind the sender, or every block when chunk is not current) is OR-ed
 * into the chunk's queue entry (merged) or queued as a new entry at the tail;
 * merged is counted once per request, also when only the current chunk took
 * blocks. Returns as ndz_serve_request.
 */
int ndz_serve_prequest(struct ndz_serve *s, uint32_t chunk, const uint8_t *bits,
		       struct ndz_error *e);

/*
 * ndz_serve_repairs - a request (RREQUEST) for need[s] more repairs of each set s
 * of chunk (NDZ_FEC_SETS counts, not all 0; a stripe's at most NDZ_FEC_K), each taken as
 * at most NDZ_FEC_ASK_MAX (what clients ask for at most). For the current
 * chunk the counts still to send become at least need (merged; every repair still
 * to come is new to the requester); for a queued chunk likewise (merged); else the
 * chunk is queued at the tail with only these repairs. Returns as ndz_serve_request.
 */
int ndz_serve_repairs(struct ndz_serve *s, uint32_t chunk, const uint8_t *need,
		      struct ndz_error *e);

/*
 * ndz_serve_range - a RANGE_RREQUEST for asked more range repairs of blocks [first,
 * first + count) of chunk, taken as at most NDZ_FEC_ASK_MAX and count. Merged as
 * ndz_serve_repairs merges a set's count, per (chunk, range). NDZ_EINVAL (counted by
 * the caller) for a chunk or range out of range, asked 0, or a chunk with repairs of
 * NDZ_SERVE_RANGES other ranges wanted already. Returns as ndz_serve_request.
 */
int ndz_serve_range(struct ndz_serve *s, uint32_t chunk, unsigned first, unsigned count,
		    unsigned asked, struct ndz_error *e);

/*
 * ndz_serve_next_chunk - the current chunk is done: take the queue's head as the
 * current chunk, its position at block 0. Returns that chunk (>= 0), or -1 when the
 * queue is empty (nothing current then).
 */
int64_t ndz_serve_next_chunk(struct ndz_serve *s);

/* What to send next: a data block, a repair index of set (stripe or NDZ_FEC_WHOLE),
 * or (repair NDZ_SERVE_RANGE) range repair index of blocks [first, first + count). */
#define NDZ_SERVE_SET   1
#define NDZ_SERVE_RANGE 2
struct ndz_serve_item {
	int repair;                    /* 0 data, NDZ_SERVE_SET, NDZ_SERVE_RANGE */
	unsigned block;                /* data: the block */
	unsigned stripe, index;        /* repair: its set and index; a range's: index */
	unsigned first, count;         /* NDZ_SERVE_RANGE: the range */
};

/*
 * ndz_serve_next - what to send next of the current chunk: its next wanted block
 * at or past the position (the position moves past it, so a request for it from
 * now on is behind the sender), and when no block is left, its wanted repairs,
 * one set after another. Returns 1 with *it filled, or 0 when nothing is left:
 * the current chunk is done (nothing current; call ndz_serve_next_chunk).
 */
int ndz_serve_next(struct ndz_serve *s, struct ndz_serve_item *it);

/*
 * ndz_serve_sent - block of chunk went out: counts blocks_sent, and distinct_sent
 * the first time. Returns 1 the first time, 0 for a re-send, NDZ_EINVAL out of range
 * (e may be NULL).
 */
int ndz_serve_sent(struct ndz_serve *s, uint32_t chunk, unsigned block, struct ndz_error *e);

/*
 * ndz_serve_repair_sent - a repair of set (stripe or NDZ_FEC_WHOLE) of chunk went
 * out: counts repairs_sent (and whole_sent). 0, or NDZ_EINVAL out of range (e may be NULL).
 */
int ndz_serve_repair_sent(struct ndz_serve *s, uint32_t chunk, unsigned stripe,
			  struct ndz_error *e);

/* ndz_serve_range_sent - a range repair of chunk went out: counts range_sent. 0, or
 * NDZ_EINVAL out of range (e may be NULL). */
int ndz_serve_range_sent(struct ndz_serve *s, uint32_t chunk, struct ndz_error *e);

/*
 * ndz_serve_current - the current chunk, or -1; when there is one, *pos (if not
 * NULL) is its position and bits (if not NULL) receives its wanted blocks.
 */
int64_t ndz_serve_current(const struct ndz_serve *s, unsigned *pos, uint8_t *bits);

/*
 * ndz_serve_queued - the i-th queue entry from the head: 0 with *chunk and bits
 * (if not NULL) filled, NDZ_ENOENT past the tail (e may be NULL).
 */
int ndz_serve_queued(const struct ndz_serve *s, size_t i, uint32_t *chunk, uint8_t *bits,
		     struct ndz_error *e);

/* ndz_serve_busy - whether anything is queued or being sent. */
int ndz_serve_busy(const struct ndz_serve *s);

/* ndz_serve_ever - whether block of chunk was ever sent (0 out of range). */
int ndz_serve_ever(const struct ndz_serve *s, uint32_t chunk, unsigned block);

/* ndz_serve_get_stats - the counters so far into *st. */
void ndz_serve_get_stats(const struct ndz_serve *s, struct ndz_serve_stats *st);

#endif
