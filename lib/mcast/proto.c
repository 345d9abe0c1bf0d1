/* Encode and decode the multicast protocol's packets (layout: doc/PROTOCOL.md). */
#include <stddef.h>
#include <string.h>

#include "core/err.h"
#include "core/le.h"
#include "proto.h"

static const uint8_t proto_magic[4] = { 'N', 'D', 'Z', 'P' };

#define BLOCKS NDZ_BLOCKS_PER_CHUNK

uint32_t ndz_image_tag(const uint8_t uuid[16])
{
	return get_le32(uuid) ^ get_le32(uuid + 4) ^ get_le32(uuid + 8) ^ get_le32(uuid + 12);
}

static int bitmap_empty(const uint8_t *bm)
{
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
		if (bm[i])
			return 0;
	return 1;
}

/*
 * Where each field of each packet type stands on the wire (doc/PROTOCOL.md). An
 * integer field is as wide on the wire as its member, little-endian; a RAW field is
 * its member's bytes as they are; fields in wire order. Bytes no field covers are
 * zero: encode writes them so, decode refuses a packet where they are not.
 */
struct field {
	uint8_t at, width, raw;
	uint16_t off;                  /* of the member in struct ndz_pkt */
};

#define MEMBER_SIZE(m) sizeof(((struct ndz_pkt *)0)->m)
#define INT(at, m) { at, MEMBER_SIZE(m), 0, offsetof(struct ndz_pkt, m) }
#define RAW(at, m) { at, MEMBER_SIZE(m), 1, offsetof(struct ndz_pkt, m) }
#define MAX_FIELDS 10                  /* JOIN_REPLY has the most */

struct layout {
	size_t len;                    /* the packet's exact length (BLOCKS: but its blocks);
					  0: no such type */
	uint8_t data_at;               /* BLOCK, REPAIR: where the NDZ_BLOCK_SIZE bytes start;
					  BLOCKS: where its count blocks do */
	uint8_t nfields;
	struct field f[MAX_FIELDS];
};

#define FIELDS(...) \
	.nfields = sizeof((struct field[]){ __VA_ARGS__ }) / sizeof(struct field), \
	.f = { __VA_ARGS__ }

