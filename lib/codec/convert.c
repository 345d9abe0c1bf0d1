/* Converting between our image format and the original Frisbee's V3. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "convert.h"
#include "core/image.h"
#include "core/le.h"
#include "unzip.h"

int ndz_image_unpack(struct ndz_io *in, const struct ndz_orig_keys *okeys,
		     struct ndz_io *scratch, struct ndz_unpacked *u, struct ndz_error *e)
{
	struct ndz_image_reader *r = NULL;
	struct ndz_unzip *z = NULL;
	struct ndz_unzip_opts o;
	const struct ndz_chunk_hdr *h0;
	struct ndz_chunk_hdr h;
	struct ndz_error mine = { 0 };
	uint32_t i;
	int rc;

	memset(u, 0, sizeof(*u));
	ndz_ranges_init(&u->alloc);
	rc = ndz_image_reader_open(in, &r, e);
	if (rc < 0)
		return rc;
	h0 = ndz_image_reader_first(r);
	u->orig_version = NDZ_IS_ORIG(h0) ? h0->version - NDZ_ORIG_HVERSION(0) : 0;
	u->bytes = h0->source_bytes;
	if (h0->source_bytes && (rc = ndz_io_set_size(scratch, h0->source_bytes, e)) < 0)
		goto out;
	ndz_unzip_opts_init(&o);
	o.target_zeroed = 1;
	o.scratch = 1;          /* read back at once, then gone: no flush */
	o.name = in->name;
	o.orig_keys = okeys;
	o.expect_chunks = ndz_image_reader_chunks(r);
	rc = ndz_unzip_create(scratch, &o, &z, e);
	if (rc < 0)
		goto out;
	for (;;) {
		uint8_t *buf = ndz_unzip_get_buf(z, NULL);
		struct ndz_chunk_view cv;

		if (!buf)
			break;
		rc = ndz_image_reader_next(r, buf, &h, &mine);
		if (rc <= 0) {
			ndz_unzip_put_buf(z, buf, NULL, 0, NULL);
			break;
		}
		/* what the chunk holds, before the pipeline takes the buffer (either format:
		   lib/core/orig.h's view) */
		rc = ndz_chunk_view_peek(buf, &h, &cv, &mine);
		for (i = 0; i < cv.h.nregions && rc >= 0; i++) {
			struct ndz_region g = ndz_chunk_view_region(&cv, i);

			rc = ndz_ranges_add(&u->alloc, g.start, g.count, &mine);
		}
		/* an original image's disklabels, kept for --to-orig */
		for (i = 0; i < cv.fixups && rc >= 0; i++) {
			struct ndz_orig_reloc rl = ndz_chunk_view_reloc(&cv, i);
			struct ndz_orig_reloc *l;

			if (rl.type != NDZ_ORIG_RELOC_FBSDDISKLABEL)
				continue;
			l = realloc(u->labels, (u->disklabels + 1) * sizeof(*l));
			if (!l) {
				rc = ndz_error_set(&mine, NDZ_ENOMEM, 0, "%s",
						   ndz_strerror(NDZ_ENOMEM));
				break;
			}
			u->labels = l;
			u->labels[u->disklabels++] = rl;
		}
		/* a stream of the original format: its end is its last data */
		if (rc >= 0 && !h0->source_bytes && cv.clip > u->bytes)
			u->bytes = cv.clip;
		if (rc < 0) {
			ndz_error_prefix(&mine, "%s: chunk %u: its regions", in->name, h.index);
			ndz_unzip_put_buf(z, buf, NULL, 0, NULL);
			break;
		}
		u->chunks++;
		if (ndz_unzip_put_buf(z, buf, &h, 0, NULL) < 0)
			break;
	}
	rc = ndz_unzip_finish(z, NULL, e);
	if (mine.code) {
		ndz_error_clear(e);
		rc = ndz_error_copy(e, &mine);
	}
	if (rc == 0 && !h0->source_bytes)
		rc = ndz_io_set_size(scratch, u->bytes, e);
	ndz_ranges_normalize(&u->alloc);
out:
	ndz_unzip_free(z);
	ndz_image_reader_free(r);
	if (rc < 0) {
		ndz_ranges_release(&u->alloc);
		free(u->labels);
		u->labels = NULL;
	}
	return rc;
}

/* ---- the original V3 writer ---- */

#define V3_PIECE   (128u << 10)        /* input per deflate call, as the original */
#define V3_CLOSE   (8u << 10)          /* a chunk with less room left is closed */

struct v3 {
	struct ndz_io *src;
	uint64_t source_bytes;
	ndz_chunk_fn out;
	void *out_ctx;
	z_stream z;
	uint8_t *chunk, *in;
	uint32_t index, nreg;
	uint64_t first, reg_start, reg_end;   /* reg_*: the open region */
	uint32_t regs[2 * NDZ_ORIG_V3_REGIONS];
	int open;
	const struct ndz_orig_reloc *labels;
	uint32_t nlabels, labels_put;
};

