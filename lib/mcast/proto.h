/*
 * The multicast wire protocol (doc/PROTOCOL.md): the only code that knows the
 * byte layout of a packet. Every field is checked on decode.
 */
#ifndef NDZ_PROTO_H
#define NDZ_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "core/bits.h"
#include "core/err.h"
#include "core/format.h"
#include "fec.h"

#define NDZ_PROTO_VERSION   1u          /* BLOCKS and CAPS are of it: see PROTOCOL.md */
#define NDZ_PKT_TYPE_OFFSET 5u          /* where the common header holds the type */
#define NDZ_PROTO_HDR       8u          /* magic, version, type, flags */

enum ndz_pkt_type {
	NDZ_PKT_JOIN = 1,              /* client -> group: who serves here? */
	NDZ_PKT_JOIN_REPLY = 2,        /* server -> group: image parameters */
	NDZ_PKT_LEAVE = 3,             /* client -> group: done, with statistics */
	NDZ_PKT_BLOCK = 4,             /* server -> group: 1 KiB of a chunk */
	NDZ_PKT_REQUEST = 5,           /* client -> group: a block range of a chunk */
	NDZ_PKT_PREQUEST = 6,          /* client -> group: a bitmap of blocks of a chunk */
	NDZ_PKT_FEATURES = 7,          /* server -> group: what else it speaks */
	NDZ_PKT_REPAIR = 8,            /* server -> group: a repair block of a chunk's stripe */
	NDZ_PKT_RREQUEST = 9,          /* client -> group: repair counts per stripe of a chunk */
	NDZ_PKT_PROGRESS = 10,         /* client -> group: how far it is (about once a second) */
	NDZ_PKT_CAPS = 11,             /* client -> group: the largest datagram it takes */
	NDZ_PKT_BLOCKS = 12,           /* server -> group: a run of blocks of a chunk */
	NDZ_PKT_SPAN = 13,             /* server -> group: a run of a chunk's bytes */
	NDZ_PKT_REPAIRS = 14,          /* server -> group: consecutive repairs of one set */
	NDZ_PKT_RANGE_RREQUEST = 15,   /* client -> group: repairs of a block range of a chunk */
	NDZ_PKT_RANGE_REPAIR = 16,     /* server -> group: a repair of a block range */
};

/* FEATURES bits; a receiver ignores bits it does not know. */
#define NDZ_FEAT_REPAIR 0x1u           /* REPAIR and RREQUEST (lib/fec.h's code) */
#define NDZ_FEAT_WHOLE  0x2u           /* whole-chunk repairs (set 8) too */
#define NDZ_FEAT_BLOCKS 0x4u           /* takes CAPS, sends BLOCKS to groups that take them */
#define NDZ_FEAT_SPAN   0x8u           /* sends SPAN to groups whose every client takes it */
#define NDZ_FEAT_REPAIRS 0x10u         /* sends REPAIRS to groups whose every client takes it */
#define NDZ_FEAT_RANGE  0x20u          /* answers RANGE_RREQUEST with RANGE_REPAIRs */

/* CAPS flags; a client sets one only when its server announced the matching feature. */
#define NDZ_CAPS_SPAN   0x1u           /* takes SPAN (NDZ_FEAT_SPAN) */
#define NDZ_CAPS_REPAIRS 0x2u          /* takes REPAIRS (NDZ_FEAT_REPAIRS) */

/* Sizes of each packet type on the wire; every packet has exactly its size. */
#define NDZ_PKT_JOIN_LEN       16u
#define NDZ_PKT_JOIN_REPLY_LEN 80u
#define NDZ_PKT_LEAVE_LEN      64u
#define NDZ_PKT_BLOCK_LEN      (20u + NDZ_BLOCK_SIZE)
#define NDZ_PKT_REQUEST_LEN    24u
#define NDZ_PKT_PREQUEST_LEN   (24u + NDZ_BITMAP_BYTES)
#define NDZ_PKT_FEATURES_LEN   16u
#define NDZ_PKT_REPAIR_LEN     (20u + NDZ_BLOCK_SIZE)
#define NDZ_PKT_RREQUEST_LEN   32u
#define NDZ_PKT_PROGRESS_LEN   40u
#define NDZ_PKT_CAPS_LEN       24u
#define NDZ_PKT_BLOCKS_HDR     20u     /* a BLOCKS: this, then count blocks */
#define NDZ_PKT_RANGE_RREQUEST_LEN 28u
#define NDZ_PKT_RANGE_DATA_AT  24u     /* RANGE_REPAIR: where its data start */
#define NDZ_PKT_RANGE_REPAIR_LEN (NDZ_PKT_RANGE_DATA_AT + NDZ_BLOCK_SIZE)
#define NDZ_PKT_HEAD_MAX       NDZ_PKT_RANGE_DATA_AT /* the longest head before data */
#define NDZ_PKT_DATA_AT        20u     /* BLOCK, BLOCKS, REPAIR: where their data start */
#define NDZ_PKT_BLOCKS_MAX     8u      /* blocks in one BLOCKS at most (a 9000-byte MTU) */
#define NDZ_PKT_BLOCKS_LEN(n)  (NDZ_PKT_BLOCKS_HDR + (n) * NDZ_BLOCK_SIZE)
#define NDZ_PKT_MAX            NDZ_PKT_RANGE_REPAIR_LEN /* the largest packet but a BLOCKS,
							   SPAN or REPAIRS */
