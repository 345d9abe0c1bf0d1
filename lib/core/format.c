/* Chunk header encoding and validation: the only place that knows its byte layout. */
#include <string.h>
#include <isa-l/crc.h>

#include "err.h"
#include "format.h"
#include "le.h"

const uint8_t ndz_magic[8] = { 0x89, 'N', 'D', 'Z', '\r', '\n', 0x1a, '\n' };

/* Offsets in the fixed part; doc/FORMAT.md mirrors this table. */
enum {
	OFF_MAGIC = 0,
	OFF_VERSION = 8,
	OFF_HDR_SIZE = 10,
	OFF_CHUNK_SIZE = 12,
	OFF_COMPAT = 16,
	OFF_INCOMPAT = 20,
	OFF_INDEX = 24,
	OFF_CHUNK_FLAGS = 28,
	OFF_UUID = 32,
	OFF_SECTOR_SIZE = 48,
	OFF_CODEC = 52,
	OFF_LEVEL = 54,
	OFF_SRC_SECTORS = 56,
	OFF_SRC_BYTES = 64,
	OFF_FIRST = 72,
	OFF_LAST = 80,
	OFF_DATA_LEN = 88,
	OFF_DATA_CRC = 92,
	OFF_NREGIONS = 96,
	OFF_HDR_CRC = 100,
	OFF_KIND = 104,
	OFF_PART_INDEX = 106,
	OFF_PART_TYPE = 108,
	OFF_PART_START = 112,
	OFF_KEY_ID = 120,
};

/*
 * ISA-L's folding CRC (PCLMULQDQ where the CPU has it, about 5x zlib's crc32 here):
 * the same reflected polynomial, initial value and final inversion as zlib.
 */
uint32_t ndz_crc32(uint32_t crc, const void *buf, size_t len)
{
	return len ? crc32_gzip_refl(crc, (const unsigned char *)buf, (uint64_t)len) : crc;
}

static uint32_t hdr_crc(const uint8_t *area)
{
	static const uint8_t zero[4];
	uint32_t crc;

	crc = ndz_crc32(0, area, OFF_HDR_CRC);
	crc = ndz_crc32(crc, zero, 4);
	return ndz_crc32(crc, area + OFF_HDR_CRC + 4, NDZ_HDR_SIZE - OFF_HDR_CRC - 4);
}

void ndz_hdr_set_region(uint8_t *a, uint32_t i, struct ndz_region r)
{
	uint8_t *p = a + NDZ_FIXED_HDR + (size_t)i * NDZ_REGION_SIZE;

	put_le64(p, r.start);
	put_le32(p + 8, r.count);
}

struct ndz_region ndz_hdr_region(const uint8_t *a, uint32_t i)
{
	const uint8_t *p = a + NDZ_FIXED_HDR + (size_t)i * NDZ_REGION_SIZE;
	struct ndz_region r = { get_le64(p), get_le32(p + 8) };

	return r;
}

/*
 * The error of a header area in e: "chunk N: what", N as the area says, once its
 * magic and version say it is one of ours; else "chunk header: what".
 */
static int hdr_fail(struct ndz_error *e, int rc, const uint8_t *a)
{
	if (rc == NDZ_EBADMAGIC || rc == NDZ_EVERSION)
		return ndz_error_set(e, rc, 0, "chunk header: %s", ndz_strerror(rc));
	return ndz_error_set(e, rc, 0, "chunk %u: %s", get_le32(a + OFF_INDEX), ndz_strerror(rc));
}

/* Invariants shared by encode and decode; the regions are read from the area. */
static int hdr_valid(const struct ndz_chunk_hdr *h, const uint8_t *a)
{
	uint64_t prev_end;
	uint32_t i;

	if (h->codec != NDZ_CODEC_ZLIB && h->codec != NDZ_CODEC_ZSTD)
		return NDZ_ECODEC;
	if (h->sector_size != NDZ_SECTOR_SIZE)
		return NDZ_EHEADER;
	if (h->chunk_flags & ~NDZ_CHUNK_KNOWN)
		return NDZ_EFEATURE;
	if (h->data_len > NDZ_MAX_DATA || h->nregions > NDZ_MAX_REGIONS)
		return NDZ_EHEADER;
	if (h->image_kind > NDZ_KIND_PARTITION)
		return NDZ_EHEADER;
	/* nonce and tag: see lib/trust.h */
	if ((h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) && h->data_len < 40)
		return NDZ_EHEADER;
	if ((h->incompat_flags & NDZ_INCOMPAT_AES256GCM) &&
	    !(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED))
		return NDZ_EFEATURE;
	/* rounded up without source_bytes + 511, which wraps near UINT64_MAX */
	if (h->source_sectors != h->source_bytes / NDZ_SECTOR_SIZE +
				 (h->source_bytes % NDZ_SECTOR_SIZE != 0))
		return NDZ_EHEADER;
	if (h->first > h->last || h->last > h->source_sectors)
		return NDZ_EREGION;
	if ((h->chunk_flags & NDZ_CHUNK_LAST) && h->last != h->source_sectors)
		return NDZ_EREGION;
	prev_end = h->first;
	for (i = 0; i < h->nregions; i++) {
		struct ndz_region r = ndz_hdr_region(a, i);

		if (r.count == 0 || r.start < prev_end || r.start > h->last ||
		    h->last - r.start < r.count)
			return NDZ_EREGION;
		prev_end = r.start + r.count;
	}
	return 0;
}

