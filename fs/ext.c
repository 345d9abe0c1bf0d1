/*
 * ext2/3/4 through libext2fs: the block (cluster) bitmaps, read through a small
 * io_manager over struct ndz_io so a partition of a disk or memory works too.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <et/com_err.h>
#include <ext2fs/ext2_fs.h>
#include <ext2fs/ext2fs.h>

#include "core/err.h"
#include "fs.h"
#include "fsutil.h"
#include "core/le.h"

/* bad(err, fmt, ...) - this module's inconsistent-metadata error (fsutil.h) */
#define bad(err, ...) ndz_fs_bad(err, "ext", __VA_ARGS__)

/* ---- io_manager over struct ndz_io; the channel name carries the pointer ---- */

struct chan_priv {
	struct ndz_io *io;
};

static struct struct_io_manager ndz_io_manager;

static errcode_t chan_open(const char *name, int flags, io_channel *out)
{
	struct ndz_io *io = NULL;
	io_channel ch;
	struct chan_priv *p;

	if (flags & IO_FLAG_RW)
		return EROFS;
	if (sscanf(name, "ndz:%p", (void **)&io) != 1 || !io)
		return EINVAL;
	ch = calloc(1, sizeof(*ch));
	p = calloc(1, sizeof(*p));
	if (ch)
		ch->name = strdup(name);
	if (!ch || !p || !ch->name) {
		if (ch)
			free(ch->name);
		free(ch);
		free(p);
		return ENOMEM;
	}
	p->io = io;
	ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
	ch->manager = &ndz_io_manager;
	ch->block_size = 1024;
	ch->refcount = 1;
	ch->private_data = p;
	*out = ch;
	return 0;
}

static errcode_t chan_close(io_channel ch)
{
	if (--ch->refcount > 0)
		return 0;
	free(ch->private_data);
	free(ch->name);
	free(ch);
	return 0;
}

static errcode_t chan_set_blksize(io_channel ch, int blksize)
{
	ch->block_size = blksize;
	return 0;
}

static errcode_t chan_read64(io_channel ch, unsigned long long block, int count, void *data)
{
	struct chan_priv *p = ch->private_data;
	size_t len = count < 0 ? (size_t)-(long)count : (size_t)count * (size_t)ch->block_size;
	size_t got = 0;
	int rc;

	if (block > UINT64_MAX / (unsigned)ch->block_size)
		return EXT2_ET_LLSEEK_FAILED;
	rc = ndz_io_read_full(p->io, data, len, block * (unsigned)ch->block_size, &got, NULL);
	if (rc == NDZ_ESHORTREAD) {
		memset((char *)data + got, 0, len - got);
		return EXT2_ET_SHORT_READ;
	}
	return rc < 0 ? EIO : 0;
}

static errcode_t chan_read(io_channel ch, unsigned long block, int count, void *data)
{
	return chan_read64(ch, block, count, data);
}

static errcode_t chan_write64(io_channel ch, unsigned long long block, int count,
			      const void *data)
{
	(void)ch;
	(void)block;
	(void)count;
	(void)data;
	return EROFS;
}

static errcode_t chan_write(io_channel ch, unsigned long block, int count, const void *data)
{
	return chan_write64(ch, block, count, data);
}

static errcode_t chan_write_byte(io_channel ch, unsigned long off, int count, const void *data)
{
	(void)ch;
	(void)off;
	(void)count;
	(void)data;
	return EROFS;
}

static errcode_t chan_flush(io_channel ch)
{
	(void)ch;
	return 0;
}

static errcode_t chan_set_option(io_channel ch, const char *opt, const char *arg)
{
	(void)ch;
	(void)opt;
	(void)arg;
	return EXT2_ET_INVALID_ARGUMENT;
}

static struct struct_io_manager ndz_io_manager = {
	.magic = EXT2_ET_MAGIC_IO_MANAGER,
	.name = "ndz I/O manager",
	.open = chan_open,
	.close = chan_close,
	.set_blksize = chan_set_blksize,
	.read_blk = chan_read,
	.write_blk = chan_write,
	.flush = chan_flush,
	.write_byte = chan_write_byte,
	.set_option = chan_set_option,
	.read_blk64 = chan_read64,
	.write_blk64 = chan_write64,
};