#define NDZ_PKT_SPAN_HDR       20u     /* a SPAN: this, then its bytes */
#define NDZ_PKT_SPAN_GRAIN     32u     /* a SPAN's offset and length are multiples of this */
#define NDZ_PKT_SPAN_MAX       9184u   /* its bytes at most: a datagram of 9204 fits the
					  9216 bytes a receiver reads (lib/net.h) */
#define NDZ_PKT_SPAN_LEN(n)    (NDZ_PKT_SPAN_HDR + (n))
#define NDZ_PKT_REPAIRS_HDR    20u     /* a REPAIRS: this, then count repairs */
#define NDZ_PKT_REPAIRS_MAX    NDZ_PKT_BLOCKS_MAX /* repairs in one REPAIRS at most */
#define NDZ_PKT_REPAIRS_LEN(n) (NDZ_PKT_REPAIRS_HDR + (n) * NDZ_BLOCK_SIZE)
#define NDZ_PKT_WIRE_MAX       NDZ_PKT_SPAN_LEN(NDZ_PKT_SPAN_MAX) /* the largest */
#define NDZ_PKT_STD_PAYLOAD    1472u   /* a standard 1500-byte MTU's UDP payload (less
					  20 bytes of IPv4 and 8 of UDP) */

/*
 * The block size is lib/format.h's; the wire sizes derived from it are fixed by
 * doc/PROTOCOL.md (version 1), so a change there must not change them unseen.
 */
_Static_assert(NDZ_BLOCKS_PER_CHUNK % 8u == 0, "a chunk's bitmap is whole bytes");
_Static_assert(NDZ_BLOCKS_PER_CHUNK <= 65535u, "REQUEST block and count are 16 bits");
_Static_assert(NDZ_BITMAP_BYTES == 128u, "PREQUEST: 128-byte bitmap on the wire");
_Static_assert(NDZ_PKT_BLOCK_LEN == 1044u, "BLOCK: 1044 bytes on the wire");
_Static_assert(NDZ_PKT_BLOCK_LEN == NDZ_PKT_DATA_AT + NDZ_BLOCK_SIZE &&
	       NDZ_PKT_REPAIR_LEN == NDZ_PKT_DATA_AT + NDZ_BLOCK_SIZE &&
	       NDZ_PKT_BLOCKS_HDR == NDZ_PKT_DATA_AT, "data start at NDZ_PKT_DATA_AT");
_Static_assert(NDZ_PKT_SPAN_HDR == NDZ_PKT_DATA_AT && NDZ_PKT_SPAN_MAX % NDZ_PKT_SPAN_GRAIN == 0 &&
	       NDZ_PKT_SPAN_LEN(NDZ_PKT_SPAN_MAX) >= NDZ_PKT_BLOCKS_LEN(NDZ_PKT_BLOCKS_MAX) &&
	       NDZ_BLOCK_SIZE / NDZ_PKT_SPAN_GRAIN == 32u, "SPAN: a block is 32 granules");
_Static_assert(NDZ_PKT_PREQUEST_LEN == 152u, "PREQUEST: 152 bytes on the wire");
_Static_assert(NDZ_FEC_STRIPES == 8u && NDZ_FEC_SETS == 9u, "RREQUEST: 9 counts on the wire");
_Static_assert(NDZ_PKT_MAX >= NDZ_PKT_REPAIR_LEN && NDZ_PKT_MAX >= NDZ_PKT_BLOCK_LEN,
	       "NDZ_PKT_MAX holds a BLOCK and a REPAIR");
_Static_assert(NDZ_PKT_HEAD_MAX >= NDZ_PKT_DATA_AT, "every head fits NDZ_PKT_HEAD_MAX");
_Static_assert(NDZ_PKT_MAX >= NDZ_PKT_JOIN_REPLY_LEN && NDZ_PKT_MAX >= NDZ_PKT_LEAVE_LEN &&
	       NDZ_PKT_MAX >= NDZ_PKT_PREQUEST_LEN, "NDZ_PKT_MAX is the largest packet");

/* What the server tells a joining client (JOIN_REPLY). */
struct ndz_join_info {
	uint8_t uuid[16];              /* image UUID (from the chunk headers) */
	uint32_t chunks;               /* image size in chunks, >= 1 */
	uint32_t block_size;           /* NDZ_BLOCK_SIZE */
	uint32_t blocks_per_chunk;     /* NDZ_BLOCKS_PER_CHUNK */
	uint64_t image_bytes;          /* chunks * NDZ_CHUNK_SIZE */
	uint64_t source_bytes;         /* bytes the image restores to */
	uint64_t rate_bps;             /* server bandwidth cap, bits/s; 0: none */
	uint32_t idle_timeout;         /* server exits after this many idle seconds; 0: never */
};

