/* Encode and decode the multicast protocol's packets (layout: doc/PROTOCOL.md). */
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

static size_t type_len(unsigned type)
{
	switch (type) {
	case NDZ_PKT_JOIN:       return NDZ_PKT_JOIN_LEN;
	case NDZ_PKT_JOIN_REPLY: return NDZ_PKT_JOIN_REPLY_LEN;
	case NDZ_PKT_LEAVE:      return NDZ_PKT_LEAVE_LEN;
	case NDZ_PKT_BLOCK:      return NDZ_PKT_BLOCK_LEN;
	case NDZ_PKT_REQUEST:    return NDZ_PKT_REQUEST_LEN;
	case NDZ_PKT_PREQUEST:   return NDZ_PKT_PREQUEST_LEN;
	case NDZ_PKT_FEATURES:   return NDZ_PKT_FEATURES_LEN;
	case NDZ_PKT_REPAIR:     return NDZ_PKT_REPAIR_LEN;
	case NDZ_PKT_RREQUEST:   return NDZ_PKT_RREQUEST_LEN;
	case NDZ_PKT_PROGRESS:   return NDZ_PKT_PROGRESS_LEN;
	default:                 return 0;
	}
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
	case NDZ_PKT_JOIN:
	case NDZ_PKT_FEATURES:
		return 1;
	default:
		return 0;
	}
}

static int encode(const struct ndz_pkt *p, uint8_t *b, size_t cap)
{
	size_t len = type_len(p->type);

	if (!len || cap < len || !fields_valid(p))
		return NDZ_EINVAL;
	if ((p->type == NDZ_PKT_BLOCK || p->type == NDZ_PKT_REPAIR) && !p->data)
		return NDZ_EINVAL;
	memset(b, 0, len);
	memcpy(b, proto_magic, 4);
	b[4] = NDZ_PROTO_VERSION;
	b[5] = p->type;
	/* b[6..7]: flags, zero in version 1 */
	switch (p->type) {
	case NDZ_PKT_JOIN:
		put_le32(b + 8, p->client_id);
		break;
	case NDZ_PKT_JOIN_REPLY:
		put_le32(b + 8, p->client_id);
		put_le32(b + 12, p->tag);
		memcpy(b + 16, p->info.uuid, 16);
		put_le32(b + 32, p->info.chunks);
		put_le32(b + 36, p->info.block_size);
		put_le32(b + 40, p->info.blocks_per_chunk);
		put_le32(b + 44, p->info.idle_timeout);
		put_le64(b + 48, p->info.image_bytes);
		put_le64(b + 56, p->info.source_bytes);
		put_le64(b + 64, p->info.rate_bps);
		break;
	case NDZ_PKT_LEAVE:
		put_le32(b + 8, p->client_id);
		put_le32(b + 12, p->tag);
		put_le32(b + 16, p->leave.elapsed_ms);
		put_le32(b + 20, p->leave.status);
		put_le64(b + 24, p->leave.blocks_received);
		put_le64(b + 32, p->leave.duplicates);
		put_le64(b + 40, p->leave.requests_sent);
		put_le64(b + 48, p->leave.bytes_written);
		put_le32(b + 56, p->leave.chunks_done);
		break;
	case NDZ_PKT_BLOCK:
		put_le32(b + 8, p->tag);
		put_le32(b + 12, p->chunk);
		put_le16(b + 16, p->block);
		memcpy(b + 20, p->data, NDZ_BLOCK_SIZE);
		break;
	case NDZ_PKT_REQUEST:
		put_le32(b + 8, p->client_id);
		put_le32(b + 12, p->tag);
		put_le32(b + 16, p->chunk);
		put_le16(b + 20, p->block);
		put_le16(b + 22, p->count);
		break;
	case NDZ_PKT_PREQUEST:
		put_le32(b + 8, p->client_id);
		put_le32(b + 12, p->tag);
		put_le32(b + 16, p->chunk);
		memcpy(b + 24, p->bitmap, NDZ_BITMAP_BYTES);
		break;
	case NDZ_PKT_FEATURES:
		put_le32(b + 8, p->tag);
		put_le32(b + 12, p->features);
		break;
	case NDZ_PKT_REPAIR:
		put_le32(b + 8, p->tag);
		put_le32(b + 12, p->chunk);
		b[16] = p->stripe;
		b[17] = p->index;
		memcpy(b + 20, p->data, NDZ_BLOCK_SIZE);
		break;
	case NDZ_PKT_RREQUEST:
		put_le32(b + 8, p->client_id);
		put_le32(b + 12, p->tag);
		put_le32(b + 16, p->chunk);
		memcpy(b + 20, p->need, NDZ_FEC_SETS);
		break;
	case NDZ_PKT_PROGRESS:
		put_le32(b + 8, p->client_id);
		put_le32(b + 12, p->tag);
		put_le32(b + 16, p->progress.chunks_done);
		put_le32(b + 20, p->progress.chunks_total);
		put_le64(b + 24, p->progress.bytes_written);
		put_le32(b + 32, p->progress.elapsed_ms);
		break;
	}
	return (int)len;
}

