/*
 * XFS (v4 and v5/CRC): each allocation group's free-space B+tree by block
 * number (bnobt) decides; every block it does not call free is kept, the
 * internal log and the AG free lists included. A log that is not provably
 * clean, or any check that fails, sends the filesystem raw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/err.h"
#include "fs.h"
#include "fsutil.h"
#include "core/le.h"

#define SB_MAGIC 0x58465342u           /* "XFSB" */
#define AGF_MAGIC 0x58414746u          /* "XAGF" */
#define BNO_MAGIC_V4 0x41425442u       /* "ABTB" */
#define BNO_MAGIC_V5 0x41423342u       /* "AB3B" */
#define CNT_MAGIC_V4 0x41425443u       /* "ABTC" */
#define CNT_MAGIC_V5 0x41423343u       /* "AB3C" */
#define LOG_MAGIC 0xfeedbabeu
#define LOG_UNMOUNT_TRANS 0x20u        /* op header flag of an unmount record */
#define LOG_HDR_CYCLE_SIZE 32768u      /* a v2 record header block covers this much */
#define BB 512u                        /* XFS's basic block */
#define MAX_LEVELS 10u                 /* far above what 2^31 blocks can need */

/* superblock version and feature bits this parser knows */
#define V_NUMBITS 0x000fu
#define V_MOREBITS 0x8000u
/* v4 features2: lazy counters, attr2, 32-bit project ids, file types in directories */
#define V4_FEAT2_OK (0x0002u | 0x0008u | 0x0080u | 0x0200u)
#define INCOMPAT_NEEDSREPAIR 0x10u
#define INCOMPAT_META_UUID 0x04u
#define INCOMPAT_OK (0x01u | 0x02u | 0x04u | 0x08u | 0x20u | 0x40u | 0x80u)
#define RO_COMPAT_OK (0x01u | 0x02u | 0x04u | 0x08u)  /* finobt, rmapbt, reflink, inobtcnt */

struct xfs {
	struct ndz_io *io;
	int v5;
	uint32_t bsize, ssize, agblocks, agcount, agblklog, inopblog, hdr_blocks;
	uint64_t dblocks, rootino;
	uint64_t log_off, log_len;     /* internal log, bytes */
	uint8_t uuid[16];              /* what v5 metadata blocks carry */
	uint8_t sb_uuid[16];           /* what log records carry */
	uint8_t *blk[MAX_LEVELS];      /* one block buffer per btree level */
};

/* what one walk of an AG's free-space btree (bnobt, or cntbt with by_size) keeps */
struct agwalk {
	uint32_t agno, aglen;
	uint64_t ag_off;               /* bytes */
	uint32_t cursor;               /* first block not yet accounted for */
	uint64_t free, nrecs;
	uint32_t longest;
	uint32_t keep_lo, keep_hi;     /* blocks that must not be free (the log) */
	uint32_t root_blk;             /* the root inode's block, or UINT32_MAX */
	ndz_extent_fn fn;
	void *ctx;
	uint64_t used;
	int by_size;                   /* walking the cntbt: only count, in (length, start) order */
	uint32_t last_len, last_start;
};

/* bad(err, fmt, ...) - this module's inconsistent-metadata error (fsutil.h) */
#define bad(err, ...) ndz_fs_bad(err, "xfs", __VA_ARGS__)

/* v5 metadata: CRC32C of len bytes with the 4-byte field at off taken as zero, stored LE */
static int crc_ok(const uint8_t *p, size_t len, size_t off)
{
	static const uint8_t zero[4];
	uint32_t c, want;

	c = ndz_crc32c_update(0xffffffffu, p, off);
	c = ndz_crc32c_update(c, zero, 4);
	c = ~ndz_crc32c_update(c, p + off + 4, len - off - 4);
	want = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 |
	       (uint32_t)p[off + 3] << 24;
	return c == want;
}

