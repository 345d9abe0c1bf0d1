/*
 * The one shape of every filesystem module: probe, open, walk the allocated
 * byte ranges through a callback, close.
 */
#ifndef NDZ_FS_H
#define NDZ_FS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "io.h"

/* Receives allocated [off, off+len) in bytes relative to the volume, in any order. */
typedef int (*ndz_extent_fn)(void *ctx, uint64_t off, uint64_t len);

struct ndz_fs_opts {
	int keep_pagefile;             /* NTFS: image pagefile.sys and hiberfil.sys contents */
};

/* What walk learned, for the -i report. */
struct ndz_fs_stats {
	uint64_t fs_bytes;             /* bytes the filesystem itself spans */
	uint64_t used_bytes;           /* bytes walk reported allocated */
	uint32_t block_size;
	char detail[96];               /* "ext4, 4096-byte blocks", "UFS2", ... */
};

struct ndz_fs_module {
	const char *name;              /* "ext", "ntfs", "ufs", "swap", "bsdswap", "fat", "exfat",
					  "xfs", "btrfs" */
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

/* ndz_fs_modules - the table, NULL-terminated, in probe order. */
extern const struct ndz_fs_module *const ndz_fs_modules[];

/* ndz_fs_by_name - a module by name (also "ext2/3/4", "ffs", "ufs1/2"), or NULL. */
const struct ndz_fs_module *ndz_fs_by_name(const char *name);

/* ndz_fs_probe_all - the first module whose probe accepts io, or NULL. */
const struct ndz_fs_module *ndz_fs_probe_all(struct ndz_io *io);

#endif
