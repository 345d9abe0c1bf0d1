/*
 * BSD FFS (UFS1 and UFS2): the superblock and the cylinder groups' free-fragment
 * bitmaps, parsed here since no library exists. Field offsets follow FreeBSD's
 * struct fs and struct cg; every field is checked before it is trusted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "fs.h"
#include "fsutil.h"
#include "core/le.h"

#define UFS1_MAGIC 0x011954u
#define UFS2_MAGIC 0x19540119u
#define CG_MAGIC   0x090255u
#define SBSIZE     8192u
#define MAXBSIZE   65536u

/* struct fs */
#define FS_SBLKNO     8
#define FS_CBLKNO     12
#define FS_IBLKNO     16
#define FS_DBLKNO     20
#define FS_OLD_CGOFF  24
#define FS_OLD_CGMASK 28
#define FS_OLD_SIZE   36
#define FS_NCG        44
#define FS_BSIZE      48
#define FS_FSIZE      52
#define FS_FRAG       56
#define FS_SBSIZE     104
#define FS_CGSIZE     160
#define FS_FPG        188
#define FS_CLEAN      209              /* int8: set at a clean unmount */
#define FS_SBLOCKLOC  1000
#define FS_SIZE       1080
#define FS_MAGIC      1372
/* struct cg */
#define CG_MAGIC_OFF  4
#define CG_CGX        12
#define CG_NDBLK      20
#define CG_NBFREE     28
#define CG_NFFREE     36
#define CG_FREEOFF    96

static const uint64_t sb_locations[] = { 65536, 8192, 0, 262144 };

struct ufs {
	struct ndz_io *io;
	int ufs2;
	uint64_t sbloc;
	uint32_t sbsize, bsize, fsize, frag, ncg, fpg, cgsize;
	uint32_t sblkno, cblkno, iblkno, dblkno;
	uint32_t cgoffset, cgmask;
	uint64_t size;                 /* fragments */
	uint8_t *cg;                   /* one cylinder group block */
};

/* Read the superblock candidate at loc; returns 1 when it is a plausible one. */
static int sb_at(struct ndz_io *io, uint64_t loc, uint8_t *sb, int *ufs2)
{
	uint32_t magic;

	if (loc + SBSIZE > io->size || ndz_io_read_full(io, sb, SBSIZE, loc, NULL, NULL) < 0)
		return 0;
	magic = get_le32(sb + FS_MAGIC);
	if (magic == UFS2_MAGIC && get_le64(sb + FS_SBLOCKLOC) == loc) {
		*ufs2 = 1;
		return 1;
	}
	/* a UFS1 superblock at 65536 is a cylinder group's backup copy */
	if (magic == UFS1_MAGIC && loc != 65536) {
		*ufs2 = 0;
		return 1;
	}
	return 0;
}

static int find_sb(struct ndz_io *io, uint8_t *sb, uint64_t *loc, int *ufs2)
{
	for (size_t i = 0; i < sizeof(sb_locations) / sizeof(sb_locations[0]); i++)
		if (sb_at(io, sb_locations[i], sb, ufs2)) {
			*loc = sb_locations[i];
			return 1;
		}
	return 0;
}

static int ufs_probe(struct ndz_io *io)
{
	uint8_t *sb = malloc(SBSIZE);
	uint64_t loc;
	int ufs2, r;

	if (!sb)
		return NDZ_ENOMEM;
	r = find_sb(io, sb, &loc, &ufs2);
	free(sb);
	return r;
}

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* bad(err, fmt, ...) - this module's inconsistent-metadata error (fsutil.h) */
#define bad(err, ...) ndz_fs_bad(err, "ufs", __VA_ARGS__)

static uint64_t cgstart(const struct ufs *u, uint32_t c)
{
	uint64_t base = (uint64_t)u->fpg * c;

	if (u->ufs2)
		return base;
	return base + (uint64_t)u->cgoffset * (c & ~u->cgmask);
}

static int ufs_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
		    struct ndz_error *err)
{
	struct ufs *u;
	uint8_t *sb;
	int rc;