static int xfs_probe(struct ndz_io *io)
{
	uint8_t s[512];
	uint32_t v;

	if (io->size < 1024 * 1024 || ndz_io_read_full(io, s, sizeof(s), 0, NULL, NULL) < 0)
		return 0;
	v = get_be16(s + 100) & V_NUMBITS;
	return get_be32(s) == SB_MAGIC && (v == 4 || v == 5);
}

static void xfs_close(void *h)
{
	struct xfs *x = h;

	if (!x)
		return;
	for (unsigned i = 0; i < MAX_LEVELS; i++)
		free(x->blk[i]);
	free(x);
}

static unsigned ilog2_up(uint64_t v)
{
	unsigned l = 0;

	while (((uint64_t)1 << l) < v)
		l++;
	return l;
}

/* Superblock fields sane and inside the volume; the handle's geometry filled. */
static int check_sb(struct xfs *x, const uint8_t *s, struct ndz_error *err)
{
	uint32_t ver = get_be16(s + 100), blog = s[120], slog = s[121];
	uint32_t incompat = get_be32(s + 216), ro = get_be32(s + 212), f2 = get_be32(s + 200);
	uint64_t logstart = get_be64(s + 48), last;
	uint32_t logblocks = get_be32(s + 96);

	x->v5 = (ver & V_NUMBITS) == 5;
	x->bsize = get_be32(s + 4);
	x->ssize = get_be16(s + 102);
	x->dblocks = get_be64(s + 8);
	x->agblocks = get_be32(s + 84);
	x->agcount = get_be32(s + 88);
	x->agblklog = s[124];
	x->inopblog = s[123];
	x->rootino = get_be64(s + 56);
	memcpy(x->sb_uuid, s + 32, 16);
	if (blog < 9 || blog > 16 || x->bsize != 1u << blog)
		return bad(err, "block size out of range");
	if (slog < 9 || slog > 15 || x->ssize != 1u << slog || x->ssize > x->bsize)
		return bad(err, "sector size out of range");
	if (s[126])
		return bad(err, "mkfs did not finish (sb_inprogress set)");
	if (x->v5) {
		if (!crc_ok(s, x->ssize, 224))
			return bad(err, "superblock checksum mismatch");
		if (incompat & INCOMPAT_NEEDSREPAIR)
			return bad(err, "filesystem needs repair (run xfs_repair)");
		if (incompat & ~INCOMPAT_OK)
			return bad(err, "unknown incompatible features 0x%x",
				   (unsigned)(incompat & ~INCOMPAT_OK));
		if (ro & ~RO_COMPAT_OK)
			return bad(err, "unknown read-only-compatible features 0x%x",
				   (unsigned)(ro & ~RO_COMPAT_OK));
		if (get_be32(s + 220))
			return bad(err, "log holds incompatible items (not cleanly unmounted)");
		memcpy(x->uuid, (incompat & INCOMPAT_META_UUID) ? s + 248 : s + 32, 16);
	} else if ((ver & V_MOREBITS) && (f2 & ~V4_FEAT2_OK)) {
		return bad(err, "unknown v4 features 0x%x", (unsigned)(f2 & ~V4_FEAT2_OK));
	}
	if (x->agcount == 0 || x->agblocks < 64 || x->agblocks > 0x7fffffffu ||
	    x->agblklog != ilog2_up(x->agblocks) || x->agblklog > 31)
		return bad(err, "allocation group geometry out of range");
	if (x->inopblog > blog - 8 || x->inopblog + x->agblklog > 63)
		return bad(err, "inodes per block out of range");
	if (x->dblocks <= (uint64_t)(x->agcount - 1) * x->agblocks ||
	    x->dblocks > (uint64_t)x->agcount * x->agblocks)
		return bad(err, "block count does not match the allocation groups");
	if (x->dblocks > x->io->size >> blog)
		return bad(err, "filesystem larger than its partition");
	x->hdr_blocks = (4 * x->ssize + x->bsize - 1) / x->bsize;
	last = x->dblocks - (uint64_t)(x->agcount - 1) * x->agblocks;
	if (last <= x->hdr_blocks + 1)
		return bad(err, "last allocation group too small");
	if ((x->rootino >> (x->agblklog + x->inopblog)) >= x->agcount)
		return bad(err, "root inode number out of range");
	if (logstart == 0)
		return bad(err, "external log device: cannot tell whether the log is clean");
	{
		uint64_t agno = logstart >> x->agblklog;
		uint64_t agbno = logstart & (((uint64_t)1 << x->agblklog) - 1);
		uint64_t aglen = agno + 1 == x->agcount ? last : x->agblocks;

		if (agno >= x->agcount || agbno < x->hdr_blocks || logblocks == 0 ||
		    agbno + logblocks > aglen)
			return bad(err, "internal log out of range");
		x->log_off = (agno * x->agblocks + agbno) << blog;
		x->log_len = (uint64_t)logblocks << blog;
	}
	return 0;
}

