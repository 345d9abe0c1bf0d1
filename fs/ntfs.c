/*
 * NTFS through libntfs-3g: free clusters from $Bitmap, unioned with the runs
 * of every in-use MFT record (a warning when $Bitmap left some out), the
 * contents of pagefile.sys, swapfile.sys and hiberfil.sys left out unless
 * asked, and the backup boot sector past the last cluster kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ntfs-3g/types.h>
#include <ntfs-3g/attrib.h>
#include <ntfs-3g/device.h>
#include <ntfs-3g/dir.h>
#include <ntfs-3g/inode.h>
#include <ntfs-3g/layout.h>
#include <ntfs-3g/logfile.h>
#include <ntfs-3g/logging.h>
#include <ntfs-3g/mst.h>
#include <ntfs-3g/runlist.h>
#include <ntfs-3g/volume.h>

#include "core/err.h"
#include "fs.h"
#include "fsutil.h"
#include "core/le.h"
#include "core/ranges.h"

/* bad(err, fmt, ...) - this module's inconsistent-metadata error (fsutil.h) */
#define bad(err, ...) ndz_fs_bad(err, "ntfs", __VA_ARGS__)

/* ---- device operations over struct ndz_io ---- */

struct dev_priv {
	struct ndz_io *io;
	int64_t pos;
};

static int dev_open(struct ntfs_device *dev, int flags)
{
	if ((flags & O_ACCMODE) != O_RDONLY) {
		errno = EROFS;
		return -1;
	}
	NDevSetOpen(dev);
	NDevSetReadOnly(dev);
	return 0;
}

static int dev_close(struct ntfs_device *dev)
{
	NDevClearOpen(dev);
	return 0;
}

static s64 dev_seek(struct ntfs_device *dev, s64 off, int whence)
{
	struct dev_priv *p = dev->d_private;
	s64 base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? p->pos : (s64)p->io->size;

	if (base + off < 0) {
		errno = EINVAL;
		return -1;
	}
	p->pos = base + off;
	return p->pos;
}

static s64 dev_pread(struct ntfs_device *dev, void *buf, s64 count, s64 off)
{
	struct dev_priv *p = dev->d_private;
	size_t got = 0;
	int rc;

	if (count < 0 || off < 0) {
		errno = EINVAL;
		return -1;
	}
	rc = ndz_io_read_full(p->io, buf, (size_t)count, (uint64_t)off, &got, NULL);
	if (rc == NDZ_ESHORTREAD)
		return (s64)got;
	if (rc < 0) {
		errno = EIO;
		return -1;
	}
	return count;
}

static s64 dev_read(struct ntfs_device *dev, void *buf, s64 count)
{
	struct dev_priv *p = dev->d_private;
	s64 n = dev_pread(dev, buf, count, p->pos);

	if (n > 0)
		p->pos += n;
	return n;
}

static s64 dev_write(struct ntfs_device *dev, const void *buf, s64 count)
{
	(void)dev;
	(void)buf;
	(void)count;
	errno = EROFS;
	return -1;
}

static s64 dev_pwrite(struct ntfs_device *dev, const void *buf, s64 count, s64 off)
{
	(void)off;
	return dev_write(dev, buf, count);
}

static int dev_sync(struct ntfs_device *dev)
{
	(void)dev;
	return 0;
}

static int dev_stat(struct ntfs_device *dev, struct stat *st)
{
	struct dev_priv *p = dev->d_private;

	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFREG | 0400;
	st->st_size = (off_t)p->io->size;
	return 0;
}

static int dev_ioctl(struct ntfs_device *dev, unsigned long req, void *arg)
{
	(void)dev;
	(void)req;
	(void)arg;
	errno = ENOTTY;
	return -1;
}

static struct ntfs_device_operations dev_ops = {
	.open = dev_open,
	.close = dev_close,
	.seek = dev_seek,
	.read = dev_read,
	.write = dev_write,
	.pread = dev_pread,
	.pwrite = dev_pwrite,
	.sync = dev_sync,
	.stat = dev_stat,
	.ioctl = dev_ioctl,
};

