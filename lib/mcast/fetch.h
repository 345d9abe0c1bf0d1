/*
 * The receiving side of the multicast protocol without the network: a cache of
 * partly received chunks and the choice of what to request, and when. frisbee
 * feeds it the BLOCKs and requests it hears and sends the requests it emits.
 * Not thread-safe: the caller serializes every call.
 */
#ifndef NDZ_FETCH_H
#define NDZ_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/bufpool.h"
#include "core/err.h"
#include "proto.h"

struct ndz_fetch;

struct ndz_fetch_opts {
	uint32_t chunks;               /* chunks in the image, at least 1 */
	size_t slots;                  /* chunk buffers (1 MiB each), at least 1 */
	unsigned request_ahead;        /* new chunks kept requested, at least 1 */
	uint64_t redelay_ns;           /* no request for a chunk anyone asked for this recently */
	uint32_t seed;                 /* of the random order new chunks are requested in */
	struct ndz_bufpool *pool;      /* chunk buffers come from here (NDZ_CHUNK_SIZE each;
					  stays the caller's, outlives the cache); NULL:
					  the cache allocates its own */
};

struct ndz_fetch_stats {
	uint64_t blocks;               /* blocks stored */
	uint64_t dups;                 /* blocks already held (or of chunks done) */
	uint64_t no_room;              /* blocks dropped: every slot taken */
	uint64_t repairs;              /* repair blocks stored */
	uint64_t decoded;              /* blocks rebuilt from repairs */
	uint32_t complete;             /* chunks accepted (handed on for writing) */
	uint32_t partial;              /* of those, chunks wanted in part (ndz_fetch_set_want) */
	uint64_t partial_blocks;       /* the blocks those wanted */
	uint32_t done;                 /* chunks written (slots given back) */
	uint64_t range_repairs;        /* of repairs, range repairs stored */
	uint64_t range_decoded;        /* of decoded, blocks rebuilt from range repairs */
	uint64_t held_back;            /* blocks of deferred chunks held back, not dropped
					  (ndz_fetch_release) */
};

/*
 * emit_range - called by ndz_fetch_requests for each range request to send (a
 * RANGE_RREQUEST): wanted (1..NDZ_FEC_ASK_MAX, <= count) range repairs of blocks
 * [first, first + count) of chunk.
 */
typedef void (*ndz_fetch_emit_range)(void *ctx, uint32_t chunk, unsigned first, unsigned count,
				     unsigned wanted);

/*
 * emit - called by ndz_fetch_requests for each request to send: the whole chunk
 * when missing and need are NULL; else missing is the bitmap (NDZ_BITMAP_BYTES)
 * of blocks still lacking (PREQUEST), or need the number of repairs each set
 * still lacks (NDZ_FEC_SETS counts: the stripes', then the whole chunk's; RREQUEST).
 */
typedef void (*ndz_fetch_emit)(void *ctx, uint32_t chunk, const uint8_t *missing,
			       const uint8_t *need);

/*
 * ndz_fetch_check_join - whether the image a JOIN_REPLY announces can be restored to
 * a target of room bytes (UINT64_MAX: no bound, e.g. a file made at the image's
 * size): 0; NDZ_ERANGE when no image could have that many chunks for its source size
 * (every chunk but the last covers at least one sector, doc/FORMAT.md: at most
 * max(1, ceil(source_bytes / 512)) chunks); NDZ_ETOOSMALL when the target cannot
 * hold what is written (source_bytes, or with raw the image itself); e (may be NULL)
 * says which. A client checks this before it makes a cache for that many chunks.
 */
int ndz_fetch_check_join(const struct ndz_join_info *info, uint64_t room, int raw,
			 struct ndz_error *e);

/*
 * ndz_fetch_create - a cache per o: 0 and *out (ndz_fetch_free), or NDZ_EINVAL for
 * bad options, NDZ_ENOMEM, with e (may be NULL) saying so. It costs a bit per chunk
 * (and the kernel gives the pages only as chunks are written), and memory per chunk
 * only for the chunks on their way.
 */
int ndz_fetch_create(const struct ndz_fetch_opts *o, struct ndz_fetch **out,
		     struct ndz_error *e);
/* ndz_fetch_free - free f and every chunk buffer; accepts NULL. */
void ndz_fetch_free(struct ndz_fetch *f);