/* ---- the module ---- */

struct ext {
	struct ndz_io *io;
	ext2_filsys fs;
	int keep_journal;
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
	dgrp_t stale_desc, first_stale;  /* groups whose descriptor fails its checksum */
	uint8_t *stale;                /* per group: its descriptor failed its checksum */
	/* after walk: what the fixed metadata and every inode but the journal use */
	ext2fs_block_bitmap other;
};

static void ext_warn(struct ext *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ext_warn(struct ext *e, const char *fmt, ...)
{
	char msg[320];
	va_list ap;

	if (!e->warn)
		return;
	memcpy(msg, "ext: ", 5);
	va_start(ap, fmt);
	vsnprintf(msg + 5, sizeof(msg) - 5, fmt, ap);
	va_end(ap);
	e->warn(e->warn_ctx, msg);
}

static int ext_probe(struct ndz_io *io)
{
	uint8_t sb[2];

	if (io->size < 2048 + 1024)
		return 0;
	if (ndz_io_read_full(io, sb, 2, 1024 + 56, NULL, NULL) < 0)
		return 0;
	return get_le16(sb) == EXT2_SUPER_MAGIC;
}

/*
 * The inode walk skips what a descriptor calls the unused tail of its inode
 * table (lazily initialised: it may hold anything). A descriptor failing its
 * checksum keeps that say while its inode bitmap agrees (no inode in use in
 * the tail); otherwise its whole table is read, as e2fsck reads it. A group
 * with no inodes yet (INODE_UNINIT) has no bitmap on the disk to ask: its
 * flag stands, and the block bitmap still shows any data the group holds.
 */
static void trust_itable(struct ext *e)
{
	ext2_filsys fs = e->fs;
	uint32_t ipg = fs->super->s_inodes_per_group;
	dgrp_t reread = 0, first = 0;

	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		ext2_ino_t base = g * ipg;
		uint32_t unused = ext2fs_bg_itable_unused(fs, g);
		int ok = unused <= ipg;

		if (!e->stale[g] || !ext2fs_has_group_desc_csum(fs) ||
		    ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT))
			continue;
		for (ext2_ino_t i = ipg - unused; ok && i < ipg; i++)
			if (ext2fs_test_inode_bitmap2(fs->inode_map, base + i + 1))
				ok = 0;
		if (ok)
			continue;
		ext2fs_bg_itable_unused_set(fs, g, 0);
		if (!reread++)
			first = g;
	}
	if (reread)
		ext_warn(e, "group %u%s: the inode bitmap uses inodes the descriptor calls unused; "
			 "reading the whole inode table", first, reread > 1 ? " and others" : "");
}

static int ext_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
		    struct ndz_error *err)
{
	struct ext *e;
	char name[64];
	errcode_t ec;