int ndz_hdr_encode(const struct ndz_chunk_hdr *h, uint8_t *a, struct ndz_error *e)
{
	size_t regions_end;
	int rc;

	if (h->nregions > NDZ_MAX_REGIONS)
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk %u: %u regions, more than a header "
				     "holds", h->index, h->nregions);
	rc = hdr_valid(h, a);
	if (rc < 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk %u: not encoded: %s", h->index,
				     ndz_strerror(rc));
	if (h->version != NDZ_VERSION_1 || (h->compat_flags & ~NDZ_COMPAT_KNOWN) ||
	    (h->incompat_flags & ~NDZ_INCOMPAT_KNOWN))
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk %u: not encoded: a version or "
				     "flag this format does not have", h->index);
	regions_end = NDZ_FIXED_HDR + (size_t)h->nregions * NDZ_REGION_SIZE;
	memset(a, 0, NDZ_FIXED_HDR);
	memset(a + regions_end, 0, NDZ_HDR_SIZE - regions_end);
	memcpy(a + OFF_MAGIC, ndz_magic, sizeof(ndz_magic));
	put_le16(a + OFF_VERSION, h->version);
	put_le16(a + OFF_HDR_SIZE, NDZ_HDR_SIZE);
	put_le32(a + OFF_CHUNK_SIZE, NDZ_CHUNK_SIZE);
	put_le32(a + OFF_COMPAT, h->compat_flags);
	put_le32(a + OFF_INCOMPAT, h->incompat_flags);
	put_le32(a + OFF_INDEX, h->index);
	put_le32(a + OFF_CHUNK_FLAGS, h->chunk_flags);
	memcpy(a + OFF_UUID, h->uuid, 16);
	put_le32(a + OFF_SECTOR_SIZE, h->sector_size);
	put_le16(a + OFF_CODEC, h->codec);
	put_le16(a + OFF_LEVEL, h->level);
	put_le64(a + OFF_SRC_SECTORS, h->source_sectors);
	put_le64(a + OFF_SRC_BYTES, h->source_bytes);
	put_le64(a + OFF_FIRST, h->first);
	put_le64(a + OFF_LAST, h->last);
	put_le32(a + OFF_DATA_LEN, h->data_len);
	put_le32(a + OFF_DATA_CRC, h->data_crc);
	put_le32(a + OFF_NREGIONS, h->nregions);
	put_le16(a + OFF_KIND, h->image_kind);
	put_le16(a + OFF_PART_INDEX, h->part_index);
	put_le32(a + OFF_PART_TYPE, h->part_type);
	put_le64(a + OFF_PART_START, h->part_start);
	if (h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED)
		memcpy(a + OFF_KEY_ID, h->key_id, 8);
	put_le32(a + OFF_HDR_CRC, hdr_crc(a));
	return 0;
}

