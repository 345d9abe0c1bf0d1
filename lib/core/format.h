/* The image format: 1 MiB self-describing chunks (doc/FORMAT.md is the byte-level spec). */
#ifndef NDZ_FORMAT_H
#define NDZ_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define NDZ_CHUNK_SIZE    (1u << 20)   /* every chunk, the last one too */
#define NDZ_BLOCK_SIZE    1024u        /* network block; a chunk is 1024 of them */
#define NDZ_BLOCKS_PER_CHUNK (NDZ_CHUNK_SIZE / NDZ_BLOCK_SIZE)
#define NDZ_HDR_SIZE      4096u        /* header area: fixed part + region list */
#define NDZ_FIXED_HDR     128u         /* fixed part of the header area */
#define NDZ_REGION_SIZE   12u          /* u64 start sector + u32 sector count */
#define NDZ_MAX_REGIONS   ((NDZ_HDR_SIZE - NDZ_FIXED_HDR) / NDZ_REGION_SIZE)
#define NDZ_MAX_DATA      (NDZ_CHUNK_SIZE - NDZ_HDR_SIZE)
#define NDZ_SECTOR_SIZE   512u
#define NDZ_VERSION_1     1u

extern const uint8_t ndz_magic[8];

/* codec field */
#define NDZ_CODEC_ZLIB    1u           /* one zlib stream */
#define NDZ_CODEC_ZSTD    2u           /* zstd frames, one after another */

/* chunk_flags: per chunk */
#define NDZ_CHUNK_LAST    0x1u         /* the final chunk of the image */
#define NDZ_CHUNK_KNOWN   NDZ_CHUNK_LAST

/* incompat flags: a reader must refuse an image with a bit it does not know */
#define NDZ_INCOMPAT_ENCRYPTED 0x1u   /* data is AEAD ciphertext (lib/trust.h) */
#define NDZ_INCOMPAT_AES256GCM 0x2u   /* with ENCRYPTED: AES-256-GCM, else XChaCha20-Poly1305 */
#define NDZ_INCOMPAT_KNOWN (NDZ_INCOMPAT_ENCRYPTED | NDZ_INCOMPAT_AES256GCM)
/* compat flags: a reader may ignore bits it does not know */
#define NDZ_COMPAT_KNOWN   0x0u

/* image_kind */
#define NDZ_KIND_WHOLE     0u          /* a whole disk or file */
#define NDZ_KIND_PARTITION 1u          /* one partition of a disk (see part_*) */

struct ndz_region {
	uint64_t start;                /* first sector, relative to the image start */
	uint32_t count;                /* sectors */
};

/*
 * A decoded chunk header: the fixed fields only, small enough for the stack. The
 * region list stays in the header area it came from (ndz_hdr_region reads one).
 * Sectors are NDZ_SECTOR_SIZE bytes in version 1.
 */
struct ndz_chunk_hdr {
	uint16_t version;
	uint32_t compat_flags;
	uint32_t incompat_flags;
	uint32_t index;                /* chunk number, from 0 */
	uint32_t chunk_flags;          /* NDZ_CHUNK_* */
	uint8_t uuid[16];              /* same in every chunk of one image */
	uint32_t sector_size;
	uint16_t codec;
	uint16_t level;                /* informational */
	uint64_t source_sectors;       /* size of the whole source, rounded up */
	uint64_t source_bytes;         /* exact size of the whole source */
	uint64_t first;                /* first sector covered (= previous chunk's last) */
	uint64_t last;                 /* one past the last sector covered */
	uint32_t data_len;             /* bytes of compressed data after the header area */
	uint32_t data_crc;             /* CRC-32 of those bytes */
	uint16_t image_kind;           /* NDZ_KIND_* */
	uint16_t part_index;           /* partition number (1-based) or 0 */
	uint32_t part_type;            /* MBR type byte, or 0 */
	uint64_t part_start;           /* partition's start sector on its disk */
	uint32_t nregions;             /* regions in the area: read with ndz_hdr_region */
	uint8_t key_id[8];             /* encrypted chunk: its key's id; else ignored */
};

/* ndz_sectors_of - sectors holding n bytes, without the overflow of (n + 511) / 512. */
static inline uint64_t ndz_sectors_of(uint64_t n)
{
	return n / NDZ_SECTOR_SIZE + (n % NDZ_SECTOR_SIZE != 0);
}