/*
 * ndz_fetch_block - a BLOCK of chunk (block < 1024, data NDZ_BLOCK_SIZE bytes)
 * arrived at now_ns. A chunk's first block that finds no buffer (every one of the
 * pool's taken) is dropped as without a free slot. data NULL records the block
 * without storing it (the slot's buffer stays unallocated, ndz_fetch_buf may return
 * NULL): for simulations that count packets, not bytes; a cache is fed one way or
 * the other throughout. Returns the slot now holding the whole chunk, which the
 * caller must check and pass to ndz_fetch_accept or ndz_fetch_reject; -1 otherwise
 * (a new block of an incomplete chunk, a duplicate, or no free slot).
 */
int ndz_fetch_block(struct ndz_fetch *f, uint32_t chunk, unsigned block, const uint8_t *data,
		    uint64_t now_ns);

/*
 * ndz_fetch_blocks - count blocks from first on (a BLOCKS: first + count <= 1024),
 * data count * NDZ_BLOCK_SIZE bytes (or NULL as for ndz_fetch_block), arrived at
 * now_ns: the same as that many ndz_fetch_block calls, but that a run none of whose
 * blocks is held, of a chunk already filling, is stored with one copy and one pass
 * over its bits. Returns as ndz_fetch_block (at most one slot completes).
 */
int ndz_fetch_blocks(struct ndz_fetch *f, uint32_t chunk, unsigned first, unsigned count,
		     const uint8_t *data, uint64_t now_ns);

/*
 * ndz_fetch_span - the len bytes at byte off of chunk (a SPAN: both multiples of 32,
 * len > 0, off + len <= NDZ_CHUNK_SIZE), data those bytes (or NULL as for
 * ndz_fetch_block), arrived at now_ns. The blocks it covers whole are taken as by
 * ndz_fetch_blocks; of a block it covers in part the 32-byte granules are stored and
 * noted, and the block is held (counted, seen by requests and repairs) once all of
 * them are: until then it is missing, and a repair that rebuilds it overwrites it.
 * A block held already counts one duplicate however it was cut. Returns as
 * ndz_fetch_block; -1 for a span out of those bounds (nothing stored).
 */
int ndz_fetch_span(struct ndz_fetch *f, uint32_t chunk, uint32_t off, uint32_t len,
		   const uint8_t *data, uint64_t now_ns);

/*
 * ndz_fetch_repair - repair index (< ndz_fec_repairs(set)) of set (a stripe, or
 * NDZ_FEC_WHOLE) of chunk arrived (data as for ndz_fetch_block). Once a stripe
 * holds as many blocks and repairs as it has data blocks its missing blocks are
 * decoded (lib/fec); once the chunk holds as many blocks and whole-chunk repairs
 * as it has blocks, all of its missing blocks are, if those repairs determine
 * them. Returns as ndz_fetch_block.
 */
int ndz_fetch_repair(struct ndz_fetch *f, uint32_t chunk, unsigned set, unsigned index,
		     const uint8_t *data, uint64_t now_ns);

/*
 * ndz_fetch_range_repair - range repair index (< NDZ_FEC_WREPAIRS) of blocks [first,
 * first + count) of chunk arrived (data as for ndz_fetch_block): kept by a chunk wanted
 * in part (ndz_fetch_set_want) when the range is one of its runs (a longest stretch of
 * wanted blocks) that lacks blocks; once the run holds as many of its range repairs as
 * it lacks blocks, those are rebuilt, if the repairs determine them. A slot keeps at
 * most 128. Returns as ndz_fetch_block.
 */
int ndz_fetch_range_repair(struct ndz_fetch *f, uint32_t chunk, unsigned first, unsigned count,
			   unsigned index, const uint8_t *data, uint64_t now_ns);

/* ndz_fetch_buf, ndz_fetch_slot_chunk - a slot's 1 MiB buffer and its chunk. */
uint8_t *ndz_fetch_buf(struct ndz_fetch *f, int slot);
uint32_t ndz_fetch_slot_chunk(const struct ndz_fetch *f, int slot);

/*
 * ndz_fetch_hold - the complete chunk in slot is being checked off the caller's
 * thread: nothing more of it is stored or asked for, and it does not count as
 * complete until ndz_fetch_accept; ndz_fetch_reject gives it up.
 */
void ndz_fetch_hold(struct ndz_fetch *f, int slot);
/* ndz_fetch_accept - the complete chunk in slot checked out: it goes to be written. */
void ndz_fetch_accept(struct ndz_fetch *f, int slot);
/* ndz_fetch_reject - it did not (forged or corrupt blocks): drop it, ask again at once. */
void ndz_fetch_reject(struct ndz_fetch *f, int slot);
/*
 * ndz_fetch_retry - the complete chunk in slot did not check out, and its buffer is
 * as received (not decrypted in place). Blocks that came twice with different bytes,
 * and blocks rebuilt from repairs, are in doubt: only those are dropped (with every
 * repair held) and asked for again at once (returns 1); with none in doubt, all are
 * (returns 2), each compared as it comes again with the copy in the buffer, so that
 * the next failure knows which block to doubt. So a forged block or repair costs a few
 * blocks, or one chunk, not one for each failure. At the fifth failure, or without a
 * buffer, the chunk is rejected as by ndz_fetch_reject (returns 0).
 */