static int hdr_decode(const uint8_t *a, struct ndz_chunk_hdr *h)
{
	if (memcmp(a + OFF_MAGIC, ndz_magic, sizeof(ndz_magic)) != 0)
		return NDZ_EBADMAGIC;
	h->version = get_le16(a + OFF_VERSION);
	if (h->version != NDZ_VERSION_1)
		return NDZ_EVERSION;
	if (get_le32(a + OFF_HDR_CRC) != hdr_crc(a))
		return NDZ_EHDRCRC;
	if (get_le16(a + OFF_HDR_SIZE) != NDZ_HDR_SIZE ||
	    get_le32(a + OFF_CHUNK_SIZE) != NDZ_CHUNK_SIZE)
		return NDZ_EHEADER;
	h->compat_flags = get_le32(a + OFF_COMPAT);
	h->incompat_flags = get_le32(a + OFF_INCOMPAT);
	if (h->incompat_flags & ~NDZ_INCOMPAT_KNOWN)
		return NDZ_EFEATURE;
	h->index = get_le32(a + OFF_INDEX);
	h->chunk_flags = get_le32(a + OFF_CHUNK_FLAGS);
	memcpy(h->uuid, a + OFF_UUID, 16);
	h->sector_size = get_le32(a + OFF_SECTOR_SIZE);
	h->codec = get_le16(a + OFF_CODEC);
	h->level = get_le16(a + OFF_LEVEL);
	h->source_sectors = get_le64(a + OFF_SRC_SECTORS);
	h->source_bytes = get_le64(a + OFF_SRC_BYTES);
	h->first = get_le64(a + OFF_FIRST);
	h->last = get_le64(a + OFF_LAST);
	h->data_len = get_le32(a + OFF_DATA_LEN);
	h->data_crc = get_le32(a + OFF_DATA_CRC);
	h->nregions = get_le32(a + OFF_NREGIONS);
	h->image_kind = get_le16(a + OFF_KIND);
	h->part_index = get_le16(a + OFF_PART_INDEX);
	h->part_type = get_le32(a + OFF_PART_TYPE);
	h->part_start = get_le64(a + OFF_PART_START);
	memcpy(h->key_id, a + OFF_KEY_ID, 8);
	if (h->nregions > NDZ_MAX_REGIONS)
		return NDZ_EHEADER;
	return hdr_valid(h, a);
}

int ndz_hdr_decode(const uint8_t *a, struct ndz_chunk_hdr *h, struct ndz_error *e)
{
	int rc = hdr_decode(a, h);

	return rc < 0 ? hdr_fail(e, rc, a) : 0;
}

int ndz_chunk_check_data(const uint8_t *chunk, const struct ndz_chunk_hdr *h,
			 struct ndz_error *e)
{
	if (ndz_crc32(0, chunk + NDZ_HDR_SIZE, h->data_len) != h->data_crc)
		return ndz_error_set(e, NDZ_EDATACRC, 0, "chunk %u: %s", h->index,
				     ndz_strerror(NDZ_EDATACRC));
	return ndz_chunk_check_padding(chunk, h, e);
}

int ndz_chunk_check_padding(const uint8_t *chunk, const struct ndz_chunk_hdr *h,
			    struct ndz_error *e)
{
	static const uint8_t zeros[4096];
	const uint8_t *data = chunk + NDZ_HDR_SIZE;
	size_t i, n;

	/* memcmp in blocks: a byte loop costs ~0.5 ms on a nearly empty chunk */
	for (i = h->data_len; i < NDZ_MAX_DATA; i += n) {
		n = NDZ_MAX_DATA - i < sizeof(zeros) ? NDZ_MAX_DATA - i : sizeof(zeros);
		if (memcmp(data + i, zeros, n) != 0)
			return ndz_error_set(e, NDZ_EPADDING, 0, "chunk %u: %s", h->index,
					     ndz_strerror(NDZ_EPADDING));
	}
	return 0;
}

int ndz_chunk_check(const uint8_t *chunk, struct ndz_chunk_hdr *h, struct ndz_error *e)
{
	int rc = ndz_hdr_decode(chunk, h, e);

	return rc < 0 ? rc : ndz_chunk_check_data(chunk, h, e);
}

uint32_t ndz_chunk_index_hint(const uint8_t *a)
{
	return get_le32(a + OFF_INDEX);
}

int ndz_hdr_same_image(const struct ndz_chunk_hdr *a, const struct ndz_chunk_hdr *b,
		       struct ndz_error *e)
{
	const char *what = memcmp(a->uuid, b->uuid, 16) != 0 ? "UUID" :
			   a->source_bytes != b->source_bytes ? "source size" :
			   a->image_kind != b->image_kind || a->part_index != b->part_index ||
			   a->part_start != b->part_start || a->part_type != b->part_type ?
			   "partition" : a->codec != b->codec ? "codec" : NULL;

	if (what)
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "chunk %u: %s (its %s differs from "
				     "chunk %u's)", b->index, ndz_strerror(NDZ_EMISMATCH), what,
				     a->index);
	return 0;
}

void ndz_hdr_auth_data(const uint8_t *a, uint8_t *ad)
{
	memcpy(ad, a, NDZ_HDR_SIZE);
	put_le32(ad + OFF_DATA_CRC, 0);
	put_le32(ad + OFF_HDR_CRC, 0);
}

uint64_t ndz_hdr_data_bytes(const uint8_t *a, const struct ndz_chunk_hdr *h)
{
	uint64_t n = 0;
	uint32_t i;

	for (i = 0; i < h->nregions; i++)
		n += ndz_hdr_region(a, i).count;
	return n * NDZ_SECTOR_SIZE;
}