/* ---- the module ---- */

struct ntfs {
	struct ndz_io *io;
	struct dev_priv priv;
	ntfs_volume *vol;
	uint8_t *bitmap;               /* one bit per cluster, set: in use */
	uint64_t nclusters;
	uint32_t csize;
	struct ndz_ranges skip;        /* clusters of pagefile.sys and the like */
	uint64_t skipped;
	int hib_kept;
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

static int ntfs_probe(struct ndz_io *io)
{
	uint8_t s[512];

	if (io->size < 8192 || ndz_io_read_full(io, s, sizeof(s), 0, NULL, NULL) < 0)
		return 0;
	return !memcmp(s + 3, "NTFS    ", 8) && s[510] == 0x55 && s[511] == 0xaa;
}

/* Clusters of inode mref's unnamed $DATA, or -1 when it has none we can read. */
typedef int (*run_fn)(struct ntfs *n, int64_t lcn, int64_t len);

static int for_runs(struct ntfs *n, ntfs_inode *ni, run_fn fn)
{
	ntfs_attr *na = ntfs_attr_open(ni, AT_DATA, AT_UNNAMED, 0);
	int rc = 0;

	if (!na)
		return -1;
	if (!NAttrNonResident(na) || ntfs_attr_map_whole_runlist(na)) {
		ntfs_attr_close(na);
		return -1;
	}
	for (runlist_element *rl = na->rl; rl && rl->length; rl++)
		if (rl->lcn >= 0 && (rc = fn(n, rl->lcn, rl->length)) != 0)
			break;
	ntfs_attr_close(na);
	return rc;
}

static int check_run(struct ntfs *n, int64_t lcn, int64_t len)
{
	if ((uint64_t)lcn > n->nclusters || (uint64_t)len > n->nclusters - (uint64_t)lcn)
		return 1;
	for (int64_t i = 0; i < len; i++)
		if (!ndz_fs_bit(n->bitmap, (uint64_t)(lcn + i)))
			return 1;
	return 0;
}

static int skip_run(struct ntfs *n, int64_t lcn, int64_t len)
{
	n->skipped += (uint64_t)len;
	return ndz_ranges_add(&n->skip, (uint64_t)lcn, (uint64_t)len, NULL) < 0 ? 1 : 0;
}

/* hiberfil.sys of a hibernated system starts with one of these. */
static int hibernated(ntfs_inode *ni)
{
	ntfs_attr *na = ntfs_attr_open(ni, AT_DATA, AT_UNNAMED, 0);
	char sig[4] = { 0 };

	if (!na)
		return 0;
	if (ntfs_attr_pread(na, 0, 4, sig) != 4)
		memset(sig, 0, sizeof(sig));
	ntfs_attr_close(na);
	return !memcmp(sig, "hibr", 4) || !memcmp(sig, "HIBR", 4) || !memcmp(sig, "wake", 4) ||
	       !memcmp(sig, "WAKE", 4) || !memcmp(sig, "RSTR", 4);
}

static void ntfs_close_fs(void *h)
{
	struct ntfs *n = h;

	if (!n)
		return;
	if (n->vol)
		ntfs_umount(n->vol, FALSE);
	free(n->bitmap);
	ndz_ranges_release(&n->skip);
	free(n);
}

/* $LogFile holds no transaction to replay. */
static int logfile_clean(ntfs_volume *vol)
{
	RESTART_PAGE_HEADER *rp = NULL;
	ntfs_inode *ni = ntfs_inode_open(vol, FILE_LogFile);
	ntfs_attr *na = ni ? ntfs_attr_open(ni, AT_DATA, AT_UNNAMED, 0) : NULL;
	int clean = na && ntfs_check_logfile(na, &rp) && ntfs_is_logfile_clean(na, rp);

	free(rp);
	if (na)
		ntfs_attr_close(na);
	if (ni)
		ntfs_inode_close(ni);
	return clean;
}

static int ntfs_open_fs(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
			struct ndz_error *err)
{
	static const char *const skippable[] = { "/pagefile.sys", "/swapfile.sys",
						 "/hiberfil.sys" };
	static const MFT_REF sys_files[] = { FILE_MFT, FILE_MFTMirr, FILE_LogFile, FILE_Bitmap };
	struct ntfs_device *dev;
	struct ntfs *n;
	uint64_t mapbytes;
	int rc = NDZ_EFS;