int ndz_fetch_retry(struct ndz_fetch *f, int slot);
/*
 * ndz_fetch_take_buf - the buffer of the accepted chunk in slot, now the caller's
 * (with a pool: give it back to the pool; else free it); the slot takes another at
 * its next use. NULL when it has none.
 */
uint8_t *ndz_fetch_take_buf(struct ndz_fetch *f, int slot);
/* ndz_fetch_done - the accepted chunk in slot is written: the slot is free again. */
void ndz_fetch_done(struct ndz_fetch *f, int slot);

/*
 * ndz_fetch_have - chunk is already held by the target (a seeded restore, issue 23):
 * count it complete and done, never ask for it, and drop what of it is on its way
 * (an ask, or a slot still filling). Returns 1, or 0 when it is out of range, done,
 * or complete and with the caller (held for its checks or being written).
 */
int ndz_fetch_have(struct ndz_fetch *f, uint32_t chunk);
/* ndz_fetch_needs - chunk (in range) is neither done nor complete with the caller. */
int ndz_fetch_needs(const struct ndz_fetch *f, uint32_t chunk);

/*
 * ndz_fetch_snoop - a request for the blocks in bitmap of chunk was seen on the
 * group at now_ns (ours looped back, or another client's). When it covers all we
 * lack of that chunk we do not ask for it ourselves within the re-request delay:
 * that is the NAK suppression.
 */
void ndz_fetch_snoop(struct ndz_fetch *f, uint32_t chunk, const uint8_t *bitmap,
		     uint64_t now_ns);

/*
 * ndz_fetch_snoop_repairs - a request for need[s] repairs of each set of chunk
 * (NDZ_FEC_SETS counts) was seen at now_ns. The server sends, per set, the most
 * asked for, so the requests seen within the re-request delay count together: when
 * per set one of them asks for at least what we lack (any repair heals any loss of
 * its set), we do not ask
 * ourselves within the delay. With repairs on, a client asks for a chunk the server
 * moved on from a random 0-16 ms after it sees that, so the others hear it first.
 */
void ndz_fetch_snoop_repairs(struct ndz_fetch *f, uint32_t chunk, const uint8_t *need,
			     uint64_t now_ns);

/*
 * ndz_fetch_snoop_range - a range request for wanted repairs of [first, first + count)
 * of chunk was seen at now_ns; as ndz_fetch_snoop_repairs, per range: when the range
 * requests heard within the re-request delay ask, for each run we would ask repairs
 * of, for at least as many, and we would ask for no blocks, we do not ask ourselves.
 */
void ndz_fetch_snoop_range(struct ndz_fetch *f, uint32_t chunk, unsigned first,
			   unsigned count, unsigned wanted, uint64_t now_ns);

/*
 * ndz_fetch_set_range - the server answers range repairs (FEATURES bit 5): a chunk
 * wanted in part asks for the blocks it lost of each run by range repairs
 * (emit_range, with ctx), while the run lacks no more than NDZ_FEC_ASK_MAX (and at most
 * NDZ_FEC_RANGES_MAX runs a round, 6 rounds a chunk), else by its blocks as before.
 * NULL: never (as at creation).
 */
void ndz_fetch_set_range(struct ndz_fetch *f, ndz_fetch_emit_range emit_range, void *ctx);

/*
 * ndz_fetch_set_repair - which repairs the server sends (NDZ_FEAT_REPAIR: stripes,
 * NDZ_FEAT_WHOLE: whole-chunk ones too; 0 none, as at creation). With whole-chunk
 * repairs a partly received chunk is asked for by a count of them (RREQUEST) while
 * it lacks no more than 32 blocks; with stripe repairs (or past 32) by a count per
 * stripe while no stripe lacks more than 32; else by its missing blocks (PREQUEST).
 */
void ndz_fetch_set_repair(struct ndz_fetch *f, unsigned features);

/*
 * ndz_fetch_requests - emit the requests due at now_ns: the missing blocks of
 * partly received chunks first (when the server went on to another chunk, or
 * nothing came for the re-request delay), then chunks someone asked for that
 * never came, then new chunks in random order until request_ahead are on their
 * way, never more than free slots. silent: the server has been silent, so ask
 * again for everything on its way. Returns the number of requests emitted.
 */
