/*
 * exFAT: the allocation bitmap decides. It is found through the root
 * directory's bitmap entry; the root directory and the bitmap are followed
 * through the (active) FAT. Kept: both boot regions, the FAT(s), every cluster
 * whose bitmap bit is set (the union when TexFAT keeps two bitmaps), and the
 * sectors after the last whole cluster.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "fs.h"
#include "fsutil.h"
#include "core/le.h"

#define BOOT_SECTORS 12u                /* a boot region: 11 sectors + checksum sector */
#define VOL_DIRTY 0x0002u
#define FAT_EOC 0xffffffffu
#define ENT_BITMAP 0x81u

struct exfat {
	struct ndz_io *io;
	uint32_t bps_shift, spc_shift, nfats, active_fat;
	uint64_t vol_sectors;
	uint64_t fat_off, fat_len;     /* sectors */
	uint64_t heap_off;             /* sector of cluster 2 */
	uint32_t clusters;
	uint32_t root;
	uint8_t *used;                 /* bit i: cluster i + 2 */
};

struct boot {
	uint64_t vol_sectors;
	uint32_t fat_off, fat_len, heap_off, clusters, root;
	uint32_t flags, bps_shift, spc_shift, nfats;
};

static int read_boot(struct ndz_io *io, const uint8_t *s, struct boot *b)
{
	if (io->size < 2 * BOOT_SECTORS * 512)
		return 0;
	if (memcmp(s + 3, "EXFAT   ", 8) || s[510] != 0x55 || s[511] != 0xaa)
		return 0;
	b->vol_sectors = get_le64(s + 72);
	b->fat_off = get_le32(s + 80);
	b->fat_len = get_le32(s + 84);
	b->heap_off = get_le32(s + 88);
	b->clusters = get_le32(s + 92);
	b->root = get_le32(s + 96);
	b->flags = get_le16(s + 106);
	b->bps_shift = s[108];
	b->spc_shift = s[109];
	b->nfats = s[110];
	return 1;
}

static int exfat_probe(struct ndz_io *io)
{
	uint8_t s[512];
	struct boot b;

	if (io->size < 2 * BOOT_SECTORS * 512 || ndz_io_read_full(io, s, sizeof(s), 0, NULL, NULL) < 0)
		return 0;
	return read_boot(io, s, &b);
}

/* bad(err, fmt, ...) - this module's inconsistent-metadata error (fsutil.h) */
#define bad(err, ...) ndz_fs_bad(err, "exfat", __VA_ARGS__)

static void exfat_close(void *h)
{
	struct exfat *x = h;

	if (!x)
		return;
	free(x->used);
	free(x);
}

/* Geometry sane and inside the volume, the volume inside io. */
static const char *check_geometry(const struct boot *b, uint64_t io_size)
{
	uint64_t fat_end, heap_end;

	if (b->bps_shift < 9 || b->bps_shift > 12)
		return "bytes per sector out of range";
	if (b->spc_shift > 25 - b->bps_shift)
		return "sectors per cluster out of range";
	if (b->nfats != 1 && b->nfats != 2)
		return "number of FATs not 1 or 2";
	if (b->vol_sectors < (1u << 20) >> b->bps_shift)
		return "volume shorter than 1 MiB";
	if (b->vol_sectors > io_size >> b->bps_shift)
		return "filesystem larger than its partition";
	if (b->fat_off < 2 * BOOT_SECTORS || b->fat_len == 0)
		return "FAT offset or length out of range";
	fat_end = (uint64_t)b->fat_off + (uint64_t)b->fat_len * b->nfats;
	if (fat_end > b->heap_off)
		return "FAT overlaps the cluster heap";
	if (b->clusters == 0 || b->clusters > 0xfffffff5u)
		return "cluster count out of range";
	heap_end = (uint64_t)b->heap_off + ((uint64_t)b->clusters << b->spc_shift);
	if (heap_end > b->vol_sectors)
		return "cluster heap beyond the end of the volume";
	if (((uint64_t)b->fat_len << b->bps_shift) < ((uint64_t)b->clusters + 2) * 4)
		return "FAT too small for the clusters";
	if (b->root < 2 || b->root - 2 >= b->clusters)
		return "root directory cluster out of range";
	return NULL;
}