	ntfs_log_set_handler(ntfs_log_handler_null);
	n = calloc(1, sizeof(*n));
	if (!n)
		return NDZ_ENOMEM;
	n->io = io;
	n->priv.io = io;
	n->warn = o ? o->warn : NULL;
	n->warn_ctx = o ? o->warn_ctx : NULL;
	ndz_ranges_init(&n->skip);
	dev = ntfs_device_alloc(io->name, 0, &dev_ops, &n->priv);
	if (!dev) {
		free(n);
		return NDZ_ENOMEM;
	}
	n->vol = ntfs_device_mount(dev, NTFS_MNT_RDONLY);
	if (!n->vol) {
		ndz_error_set(err, NDZ_EFS, errno, "ntfs: cannot read the volume");
		ntfs_device_free(dev);
		free(n);
		return NDZ_EFS;
	}
	n->csize = n->vol->cluster_size;
	n->nclusters = (uint64_t)n->vol->nr_clusters;
	if (n->nclusters == 0 || n->csize == 0 || n->nclusters > io->size / n->csize) {
		bad(err, "volume larger than its partition");
		goto fail;
	}
	/*
	 * Dirty with transactions in $LogFile: they are not on the disk yet, so no
	 * map here can be trusted. Dirty with a clean log (chkdsk asked for, or a
	 * crash between transactions): the union below covers what the maps miss.
	 */
	if (n->vol->flags & VOLUME_IS_DIRTY) {
		if (!logfile_clean(n->vol)) {
			bad(err, "volume marked dirty, $LogFile not clean (run chkdsk)");
			goto fail;
		}
		ndz_fs_warn(n->warn, n->warn_ctx, "ntfs", "volume marked dirty ($LogFile clean)");
	}
	mapbytes = (n->nclusters + 7) / 8;
	n->bitmap = malloc(mapbytes);
	if (!n->bitmap) {
		rc = NDZ_ENOMEM;
		goto fail;
	}
	if (!n->vol->lcnbmp_na ||
	    ntfs_attr_pread(n->vol->lcnbmp_na, 0, (s64)mapbytes, n->bitmap) != (s64)mapbytes) {
		bad(err, "cannot read $Bitmap");
		goto fail;
	}
	/* the system files must be in use according to $Bitmap, or it is not trusted */
	for (size_t i = 0; i < sizeof(sys_files) / sizeof(sys_files[0]); i++) {
		ntfs_inode *ni = ntfs_inode_open(n->vol, sys_files[i]);
		int bad = !ni || for_runs(n, ni, check_run) != 0;

		if (ni)
			ntfs_inode_close(ni);
		if (bad) {
			bad(err, "$Bitmap disagrees with system file %u",
			    (unsigned)sys_files[i]);
			goto fail;
		}
	}
	for (size_t i = 0; !o->keep_pagefile && i < sizeof(skippable) / sizeof(skippable[0]);
	     i++) {
		ntfs_inode *ni = ntfs_pathname_to_inode(n->vol, NULL, skippable[i]);

		if (!ni)
			continue;
		if (i == 2 && hibernated(ni))
			n->hib_kept = 1;
		else if (for_runs(n, ni, skip_run) > 0) {
			ntfs_inode_close(ni);
			rc = NDZ_ENOMEM;
			goto fail;
		}
		ntfs_inode_close(ni);
	}
	ndz_ranges_normalize(&n->skip);
	*out = n;
	return 0;
fail:
	ntfs_close_fs(n);
	return rc;
}

static int emit(struct ntfs *n, uint64_t a, uint64_t b, size_t *k, ndz_extent_fn fn, void *ctx,
		uint64_t *used)
{
	const struct ndz_ranges *s = &n->skip;

	/* clusters [a, b) minus the sorted skip list, whose cursor is *k */
	while (a < b) {
		uint64_t e = b;
		int rc;

		while (*k < s->n && s->v[*k].start + s->v[*k].count <= a)
			(*k)++;
		if (*k < s->n && s->v[*k].start <= a) {
			a = s->v[*k].start + s->v[*k].count;
			continue;
		}
		if (*k < s->n && s->v[*k].start < e)
			e = s->v[*k].start;
		*used += (e - a) * n->csize;
		rc = fn(ctx, a * n->csize, (e - a) * n->csize);
		if (rc)
			return rc;
		a = e;
	}
	return 0;
}

/* what the MFT walk found against $Bitmap */
struct mft_tally {
	uint64_t added, first_lcn, first_rec;
	uint64_t unreadable, first_bad;
};

/* Every cluster of the runs of the non-resident attribute a (of record rec) set in the bitmap. */
static int mark_runs(struct ntfs *n, const uint8_t *a, uint64_t rec, struct mft_tally *t)
{
	runlist_element *rl = ntfs_mapping_pairs_decompress(n->vol, (const ATTR_RECORD *)a, NULL);

	if (!rl)
		return errno == ENOMEM ? NDZ_ENOMEM : 1;
	for (runlist_element *r = rl; r->length; r++) {
		uint64_t lcn, len;

		if (r->lcn < 0 || r->length < 0 || (uint64_t)r->lcn >= n->nclusters)
			continue;
		lcn = (uint64_t)r->lcn;
		len = (uint64_t)r->length;
		if (len > n->nclusters - lcn)
			len = n->nclusters - lcn;
		for (uint64_t c = lcn; c < lcn + len; c++) {
			if (ndz_fs_bit(n->bitmap, c))
				continue;
			n->bitmap[c >> 3] |= (uint8_t)(1u << (c & 7));
			if (!t->added++) {
				t->first_lcn = c;
				t->first_rec = rec;
			}
		}
	}
	free(rl);
	return 0;
}

/* One MFT record (fixed up): the runs of each of its non-resident attributes. */
static int record_runs(struct ntfs *n, uint8_t *r, uint32_t size, uint64_t rec,
		       struct mft_tally *t)
{
	uint32_t used = get_le32(r + 24), off = get_le16(r + 20);