static int zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static int decode(const uint8_t *b, size_t len, struct ndz_pkt *p)
{
	size_t want;

	if (len < NDZ_PROTO_HDR || memcmp(b, proto_magic, 4) != 0)
		return NDZ_EPROTO;
	if (b[4] != NDZ_PROTO_VERSION)
		return NDZ_EPROTOVER;
	want = type_len(b[5]);
	if (!want || len != want || get_le16(b + 6) != 0)
		return NDZ_EPROTO;
	memset(p, 0, sizeof(*p));
	p->type = b[5];
	switch (p->type) {
	case NDZ_PKT_JOIN:
		p->client_id = get_le32(b + 8);
		if (!zero(b + 12, 4))
			return NDZ_EPROTO;
		break;
	case NDZ_PKT_JOIN_REPLY:
		p->client_id = get_le32(b + 8);
		p->tag = get_le32(b + 12);
		memcpy(p->info.uuid, b + 16, 16);
		p->info.chunks = get_le32(b + 32);
		p->info.block_size = get_le32(b + 36);
		p->info.blocks_per_chunk = get_le32(b + 40);
		p->info.idle_timeout = get_le32(b + 44);
		p->info.image_bytes = get_le64(b + 48);
		p->info.source_bytes = get_le64(b + 56);
		p->info.rate_bps = get_le64(b + 64);
		if (!zero(b + 72, 8) || p->tag != ndz_image_tag(p->info.uuid))
			return NDZ_EPROTO;
		break;
	case NDZ_PKT_LEAVE:
		p->client_id = get_le32(b + 8);
		p->tag = get_le32(b + 12);
		p->leave.elapsed_ms = get_le32(b + 16);
		p->leave.status = get_le32(b + 20);
		p->leave.blocks_received = get_le64(b + 24);
		p->leave.duplicates = get_le64(b + 32);
		p->leave.requests_sent = get_le64(b + 40);
		p->leave.bytes_written = get_le64(b + 48);
		p->leave.chunks_done = get_le32(b + 56);
		if (!zero(b + 60, 4))
			return NDZ_EPROTO;
		break;
	case NDZ_PKT_BLOCK:
		p->tag = get_le32(b + 8);
		p->chunk = get_le32(b + 12);
		p->block = get_le16(b + 16);
		if (!zero(b + 18, 2))
			return NDZ_EPROTO;
		p->data = b + 20;
		break;
	case NDZ_PKT_REQUEST:
		p->client_id = get_le32(b + 8);
		p->tag = get_le32(b + 12);
		p->chunk = get_le32(b + 16);
		p->block = get_le16(b + 20);
		p->count = get_le16(b + 22);
		break;
	case NDZ_PKT_PREQUEST:
		p->client_id = get_le32(b + 8);
		p->tag = get_le32(b + 12);
		p->chunk = get_le32(b + 16);
		if (!zero(b + 20, 4))
			return NDZ_EPROTO;
		memcpy(p->bitmap, b + 24, NDZ_BITMAP_BYTES);
		break;
	case NDZ_PKT_FEATURES:
		p->tag = get_le32(b + 8);
		p->features = get_le32(b + 12);
		break;
	case NDZ_PKT_REPAIR:
		p->tag = get_le32(b + 8);
		p->chunk = get_le32(b + 12);
		p->stripe = b[16];
		p->index = b[17];
		if (!zero(b + 18, 2))
			return NDZ_EPROTO;
		p->data = b + 20;
		break;
	case NDZ_PKT_RREQUEST:
		p->client_id = get_le32(b + 8);
		p->tag = get_le32(b + 12);
		p->chunk = get_le32(b + 16);
		memcpy(p->need, b + 20, NDZ_FEC_SETS);
		if (!zero(b + 29, 3))
			return NDZ_EPROTO;
		break;
	case NDZ_PKT_PROGRESS:
		p->client_id = get_le32(b + 8);
		p->tag = get_le32(b + 12);
		p->progress.chunks_done = get_le32(b + 16);
		p->progress.chunks_total = get_le32(b + 20);
		p->progress.bytes_written = get_le64(b + 24);
		p->progress.elapsed_ms = get_le32(b + 32);
		if (!zero(b + 36, 4))
			return NDZ_EPROTO;
		break;
	}
	return fields_valid(p) ? 0 : NDZ_EPROTO;
}

int ndz_pkt_encode(const struct ndz_pkt *p, uint8_t *b, size_t cap, struct ndz_error *e)
{
	int r = encode(p, b, cap);

	if (r < 0)
		ndz_error_set(e, r, 0, "packet of type %u: a field out of range, or %zu bytes "
			      "too small", p->type, cap);
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