/* Whether the open chunk's regions hold bytes [at, at + len) of the source. */
static int v3_holds(const struct v3 *c, uint64_t at, uint64_t len)
{
	uint32_t i;

	for (i = 0; i < c->nreg; i++) {
		uint64_t s = (uint64_t)c->regs[2 * i] * NDZ_SECTOR_SIZE;
		uint64_t n = (uint64_t)c->regs[2 * i + 1] * NDZ_SECTOR_SIZE;

		if (at >= s && at + len <= s + n)
			return 1;
	}
	return 0;
}

/* deflate output for n more input bytes at most (stored blocks, a sync marker) */
static uint64_t v3_bound(uint64_t n)
{
	return n + (n >> 12) + (n >> 14) + 64;
}

static int v3_start(struct v3 *c, struct ndz_error *e)
{
	memset(c->chunk, 0, NDZ_CHUNK_SIZE);
	if (deflateReset(&c->z) != Z_OK)
		return ndz_error_set(e, NDZ_EINVAL, 0, "zlib: deflateReset failed");
	c->z.next_out = c->chunk + NDZ_ORIG_HDR_AREA;
	c->z.avail_out = NDZ_ORIG_MAX_DATA;
	c->nreg = 0;
	c->open = 1;
	return 0;
}

static int v3_finish(struct v3 *c, uint64_t last, int is_last, struct ndz_error *e)
{
	uint8_t *a = c->chunk, *p;
	uint32_t i, nrel = 0, size;
	int zrc;

	c->z.next_in = NULL;
	c->z.avail_in = 0;
	zrc = deflate(&c->z, Z_FINISH);
	if (zrc != Z_STREAM_END)
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk %u: zlib could not finish (%d)",
				     c->index, zrc);
	size = NDZ_ORIG_MAX_DATA - c->z.avail_out;
	put_le32(a + 0, NDZ_ORIG_MAGIC + 2);
	put_le32(a + 4, size);
	put_le32(a + 8, c->index);
	put_le32(a + 12, 0);
	put_le32(a + 16, NDZ_ORIG_HDR_AREA);
	put_le32(a + 20, c->nreg);
	put_le32(a + 24, (uint32_t)c->first);
	put_le32(a + 28, (uint32_t)last);
	for (i = 0; i < c->nreg; i++) {
		put_le32(a + NDZ_ORIG_HDR_V2 + 8 * i, c->regs[2 * i]);
		put_le32(a + NDZ_ORIG_HDR_V2 + 8 * i + 4, c->regs[2 * i + 1]);
	}
	/* a source that ends inside its last sector, when that sector is here */
	if (is_last && c->source_bytes % NDZ_SECTOR_SIZE && c->nreg &&
	    (uint64_t)c->regs[2 * (c->nreg - 1)] + c->regs[2 * c->nreg - 1] ==
	    ndz_sectors_of(c->source_bytes)) {
		p = a + NDZ_ORIG_HDR_V2 + 8 * c->nreg;
		put_le32(p, NDZ_ORIG_RELOC_SHORTSECTOR);
		put_le32(p + 4, (uint32_t)(c->source_bytes / NDZ_SECTOR_SIZE));
		put_le32(p + 8, 0);
		put_le32(p + 12, (uint32_t)(c->source_bytes % NDZ_SECTOR_SIZE));
		nrel = 1;
	}
	/* the disklabels this chunk holds, as the original image had them */
	for (i = 0; i < c->nlabels; i++) {
		const struct ndz_orig_reloc *l = &c->labels[i];

		if (!v3_holds(c, (uint64_t)l->sector * NDZ_SECTOR_SIZE + l->sectoff, l->size))
			continue;
		if (NDZ_ORIG_HDR_V2 + 8 * c->nreg + 16 * (nrel + 1) > NDZ_ORIG_HDR_AREA)
			return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: no room for its "
					     "relocations", c->index);
		p = a + NDZ_ORIG_HDR_V2 + 8 * c->nreg + 16 * nrel;
		put_le32(p, NDZ_ORIG_RELOC_FBSDDISKLABEL);
		put_le32(p + 4, l->sector);
		put_le32(p + 8, l->sectoff);
		put_le32(p + 12, l->size);
		nrel++;
		c->labels_put++;
	}
	put_le32(a + 32, nrel);
	c->open = 0;
	c->first = last;
	if (c->out(c->out_ctx, c->chunk, c->index, e) < 0)
		return e->code ? e->code : NDZ_EIO;
	c->index++;
	return 0;
}