/* The cycle number a log basic block carries: a record header's, or the stamped first word. */
static uint32_t bb_cycle(const uint8_t *p)
{
	return get_be32(p) == LOG_MAGIC ? get_be32(p + 4) : get_be32(p);
}

/*
 * The log is clean when its last record, ending exactly at the head, is an
 * unmount record and nothing else: what the kernel and xfs_repair look for.
 * The head is where the cycle numbers drop by one (or block 0 when all blocks
 * share one cycle); any other pattern (a torn write, a zeroed log) is "cannot
 * tell" and counts as dirty. Returns 0 clean, NDZ_EFS (err set) or an io error.
 */
static int check_log(struct xfs *x, struct ndz_error *err)
{
	uint64_t n = x->log_len / BB, head = 0, hdr1 = UINT64_MAX, hdr2 = UINT64_MAX, rec;
	uint32_t c0 = 0, hblks, len, ver, size;
	size_t chunk = 256 * 1024;
	uint8_t *buf = malloc(chunk), h[512];
	int seg = 1, rc = 0;

	if (!buf)
		return NDZ_ENOMEM;
	for (uint64_t b = 0; b < n && !rc; b += chunk / BB) {
		size_t m = (n - b) * BB < chunk ? (size_t)((n - b) * BB) : chunk;

		rc = ndz_io_read_full(x->io, buf, m, x->log_off + b * BB, NULL, NULL);
		for (size_t i = 0; !rc && i < m / BB; i++) {
			const uint8_t *p = buf + i * BB;
			uint32_t c = bb_cycle(p);

			if (b + i == 0)
				c0 = c;
			if (seg == 1 && c != c0) {
				seg = 2;
				head = b + i;
			}
			if ((seg == 1 && c != c0) || (seg == 2 && c != c0 - 1))
				rc = bad(err, "log cycle numbers out of order (log not clean)");
			else if (get_be32(p) == LOG_MAGIC)
				*(seg == 1 ? &hdr1 : &hdr2) = b + i;
		}
	}
	free(buf);
	if (rc)
		return rc;
	if (c0 == 0)
		return bad(err, "log is empty (cannot tell whether it is clean)");
	rec = hdr1 != UINT64_MAX ? hdr1 : hdr2;
	if (rec == UINT64_MAX)
		return bad(err, "no log record found (cannot tell whether the log is clean)");
	rc = ndz_io_read_full(x->io, h, sizeof(h), x->log_off + rec * BB, NULL, NULL);
	if (rc < 0)
		return rc;
	ver = get_be32(h + 8);
	len = get_be32(h + 12);
	size = get_be32(h + 320);
	hblks = (ver & 2) && size > LOG_HDR_CYCLE_SIZE ?
		(size + LOG_HDR_CYCLE_SIZE - 1) / LOG_HDR_CYCLE_SIZE : 1;
	if ((ver != 1 && ver != 2) || hblks > 8 || len > n * BB ||
	    get_be64(h + 16) != ((uint64_t)get_be32(h + 4) << 32 | rec) || memcmp(h + 304, x->sb_uuid, 16))
		return bad(err, "last log record header is malformed (log not clean)");
	if ((rec + hblks + (len + BB - 1) / BB) % n != head % n || get_be32(h + 40) != 1)
		return bad(err, "log is dirty (not cleanly unmounted; mount it or run xfs_repair)");
	rc = ndz_io_read_full(x->io, h, sizeof(h), x->log_off + ((rec + hblks) % n) * BB, NULL, NULL);
	if (rc < 0)
		return rc;
	if (!(h[9] & LOG_UNMOUNT_TRANS))
		return bad(err, "log is dirty (not cleanly unmounted; mount it or run xfs_repair)");
	return 0;
}

