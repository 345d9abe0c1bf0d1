/*
 * ext2/3/4 through libext2fs: the block (cluster) bitmaps, read through a small
 * io_manager over struct ndz_io so a partition of a disk or memory works too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <et/com_err.h>
#include <ext2fs/ext2_fs.h>
#include <ext2fs/ext2fs.h>

#include "err.h"
#include "fs.h"
#include "fsutil.h"
#include "le.h"

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
	rc = ndz_io_read_full(p->io, data, len, block * (unsigned)ch->block_size, &got);
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
};

static int ext_probe(struct ndz_io *io)
{
	uint8_t sb[2];

	if (io->size < 2048 + 1024)
		return 0;
	if (ndz_io_read_full(io, sb, 2, 1024 + 56, NULL) < 0)
		return 0;
	return get_le16(sb) == EXT2_SUPER_MAGIC;
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
	snprintf(name, sizeof(name), "ndz:%p", (void *)io);
	ec = ext2fs_open2(name, NULL, EXT2_FLAG_64BITS, 0, 0, &ndz_io_manager, &e->fs);
	if (ec) {
		bad(err, "%s", error_message(ec));
		free(e);
		return NDZ_EFS;
	}
	if (ext2fs_has_feature_journal_needs_recovery(e->fs->super)) {
		bad(err, "journal needs recovery");
		goto inconsistent;
	}
	if (e->fs->super->s_state & EXT2_ERROR_FS) {
		bad(err, "filesystem marked as having errors");
		goto inconsistent;
	}
	if (ext2fs_blocks_count(e->fs->super) > io->size / e->fs->blocksize) {
		bad(err, "filesystem larger than its partition");
		goto inconsistent;
	}
	ec = ext2fs_read_block_bitmap(e->fs);
	if (ec) {
		bad(err, "block bitmap: %s", error_message(ec));
		goto inconsistent;
	}
	*out = e;
	return 0;
inconsistent:
	ext2fs_close_free(&e->fs);
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

static const char *ext_version(ext2_filsys fs)
{
	struct ext2_super_block *s = fs->super;

	if (ext2fs_has_feature_extents(s) || ext2fs_has_feature_64bit(s) ||
	    ext2fs_has_feature_flex_bg(s) || ext2fs_has_feature_metadata_csum(s) ||
	    ext2fs_has_feature_bigalloc(s))
		return "ext4";
	return ext2fs_has_feature_journal(s) ? "ext3" : "ext2";
}

static int ext_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		    struct ndz_error *err)
{
	struct ext *e = h;
	ext2_filsys fs = e->fs;
	uint64_t bs = fs->blocksize;
	blk64_t first = fs->super->s_first_data_block;
	blk64_t last = ext2fs_blocks_count(fs->super) - 1;
	uint64_t fsbytes = (last + 1) * bs;
	uint64_t used = 0;
	blk64_t b;
	int rc;

	st->fs_bytes = fsbytes;
	st->block_size = (uint32_t)bs;
	snprintf(st->detail, sizeof(st->detail), "%s, %u-byte blocks%s", ext_version(fs),
		 (unsigned)bs, fs->cluster_ratio_bits ? ", bigalloc" : "");
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		if (group_free(fs, g) != ext2fs_bg_free_blocks_count(fs, g)) {
			bad(err, "group %u: free count disagrees with the bitmap", g);
			return NDZ_EFS;
		}
	}
	/* the boot block (1 KiB blocks: block 0 is outside the bitmap) */
	rc = fn(ctx, 0, first ? first * bs : 1024);
	if (rc)
		return rc;
	b = first;
	while (b <= last) {
		blk64_t s, z;

		if (ext2fs_find_first_set_block_bitmap2(fs->block_map, b, last, &s))
			break;
		if (ext2fs_find_first_zero_block_bitmap2(fs->block_map, s, last, &z))
			z = last + 1;
		used += (z - s) * bs;
		rc = fn(ctx, s * bs, (z - s) * bs);
		if (rc)
			return rc;
		b = z;
	}
	st->used_bytes = used;
	return 0;
}

/* ---- a clean journal's body, imaged as zeros ---- */

#define JBD2_MAGIC 0xC03B3998u         /* the journal superblock's header, big-endian */
#define JBD2_SB_V1 3u
#define JBD2_SB_V2 4u

struct jrun {
	ndz_extent_fn fn;
	void *ctx;
	uint64_t bs;
	blk64_t start, len;            /* the run of physical blocks being gathered */
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
	struct jrun j = { fn, ctx, fs->blocksize, 0, 0, 0 };
	uint8_t jsb[1024];
	blk64_t first = 0;
	errcode_t ec;

	if (e->keep_journal || !ext2fs_has_feature_journal(fs->super) || ino == 0 ||
	    ino > fs->super->s_inodes_count || fs->blocksize < sizeof(jsb))
		return 0;
	ec = ext2fs_bmap2(fs, ino, NULL, NULL, 0, 0, NULL, &first);
	if (ec || first == 0 || first >= ext2fs_blocks_count(fs->super))
		return 0;
	if (ndz_io_read_full(e->io, jsb, sizeof(jsb), first * fs->blocksize, NULL) < 0)
		return NDZ_EIO;
	if (get_be32(jsb) != JBD2_MAGIC ||
	    (get_be32(jsb + 4) != JBD2_SB_V1 && get_be32(jsb + 4) != JBD2_SB_V2) ||
	    get_be32(jsb + 12) != fs->blocksize || get_be32(jsb + 28) != 0)
		return 0;
	ec = ext2fs_block_iterate3(fs, ino, BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY, NULL,
				   journal_block, &j);
	if (ec)
		return j.rc ? j.rc : NDZ_EIO;
	return jrun_flush(&j);
}

static void ext_close(void *h)
{
	struct ext *e = h;

	if (!e)
		return;
	ext2fs_close_free(&e->fs);
	free(e);
}

const struct ndz_fs_module ndz_fs_ext = {
	"ext", ext_probe, ext_open, ext_walk, ext_close, ext_zeros,
};