	initialize_ext2_error_table();
	e = calloc(1, sizeof(*e));
	if (!e)
		return NDZ_ENOMEM;
	e->io = io;
	e->keep_journal = o && o->keep_journal;
	e->warn = o ? o->warn : NULL;
	e->warn_ctx = o ? o->warn_ctx : NULL;
	snprintf(name, sizeof(name), "ndz:%p", (void *)io);
	ec = ext2fs_open2(name, NULL, EXT2_FLAG_64BITS, 0, 0, &ndz_io_manager, &e->fs);
	/* a superblock that fails only its checksum is still read: the union follows */
	if (ec == EXT2_ET_SB_CSUM_INVALID) {
		ec = ext2fs_open2(name, NULL, EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS, 0,
				  0, &ndz_io_manager, &e->fs);
		if (!ec)
			ext_warn(e, "the superblock fails its checksum");
	}
	if (ec) {
		bad(err, "%s", error_message(ec));
		free(e);
		return NDZ_EFS;
	}
	/* what the journal holds is not on the disk yet: no map here can be trusted */
	if (ext2fs_has_feature_journal_needs_recovery(e->fs->super)) {
		bad(err, "journal needs recovery");
		goto inconsistent;
	}
	if (e->fs->super->s_state & EXT2_ERROR_FS)
		ext_warn(e, "marked as having errors");
	if (ext2fs_blocks_count(e->fs->super) > io->size / e->fs->blocksize) {
		bad(err, "filesystem larger than its partition");
		goto inconsistent;
	}
	ec = ext2fs_check_desc(e->fs);
	if (ec && ec != EXT2_ET_NO_MEMORY) {
		bad(err, "group descriptors: %s", error_message(ec));
		goto inconsistent;
	}
	/*
	 * A descriptor that fails its checksum still places its group's bitmaps
	 * and inode table (checked above); the library then reads both bitmaps
	 * from the disk, never from the flags. See trust_itable for its inodes.
	 */
	for (dgrp_t g = 0; g < e->fs->group_desc_count; g++) {
		if (ext2fs_group_desc_csum_verify(e->fs, g))
			continue;
		if (!e->stale) {
			e->stale = calloc(e->fs->group_desc_count, 1);
			if (!e->stale) {
				ext2fs_close_free(&e->fs);
				free(e);
				return NDZ_ENOMEM;
			}
		}
		e->stale[g] = 1;
		if (!e->stale_desc++)
			e->first_stale = g;
		/* in memory only (read-only): the library now reads it as a sound one */
		ext2fs_group_desc_csum_set(e->fs, g);
	}
	if (e->stale_desc)
		ext_warn(e, "group %u%s: descriptor checksum does not match", e->first_stale,
			 e->stale_desc > 1 ? " and others" : "");
	ec = ext2fs_read_block_bitmap(e->fs);
	if (ec == EXT2_ET_BLOCK_BITMAP_CSUM_INVALID) {
		e->fs->flags |= EXT2_FLAG_IGNORE_CSUM_ERRORS;
		ec = ext2fs_read_block_bitmap(e->fs);
		if (!ec)
			ext_warn(e, "the block bitmap fails its checksum");
	}
	if (ec) {
		bad(err, "block bitmap: %s", error_message(ec));
		goto inconsistent;
	}
	ec = ext2fs_read_inode_bitmap(e->fs);
	if (ec == EXT2_ET_INODE_BITMAP_CSUM_INVALID) {
		e->fs->flags |= EXT2_FLAG_IGNORE_CSUM_ERRORS;
		ec = ext2fs_read_inode_bitmap(e->fs);
		if (!ec)
			ext_warn(e, "the inode bitmap fails its checksum");
	}
	if (ec) {
		bad(err, "inode bitmap: %s", error_message(ec));
		goto inconsistent;
	}
	if (e->stale_desc)
		trust_itable(e);
	*out = e;
	return 0;
inconsistent:
	ext2fs_close_free(&e->fs);
	free(e->stale);
	free(e);
	return NDZ_EFS;
}

/* Free clusters of group g according to the bitmap. */
static uint64_t group_free(ext2_filsys fs, dgrp_t g)
{
	blk64_t b = ext2fs_group_first_block2(fs, g), end = ext2fs_group_last_block2(fs, g);
	blk64_t last = ext2fs_blocks_count(fs->super) - 1;
	int ratio_bits = fs->cluster_ratio_bits;
	uint64_t n = 0;

	if (end > last)
		end = last;
	while (b <= end) {
		blk64_t z, s;

		if (ext2fs_find_first_zero_block_bitmap2(fs->block_map, b, end, &z))
			break;
		if (ext2fs_find_first_set_block_bitmap2(fs->block_map, z, end, &s))
			s = end + 1;
		n += ((s - 1) >> ratio_bits) - (z >> ratio_bits) + 1;
		b = s;
	}
	return n;
}

/* Free inodes of group g according to the inode bitmap. */
static uint32_t group_free_inodes(ext2_filsys fs, dgrp_t g)
{
	ext2_ino_t first = g * fs->super->s_inodes_per_group + 1;
	ext2_ino_t end = first + fs->super->s_inodes_per_group - 1;
	uint32_t n = 0;

	for (ext2_ino_t i = first; i <= end && i >= first; i++)
		n += !ext2fs_test_inode_bitmap2(fs->inode_map, i);
	return n;
}