static const struct layout layouts[] = {
	[NDZ_PKT_JOIN] = { NDZ_PKT_JOIN_LEN, 0, FIELDS(INT(8, client_id)) },
	[NDZ_PKT_JOIN_REPLY] = { NDZ_PKT_JOIN_REPLY_LEN, 0, FIELDS(
		INT(8, client_id), INT(12, tag), RAW(16, info.uuid), INT(32, info.chunks),
		INT(36, info.block_size), INT(40, info.blocks_per_chunk),
		INT(44, info.idle_timeout), INT(48, info.image_bytes),
		INT(56, info.source_bytes), INT(64, info.rate_bps)) },
	[NDZ_PKT_LEAVE] = { NDZ_PKT_LEAVE_LEN, 0, FIELDS(
		INT(8, client_id), INT(12, tag), INT(16, leave.elapsed_ms),
		INT(20, leave.status), INT(24, leave.blocks_received),
		INT(32, leave.duplicates), INT(40, leave.requests_sent),
		INT(48, leave.bytes_written), INT(56, leave.chunks_done)) },
	[NDZ_PKT_BLOCK] = { NDZ_PKT_BLOCK_LEN, 20, FIELDS(
		INT(8, tag), INT(12, chunk), INT(16, block)) },
	[NDZ_PKT_REQUEST] = { NDZ_PKT_REQUEST_LEN, 0, FIELDS(
		INT(8, client_id), INT(12, tag), INT(16, chunk), INT(20, block),
		INT(22, count)) },
	[NDZ_PKT_PREQUEST] = { NDZ_PKT_PREQUEST_LEN, 0, FIELDS(
		INT(8, client_id), INT(12, tag), INT(16, chunk), RAW(24, bitmap)) },
	[NDZ_PKT_FEATURES] = { NDZ_PKT_FEATURES_LEN, 0, FIELDS(
		INT(8, tag), INT(12, features)) },
	[NDZ_PKT_REPAIR] = { NDZ_PKT_REPAIR_LEN, 20, FIELDS(
		INT(8, tag), INT(12, chunk), INT(16, stripe), INT(17, index)) },
	[NDZ_PKT_RREQUEST] = { NDZ_PKT_RREQUEST_LEN, 0, FIELDS(
		INT(8, client_id), INT(12, tag), INT(16, chunk), RAW(20, need)) },
	[NDZ_PKT_PROGRESS] = { NDZ_PKT_PROGRESS_LEN, 0, FIELDS(
		INT(8, client_id), INT(12, tag), INT(16, progress.chunks_done),
		INT(20, progress.chunks_total), INT(24, progress.bytes_written),
		INT(32, progress.elapsed_ms)) },
	[NDZ_PKT_CAPS] = { NDZ_PKT_CAPS_LEN, 0, FIELDS(
		INT(8, client_id), INT(12, tag), INT(16, max_payload), INT(20, caps_flags)) },
	[NDZ_PKT_BLOCKS] = { NDZ_PKT_BLOCKS_HDR, NDZ_PKT_BLOCKS_HDR, FIELDS(
		INT(8, tag), INT(12, chunk), INT(16, block), INT(18, count)) },
	[NDZ_PKT_SPAN] = { NDZ_PKT_SPAN_HDR, NDZ_PKT_SPAN_HDR, FIELDS(
		INT(8, tag), INT(12, chunk), INT(16, offset)) },
	[NDZ_PKT_REPAIRS] = { NDZ_PKT_REPAIRS_HDR, NDZ_PKT_REPAIRS_HDR, FIELDS(
		INT(8, tag), INT(12, chunk), INT(16, stripe), INT(17, index), INT(18, nrep)) },
	[NDZ_PKT_RANGE_RREQUEST] = { NDZ_PKT_RANGE_RREQUEST_LEN, 0, FIELDS(
		INT(8, client_id), INT(12, tag), INT(16, chunk), INT(20, block),
		INT(22, count), INT(24, wanted)) },
	[NDZ_PKT_RANGE_REPAIR] = { NDZ_PKT_RANGE_REPAIR_LEN, NDZ_PKT_RANGE_DATA_AT, FIELDS(
		INT(8, tag), INT(12, chunk), INT(16, block), INT(18, count), INT(20, index)) },
};

/* The bytes of data a packet carries after data_at. */
static size_t data_len(const struct ndz_pkt *p)
{
	return p->type == NDZ_PKT_BLOCKS ? (size_t)p->count * NDZ_BLOCK_SIZE :
	       p->type == NDZ_PKT_SPAN ? p->length :
	       p->type == NDZ_PKT_REPAIRS ? (size_t)p->nrep * NDZ_BLOCK_SIZE : NDZ_BLOCK_SIZE;
}

/* A packet's whole length on the wire. */
static size_t total_len(const struct layout *l, const struct ndz_pkt *p)
{
	return p->type == NDZ_PKT_BLOCKS || p->type == NDZ_PKT_SPAN || p->type == NDZ_PKT_REPAIRS ?
	       l->len + data_len(p) : l->len;
}

/* The layout of a packet type, or NULL for a type there is none of. */
static const struct layout *layout_of(unsigned type)
{
	if (type >= sizeof(layouts) / sizeof(layouts[0]) || !layouts[type].len)
		return NULL;
	return &layouts[type];
}

static int zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* Whether every byte of b that no field or data covers is zero (fields in wire order). */
static int gaps_zero(const struct layout *l, const uint8_t *b, const struct ndz_pkt *p)
{
	size_t pos = NDZ_PROTO_HDR;

	for (unsigned i = 0; i < l->nfields; i++) {
		if (!zero(b + pos, l->f[i].at - pos))
			return 0;
		pos = l->f[i].at + (size_t)l->f[i].width;
	}
	if (l->data_at) {
		if (!zero(b + pos, l->data_at - pos))
			return 0;
		pos = l->data_at + data_len(p);
	}
	return zero(b + pos, total_len(l, p) - pos);
}