/* The main boot region's checksum (sectors 0-10) against sector 11. */
/* The boot region starting at sector base (0: main, 12: backup) matches its checksum sector. */
static int check_sum(struct ndz_io *io, uint32_t bps, uint32_t base, int *ok)
{
	uint8_t *s = malloc(bps);
	uint32_t sum = 0;
	int rc = 0;

	*ok = 0;
	if (!s)
		return NDZ_ENOMEM;
	for (uint32_t k = 0; k < BOOT_SECTORS - 1; k++) {
		rc = ndz_io_read_full(io, s, bps, (uint64_t)(base + k) * bps, NULL, NULL);
		if (rc < 0)
			goto out;
		for (uint32_t i = 0; i < bps; i++) {
			if (k == 0 && (i == 106 || i == 107 || i == 112))
				continue;
			sum = ((sum & 1) ? 0x80000000u : 0) + (sum >> 1) + s[i];
		}
	}
	rc = ndz_io_read_full(io, s, bps, (uint64_t)(base + BOOT_SECTORS - 1) * bps, NULL, NULL);
	if (rc < 0)
		goto out;
	*ok = 1;
	for (uint32_t i = 0; i < bps; i += 4)
		if (get_le32(s + i) != sum)
			*ok = 0;
out:
	free(s);
	return rc;
}

/* The FAT entry of cluster c (2 <= c < clusters + 2) in the active FAT. */
static int fat_next(struct exfat *x, uint32_t c, uint32_t *next)
{
	uint8_t e[4];
	uint64_t off = ((x->fat_off + (uint64_t)x->active_fat * x->fat_len) << x->bps_shift) +
		       (uint64_t)c * 4;
	int rc = ndz_io_read_full(x->io, e, sizeof(e), off, NULL, NULL);

	if (rc < 0)
		return rc;
	*next = get_le32(e);
	return 0;
}

static uint64_t cluster_off(const struct exfat *x, uint32_t c)
{
	return (x->heap_off << x->bps_shift) + ((uint64_t)(c - 2) << (x->spc_shift + x->bps_shift));
}

/*
 * The cluster after c in its chain: 0 and *c set, 1 at the end of the chain, or
 * a negative code (NDZ_EFS with err set when the chain is broken or too long).
 */
static int chain_step(struct exfat *x, uint32_t *c, uint64_t *steps, struct ndz_error *err)
{
	uint32_t n;
	int rc = fat_next(x, *c, &n);

	if (rc < 0)
		return rc;
	if (n == FAT_EOC)
		return 1;
	if (n < 2 || n - 2 >= x->clusters)
		return bad(err, "broken cluster chain in the FAT");
	if (++*steps >= x->clusters)
		return bad(err, "cluster chain loops");
	*c = n;
	return 0;
}

/* Read the bitmap starting at cluster first, len bytes, OR-ing it into x->used. */
static int read_bitmap(struct exfat *x, uint32_t first, uint64_t len, struct ndz_error *err)
{
	uint64_t need = ((uint64_t)x->clusters + 7) / 8, done = 0, steps = 0;
	uint64_t csize = (uint64_t)1 << (x->spc_shift + x->bps_shift);
	uint8_t buf[4096];
	uint32_t c = first;
	int rc;

	if (first < 2 || first - 2 >= x->clusters)
		return bad(err, "allocation bitmap cluster out of range");
	if (len < need)
		return bad(err, "allocation bitmap shorter than the cluster count");
	for (;;) {
		uint64_t in = 0, base = cluster_off(x, c);

		while (in < csize && done < need) {
			size_t n = sizeof(buf);

			if (n > csize - in)
				n = (size_t)(csize - in);
			if (n > need - done)
				n = (size_t)(need - done);
			rc = ndz_io_read_full(x->io, buf, n, base + in, NULL, NULL);
			if (rc < 0)
				return rc;
			for (size_t i = 0; i < n; i++)
				x->used[done + i] |= buf[i];
			in += n;
			done += n;
		}
		if (done >= need)
			return 0;
		rc = chain_step(x, &c, &steps, err);
		if (rc < 0)
			return rc;
		if (rc == 1)
			return bad(err, "allocation bitmap chain ends early");
	}
}

static int is_used(const struct exfat *x, uint64_t c)
{
	return ndz_fs_bit(x->used, c - 2);
}

/* Walk the root directory for its bitmap entries (one, or two with TexFAT). */
static int find_bitmaps(struct exfat *x, struct ndz_error *err)
{
	uint64_t csize = (uint64_t)1 << (x->spc_shift + x->bps_shift), steps = 0;
	uint32_t c = x->root, found = 0;
	uint8_t e[32];
	int rc;

	for (;;) {
		uint64_t base = cluster_off(x, c);

		for (uint64_t o = 0; o < csize; o += sizeof(e)) {
			rc = ndz_io_read_full(x->io, e, sizeof(e), base + o, NULL, NULL);
			if (rc < 0)
				return rc;
			if (e[0] == 0)
				goto end;
			if (e[0] != ENT_BITMAP)
				continue;
			if (++found > 2)
				return bad(err, "more than two allocation bitmap entries");
			rc = read_bitmap(x, get_le32(e + 20), get_le64(e + 24), err);
			if (rc < 0)
				return rc;
		}
		rc = chain_step(x, &c, &steps, err);
		if (rc < 0)
			return rc;
		if (rc == 1)
			break;
	}
end:
	if (!found)
		return bad(err, "no allocation bitmap entry in the root directory");
	if (!is_used(x, x->root))
		return bad(err, "root directory cluster is free in the allocation bitmap");
	return 0;
}