/*
 * ndz_hdr_set_region - store region i (< NDZ_MAX_REGIONS) in a header area;
 * the region list is written this way before ndz_hdr_encode.
 */
void ndz_hdr_set_region(uint8_t *area, uint32_t i, struct ndz_region r);

/*
 * ndz_hdr_region - region i (< nregions) of a header area that ndz_hdr_decode
 * accepted or ndz_hdr_encode wrote.
 */
struct ndz_region ndz_hdr_region(const uint8_t *area, uint32_t i);

/*
 * ndz_hdr_encode - write hdr's fixed fields into a NDZ_HDR_SIZE byte area whose
 * first hdr->nregions regions are already set (ndz_hdr_set_region), zero the rest
 * and compute the header CRC (data_crc must already be set).
 * Returns 0, or NDZ_EINVAL when hdr or its regions violate an invariant (see
 * ndz_hdr_decode), with e naming the chunk and why.
 */
int ndz_hdr_encode(const struct ndz_chunk_hdr *hdr, uint8_t *area, struct ndz_error *e);

/*
 * ndz_hdr_decode - parse and fully validate a NDZ_HDR_SIZE byte header area:
 * magic, version, flags, header CRC, field bounds, regions sorted, non-overlapping
 * and inside [first, last), last <= source_sectors. Does not check data_crc.
 * Returns 0 or a negative NDZ_E* code with e saying "chunk N: why" (N as the area
 * says; "chunk header: why" for a bad magic or version); hdr is undefined on error.
 * e may be NULL (a hot path that only wants the code).
 */
int ndz_hdr_decode(const uint8_t *area, struct ndz_chunk_hdr *hdr, struct ndz_error *e);

/*
 * ndz_crc32 - the CRC-32 of zlib's crc32() (ISO-HDLC, reflected 0x04c11db7):
 * start with crc 0, pass the previous result to continue over more bytes.
 * Equals crc32(crc, buf, len) for every input; len 0 returns crc.
 */
uint32_t ndz_crc32(uint32_t crc, const void *buf, size_t len);

/*
 * ndz_chunk_check_data - the data CRC and the zero padding of a whole
 * NDZ_CHUNK_SIZE chunk whose header hdr was decoded from it.
 * Returns 0, NDZ_EDATACRC or NDZ_EPADDING with e saying "chunk N: why" (e may be
 * NULL).
 */
int ndz_chunk_check_data(const uint8_t *chunk, const struct ndz_chunk_hdr *hdr,
			 struct ndz_error *e);

/*
 * ndz_chunk_check_padding - the zero padding alone: for a chunk whose data is
 * authenticated otherwise (an AEAD tag), where the CRC adds nothing.
 * Returns 0 or NDZ_EPADDING with e saying so (e may be NULL).
 */
int ndz_chunk_check_padding(const uint8_t *chunk, const struct ndz_chunk_hdr *hdr,
			    struct ndz_error *e);

/*
 * ndz_chunk_check - ndz_hdr_decode then ndz_chunk_check_data. 0 or NDZ_E* with e
 * set as they set it (e may be NULL).
 */
int ndz_chunk_check(const uint8_t *chunk, struct ndz_chunk_hdr *hdr, struct ndz_error *e);

/*
 * ndz_chunk_index_hint - the chunk index field as stored, unchecked: for naming a
 * chunk in a message when its header did not decode.
 */
uint32_t ndz_chunk_index_hint(const uint8_t *area);

/*
 * ndz_hdr_same_image - 0 when b belongs to the same image as a (UUID, source
 * size, kind and partition, codec), else NDZ_EMISMATCH with e naming b's chunk and
 * the field that differs (e may be NULL).
 */
int ndz_hdr_same_image(const struct ndz_chunk_hdr *a, const struct ndz_chunk_hdr *b,
		       struct ndz_error *e);

/*
 * ndz_hdr_auth_data - the bytes an encrypted chunk's AEAD authenticates: a copy of
 * the NDZ_HDR_SIZE header area into ad with data_crc and header_crc taken as zero
 * (they are computed over the ciphertext, after it).
 */
void ndz_hdr_auth_data(const uint8_t *area, uint8_t *ad);

/* ndz_hdr_data_bytes - uncompressed bytes the regions of a decoded area hold. */
uint64_t ndz_hdr_data_bytes(const uint8_t *area, const struct ndz_chunk_hdr *hdr);

#endif
