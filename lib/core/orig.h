/*
 * The original Frisbee (Emulab) image format, versions 1 to 4: detection, a
 * bounds-checked header parser, V4 checksums, signatures and decryption, and a
 * reader that hands its chunks to the restorer as ndz_chunk_hdr (doc/FORMAT.md,
 * appendix "The original Frisbee format").
 */
#ifndef NDZ_ORIG_H
#define NDZ_ORIG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "format.h"
#include "io.h"

#define NDZ_ORIG_MAGIC       0x69696969u   /* + (version - 1) */
#define NDZ_ORIG_HDR_AREA    4096u         /* header, regions, relocations */
#define NDZ_ORIG_MAX_DATA    (NDZ_CHUNK_SIZE - NDZ_ORIG_HDR_AREA)
#define NDZ_ORIG_HDR_V1      24u
#define NDZ_ORIG_HDR_V2      36u           /* V2 and V3 */
#define NDZ_ORIG_HDR_V4      344u
#define NDZ_ORIG_MAX_REGIONS ((NDZ_ORIG_HDR_AREA - NDZ_ORIG_HDR_V1) / 8)   /* V1 */

/* ndz_chunk_hdr.version of a chunk in the original format: above every version of ours */
#define NDZ_ORIG_HVERSION(v) (0x100u + (v))
#define NDZ_IS_ORIG(h)       ((h)->version > 0xffu)

#define NDZ_ORIG_RELOC_FBSDDISKLABEL 1u
#define NDZ_ORIG_RELOC_SHORTSECTOR   6u

#define NDZ_ORIG_CSUM_SHA1   1u
#define NDZ_ORIG_CSUM_SIGNED 0x8000u
#define NDZ_ORIG_CIPHER_BF_CBC 1u

/* BSD disklabel: the fields a relocation touches */
#define NDZ_BSDLABEL_MAGIC   0x82564557u
#define NDZ_BSDLABEL_PARTS   148u          /* offset of the partition table */

struct ndz_orig_hdr {
	uint32_t version;              /* 1 to 4 */
	uint32_t size;                 /* bytes of (possibly encrypted) data after the area */
	uint32_t index, total;         /* total: V1 only */
	uint32_t regionsize, nregions, first, last, nrelocs;   /* first/last/nrelocs: V2+ */
	uint16_t cipher, csum_type;    /* V4 */
	uint8_t iv[32], csum[256], imageid[16];
	uint32_t hdrsize;
};

struct ndz_orig_reloc {
	uint32_t type, sector, sectoff, size;
};

/*
 * Keys of the original's V4 images: bf_key (32 bytes, the -k key file decoded)
 * decrypts, rsa_n/rsa_e (big-endian, the .skey file) check signatures.
 */
struct ndz_orig_keys {
	int have_bf;
	uint8_t bf_key[32];
	size_t rsa_n_len, rsa_e_len;   /* 0: no public key */
	uint8_t rsa_n[512], rsa_e[16];
};

/*
 * ndz_orig_probe - whether len bytes start an original image: its version (1-4),
 * 0 when they do not, or NDZ_EBIGENDIAN (e set) for one written on a big-endian
 * host. e may be NULL.
 */
int ndz_orig_probe(const uint8_t *buf, size_t len, struct ndz_error *e);

/*
 * ndz_orig_decode - parse and validate a NDZ_ORIG_HDR_AREA header area: magic,
 * sizes, regions sorted, not overlapping, inside [first, last), relocations inside
 * the regions and of a kind we apply. Returns 0 or a negative code with e saying
 * "the code's message: what in the header" ("malformed chunk header: data size 0
 * outside 1..N"); the caller names the image and chunk. e may be NULL.
 */
int ndz_orig_decode(const uint8_t *area, struct ndz_orig_hdr *oh, struct ndz_error *e);

/* ndz_orig_region - region i (< nregions) of an area ndz_orig_decode accepted. */
struct ndz_region ndz_orig_region(const uint8_t *area, const struct ndz_orig_hdr *oh, uint32_t i);
/* ndz_orig_get_reloc - relocation i (< nrelocs) likewise. */
struct ndz_orig_reloc ndz_orig_get_reloc(const uint8_t *area, const struct ndz_orig_hdr *oh,
					 uint32_t i);