static const char *ext_version(ext2_filsys fs)
{
	struct ext2_super_block *s = fs->super;

	if (ext2fs_has_feature_extents(s) || ext2fs_has_feature_64bit(s) ||
	    ext2fs_has_feature_flex_bg(s) || ext2fs_has_feature_metadata_csum(s) ||
	    ext2fs_has_feature_bigalloc(s))
		return "ext4";
	return ext2fs_has_feature_journal(s) ? "ext3" : "ext2";
}

/* ---- what uses a block besides the bitmap: fixed metadata and inodes ---- */

struct refs {
	ext2_filsys fs;
	ext2fs_block_bitmap map;       /* where references are marked */
	blk64_t start, len;            /* a run of blocks being gathered */
	uint64_t outside;              /* references past the filesystem's end */
	uint64_t *budget;              /* references left before the walk gives up */
	int over;                      /* the budget ran out: cross-links beyond belief */
};

static void refs_flush(struct refs *r)
{
	if (r->len)
		ext2fs_mark_block_bitmap_range2(r->map, r->start, (unsigned)r->len);
	r->len = 0;
}

/* Blocks [b, b+n) are in use; those outside the filesystem are only counted. */
static void refs_add(struct refs *r, blk64_t b, blk64_t n)
{
	blk64_t first = r->fs->super->s_first_data_block;
	blk64_t end = ext2fs_blocks_count(r->fs->super);

	if (n == 0 || r->over)
		return;
	/* a garbled map can name the same blocks a billion times (an indirect block
	   that points at itself): far more than the filesystem holds is no map to trust */
	if (*r->budget < n) {
		r->over = 1;
		return;
	}
	*r->budget -= n;
	if (b < first || b >= end || n > end - b) {
		r->outside++;
		if (b < first || b >= end)
			return;
		n = end - b;
	}
	if (r->len && b == r->start + r->len && r->len + n <= (1u << 30)) {
		r->len += n;
		return;
	}
	refs_flush(r);
	r->start = b;
	r->len = n;
}

/*
 * The filesystem's own fixed metadata: superblocks and their backups, group
 * descriptors, reserved GDT blocks, bitmaps, inode tables, the MMP block.
 */
static void mark_metadata(struct refs *r)
{
	ext2_filsys fs = r->fs;

	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		ext2fs_reserve_super_and_bgd(fs, g, r->map);
		refs_add(r, ext2fs_block_bitmap_loc(fs, g), 1);
		refs_add(r, ext2fs_inode_bitmap_loc(fs, g), 1);
		refs_add(r, ext2fs_inode_table_loc(fs, g), fs->inode_blocks_per_group);
	}
	if (ext2fs_has_feature_mmp(fs->super) && fs->super->s_mmp_block)
		refs_add(r, fs->super->s_mmp_block, 1);
	refs_flush(r);
}

static int ref_block(ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt, blk64_t ref_blk,
		     int ref_offset, void *priv)
{
	struct refs *r = priv;

	(void)fs, (void)blockcnt, (void)ref_blk, (void)ref_offset;
	refs_add(r, *blocknr, 1);
	return r->over ? BLOCK_ABORT : 0;
}

/*
 * Mark what inode ino uses: its xattr block, and its block map with the blocks
 * that hold the map (indirect blocks, extent tree nodes). Returns 0, or -1 when
 * the map could not be read whole (what was read is marked).
 */
static int mark_inode(struct refs *r, ext2_ino_t ino, struct ext2_inode *inode, char *buf)
{
	ext2_filsys fs = r->fs;
	blk64_t acl = ext2fs_file_acl_block(fs, inode);
	int rc = 0;

	if (acl)
		refs_add(r, acl, 1);
	/* reserved inodes (the bad blocks list has no mode) are walked by their map alone */
	if (ino >= EXT2_FIRST_INODE(fs->super) && !ext2fs_inode_has_valid_blocks2(fs, inode))
		goto out;
	if (inode->i_flags & EXT4_INLINE_DATA_FL)
		goto out;
	if (inode->i_flags & EXT4_EXTENTS_FL) {
		ext2_extent_handle_t h;
		struct ext2fs_extent x;
		int op = EXT2_EXTENT_ROOT;
		errcode_t ec;

		if (ext2fs_extent_open2(fs, ino, inode, &h)) {
			rc = -1;
			goto out;
		}
		while (!r->over && !(ec = ext2fs_extent_get(h, op, &x))) {
			op = EXT2_EXTENT_NEXT;
			if (x.e_flags & EXT2_EXTENT_FLAGS_SECOND_VISIT)
				continue;
			/* a leaf's extent, or an index entry: the node one level down */
			refs_add(r, x.e_pblk, (x.e_flags & EXT2_EXTENT_FLAGS_LEAF) ? x.e_len : 1);
		}
		if (!r->over && ec != EXT2_ET_EXTENT_NO_NEXT && ec != EXT2_ET_EXTENT_NO_DOWN)
			rc = -1;
		ext2fs_extent_free(h);
		goto out;
	}
	if (ext2fs_block_iterate3(fs, ino, BLOCK_FLAG_READ_ONLY, buf, ref_block, r))
		rc = -1;
out:
	refs_flush(r);
	return rc;
}