/* What a leaving client reports (LEAVE). */
struct ndz_leave_stats {
	uint32_t elapsed_ms;
	uint32_t status;               /* 0: image complete, 1: failed */
	uint64_t blocks_received;
	uint64_t duplicates;
	uint64_t requests_sent;
	uint64_t bytes_written;
	uint32_t chunks_done;
};

/* What a receiving client reports of itself (PROGRESS); chunks_done <= chunks_total. */
struct ndz_progress {
	uint32_t chunks_done;          /* chunks of the image written (or found present) */
	uint32_t chunks_total;         /* chunks of the image */
	uint64_t bytes_written;        /* bytes written to the target so far */
	uint32_t elapsed_ms;           /* since the client began receiving */
};

/* A decoded packet; which fields are meaningful depends on type. */
struct ndz_pkt {
	uint8_t type;                  /* enum ndz_pkt_type */
	uint32_t client_id;            /* JOIN, JOIN_REPLY (the asker), LEAVE, requests,
					* PROGRESS */
	uint32_t tag;                  /* image tag: all but JOIN */
	uint32_t chunk;                /* BLOCK, REQUEST, PREQUEST, REPAIR, RREQUEST */
	uint16_t block;                /* BLOCK: block; REQUEST, BLOCKS, RANGE_*: first block */
	uint16_t count;                /* REQUEST, BLOCKS, RANGE_*: number of blocks, >= 1 */
	uint8_t wanted;                /* RANGE_RREQUEST: repairs wanted, 1..min(32, count) */
	const uint8_t *data;           /* BLOCK, REPAIR: NDZ_BLOCK_SIZE bytes, BLOCKS: count
					* times that, SPAN: length bytes (into the buffer) */
	uint32_t offset;               /* SPAN: byte offset in the chunk (grains) */
	uint32_t length;               /* SPAN: its bytes (grains, > 0, offset + length <=
					* NDZ_CHUNK_SIZE, <= NDZ_PKT_SPAN_MAX): the datagram's
					* length less NDZ_PKT_SPAN_HDR */
	uint8_t stripe, index;         /* REPAIR: which repair of which set (lib/fec.h);
					* REPAIRS: the set and the first repair's index;
					* RANGE_REPAIR: index, < NDZ_FEC_WREPAIRS */
	uint8_t nrep;                  /* REPAIRS: how many (1 to NDZ_PKT_REPAIRS_MAX, their
					* indexes within the set's) */
	uint8_t need[NDZ_FEC_SETS];    /* RREQUEST: repairs wanted per stripe (<= NDZ_FEC_K),
					* then of the whole chunk */
	uint32_t features;             /* FEATURES: NDZ_FEAT_* bits */
	uint32_t max_payload;          /* CAPS: the largest UDP payload the client takes */
	uint32_t caps_flags;           /* CAPS: NDZ_CAPS_* (0 to a server that announced none) */
	uint8_t bitmap[NDZ_BITMAP_BYTES]; /* PREQUEST: bit b%8 of byte b/8 = block b */
	struct ndz_join_info info;     /* JOIN_REPLY */
	struct ndz_leave_stats leave;  /* LEAVE */
	struct ndz_progress progress;  /* PROGRESS */
};

/* ndz_image_tag - the 32-bit tag of an image carried in packets (from its UUID). */
uint32_t ndz_image_tag(const uint8_t uuid[16]);

/*
 * ndz_pkt_encode - write p into buf (cap bytes). Returns the packet length, or
 * NDZ_EINVAL when a field is out of range or cap is too small, with e (may be NULL)
 * saying so.
 */
int ndz_pkt_encode(const struct ndz_pkt *p, uint8_t *buf, size_t cap, struct ndz_error *e);

/*
 * ndz_pkt_encode_head - of a packet that carries data (BLOCK, BLOCKS, REPAIR, SPAN), only
 * the bytes before the data into buf (cap bytes): what ndz_pkt_encode would write
 * there, p->data not read. A sender that sends these bytes and then the data
 * (NDZ_BLOCK_SIZE bytes, a BLOCKS count times that, a SPAN length) as one datagram sends what
 * ndz_pkt_encode makes, without copying the data. Returns the head's length
 * (NDZ_PKT_DATA_AT; NDZ_PKT_RANGE_DATA_AT for a RANGE_REPAIR), or NDZ_EINVAL as ndz_pkt_encode, or for a type without data,
 * with e (may be NULL) saying so.
 */
int ndz_pkt_encode_head(const struct ndz_pkt *p, uint8_t *buf, size_t cap, struct ndz_error *e);

/*
 * ndz_pkt_decode - parse and validate len bytes: magic, version, type, exact
 * length, reserved bytes zero, field ranges. Returns 0 with *p filled (p->data
 * points into buf), NDZ_EPROTOVER for another protocol version, or NDZ_EPROTO.
 * Does not know the image: the caller checks tag and chunk against it. e may be
 * NULL (the hot path: an untrusted packet's failure is counted, not described).
 */
int ndz_pkt_decode(const uint8_t *buf, size_t len, struct ndz_pkt *p, struct ndz_error *e);

#endif