	if (!(get_le16(r + 22) & 1))    /* MFT_RECORD_IN_USE */
		return 0;
	if (used > size)
		used = size;
	while (off <= used && used - off >= 16) {
		uint32_t type = get_le32(r + off), len = get_le32(r + off + 4);
		int rc;

		if (type == 0xffffffffu || len < 16 || len > used - off || (len & 7))
			break;
		if (r[off + 8] && len >= 64) {
			rc = mark_runs(n, r + off, rec, t);
			if (rc < 0)
				return rc;
			if (rc > 0 && !t->unreadable++)
				t->first_bad = rec;
		}
		off += len;
	}
	return 0;
}

/*
 * Set in n->bitmap every cluster that a non-resident attribute of an in-use
 * MFT record runs over (base and extension records alike, so attribute lists
 * need no following): the union of $Bitmap and the MFT. Costs one read of
 * the MFT. A record that cannot be read is counted and passed over.
 */
static int mft_union(struct ntfs *n)
{
	ntfs_volume *v = n->vol;
	uint32_t size = v->mft_record_size, batch = 256;
	uint64_t nrec, mapbytes;
	uint8_t *map = NULL, *buf = NULL;
	struct mft_tally t = { 0 };
	int rc = NDZ_ENOMEM;

	if (!v->mft_na || !v->mftbmp_na || size < 256 || v->mft_na->initialized_size < 0)
		return 0;
	nrec = (uint64_t)v->mft_na->initialized_size / size;
	mapbytes = (uint64_t)v->mftbmp_na->initialized_size;
	if (mapbytes * 8 < nrec)
		nrec = mapbytes * 8;
	map = malloc(mapbytes ? mapbytes : 1);
	buf = malloc((size_t)size * batch);
	if (!map || !buf)
		goto out;
	if (ntfs_attr_pread(v->mftbmp_na, 0, (s64)mapbytes, map) != (s64)mapbytes) {
		t.unreadable = nrec;    /* nothing to go by but $Bitmap */
		rc = 0;
		goto out;
	}
	for (uint64_t i = 0; i < nrec; i += batch) {
		uint64_t k = nrec - i < batch ? nrec - i : batch;
		s64 want = (s64)(k * size);

		if (ntfs_attr_pread(v->mft_na, (s64)(i * size), want, buf) != want) {
			if (!t.unreadable)
				t.first_bad = i;
			t.unreadable += k;
			continue;
		}
		for (uint64_t j = 0; j < k; j++) {
			uint8_t *r = buf + j * size;

			if (!ndz_fs_bit(map, i + j))
				continue;
			if (get_le32(r) != 0x454c4946u ||    /* "FILE" */
			    ntfs_mst_post_read_fixup((NTFS_RECORD *)r, size)) {
				if (!t.unreadable++)
					t.first_bad = i + j;
				continue;
			}
			rc = record_runs(n, r, size, i + j, &t);
			if (rc < 0)
				goto out;
		}
	}
	rc = 0;
out:
	free(map);
	free(buf);
	if (t.added)
		ndz_fs_warn(n->warn, n->warn_ctx, "ntfs",
			    "%llu cluster%s $Bitmap calls free %s in use by MFT record %llu%s; "
			    "imaging %s too",
			    (unsigned long long)t.added, t.added == 1 ? "" : "s",
			    t.added == 1 ? "is" : "are", (unsigned long long)t.first_rec,
			    t.added == 1 ? "" : " and others", t.added == 1 ? "it" : "them");
	if (t.unreadable)
		ndz_fs_warn(n->warn, n->warn_ctx, "ntfs",
			    "%llu MFT record%s marked in use could not be read (the first: %llu); "
			    "the clusters %s use are as $Bitmap says",
			    (unsigned long long)t.unreadable, t.unreadable == 1 ? "" : "s",
			    (unsigned long long)t.first_bad, t.unreadable == 1 ? "it may" : "they");
	return rc;
}

static int ntfs_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		     struct ndz_error *err)
{
	struct ntfs *n = h;
	uint64_t fsbytes = n->nclusters * n->csize, used = 0, pos = 0, i, j;
	size_t k = 0;
	int rc;

	(void)err;
	st->fs_bytes = fsbytes;
	st->block_size = n->csize;
	snprintf(st->detail, sizeof(st->detail), "NTFS %u.%u, %u-byte clusters%s%s",
		 n->vol->major_ver, n->vol->minor_ver, n->csize,
		 n->skipped ? ", page/hibernation files skipped" : "",
		 n->hib_kept ? ", hibernated (hiberfil.sys kept)" : "");
	rc = mft_union(n);
	if (rc)
		return rc;
	while (ndz_fs_next_run(n->bitmap, &pos, n->nclusters, 1, &i, &j)) {
		rc = emit(n, i, j, &k, fn, ctx, &used);
		if (rc)
			return rc;
	}
	st->used_bytes = used;
	/* the backup boot sector sits past the last cluster, beyond fs_bytes: kept by
	 * the caller with the rest of the volume's tail */
	return 0;
}

const struct ndz_fs_module ndz_fs_ntfs = {
	"ntfs", ntfs_probe, ntfs_open_fs, ntfs_walk, ntfs_close_fs, NULL, 1,
};
