/*
 * The one shape of every filesystem module: probe, open, walk the allocated
 * byte ranges through a callback, close.
 */
#ifndef NDZ_FS_H
#define NDZ_FS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/io.h"

/* Receives allocated [off, off+len) in bytes relative to the volume, in any order. */
typedef int (*ndz_extent_fn)(void *ctx, uint64_t off, uint64_t len);

struct ndz_fs_opts {
	int keep_pagefile;             /* NTFS: image pagefile.sys and hiberfil.sys contents */
	int keep_journal;              /* ext3/4: image a clean journal's body as it is */
	/*
	 * a warning for the user about a volume imaged nonetheless ("ext: group 3:
	 * free count disagrees with the bitmap"); the caller names the volume. May
	 * be NULL.
	 */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

/* What walk learned, for the -i report. */
struct ndz_fs_stats {
	uint64_t fs_bytes;             /* bytes the filesystem itself spans */
	uint64_t used_bytes;           /* bytes walk reported allocated */
	uint32_t block_size;
	char detail[256];              /* "ext4, 4096-byte blocks", "UFS2", ... */
};

struct ndz_fs_module {
	const char *name;              /* "ext", "ntfs", "ufs", "swap", "bsdswap", "fat", "exfat",
					  "xfs", "btrfs", "lvm" */
	/* probe - 1 when io looks like this filesystem, 0 when not, or a negative code. */
	int (*probe)(struct ndz_io *io);
	/*
	 * open - read the metadata. Returns 0 and *fs, or NDZ_EFS (inconsistent),
	 * NDZ_EIO, NDZ_ENOMEM. With NDZ_EFS, err says what, starting with the module
	 * ("ext: journal needs recovery"); the caller adds the volume's name. io must
	 * outlive the handle.
	 */
	int (*open)(struct ndz_io *io, const struct ndz_fs_opts *o, void **fs,
		    struct ndz_error *err);
	/*
	 * walk - report every byte range of the filesystem that may hold data (a
	 * superset of what is allocated: when unsure a block counts as allocated) and
	 * set st->fs_bytes; the caller keeps whatever follows fs_bytes in the volume,
	 * which is not the module's to judge. Stops at the first
	 * non-zero return of fn and returns it; NDZ_EFS with err filled as by open
	 * when the metadata turns out inconsistent half-way.
	 */
	int (*walk)(void *fs, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		    struct ndz_error *err);
	/* close - free the handle; accepts NULL. */
	void (*close)(void *fs);
	/*
	 * zeros - NULL, or report (after walk) allocated byte ranges that the image is
	 * to hold as zeros: blocks the filesystem never reads as they are, and which
	 * must not keep a restored disk's old contents either (a cleanly closed ext3/4
	 * journal's body). A subset of what walk reported. Returns 0, fn's non-zero
	 * return, or NDZ_EIO; on any error the caller images the blocks as they are.
	 */
	int (*zeros)(void *fs, ndz_extent_fn fn, void *ctx);
	/*
	 * union_walk - 1 when walk reports the union of the allocation maps and what
	 * the metadata reaches (a damaged map loses nothing), 0 when the maps alone
	 * decide; the user is told which ("taking the union").
	 */
	int union_walk;
};

extern const struct ndz_fs_module ndz_fs_ext;
extern const struct ndz_fs_module ndz_fs_ntfs;
extern const struct ndz_fs_module ndz_fs_ufs;
extern const struct ndz_fs_module ndz_fs_swap;
extern const struct ndz_fs_module ndz_fs_bsdswap;
extern const struct ndz_fs_module ndz_fs_fat;
extern const struct ndz_fs_module ndz_fs_exfat;
extern const struct ndz_fs_module ndz_fs_xfs;
extern const struct ndz_fs_module ndz_fs_btrfs;
extern const struct ndz_fs_module ndz_fs_lvm;

/* ndz_fs_modules - the table, NULL-terminated, in probe order. */
extern const struct ndz_fs_module *const ndz_fs_modules[];

/* ndz_fs_by_name - a module by name (also "ext2/3/4", "ffs", "ufs1/2"), or NULL. */
const struct ndz_fs_module *ndz_fs_by_name(const char *name);

/* ndz_fs_probe_all - the first module whose probe accepts io, or NULL. */
const struct ndz_fs_module *ndz_fs_probe_all(struct ndz_io *io);

/* ---- LVM2 (fs/lvm.c): what imaging needs of a VG's text metadata ---- */

#define NDZ_LVM_NAME 128
#define NDZ_LVM_MAX_LVS 1024
#define NDZ_LVM_MAX_SEGS 4096

/* A piece of an LV on this PV. */
struct ndz_lvm_seg {
	int lv;                        /* index in ndz_lvm_vg.lv */
	uint64_t lv_extent;            /* first extent of the piece within the LV */
	uint64_t pv_extent;            /* first extent on this PV (from pe_start) */
	uint64_t count;                /* extents */
	int linear;                    /* "striped" with stripe_count 1 */
};

struct ndz_lvm_lv {
	char name[NDZ_LVM_NAME];
	uint64_t extents;              /* the LV's size in extents */
	int linear;                    /* wholly on this PV, linear pieces tiling it once */
};

struct ndz_lvm_vg {
	char name[NDZ_LVM_NAME];
	uint64_t extent_bytes;
	uint64_t pe_start;             /* bytes: where extent 0 of this PV starts */
	uint64_t pe_count;             /* extents of this PV */
	struct ndz_lvm_lv *lv;
	size_t nlv;
	struct ndz_lvm_seg *seg;       /* this PV's pieces, by pv_extent, not overlapping */
	size_t nseg;
};

/*
 * ndz_lvm_parse - read LVM2 text metadata text[0..len) (NUL-free or cut at the
 * first NUL) for the PV whose UUID is pv_uuid (dashes ignored). Returns 0 and
 * *vg (release with ndz_lvm_vg_release), NDZ_EFS with err saying what and where
 * (syntax, limits, a field missing, pieces outside the PV or overlapping), or
 * NDZ_ENOMEM. *vg is empty after a failure.
 */
int ndz_lvm_parse(const char *text, size_t len, const char *pv_uuid, struct ndz_lvm_vg *vg,
		  struct ndz_error *err);

/* ndz_lvm_vg_release - free what ndz_lvm_parse allocated; accepts NULL. */
void ndz_lvm_vg_release(struct ndz_lvm_vg *vg);

/*
 * ndz_lvm_open_lv - a read-only view of linear LV lv as a volume of its own,
 * mapping LV bytes to bytes of pv (the PV's volume). pv and vg must outlive it.
 * Returns 0 and *out (ndz_io_close it), NDZ_EINVAL when the LV is not linear
 * here, NDZ_ENOMEM, with e set.
 */
int ndz_lvm_open_lv(struct ndz_io *pv, const struct ndz_lvm_vg *vg, int lv,
		    struct ndz_io **out, struct ndz_error *e);

/*
 * ndz_lvm_map_back - hand LV lv's bytes [off, off+len) to fn as PV bytes, split
 * where they cross pieces (cut at the LV's end). Returns 0, fn's first non-zero
 * return, NDZ_EINVAL when the LV is not linear here, or NDZ_EFS for bytes of no
 * piece.
 */
int ndz_lvm_map_back(const struct ndz_lvm_vg *vg, int lv, uint64_t off, uint64_t len,
		     ndz_extent_fn fn, void *ctx);

#endif