/* Clusters set in src, not in dst; marked in dst. */
static uint64_t merge(ext2_filsys fs, ext2fs_block_bitmap dst, ext2fs_block_bitmap src)
{
	blk64_t b = fs->super->s_first_data_block, last = ext2fs_blocks_count(fs->super) - 1;
	int bits = fs->cluster_ratio_bits;
	uint64_t n = 0;

	while (b <= last) {
		blk64_t s, z, c;

		if (ext2fs_find_first_set_block_bitmap2(src, b, last, &s))
			break;
		if (ext2fs_find_first_zero_block_bitmap2(src, s, last, &z))
			z = last + 1;
		for (c = s; c < z;) {
			blk64_t a, e;

			if (ext2fs_find_first_zero_block_bitmap2(dst, c, z - 1, &a))
				break;
			if (ext2fs_find_first_set_block_bitmap2(dst, a, z - 1, &e))
				e = z;
			n += ((e - 1) >> bits) - (a >> bits) + 1;
			for (c = a; c < e;) {    /* the library counts in unsigned int */
				blk64_t k = e - c < (1u << 30) ? e - c : (1u << 30);

				ext2fs_mark_block_bitmap_range2(dst, c, (unsigned)k);
				c += k;
			}
		}
		b = z;
	}
	return n;
}

/* Clusters set in map and in neither a nor b (e2fsck's "block bitmap differences: +"). */
static uint64_t unreferenced(ext2_filsys fs, ext2fs_block_bitmap map, ext2fs_block_bitmap a,
			     ext2fs_block_bitmap b)
{
	blk64_t c = fs->super->s_first_data_block, last = ext2fs_blocks_count(fs->super) - 1;
	blk64_t step = (blk64_t)1 << fs->cluster_ratio_bits;
	uint64_t n = 0;

	while (c <= last) {
		blk64_t s, z;

		if (ext2fs_find_first_set_block_bitmap2(map, c, last, &s))
			break;
		if (ext2fs_find_first_zero_block_bitmap2(map, s, last, &z))
			z = last + 1;
		for (blk64_t k = s; k < z; k += step)
			n += !ext2fs_test_block_bitmap2(a, k) && !ext2fs_test_block_bitmap2(b, k);
		c = z;
	}
	return n;
}

/*
 * Every inode in use (its bit in the inode bitmap, or links) marks what it uses: in r, or in j for the journal's own inode.
 * Returns 0, NDZ_ENOMEM, or NDZ_EFS when the inode tables cannot be read.
 */