static void put_field(uint8_t *b, const struct field *f, const struct ndz_pkt *p)
{
	const uint8_t *m = (const uint8_t *)p + f->off;

	if (f->raw)
		memcpy(b + f->at, m, f->width);
	else if (f->width == 1)
		b[f->at] = *m;
	else if (f->width == 2)
		put_le16(b + f->at, *(const uint16_t *)(const void *)m);
	else if (f->width == 4)
		put_le32(b + f->at, *(const uint32_t *)(const void *)m);
	else
		put_le64(b + f->at, *(const uint64_t *)(const void *)m);
}

static void get_field(const uint8_t *b, const struct field *f, struct ndz_pkt *p)
{
	uint8_t *m = (uint8_t *)p + f->off;

	if (f->raw)
		memcpy(m, b + f->at, f->width);
	else if (f->width == 1)
		*m = b[f->at];
	else if (f->width == 2)
		*(uint16_t *)(void *)m = get_le16(b + f->at);
	else if (f->width == 4)
		*(uint32_t *)(void *)m = get_le32(b + f->at);
	else
		*(uint64_t *)(void *)m = get_le64(b + f->at);
}

/* The checks shared by encode and decode, on the decoded fields. */
static int fields_valid(const struct ndz_pkt *p)
{
	const struct ndz_join_info *i = &p->info;

	switch (p->type) {
	case NDZ_PKT_JOIN_REPLY:
		return i->chunks >= 1 && i->block_size == NDZ_BLOCK_SIZE &&
		       i->blocks_per_chunk == BLOCKS &&
		       i->image_bytes == (uint64_t)i->chunks * NDZ_CHUNK_SIZE;
	case NDZ_PKT_LEAVE:
		return p->leave.status <= 1;
	case NDZ_PKT_PROGRESS:
		return p->progress.chunks_done <= p->progress.chunks_total;
	case NDZ_PKT_BLOCK:
		return p->block < BLOCKS;
	case NDZ_PKT_BLOCKS:
		return p->block < BLOCKS && p->count >= 1 && p->count <= NDZ_PKT_BLOCKS_MAX &&
		       p->count <= BLOCKS - p->block;
	case NDZ_PKT_SPAN:
		return p->offset % NDZ_PKT_SPAN_GRAIN == 0 && p->length % NDZ_PKT_SPAN_GRAIN == 0 &&
		       p->length >= 1 && p->length <= NDZ_PKT_SPAN_MAX &&
		       p->offset <= NDZ_CHUNK_SIZE - p->length;
	case NDZ_PKT_CAPS:
		return p->max_payload >= NDZ_PKT_BLOCK_LEN &&
		       !(p->caps_flags & ~(NDZ_CAPS_SPAN | NDZ_CAPS_REPAIRS));
	case NDZ_PKT_REPAIRS:
		return p->stripe < NDZ_FEC_SETS && p->nrep >= 1 && p->nrep <= NDZ_PKT_REPAIRS_MAX &&
		       p->index < ndz_fec_repairs(p->stripe) &&
		       p->nrep <= ndz_fec_repairs(p->stripe) - p->index;
	case NDZ_PKT_REQUEST:
		return p->block < BLOCKS && p->count >= 1 && p->count <= BLOCKS - p->block;
	case NDZ_PKT_PREQUEST:
		return !bitmap_empty(p->bitmap);
	case NDZ_PKT_REPAIR:
		return p->stripe < NDZ_FEC_SETS && p->index < ndz_fec_repairs(p->stripe);
	case NDZ_PKT_RREQUEST: {
		unsigned any = 0;

		for (unsigned st = 0; st < NDZ_FEC_STRIPES; st++) {
			if (p->need[st] > NDZ_FEC_K)
				return 0;
			any |= p->need[st];
		}
		return (any | p->need[NDZ_FEC_WHOLE]) != 0;
	}
	case NDZ_PKT_RANGE_RREQUEST:
		/* no client asks for more than NDZ_FEC_ASK_MAX, nor more than the blocks */
		return ndz_fec_range_ok(p->block, p->count) && p->wanted >= 1 &&
		       p->wanted <= NDZ_FEC_ASK_MAX && p->wanted <= p->count;
	case NDZ_PKT_RANGE_REPAIR:
		return ndz_fec_range_ok(p->block, p->count) && p->index < NDZ_FEC_WREPAIRS;
	case NDZ_PKT_JOIN:
	case NDZ_PKT_FEATURES:
		return 1;
	default:
		return 0;
	}
}