/* ndz_orig_data_end - byte offset past the chunk's last region, a short sector applied. */
uint64_t ndz_orig_data_end(const uint8_t *area, const struct ndz_orig_hdr *oh);

/*
 * ndz_orig_check_signed - the rule of a public key (keys->rsa_n_len; without one
 * it returns 0): the original chunk (as stored: not decrypted) has a valid header,
 * carries a V4 RSA signature, and it verifies under the key. NDZ_EUNSIGNED for a
 * chunk without one (versions 1-3 cannot be signed; an unsigned V4 chunk),
 * NDZ_EORIGSUM for one that does not verify, or ndz_orig_decode's code; e set as
 * ndz_orig_decode sets it. The verifier (lib/trust/verify.h) asks it of every chunk.
 */
int ndz_orig_check_signed(const uint8_t *chunk, const struct ndz_orig_keys *keys,
			  struct ndz_error *e);

/*
 * ndz_orig_open_chunk - in a decoder, before anything of the chunk is decoded:
 * the V4 SHA-1 checksum of an unsigned chunk (a signature is the verifier's,
 * ndz_orig_check_signed) and, for an encrypted chunk, decryption in place with
 * keys->bf_key. *data_len is the compressed length after. Returns 0 or a negative
 * code with e set as ndz_orig_decode sets it.
 */
int ndz_orig_open_chunk(uint8_t *chunk, const struct ndz_orig_hdr *oh,
			const struct ndz_orig_keys *keys, uint32_t *data_len,
			struct ndz_error *e);

/*
 * ndz_orig_relocate - apply the chunk's relocations to its decoded output out
 * (the regions' bytes end to end, out_len of them) for an image laid at sector
 * base of its disk: a FreeBSD disklabel gets base added to its partitions'
 * offsets and its checksum recomputed, as the original restorer does.
 * Returns 0 or a negative code with e set as ndz_orig_decode sets it.
 */
int ndz_orig_relocate(const uint8_t *area, const struct ndz_orig_hdr *oh, uint8_t *out,
		      uint64_t out_len, uint64_t base, struct ndz_error *e);

/*
 * ndz_orig_load_keys - the original's key files: bf (hex, 32 bytes) and/or pub
 * (.skey); either may be NULL. 0, or NDZ_EIO / NDZ_EKEY with e naming the file.
 */
int ndz_orig_load_keys(const char *bf_path, const char *pub_path, struct ndz_orig_keys *k,
		       struct ndz_error *e);

/*
 * The reader, used by ndz_image_reader (lib/image.h) when the input starts with an
 * original magic. A file is scanned whole at open: every header valid, in place,
 * chained and of one image; a stream as it goes, a chunk known to be the last one
 * when the input ends right after it.
 */
struct ndz_orig_reader;

/*
 * ndz_orig_reader_open - in is the input; chunk0 (NDZ_CHUNK_SIZE bytes, taken over
 * and freed by the reader) is a stream's chunk 0 already read, NULL for a file.
 * Fills *first and *chunks (0 for a stream). 0 with *out, or a negative code with
 * e naming in and the chunk.
 */
int ndz_orig_reader_open(struct ndz_io *in, uint8_t *chunk0, struct ndz_chunk_hdr *first,
			 uint32_t *chunks, struct ndz_orig_reader **out, struct ndz_error *e);
/*
 * ndz_orig_reader_next - as ndz_image_reader_next: 1 with the next chunk in buf and
 * its header in h, 0 at the image's end, or a negative code with e set.
 */
int ndz_orig_reader_next(struct ndz_orig_reader *r, uint8_t *buf, struct ndz_chunk_hdr *h,
			 struct ndz_error *e);
/* ndz_orig_reader_free - accepts NULL; does not close the io. */
void ndz_orig_reader_free(struct ndz_orig_reader *r);

/*
 * A chunk of either format as a decoder sees it: the one view through which the
 * decoder reads an original chunk (its regions, checks, decryption, relocations
 * stay behind this door). Filled by ndz_chunk_view_open; the fields after h are
 * the view's own.
 */