static int mark_inodes(struct ext *e, struct refs *r, struct refs *j, struct ndz_error *err)
{
	ext2_filsys fs = e->fs;
	ext2_ino_t jino = ext2fs_has_feature_journal(fs->super) ? fs->super->s_journal_inum : 0;
	int isize = EXT2_INODE_SIZE(fs->super);
	uint64_t broken = 0, garbled = 0, unmarked = 0, empty = 0;
	ext2_ino_t first_broken = 0, first_unmarked = 0, first_empty = 0;
	ext2_inode_scan scan = NULL;
	struct ext2_inode *inode;
	char *buf;
	errcode_t ec;
	int rc = 0;

	inode = malloc((size_t)isize);
	buf = malloc((size_t)fs->blocksize * 3);
	if (!inode || !buf) {
		rc = NDZ_ENOMEM;
		goto out;
	}
	ec = ext2fs_open_inode_scan(fs, 0, &scan);
	if (ec) {
		rc = ec == EXT2_ET_NO_MEMORY ? NDZ_ENOMEM : bad(err, "inode tables: %s",
								 error_message(ec));
		goto out;
	}
	for (;;) {
		ext2_ino_t ino;

		ec = ext2fs_get_next_inode_full(scan, &ino, inode, isize);
		if (ec == EXT2_ET_INODE_CSUM_INVALID || ec == EXT2_ET_INODE_IS_GARBAGE) {
			garbled++;
			ec = 0;
		}
		if (ec == EXT2_ET_BAD_BLOCK_IN_INODE_TABLE)
			continue;
		if (ec) {
			rc = bad(err, "inode tables: %s", error_message(ec));
			goto out;
		}
		if (ino == 0)
			break;
		/* links make an inode in use whatever the bitmap or a deletion time say:
		   e2fsck keeps it and reconnects it, so its blocks are data */
		if (!ext2fs_test_inode_bitmap2(fs->inode_map, ino)) {
			if (inode->i_links_count == 0)
				continue;
			if (!unmarked++)
				first_unmarked = ino;
		} else if (inode->i_links_count == 0 && ino >= EXT2_FIRST_INODE(fs->super) &&
			   !fs->super->s_last_orphan && !empty++) {
			first_empty = ino;     /* marked, but no name reaches it */
		}
		/* checksums are ignored while reading (the union takes what it can), not here */
		if (ext2fs_has_feature_metadata_csum(fs->super) &&
		    !ext2fs_inode_csum_verify(fs, ino, (struct ext2_inode_large *)inode))
			garbled++;
		if (mark_inode(ino == jino ? j : r, ino, inode, buf) && broken++ == 0)
			first_broken = ino;
		if (r->over || j->over) {
			rc = bad(err, "inodes map more blocks than the filesystem holds, over and "
				 "over");
			goto out;
		}
	}
	if (unmarked)
		ext_warn(e, "inode %u%s: links but free in the inode bitmap; imaging what %s maps",
			 first_unmarked, unmarked > 1 ? " and others" : "",
			 unmarked > 1 ? "each" : "it");
	if (empty)
		ext_warn(e, "inode %u%s: in use in the inode bitmap without links", first_empty,
			 empty > 1 ? " and others" : "");
	if (garbled)
		ext_warn(e, "%llu inodes fail their checksum; imaging what they map too",
			 (unsigned long long)garbled);
	if (broken)
		ext_warn(e, "inode %u%s: block map unreadable; imaging what can be read of it",
			 first_broken, broken > 1 ? " and others" : "");
out:
	ext2fs_close_inode_scan(scan);
	free(buf);
	free(inode);
	return rc;
}

/* The cheap checks: warnings only, the walk below takes the union anyway. */
static void cheap_checks(struct ext *e)
{
	ext2_filsys fs = e->fs;
	dgrp_t bad_groups = 0, first_bad = 0;

	if (!(fs->super->s_state & EXT2_VALID_FS))
		ext_warn(e, "not cleanly unmounted");
	if (fs->super->s_error_count)
		ext_warn(e, "the superblock records %u errors", fs->super->s_error_count);
	for (dgrp_t g = 0; g < fs->group_desc_count; g++)
		if (group_free(fs, g) != ext2fs_bg_free_blocks_count(fs, g) && bad_groups++ == 0)
			first_bad = g;
	if (bad_groups)
		ext_warn(e, "group %u%s: free count disagrees with the bitmap", first_bad,
			 bad_groups > 1 ? " and others" : "");
	bad_groups = 0;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++)
		if (group_free_inodes(fs, g) != ext2fs_bg_free_inodes_count(fs, g) &&
		    bad_groups++ == 0)
			first_bad = g;
	if (bad_groups)
		ext_warn(e, "group %u%s: free inode count disagrees with the inode bitmap",
			 first_bad, bad_groups > 1 ? " and others" : "");
	/* a cleanly closed filesystem has processed its orphans */
	if (fs->super->s_last_orphan && (fs->super->s_state & EXT2_VALID_FS))
		ext_warn(e, "orphan list not empty (inode %u)", fs->super->s_last_orphan);
}