static int xfs_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
		    struct ndz_error *err)
{
	struct xfs *x;
	uint8_t *s;
	int rc;

	(void)o;
	if (!xfs_probe(io))
		return bad(err, "no superblock");
	x = calloc(1, sizeof(*x));
	s = malloc(32768);
	if (!x || !s) {
		free(s);
		free(x);
		return NDZ_ENOMEM;
	}
	x->io = io;
	rc = ndz_io_read_full(io, s, 32768 < io->size ? 32768 : (size_t)io->size, 0, NULL, NULL);
	if (rc == 0)
		rc = check_sb(x, s, err);
	if (rc == 0)
		rc = check_log(x, err);
	for (unsigned i = 0; rc == 0 && i < MAX_LEVELS; i++)
		if (!(x->blk[i] = malloc(x->bsize)))
			rc = NDZ_ENOMEM;
	free(s);
	if (rc < 0) {
		xfs_close(x);
		return rc == NDZ_ESHORTREAD ? bad(err, "metadata beyond the end of the volume") : rc;
	}
	*out = x;
	return 0;
}

/* Report AG blocks [a, b) as allocated. */
static int keep(struct agwalk *w, struct xfs *x, uint32_t a, uint32_t b)
{
	if (b <= a)
		return 0;
	w->used += (uint64_t)(b - a) * x->bsize;
	return w->fn(w->ctx, w->ag_off + (uint64_t)a * x->bsize, (uint64_t)(b - a) * x->bsize);
}

/* One more free extent of len blocks in the AG's totals. */
static void count_free(struct agwalk *w, uint32_t len)
{
	w->free += len;
	w->nrecs++;
	if (len > w->longest)
		w->longest = len;
}

/* One free extent, in bnobt order: everything between it and the previous one is kept. */
static int free_rec(struct xfs *x, struct agwalk *w, uint32_t start, uint32_t len,
		    struct ndz_error *err)
{
	int rc;

	if (len == 0 || start < x->hdr_blocks || start > w->aglen || len > w->aglen - start)
		return bad(err, "AG %u: free extent %u+%u out of range", w->agno, start, len);
	if (start < w->cursor)
		return bad(err, "AG %u: free extents out of order or overlapping at block %u",
			   w->agno, start);
	if (start < w->keep_hi && start + len > w->keep_lo)
		return bad(err, "AG %u: free extent %u+%u overlaps the log", w->agno, start, len);
	if (w->root_blk >= start && w->root_blk - start < len)
		return bad(err, "AG %u: the root inode's block %u is free", w->agno, w->root_blk);
	rc = keep(w, x, w->cursor, start);
	if (rc)
		return rc;
	w->cursor = start + len;
	count_free(w, len);
	return 0;
}

