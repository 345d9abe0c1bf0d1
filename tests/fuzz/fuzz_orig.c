/*
 * libFuzzer target for the original Frisbee format (lib/orig.c): the input, zero
 * padded to a whole 1 MiB chunk, is an image of one chunk read through
 * ndz_image_reader (which detects the format) and restored by ndz_unzip into a
 * memory target guarded by the fault io: every header field, region, relocation,
 * V4 checksum, Blowfish padding and zlib stream is hostile. The first byte picks
 * the mode: bit 0 gives the Blowfish key, bit 1 a public key (a fixed 512-bit
 * modulus), bit 2 zero fills, bit 3 restores as into a slice at sector 2048
 * (disklabels relocated). Seeds: the header area and data of corpus images.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/format.h"
#include "core/image.h"
#include "core/io.h"
#include "core/orig.h"
#include "codec/unzip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TARGET (8u << 20)

static uint8_t *img, *target;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ndz_io *in = NULL, *mem = NULL, *io = NULL;
	struct ndz_image_reader *r = NULL;
	struct ndz_unzip *u = NULL;
	struct ndz_unzip_opts o;
	struct ndz_orig_keys k = { 0 };
	struct ndz_error e = { 0 };
	const struct ndz_chunk_hdr *h0;
	struct ndz_chunk_hdr h;
	struct ndz_orig_hdr oh;
	struct ndz_error why = { 0 };
	unsigned mode;
	uint8_t *buf;
	int rc, orc;

	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	if (!img && (!(img = malloc(NDZ_CHUNK_SIZE)) || !(target = malloc(MAX_TARGET))))
		abort();
	memset(img, 0, NDZ_CHUNK_SIZE);
	memcpy(img, data, size < NDZ_CHUNK_SIZE ? size : NDZ_CHUNK_SIZE);

	/* the parser alone: a verdict, with a reason when it refuses */
	ndz_error_clear(&why);
	orc = ndz_orig_decode(img, &oh, &why);
	if (orc > 0 || (orc < 0 && (why.code != orc || !why.msg[0])))
		abort();
	if (orc == 0 && ndz_orig_data_end(img, &oh) > ((uint64_t)UINT32_MAX + 1) * NDZ_SECTOR_SIZE)
		abort();

	if (ndz_io_open_mem(img, NDZ_CHUNK_SIZE, 0, &in, NULL) < 0)
		abort();
	rc = ndz_image_reader_open(in, &r, &e);
	if (rc < 0)
		goto out;
	h0 = ndz_image_reader_first(r);
	if (!NDZ_IS_ORIG(h0))
		goto out;              /* one of ours: fuzz_unzip's */
	if (orc < 0)
		abort();               /* the reader took what the parser refuses */
	if (mode & 1) {
		k.have_bf = 1;
		memset(k.bf_key, 0x5a, sizeof(k.bf_key));
	}
	if (mode & 2) {
		k.rsa_n_len = 64;
		memset(k.rsa_n, 0xc3, 64);
		k.rsa_e[0] = 17;
		k.rsa_e_len = 1;
	}
	ndz_unzip_opts_init(&o);
	o.threads = 1;
	o.mem_limit = mode & 0x10 ? 1 : 0;
	o.zero_fill = !!(mode & 4);
	o.orig_base = mode & 8 ? 2048 : 0;
	o.orig_keys = &k;
	o.verify_only = 1;
	if (h0->source_bytes <= MAX_TARGET) {
		o.verify_only = 0;
		memset(target, 0xa5, (size_t)h0->source_bytes);
		if (ndz_io_open_mem(target, (size_t)h0->source_bytes, 1, &mem, NULL) < 0 ||
		    ndz_io_open_fault(mem, 0, 0, 0, h0->source_bytes, &io, NULL) < 0)
			abort();
	}
	if (ndz_unzip_create(io, &o, &u, NULL) < 0)
		abort();
	buf = ndz_unzip_get_buf(u, NULL);
	if (!buf)
		abort();
	rc = ndz_image_reader_next(r, buf, &h, &e);
	if (rc != 1)
		abort();               /* the chunk open read and checked */
	ndz_unzip_put_buf(u, buf, &h, 0, NULL);
	rc = ndz_unzip_finish(u, NULL, &e);
	if (rc == NDZ_EIO || rc > 0)
		abort();               /* a write outside the image, or a bogus code */
	if (rc < 0 && (e.code != rc || !e.msg[0]))
		abort();
out:
	ndz_unzip_free(u);
	ndz_io_close(io);
	ndz_image_reader_free(r);
	ndz_io_close(in);
	return 0;
}