/*
 * What to image: the union of what the block bitmap marks in use, the fixed
 * metadata and what every inode in use maps. Damage that empties the bitmap
 * (blocks freed under a file, with the group counts and checksums rewritten to
 * agree: e2fsck on a metadata_csum filesystem then finds nothing) loses nothing.
 */
static int ext_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		    struct ndz_error *err)
{
	struct ext *e = h;
	ext2_filsys fs = e->fs;
	uint64_t bs = fs->blocksize;
	blk64_t first = fs->super->s_first_data_block;
	blk64_t last = ext2fs_blocks_count(fs->super) - 1;
	uint64_t fsbytes = (last + 1) * bs;
	uint64_t used = 0, missed;
	ext2fs_block_bitmap all = NULL, jmap = NULL;
	/* every block twice (the metadata, then maybe a cross-link), and an xattr
	   block shared by every inode */
	uint64_t budget = 2 * (uint64_t)ext2fs_blocks_count(fs->super) +
			  fs->super->s_inodes_count + 65536;
	struct refs r = { fs, NULL, 0, 0, 0, &budget, 0 }, j = { fs, NULL, 0, 0, 0, &budget, 0 };
	blk64_t b;
	int rc;

	st->fs_bytes = fsbytes;
	st->block_size = (uint32_t)bs;
	snprintf(st->detail, sizeof(st->detail), "%s, %u-byte blocks%s", ext_version(fs),
		 (unsigned)bs, fs->cluster_ratio_bits ? ", bigalloc" : "");
	cheap_checks(e);
	ext2fs_free_block_bitmap(e->other);
	e->other = NULL;
	if (ext2fs_allocate_block_bitmap(fs, "other", &e->other) ||
	    ext2fs_allocate_block_bitmap(fs, "journal", &jmap) ||
	    ext2fs_copy_bitmap(fs->block_map, &all)) {
		rc = NDZ_ENOMEM;
		goto out;
	}
	r.map = e->other;
	j.map = jmap;
	mark_metadata(&r);
	missed = merge(fs, all, e->other);
	if (missed)
		ext_warn(e, "the block bitmap calls %llu blocks of the filesystem's own metadata "
			 "free; imaging them", (unsigned long long)(missed << fs->cluster_ratio_bits));
	/* inode checksums are the union's business now, not a reason to stop reading */
	fs->flags |= EXT2_FLAG_IGNORE_CSUM_ERRORS;
	rc = mark_inodes(e, &r, &j, err);
	if (rc)
		goto out;
	missed = merge(fs, all, e->other) + merge(fs, all, jmap);
	if (missed)
		ext_warn(e, "the block bitmap calls %llu blocks in use by inodes free; imaging them",
			 (unsigned long long)(missed << fs->cluster_ratio_bits));
	missed = unreferenced(fs, fs->block_map, e->other, jmap);
	if (missed)
		ext_warn(e, "the block bitmap marks %llu blocks that no inode or metadata uses; "
			 "imaging them", (unsigned long long)(missed << fs->cluster_ratio_bits));
	if (r.outside + j.outside)
		ext_warn(e, "inodes map %llu blocks outside the filesystem; ignored",
			 (unsigned long long)(r.outside + j.outside));

	/* the boot block (1 KiB blocks: block 0 is outside the bitmap) */
	rc = fn(ctx, 0, first ? first * bs : 1024);
	if (rc)
		goto out;
	b = first;
	while (b <= last) {
		blk64_t s, z;

		if (ext2fs_find_first_set_block_bitmap2(all, b, last, &s))
			break;
		if (ext2fs_find_first_zero_block_bitmap2(all, s, last, &z))
			z = last + 1;
		used += (z - s) * bs;
		rc = fn(ctx, s * bs, (z - s) * bs);
		if (rc)
			goto out;
		b = z;
	}
	st->used_bytes = used;
out:
	ext2fs_free_block_bitmap(all);
	ext2fs_free_block_bitmap(jmap);
	return rc;
}

/* ---- a clean journal's body, imaged as zeros ---- */

#define JBD2_MAGIC 0xC03B3998u         /* the journal superblock's header, big-endian */
#define JBD2_SB_V1 3u
#define JBD2_SB_V2 4u