/* One record of the by-size tree: only counted, in strictly rising (length, start) order. */
static int size_rec(struct xfs *x, struct agwalk *w, uint32_t start, uint32_t len,
		    struct ndz_error *err)
{
	if (len == 0 || start < x->hdr_blocks || start > w->aglen || len > w->aglen - start)
		return bad(err, "AG %u: by-size free extent %u+%u out of range", w->agno, start,
			   len);
	if (w->nrecs && (len < w->last_len || (len == w->last_len && start <= w->last_start)))
		return bad(err, "AG %u: by-size free extents out of order", w->agno);
	w->last_len = len;
	w->last_start = start;
	count_free(w, len);
	return 0;
}

/*
 * Walk the bnobt (or cntbt) block agbno, expected at level (the root's level comes from
 * the AGF). Levels strictly decrease, so the recursion is bounded; a block
 * reached twice repeats free extents, which free_rec's ordering check refuses.
 */
static int walk_block(struct xfs *x, struct agwalk *w, uint32_t agbno, uint32_t level,
		      int is_root, struct ndz_error *err)
{
	uint8_t *b = x->blk[level];
	uint32_t hdr = x->v5 ? 56 : 16, n, max;
	uint64_t off = w->ag_off + (uint64_t)agbno * x->bsize;
	int rc;

	if (agbno < x->hdr_blocks || agbno >= w->aglen)
		return bad(err, "AG %u: free-space btree block %u out of range", w->agno, agbno);
	rc = ndz_io_read_full(x->io, b, x->bsize, off, NULL, NULL);
	if (rc < 0)
		return rc;
	if (get_be32(b) != (w->by_size ? (x->v5 ? CNT_MAGIC_V5 : CNT_MAGIC_V4) :
				     (x->v5 ? BNO_MAGIC_V5 : BNO_MAGIC_V4)) ||
	    get_be16(b + 4) != level)
		return bad(err, "AG %u: free-space btree block %u: bad magic or level", w->agno,
			   agbno);
	if (x->v5 && (get_be64(b + 16) != off / BB || memcmp(b + 32, x->uuid, 16) ||
		      get_be32(b + 48) != w->agno || !crc_ok(b, x->bsize, 52)))
		return bad(err, "AG %u: free-space btree block %u: bad header or checksum",
			   w->agno, agbno);
	n = get_be16(b + 6);
	max = (x->bsize - hdr) / (level ? 12 : 8);
	if (n > max || (n == 0 && (!is_root || level)))
		return bad(err, "AG %u: free-space btree block %u: bad record count", w->agno,
			   agbno);
	if (level == 0) {
		for (uint32_t i = 0; i < n; i++) {
			rc = (w->by_size ? size_rec : free_rec)(x, w, get_be32(b + hdr + 8 * i),
								get_be32(b + hdr + 8 * i + 4), err);
			if (rc)
				return rc;
		}
		return 0;
	}
	/* children use the next level's buffer, so b's pointers stay put */
	for (uint32_t i = 0; i < n; i++) {
		rc = walk_block(x, w, get_be32(b + hdr + 8 * max + 4 * i), level - 1, 0, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* One allocation group: its AGF checked, its bnobt walked, the counts compared. */
static int walk_ag(struct xfs *x, uint32_t agno, ndz_extent_fn fn, void *ctx, uint64_t *used,
		   struct ndz_error *err)
{
	struct agwalk w;
	uint8_t *a = x->blk[MAX_LEVELS - 1];
	uint32_t levels, root, flmax, inoag, cnt_levels, cnt_root;
	int rc;

	memset(&w, 0, sizeof(w));
	w.agno = agno;
	w.aglen = agno + 1 == x->agcount ?
		  (uint32_t)(x->dblocks - (uint64_t)agno * x->agblocks) : x->agblocks;
	w.ag_off = (uint64_t)agno * x->agblocks * x->bsize;
	w.fn = fn;
	w.ctx = ctx;
	w.root_blk = UINT32_MAX;
	w.keep_lo = w.keep_hi = 0;
	if (x->log_off >= w.ag_off && x->log_off < w.ag_off + (uint64_t)w.aglen * x->bsize) {
		w.keep_lo = (uint32_t)((x->log_off - w.ag_off) / x->bsize);
		w.keep_hi = w.keep_lo + (uint32_t)(x->log_len / x->bsize);
	}
	inoag = (uint32_t)(x->rootino >> (x->agblklog + x->inopblog));
	if (inoag == agno)
		w.root_blk = (uint32_t)((x->rootino >> x->inopblog) &
					(((uint64_t)1 << x->agblklog) - 1));
	rc = ndz_io_read_full(x->io, a, x->ssize, w.ag_off + x->ssize, NULL, NULL);
	if (rc < 0)
		return rc;
	levels = get_be32(a + 28);
	root = get_be32(a + 16);
	cnt_levels = get_be32(a + 32);
	cnt_root = get_be32(a + 20);
	flmax = x->v5 ? (x->ssize - 36) / 4 : x->ssize / 4;
	if (get_be32(a) != AGF_MAGIC || get_be32(a + 4) != 1 || get_be32(a + 8) != agno ||
	    get_be32(a + 12) != w.aglen)
		return bad(err, "AG %u: bad AGF header", agno);
	if (x->v5 && (memcmp(a + 64, x->uuid, 16) || !crc_ok(a, x->ssize, 216)))
		return bad(err, "AG %u: AGF checksum or UUID mismatch", agno);
	if (levels == 0 || levels >= MAX_LEVELS || cnt_levels == 0 || cnt_levels >= MAX_LEVELS || get_be32(a + 48) > flmax ||
	    get_be32(a + 52) > w.aglen || get_be32(a + 56) > get_be32(a + 52))
		return bad(err, "AG %u: AGF counts out of range", agno);
	/* a is the last level's buffer, which no walk reaches; still, keep the counts */
	{
		uint32_t freeblks = get_be32(a + 52), longest = get_be32(a + 56);

		rc = walk_block(x, &w, root, levels - 1, 1, err);
		if (rc)
			return rc;
		rc = keep(&w, x, w.cursor, w.aglen);
		if (rc)
			return rc;
		if (w.free != freeblks)
			return bad(err, "AG %u: free-space btree holds %llu free blocks, the AGF "
				   "says %u", agno, (unsigned long long)w.free, freeblks);
		if (w.longest != longest)
			return bad(err, "AG %u: longest free extent %u, the AGF says %u", agno,
				   w.longest, longest);
		/* the by-size tree must hold the same extents: same count, sum, longest */
		{
			struct agwalk c = w;

			c.by_size = 1;
			c.free = c.nrecs = 0;
			c.longest = 0;
			rc = walk_block(x, &c, cnt_root, cnt_levels - 1, 1, err);
			if (rc)
				return rc;
			if (c.free != w.free || c.nrecs != w.nrecs || c.longest != w.longest)
				return bad(err, "AG %u: the by-size free-space btree disagrees "
					   "with the by-block one", agno);
		}
	}
	*used += w.used;
	return 0;
}

static int xfs_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		    struct ndz_error *err)
{
	struct xfs *x = h;
	uint64_t used = 0;
	int rc;

	st->fs_bytes = x->dblocks * x->bsize;
	st->block_size = x->bsize;
	snprintf(st->detail, sizeof(st->detail), "xfs v%d, %u-byte blocks, %u AG%s",
		 x->v5 ? 5 : 4, x->bsize, x->agcount, x->agcount == 1 ? "" : "s");
	for (uint32_t ag = 0; ag < x->agcount; ag++) {
		rc = walk_ag(x, ag, fn, ctx, &used, err);
		if (rc)
			return rc == NDZ_ESHORTREAD ?
			       bad(err, "metadata beyond the end of the volume") : rc;
	}
	st->used_bytes = used;
	return 0;
}

const struct ndz_fs_module ndz_fs_xfs = {
	"xfs", xfs_probe, xfs_open, xfs_walk, xfs_close, NULL, 0,
};