/* Compress sectors [pos, pos + n) of the source into the open chunk. */
static int v3_put(struct v3 *c, uint64_t pos, uint32_t n, struct ndz_error *e)
{
	uint64_t off = pos * NDZ_SECTOR_SIZE, len = (uint64_t)n * NDZ_SECTOR_SIZE, have = len;
	int rc;

	if (off + have > c->source_bytes)
		have = c->source_bytes - off;
	memset(c->in, 0, (size_t)len);
	rc = ndz_io_read_full(c->src, c->in, (size_t)have, off, NULL, e);
	if (rc < 0)
		return rc;
	if (c->nreg && (uint64_t)c->regs[2 * (c->nreg - 1)] + c->regs[2 * c->nreg - 1] == pos) {
		c->regs[2 * c->nreg - 1] += n;
	} else {
		c->regs[2 * c->nreg] = (uint32_t)pos;
		c->regs[2 * c->nreg + 1] = n;
		c->nreg++;
	}
	c->z.next_in = c->in;
	c->z.avail_in = (uInt)len;
	rc = deflate(&c->z, Z_SYNC_FLUSH);
	if (rc != Z_OK || c->z.avail_in)
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk %u: compressed data overran the "
				     "chunk", c->index);
	return 0;
}

int ndz_orig_zip_v3(struct ndz_io *src, uint64_t source_bytes, const struct ndz_ranges *alloc,
		    const struct ndz_orig_reloc *labels, uint32_t nlabels, int level,
		    ndz_chunk_fn out, void *out_ctx, uint32_t *chunks, struct ndz_error *e)
{
	uint64_t sectors = ndz_sectors_of(source_bytes);
	struct v3 c;
	size_t i;
	int rc = 0;

	memset(&c, 0, sizeof(c));
	if (sectors > UINT32_MAX)
		return ndz_error_set(e, NDZ_ERANGE, 0, "%s: %llu sectors: the original format "
				     "addresses 2^32 sectors (2 TiB) at most", src->name,
				     (unsigned long long)sectors);
	c.src = src;
	c.source_bytes = source_bytes;
	c.out = out;
	c.out_ctx = out_ctx;
	c.labels = labels;
	c.nlabels = nlabels;
	c.chunk = malloc(NDZ_CHUNK_SIZE);
	c.in = malloc(V3_PIECE);
	if (!c.chunk || !c.in || deflateInit(&c.z, level) != Z_OK) {
		free(c.chunk);
		free(c.in);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", ndz_strerror(NDZ_ENOMEM));
	}
	for (i = 0; i < alloc->n && rc == 0; i++) {
		uint64_t pos = alloc->v[i].start, end = pos + alloc->v[i].count;

		if (end > sectors)
			rc = ndz_error_set(e, NDZ_EREGION, 0, "%s: sectors %llu+%llu past its end",
					   src->name, (unsigned long long)pos,
					   (unsigned long long)alloc->v[i].count);
		while (rc == 0 && pos < end) {
			uint64_t room, n = end - pos;
			int contiguous;

			if (!c.open && (rc = v3_start(&c, e)) < 0)
				break;
			room = c.z.avail_out;
			contiguous = c.nreg && (uint64_t)c.regs[2 * (c.nreg - 1)] +
					       c.regs[2 * c.nreg - 1] == pos;
			if (n > V3_PIECE / NDZ_SECTOR_SIZE)
				n = V3_PIECE / NDZ_SECTOR_SIZE;
			/* near the end, smaller pieces, as long as one sector fits */
			while (n && v3_bound(n * NDZ_SECTOR_SIZE) > room)
				n /= 2;
			if (room < V3_CLOSE || n == 0 ||
			    (!contiguous && c.nreg == NDZ_ORIG_V3_REGIONS)) {
				rc = v3_finish(&c, pos, 0, e);
				continue;
			}
			rc = v3_put(&c, pos, (uint32_t)n, e);
			pos += n;
		}
	}
	if (rc == 0 && c.open)
		rc = v3_finish(&c, sectors, 1, e);
	else if (rc == 0 && c.index == 0) {
		/* nothing allocated: one chunk of one empty-looking region is not V3; refuse */
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "%s: nothing to image", src->name);
	}
	/* a label whose bytes no one chunk held (split by a chunk's end) is not dropped */
	if (rc == 0 && c.labels_put != nlabels)
		rc = ndz_error_set(e, NDZ_EREGION, 0, "%s: %u of %u disklabel relocations are "
				   "not inside one chunk's regions", src->name,
				   nlabels - c.labels_put, nlabels);
	/* the last chunk closed early (full): the source's end is the next one's */
	*chunks = c.index;
	deflateEnd(&c.z);
	free(c.chunk);
	free(c.in);
	return rc;
}