unsigned ndz_fetch_requests(struct ndz_fetch *f, uint64_t now_ns, int silent,
			    ndz_fetch_emit emit, void *ctx);

/*
 * ndz_fetch_set_defer - new chunks for which defer(ctx, chunk) returns 1 are not
 * asked for yet, but later (a seed scan has not reached them), nor the rest of one
 * whose blocks others asked for came meanwhile; such blocks fill at most a quarter
 * of the slots (the rest is dropped), so blocks of chunks that are needed find room.
 * NULL: none is deferred (as at creation). defer must not call back.
 */
void ndz_fetch_set_defer(struct ndz_fetch *f, int (*defer)(void *ctx, uint32_t chunk),
			 void *ctx);
/*
 * ndz_fetch_deferred - a deferred chunk others' blocks of came (a seed scan, told,
 * can decide it next): of those filling a slot, the one holding the most blocks;
 * else the last one the cap dropped blocks of, once, if still deferred and not done.
 * -1 when none is (or nothing is deferred).
 */
int64_t ndz_fetch_deferred(struct ndz_fetch *f);
/*
 * Blocks of deferred chunks the cap refuses a slot are held back rather than dropped,
 * in a store of the blocks alone: at most as many as the deferred slots hold (a
 * quarter of the slots times NDZ_BLOCKS_PER_CHUNK blocks, 16 MiB for 64 slots), 8 MiB
 * at least, of at most a chunk per 64 of those blocks; past that they are dropped.
 * The store is made on first use.
 *
 * ndz_fetch_held_back - a chunk with blocks held back that is no longer deferred (or
 * is done): for ndz_fetch_release; -1 when none is.
 */
int64_t ndz_fetch_held_back(struct ndz_fetch *f);
/*
 * ndz_fetch_release - the blocks held back of chunk go into its slot (one is taken),
 * as if they came when they did; when it is done they are dropped (counted as dups); when no
 * slot is free they are kept (and its blocks arriving meanwhile) until one is
 * (ndz_fetch_held_back names it again then). Returns the slot when that completes
 * it (as ndz_fetch_block), else -1. Call it once chunk is no longer deferred.
 */
int ndz_fetch_release(struct ndz_fetch *f, uint32_t chunk);
/*
 * ndz_fetch_set_want - chunks wanted in part (a seeded restore that lacks only some
 * pieces of a chunk, issue 32): want(ctx, chunk) returns the bitmap of the blocks to
 * receive (NDZ_BITMAP_BYTES, valid until the next call into the cache), or NULL for
 * the whole chunk. Such a chunk is asked for by those blocks (PREQUEST), never by
 * repairs; its slot holds the others as if received (their bytes in the buffer are
 * not the chunk's) and completes when those came; ndz_fetch_slot_want tells it apart.
 * The answer for a chunk is taken when its slot is, so it must not change while the
 * chunk is on its way. NULL: no chunk is (as at creation). want must not call back.
 */
void ndz_fetch_set_want(struct ndz_fetch *f,
			const uint8_t *(*want)(void *ctx, uint32_t chunk), void *ctx);
/*
 * ndz_fetch_want - chunk, already filling as a whole chunk, is wanted in part after
 * all (want as want's answer, which must say so from now on): the blocks it holds
 * are kept, the others not wanted count as held. Returns the slot when that
 * completes it (as ndz_fetch_block), else -1 (also when chunk is not filling).
 */
int ndz_fetch_want(struct ndz_fetch *f, uint32_t chunk, const uint8_t *want);
/* ndz_fetch_slot_want - the blocks slot's chunk was wanted for (f's), or NULL: whole. */
const uint8_t *ndz_fetch_slot_want(const struct ndz_fetch *f, int slot);
/*
 * ndz_fetch_whole - the chunk in slot, wanted in part and complete, is wanted whole
 * after all (its blocks were not enough): the blocks received are kept, the others
 * asked for at once; it completes again as a whole chunk. Nothing for a whole one.
 */
void ndz_fetch_whole(struct ndz_fetch *f, int slot);

/* ndz_fetch_kick - requests are due at once (what the caller knows changed). */
void ndz_fetch_kick(struct ndz_fetch *f);
/* ndz_fetch_kicked - whether requests are due at once (the server moved on); clears it. */
int ndz_fetch_kicked(struct ndz_fetch *f);

void ndz_fetch_get_stats(const struct ndz_fetch *f, struct ndz_fetch_stats *st);

#endif