struct ndz_chunk_view {
	struct ndz_chunk_hdr h;        /* plain header: data_len the bytes to decode */
	const uint8_t *data;           /* the compressed data */
	uint64_t want;                 /* bytes its regions hold, decoded */
	uint64_t clip;                 /* the chunk's data end: bytes past it are not written */
	uint64_t end;                  /* the source's end, for zero-filling gaps
					  (UINT64_MAX: not known, an original stream) */
	uint32_t fixups;               /* > 0: the decoded bytes need ndz_chunk_view_fix */
	const uint8_t *area;
	struct ndz_orig_hdr oh;        /* oh.version 0: a chunk of ours */
};

/*
 * ndz_chunk_view_open - the view of chunk, whose header h passed the verifier
 * (lib/trust/verify.h: ndz_verify_data, which made it plain). A chunk of ours is
 * read as it is; an original one has its header checked again on these bytes, its
 * V4 SHA-1 checksum checked and, encrypted, is decrypted in place with keys'
 * Blowfish key (keys may be NULL). 0, or a negative code with e set as
 * ndz_orig_decode sets it (the caller names the chunk).
 */
int ndz_chunk_view_open(uint8_t *chunk, const struct ndz_chunk_hdr *h,
			const struct ndz_orig_keys *keys, struct ndz_chunk_view *v,
			struct ndz_error *e);
/*
 * ndz_chunk_view_peek - as ndz_chunk_view_open without the checksum and the
 * decryption, chunk untouched: what a chunk holds (regions, ends, relocations),
 * for a reader that lists it. data_len is then the data as stored.
 */
int ndz_chunk_view_peek(const uint8_t *chunk, const struct ndz_chunk_hdr *h,
			struct ndz_chunk_view *v, struct ndz_error *e);
/* ndz_chunk_view_reloc - relocation i (< v->fixups) of the view. */
struct ndz_orig_reloc ndz_chunk_view_reloc(const struct ndz_chunk_view *v, uint32_t i);
/* ndz_chunk_view_region - region i (< v->h.nregions) of the view. */
struct ndz_region ndz_chunk_view_region(const struct ndz_chunk_view *v, uint32_t i);
/*
 * ndz_chunk_view_fix - when v->fixups: fix the decoded output out (the regions'
 * bytes end to end, len of them) for a restore laid at sector base of its disk
 * (ndz_orig_relocate). 0 or a negative code with e set.
 */
int ndz_chunk_view_fix(const struct ndz_chunk_view *v, uint8_t *out, uint64_t len,
		       uint64_t base, struct ndz_error *e);

/* an original chunk's ndz_chunk_hdr.compat_flags: its V4 checksum type and cipher */
#define NDZ_ORIG_FLAGS(csum, cipher) ((uint32_t)(csum) | (uint32_t)(cipher) << 16)
#define NDZ_ORIG_SIGNED(h)    (NDZ_IS_ORIG(h) && ((h)->compat_flags & NDZ_ORIG_CSUM_SIGNED))
#define NDZ_ORIG_ENCRYPTED(h) (NDZ_IS_ORIG(h) && ((h)->compat_flags >> 16) != 0)

/*
 * ndz_orig_to_hdr - the ndz_chunk_hdr of a decoded original chunk: index, regions,
 * chain, uuid (V4 image id), source_bytes as given (the restore's end).
 */
void ndz_orig_to_hdr(const struct ndz_orig_hdr *oh, uint64_t first, uint64_t last,
		     uint64_t source_bytes, int is_last, struct ndz_chunk_hdr *h);

/*
 * ndz_orig_chunk_hdr - the header of one original chunk taken alone (as a
 * multicast client gets them, in any order) in an image of nchunks chunks whose
 * restore ends at source_bytes (0: not known). Version 1 is refused: its chunks
 * say nothing of where they start. 0 or a negative code with e set as
 * ndz_orig_decode sets it.
 */
int ndz_orig_chunk_hdr(const uint8_t *chunk, uint32_t nchunks, uint64_t source_bytes,
		       struct ndz_chunk_hdr *h, struct ndz_error *e);

/*
 * An original image read from a stream has source_bytes 0: its end is not known
 * ahead (the original format does not record it), so a new target file grows as
 * it is written and each chunk's data is clipped at its own end instead.
 */

#endif