static int exfat_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
		      struct ndz_error *err)
{
	struct exfat *x;
	struct boot b;
	uint8_t s[512];
	const char *why;
	int rc, ok;

	if (io->size < 2 * BOOT_SECTORS * 512 || ndz_io_read_full(io, s, sizeof(s), 0, NULL, NULL) < 0 ||
	    !read_boot(io, s, &b))
		return bad(err, "no boot sector");
	why = check_geometry(&b, io->size);
	if (why)
		return bad(err, "%s", why);
	rc = check_sum(io, 1u << b.bps_shift, 0, &ok);
	if (rc < 0)
		return rc == NDZ_ESHORTREAD ? bad(err, "boot region cut short") : rc;
	if (!ok)
		return bad(err, "main boot region checksum mismatch");
	/* the backup is imaged as it is: only said */
	rc = check_sum(io, 1u << b.bps_shift, BOOT_SECTORS, &ok);
	if (rc == NDZ_ENOMEM)
		return rc;
	if (rc < 0 || !ok)
		ndz_fs_warn(o ? o->warn : NULL, o ? o->warn_ctx : NULL, "exfat",
			    "backup boot region checksum mismatch");
	if (b.flags & VOL_DIRTY)
		return bad(err, "volume is marked dirty (not cleanly unmounted; run fsck.exfat)");
	x = calloc(1, sizeof(*x));
	if (!x)
		return NDZ_ENOMEM;
	x->io = io;
	x->bps_shift = b.bps_shift;
	x->spc_shift = b.spc_shift;
	x->nfats = b.nfats;
	x->active_fat = b.nfats == 2 ? (b.flags & 1) : 0;
	x->vol_sectors = b.vol_sectors;
	x->fat_off = b.fat_off;
	x->fat_len = b.fat_len;
	x->heap_off = b.heap_off;
	x->clusters = b.clusters;
	x->root = b.root;
	x->used = calloc(1, ((size_t)x->clusters + 7) / 8);
	if (!x->used) {
		exfat_close(x);
		return NDZ_ENOMEM;
	}
	rc = find_bitmaps(x, err);
	if (rc < 0) {
		exfat_close(x);
		return rc == NDZ_ESHORTREAD ? bad(err, "metadata beyond the end of the volume") : rc;
	}
	*out = x;
	return 0;
}

static int exfat_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		      struct ndz_error *err)
{
	struct exfat *x = h;
	uint32_t bps = 1u << x->bps_shift;
	uint64_t csize = (uint64_t)1 << (x->spc_shift + x->bps_shift);
	uint64_t pos = 0, a, b, used, tail;
	uint64_t fat_bytes = x->fat_len * x->nfats * bps;
	int rc;

	(void)err;
	st->fs_bytes = x->vol_sectors * bps;
	st->block_size = (uint32_t)csize;
	snprintf(st->detail, sizeof(st->detail), "exfat, %llu-byte clusters",
		 (unsigned long long)csize);
	/* main and backup boot regions, then the FAT(s) */
	used = 2 * BOOT_SECTORS * bps + fat_bytes;
	rc = fn(ctx, 0, 2 * BOOT_SECTORS * bps);
	if (!rc)
		rc = fn(ctx, x->fat_off * bps, fat_bytes);
	if (rc)
		return rc;
	/* bit i of the bitmap is cluster i + 2 */
	while (ndz_fs_next_run(x->used, &pos, x->clusters, 1, &a, &b)) {
		used += (b - a) * csize;
		rc = fn(ctx, cluster_off(x, (uint32_t)(a + 2)), (b - a) * csize);
		if (rc)
			return rc;
	}
	st->used_bytes = used;
	/* sectors after the last whole cluster (the caller keeps what follows fs_bytes) */
	tail = (x->heap_off * bps) + (uint64_t)x->clusters * csize;
	if (st->fs_bytes > tail)
		return fn(ctx, tail, st->fs_bytes - tail);
	return 0;
}

const struct ndz_fs_module ndz_fs_exfat = {
	"exfat", exfat_probe, exfat_open, exfat_walk, exfat_close, NULL, 0,
};