struct jrun {
	ext2fs_block_bitmap other;     /* blocks something besides the journal uses */
	ndz_extent_fn fn;
	void *ctx;
	uint64_t bs;
	blk64_t start, len;            /* the run of physical blocks being gathered */
	uint64_t shared;               /* blocks kept as they are: something else uses them */
	int rc;
};

static int jrun_flush(struct jrun *j)
{
	if (j->len && !j->rc)
		j->rc = j->fn(j->ctx, j->start * j->bs, j->len * j->bs);
	j->len = 0;
	return j->rc;
}

static int journal_block(ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt,
			 blk64_t ref_blk, int ref_offset, void *priv)
{
	struct jrun *j = priv;

	(void)fs, (void)ref_blk, (void)ref_offset;
	if (blockcnt < 1)              /* the journal's superblock is imaged as it is */
		return 0;
	/* shared with a file or metadata (a damaged filesystem): imaged as data */
	if (*blocknr < fs->super->s_first_data_block || *blocknr >= ext2fs_blocks_count(fs->super) ||
	    ext2fs_test_block_bitmap2(j->other, *blocknr)) {
		j->shared++;
		if (jrun_flush(j))
			return BLOCK_ABORT;
		return 0;
	}
	if (j->len && *blocknr == j->start + j->len) {
		j->len++;
		return 0;
	}
	if (jrun_flush(j))
		return BLOCK_ABORT;
	j->start = *blocknr;
	j->len = 1;
	return 0;
}

/*
 * The journal of a cleanly closed ext3/4 (its superblock's s_start is 0) is never
 * replayed: the kernel and e2fsck read its superblock and begin the next
 * transaction at s_first, so the rest holds only history, often many MiB of it.
 * That rest goes into the image as zeros (which compress to nothing), as mke2fs
 * leaves a new journal. Leaving it out instead would not do: a restored disk would
 * keep the journal blocks of its previous life, written under the same journal
 * and sequence numbers by the same image, and after a crash recovery could take
 * them for the transactions that follow. Anything unexpected (an external
 * journal, a superblock that does not look right) leaves the journal as it is.
 */
static int ext_zeros(void *h, ndz_extent_fn fn, void *ctx)
{
	struct ext *e = h;
	ext2_filsys fs = e->fs;
	ext2_ino_t ino = fs->super->s_journal_inum;
	struct jrun j = { e->other, fn, ctx, fs->blocksize, 0, 0, 0, 0 };
	uint8_t jsb[1024];
	blk64_t first = 0;
	errcode_t ec;

	if (e->keep_journal || !e->other || !ext2fs_has_feature_journal(fs->super) || ino == 0 ||
	    ino > fs->super->s_inodes_count || fs->blocksize < sizeof(jsb))
		return 0;
	ec = ext2fs_bmap2(fs, ino, NULL, NULL, 0, 0, NULL, &first);
	if (ec || first == 0 || first >= ext2fs_blocks_count(fs->super))
		return 0;
	if (ndz_io_read_full(e->io, jsb, sizeof(jsb), first * fs->blocksize, NULL, NULL) < 0)
		return NDZ_EIO;
	if (get_be32(jsb) != JBD2_MAGIC ||
	    (get_be32(jsb + 4) != JBD2_SB_V1 && get_be32(jsb + 4) != JBD2_SB_V2) ||
	    get_be32(jsb + 12) != fs->blocksize || get_be32(jsb + 28) != 0)
		return 0;
	ec = ext2fs_block_iterate3(fs, ino, BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY, NULL,
				   journal_block, &j);
	if (ec)
		return j.rc ? j.rc : NDZ_EIO;
	if (j.shared)
		ext_warn(e, "%llu journal blocks are used by something else too; imaging them as "
			 "they are", (unsigned long long)j.shared);
	return jrun_flush(&j);
}

static void ext_close(void *h)
{
	struct ext *e = h;

	if (!e)
		return;
	ext2fs_free_block_bitmap(e->other);
	ext2fs_close_free(&e->fs);
	free(e->stale);
	free(e);
}

const struct ndz_fs_module ndz_fs_ext = {
	"ext", ext_probe, ext_open, ext_walk, ext_close, ext_zeros, 1,
};
