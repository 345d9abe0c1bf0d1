/*
 * libFuzzer target for the restore pipeline (lib/unzip.c): one chunk, built from
 * the input, is decoded by ndz_unzip. Input: a mode byte, then the header area and
 * data of the chunk (zero padded to 1 MiB). Mode 0 takes the bytes as they are;
 * mode 1 fixes both CRCs so the decoders see hostile data; mode 2 builds a valid
 * header whose regions match a payload (the input after 16 bytes of parameters)
 * deflated, or compressed into one or two zstd frames (the second with the first's
 * data as prefix, as the format allows), may damage one bit of the data, and
 * fixes the CRCs. With mode
 * bit 0x80 the chunk is restored into a memory target guarded by the fault io, so
 * a write outside the image turns into NDZ_EIO, which must never happen; with bit
 * 0x20 the default memory budget lets zlib chunks take the libdeflate path.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "chunkfix.h"
#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "core/le.h"
#include "codec/unzip.h"
#include "codec/zip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TARGET (4u << 20)

static uint8_t *chunk, *target;

/* Mode 2: payload sectors in up to 8 regions with gaps, compressed, one byte damaged. */
static void build(const uint8_t *d, size_t n)
{
	static struct ndz_chunk_hdr h;
	static uint8_t payload[64 * NDZ_SECTOR_SIZE];
	uint8_t b[16] = { 0 };
	size_t used = n < sizeof(b) ? n : sizeof(b), plen;
	uLongf zlen = NDZ_MAX_DATA;
	uint64_t pos, sectors;
	uint32_t i, nr;

	memcpy(b, d, used);
	d += used;
	n -= used;
	/* the payload: the rest of the input, zero padded to whole sectors */
	if (n > sizeof(payload))
		n = sizeof(payload);
	memset(payload, 0, sizeof(payload));
	memcpy(payload, d, n);
	plen = (n + NDZ_SECTOR_SIZE - 1) / NDZ_SECTOR_SIZE * NDZ_SECTOR_SIZE;
	sectors = plen / NDZ_SECTOR_SIZE;
	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.chunk_flags = NDZ_CHUNK_LAST;
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = b[12] & 2 ? NDZ_CODEC_ZSTD : NDZ_CODEC_ZLIB;
	nr = sectors ? 1 + b[0] % 8 : 0;
	if (nr > sectors)
		nr = (uint32_t)sectors;
	pos = b[1] % 4;
	for (i = 0; i < nr; i++) {
		uint64_t each = sectors / nr;

		struct ndz_region r = { pos, (uint32_t)(i + 1 < nr ? each : sectors - each * i) };

		ndz_hdr_set_region(chunk, i, r);
		pos += r.count + b[2 + i] % 3;
	}
	h.nregions = nr;
	h.source_bytes = pos * NDZ_SECTOR_SIZE - (b[10] % NDZ_SECTOR_SIZE) * (pos > 0);
	h.source_sectors = pos;
	h.first = 0;
	h.last = pos;
	if (h.codec == NDZ_CODEC_ZSTD) {
		/* one frame, or two split at a sector */
		size_t cut = b[12] & 4 ? (size_t)(sectors / 2) * NDZ_SECTOR_SIZE : plen, z1, z2;

		z1 = ZSTD_compress(chunk + NDZ_HDR_SIZE, NDZ_MAX_DATA, payload, cut,
				   1 + b[11] % 19);
		if (ZSTD_isError(z1))
			return;
		z2 = 0;
		if (cut < plen) {
			/* the second frame uses the first's data as its prefix, as imagezip's do */
			ZSTD_CCtx *zc = ZSTD_createCCtx();
			size_t pl = cut < NDZ_ZSTD_PREFIX ? cut : NDZ_ZSTD_PREFIX;

			if (!zc)
				return;
			ZSTD_CCtx_setParameter(zc, ZSTD_c_compressionLevel, 1 + b[11] % 19);
			ZSTD_CCtx_setParameter(zc, ZSTD_c_checksumFlag, b[12] >> 3 & 1);
			ZSTD_CCtx_refPrefix(zc, payload + cut - pl, pl);
			z2 = ZSTD_compress2(zc, chunk + NDZ_HDR_SIZE + z1, NDZ_MAX_DATA - z1,
					    payload + cut, plen - cut);
			ZSTD_freeCCtx(zc);
		}
		if (ZSTD_isError(z2))
			return;
		zlen = (uLongf)(z1 + z2);
	} else if (compress2(chunk + NDZ_HDR_SIZE, &zlen, payload, (uLong)plen, b[11] % 10) !=
		   Z_OK) {
		return;
	}
	h.data_len = (uint32_t)zlen;
	if (zlen && (b[12] & 1))
		chunk[NDZ_HDR_SIZE + get_le16(b + 13) % zlen] ^= (uint8_t)(1u << (b[15] % 8));
	h.data_crc = crc(chunk + NDZ_HDR_SIZE, h.data_len);
	if (ndz_hdr_encode(&h, chunk, NULL) != 0)
		memset(chunk, 0, NDZ_HDR_SIZE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ndz_unzip_opts o;
	struct ndz_chunk_hdr h;
	struct ndz_error e = { 0 };
	struct ndz_io *mem = NULL, *io = NULL;
	struct ndz_unzip *u;
	uint8_t mode;
	int rc, put_rc, write;

	if (!chunk) {
		chunk = malloc(NDZ_CHUNK_SIZE);
		target = malloc(MAX_TARGET);
		if (!chunk || !target)
			abort();
	}
	if (size < 1)
		return 0;
	memset(chunk, 0, NDZ_CHUNK_SIZE);
	mode = data[0];
	write = !!(mode & 0x80);
	data++;
	size--;
	switch (mode % 3) {
	case 0:
	case 1:
		memcpy(chunk, data, size < NDZ_CHUNK_SIZE ? size : NDZ_CHUNK_SIZE);
		if (mode % 3 == 1)
			fix_crcs(chunk);
		break;
	default:
		build(data, size);
		break;
	}

	/* A header that does not decode never reaches the pipeline: skip its costly setup. */
	rc = ndz_hdr_decode(chunk, &h, NULL);
	if (rc < 0) {
		if (ndz_chunk_check(chunk, &h, NULL) != rc)
			abort();
		return 0;
	}
	ndz_unzip_opts_init(&o);
	o.threads = 1;
	o.mem_limit = mode & 0x20 ? 0 : 1;   /* the default budget decodes zlib flat */
	o.zero_fill = !!(mode & 0x40);
	o.verify_only = 1;
	if (write && h.source_bytes <= MAX_TARGET) {
		o.verify_only = 0;
		memset(target, 0xa5, (size_t)h.source_bytes);
		if (ndz_io_open_mem(target, (size_t)h.source_bytes, 1, &mem, NULL) < 0 ||
		    ndz_io_open_fault(mem, 0, 0, 0, h.source_bytes, &io, NULL) < 0)
			abort();
	}
	if (ndz_unzip_create(io, &o, &u, NULL) < 0)
		abort();
	put_rc = ndz_unzip_put(u, chunk, NULL, 0, NULL);
	rc = ndz_unzip_finish(u, NULL, &e);
	if (put_rc < 0 && rc != put_rc)
		abort();               /* finish reports the first error */
	if (rc == NDZ_EIO || rc > 0)
		abort();               /* a write outside the image, or a bogus code */
	if (rc < 0 && strcmp(ndz_strerror(rc), "unknown error") == 0)
		abort();
	if (rc < 0 && (e.code != rc || !e.msg[0]))
		abort();               /* every failure comes with its message */
	ndz_unzip_free(u);
	ndz_io_close(io);
	return 0;
}