	u = calloc(1, sizeof(*u));
	sb = malloc(SBSIZE);
	if (!u || !sb) {
		free(u);
		free(sb);
		return NDZ_ENOMEM;
	}
	u->io = io;
	if (!find_sb(io, sb, &u->sbloc, &u->ufs2)) {
		rc = bad(err, "no superblock");
		goto fail;
	}
	u->sbsize = get_le32(sb + FS_SBSIZE);
	u->bsize = get_le32(sb + FS_BSIZE);
	u->fsize = get_le32(sb + FS_FSIZE);
	u->frag = get_le32(sb + FS_FRAG);
	u->ncg = get_le32(sb + FS_NCG);
	u->fpg = get_le32(sb + FS_FPG);
	u->cgsize = get_le32(sb + FS_CGSIZE);
	u->sblkno = get_le32(sb + FS_SBLKNO);
	u->cblkno = get_le32(sb + FS_CBLKNO);
	u->iblkno = get_le32(sb + FS_IBLKNO);
	u->dblkno = get_le32(sb + FS_DBLKNO);
	u->cgoffset = get_le32(sb + FS_OLD_CGOFF);
	u->cgmask = get_le32(sb + FS_OLD_CGMASK);
	u->size = u->ufs2 ? get_le64(sb + FS_SIZE) : get_le32(sb + FS_OLD_SIZE);
	rc = NDZ_EFS;
	if (!is_pow2(u->bsize) || u->bsize < 4096 || u->bsize > MAXBSIZE ||
	    (u->frag != 1 && u->frag != 2 && u->frag != 4 && u->frag != 8) ||
	    u->fsize != u->bsize / u->frag || u->fsize < 512) {
		bad(err, "bad block or fragment size in the superblock");
		goto fail;
	}
	if (u->sbsize < FS_MAGIC + 4 || u->sbsize > SBSIZE || u->ncg == 0 || u->fpg == 0 ||
	    u->fpg % u->frag || u->cgsize < CG_FREEOFF + 4 || u->cgsize > MAXBSIZE) {
		bad(err, "bad sizes in the superblock");
		goto fail;
	}
	if (u->size == 0 || u->size > (uint64_t)u->ncg * u->fpg ||
	    u->size <= (uint64_t)(u->ncg - 1) * u->fpg) {
		bad(err, "filesystem size does not match its cylinder groups");
		goto fail;
	}
	if (u->size > io->size / u->fsize) {
		bad(err, "filesystem larger than its partition");
		goto fail;
	}
	if (!(u->sblkno < u->cblkno && u->cblkno < u->iblkno && u->iblkno < u->dblkno &&
	      u->dblkno < u->fpg)) {
		bad(err, "bad cylinder group layout in the superblock");
		goto fail;
	}
	/* the maps of a filesystem in use may lag: said, they are all there is to read */
	if (!sb[FS_CLEAN])
		ndz_fs_warn(o ? o->warn : NULL, o ? o->warn_ctx : NULL, "ufs",
			    "not cleanly unmounted");
	u->cg = malloc(u->cgsize);
	if (!u->cg) {
		rc = NDZ_ENOMEM;
		goto fail;
	}
	free(sb);
	*out = u;
	return 0;
fail:
	free(sb);
	free(u);
	return rc;
}

static int bad_cg(struct ndz_error *err, uint32_t c, const char *what)
{
	return bad(err, "cylinder group %u%s", c, what);
}

static int read_cg(struct ufs *u, uint32_t c, uint32_t *ndblk, struct ndz_error *err)
{
	uint64_t frag = cgstart(u, c) + u->cblkno;
	uint64_t want = u->size - (uint64_t)u->fpg * c;
	uint32_t freeoff, nbfree, nffree;
	uint64_t nfree = 0;
	int rc;

	if (want > u->fpg)
		want = u->fpg;
	if (frag > u->io->size / u->fsize || frag * u->fsize + u->cgsize > u->io->size)
		return bad_cg(err, c, " beyond the partition");
	rc = ndz_io_read_full(u->io, u->cg, u->cgsize, frag * u->fsize, NULL, NULL);
	if (rc < 0)
		return rc;
	*ndblk = get_le32(u->cg + CG_NDBLK);
	freeoff = get_le32(u->cg + CG_FREEOFF);
	if (get_le32(u->cg + CG_MAGIC_OFF) != CG_MAGIC || get_le32(u->cg + CG_CGX) != c)
		return bad_cg(err, c, ": bad magic or index");
	if (*ndblk != want || freeoff > u->cgsize || (*ndblk + 7) / 8 > u->cgsize - freeoff)
		return bad_cg(err, c, ": bad size or bitmap offset");
	/* the free counts must agree with the bitmap, or the bitmap is not to be trusted */
	for (uint32_t i = 0; i < *ndblk; i++)
		nfree += ndz_fs_bit(u->cg + freeoff, i);
	nbfree = get_le32(u->cg + CG_NBFREE);
	nffree = get_le32(u->cg + CG_NFFREE);
	if (nfree != (uint64_t)nbfree * u->frag + nffree)
		return bad_cg(err, c, ": free counts disagree with the bitmap");
	return 0;
}

static int ufs_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		    struct ndz_error *err)
{
	struct ufs *u = h;
	uint64_t fsbytes = u->size * u->fsize;
	uint64_t used = 0;
	int rc;

	st->fs_bytes = fsbytes;
	st->block_size = u->fsize;
	snprintf(st->detail, sizeof(st->detail), "%s, %u-byte blocks, %u-byte fragments",
		 u->ufs2 ? "UFS2" : "UFS1", u->bsize, u->fsize);
	/* boot area, superblock, first cylinder group's metadata */
	rc = fn(ctx, 0, (uint64_t)u->dblkno * u->fsize);
	if (rc)
		return rc;
	for (uint32_t c = 0; c < u->ncg; c++) {
		uint64_t base = (uint64_t)u->fpg * c;
		const uint8_t *map;
		uint32_t ndblk = 0;
		uint64_t pos = 0, i, j;

		rc = read_cg(u, c, &ndblk, err);
		if (rc)
			return rc;
		map = u->cg + get_le32(u->cg + CG_FREEOFF);
		/* the map marks free fragments: runs of clear bits are in use */
		while (ndz_fs_next_run(map, &pos, ndblk, 0, &i, &j)) {
			used += (j - i) * u->fsize;
			rc = fn(ctx, (base + i) * u->fsize, (j - i) * u->fsize);
			if (rc)
				return rc;
		}
	}
	st->used_bytes = used;
	/* newfs writes its last sector to prove the size (a piece of the superblock) */
	return fn(ctx, fsbytes - 512, 512);
}

static void ufs_close(void *h)
{
	struct ufs *u = h;

	if (!u)
		return;
	free(u->cg);
	free(u);
}

const struct ndz_fs_module ndz_fs_ufs = {
	"ufs", ufs_probe, ufs_open, ufs_walk, ufs_close, NULL, 0,
};