/* The packet into b, or with head only the bytes before its data (a packet with data). */
static int encode(const struct ndz_pkt *p, uint8_t *b, size_t cap, int head)
{
	const struct layout *l = layout_of(p->type);
	size_t len;

	if (!l || !fields_valid(p) || (head && !l->data_at))
		return NDZ_EINVAL;
	len = head ? l->data_at : total_len(l, p);
	if (cap < len || (l->data_at && !head && !p->data))
		return NDZ_EINVAL;
	memset(b, 0, len);
	memcpy(b, proto_magic, 4);
	b[4] = NDZ_PROTO_VERSION;
	b[5] = p->type;
	/* b[6..7]: flags, zero in version 1 */
	for (unsigned i = 0; i < l->nfields; i++)
		put_field(b, &l->f[i], p);
	if (l->data_at && !head)
		memcpy(b + l->data_at, p->data, data_len(p));
	return (int)len;
}

static int decode(const uint8_t *b, size_t len, struct ndz_pkt *p)
{
	const struct layout *l;

	if (len < NDZ_PROTO_HDR || memcmp(b, proto_magic, 4) != 0)
		return NDZ_EPROTO;
	if (b[4] != NDZ_PROTO_VERSION)
		return NDZ_EPROTOVER;
	l = layout_of(b[5]);
	if (!l || len < l->len || get_le16(b + 6) != 0)
		return NDZ_EPROTO;
	memset(p, 0, sizeof(*p));
	p->type = b[5];
	for (unsigned i = 0; i < l->nfields; i++)
		get_field(b, &l->f[i], p);
	if (p->type == NDZ_PKT_SPAN)
		p->length = (uint32_t)(len - l->len);   /* its bytes are the rest */
	if (len != total_len(l, p) || !fields_valid(p))
		return NDZ_EPROTO;
	if (l->data_at)
		p->data = b + l->data_at;
	if (!gaps_zero(l, b, p))
		return NDZ_EPROTO;
	if (p->type == NDZ_PKT_JOIN_REPLY && p->tag != ndz_image_tag(p->info.uuid))
		return NDZ_EPROTO;
	return fields_valid(p) ? 0 : NDZ_EPROTO;
}

int ndz_pkt_encode(const struct ndz_pkt *p, uint8_t *b, size_t cap, struct ndz_error *e)
{
	int r = encode(p, b, cap, 0);

	if (r < 0)
		ndz_error_set(e, r, 0, "packet of type %u: a field out of range, or %zu bytes "
			      "too small", p->type, cap);
	return r;
}

int ndz_pkt_encode_head(const struct ndz_pkt *p, uint8_t *b, size_t cap, struct ndz_error *e)
{
	int r = encode(p, b, cap, 1);

	if (r < 0)
		ndz_error_set(e, r, 0, "packet of type %u: no data, a field out of range, or %zu "
			      "bytes too small for its head", p->type, cap);
	return r;
}

/* The hot path: e is usually NULL, and then nothing but the code is made. */
int ndz_pkt_decode(const uint8_t *b, size_t len, struct ndz_pkt *p, struct ndz_error *e)
{
	int r = decode(b, len, p);

	if (r < 0 && e)
		ndz_error_set(e, r, 0, "packet of %zu bytes: %s", len, ndz_strerror(r));
	return r;
}
