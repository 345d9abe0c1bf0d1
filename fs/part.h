/*
 * Partition tables: MBR (with extended/logical partitions), GPT (CRC-checked,
 * backup header fallback) and BSD disklabels, decoded into one common list.
 */
#ifndef NDZ_PART_H
#define NDZ_PART_H

#include <stddef.h>
#include <stdint.h>

#include "core/io.h"
#include "core/ranges.h"

enum ndz_scheme {
	NDZ_SCHEME_NONE = 0,
	NDZ_SCHEME_MBR,
	NDZ_SCHEME_GPT,
	NDZ_SCHEME_BSD,
};

/*
 * Partition type codes stored in part_type (and in chunk headers of partition
 * images): an MBR partition's type byte as is (0x00-0xff); a GPT partition's
 * type GUID mapped to NDZ_GPT_BASE + a small code (doc/FORMAT.md, "Partition images").
 */
#define NDZ_GPT_BASE         0x10000u
#define NDZ_GPT_OTHER        (NDZ_GPT_BASE + 0x00)  /* a GUID not in this list */
#define NDZ_GPT_LINUX        (NDZ_GPT_BASE + 0x01)  /* 0fc63daf-8483-4772-8e79-3d69d8477de4 */
#define NDZ_GPT_LINUX_SWAP   (NDZ_GPT_BASE + 0x02)  /* 0657fd6d-a4ab-43c4-84e5-0933c84b4f4f */
#define NDZ_GPT_EFI          (NDZ_GPT_BASE + 0x03)  /* c12a7328-f81f-11d2-ba4b-00a0c93ec93b */
#define NDZ_GPT_MSDATA       (NDZ_GPT_BASE + 0x04)  /* ebd0a0a2-b9e5-4433-87c0-68b6b72699c7 */
#define NDZ_GPT_BIOS_BOOT    (NDZ_GPT_BASE + 0x05)  /* 21686148-6449-6e6f-744e-656564454649 */
#define NDZ_GPT_FREEBSD      (NDZ_GPT_BASE + 0x06)  /* 516e7cb4-6ecf-11d6-8ff8-00022d09712b */
#define NDZ_GPT_FREEBSD_SWAP (NDZ_GPT_BASE + 0x07)  /* 516e7cb5-... */
#define NDZ_GPT_FREEBSD_UFS  (NDZ_GPT_BASE + 0x08)  /* 516e7cb6-... */
#define NDZ_GPT_FREEBSD_BOOT (NDZ_GPT_BASE + 0x09)  /* 83bd6b9d-7f41-11dc-be0b-001560b84f0f */
#define NDZ_GPT_MSRESERVED   (NDZ_GPT_BASE + 0x0a)  /* e3c9e316-0b5c-4db8-817d-f92df00215ae */
#define NDZ_GPT_LINUX_LVM    (NDZ_GPT_BASE + 0x0b)  /* e6d6d379-f507-44c2-a23c-238f2a3df928 */

/* BSD disklabel fstypes (p_fstype) used here */
#define NDZ_BSD_UNUSED 0
#define NDZ_BSD_SWAP   1
#define NDZ_BSD_FFS    7

struct ndz_part {
	int index;                     /* 1-based: MBR 1-4 primary, 5+ logical; GPT slot; BSD 1='a' */
	uint64_t start;                /* first sector, relative to the table's disk */
	uint64_t count;                /* sectors */
	uint32_t type;                 /* MBR type byte, NDZ_GPT_*, or BSD fstype */
	uint8_t guid[16];              /* GPT type GUID as stored on disk */
	int container;                 /* an MBR extended partition (holds logical ones) */
};

struct ndz_ptable {
	enum ndz_scheme scheme;
	struct ndz_part *v;
	size_t n;
	/* sectors of the table itself beyond the first partition's start: EBRs, GPT backup */
	struct ndz_ranges meta;
	uint64_t first_start;          /* lowest partition start (the boot-code gap ends here) */
	int used_backup;               /* GPT: the primary was damaged, the backup was used */
	char note[160];                /* a warning worth telling the user, or empty */
};

void ndz_ptable_init(struct ndz_ptable *t);
void ndz_ptable_release(struct ndz_ptable *t);

/*
 * ndz_part_read - decode the partition table of disk: GPT when a protective
 * MBR entry (0xee) is present, else MBR. Returns 0 and fills t (scheme NONE
 * when there is no table: no 0x55aa signature or an MBR that is not one),
 * NDZ_EPART when a table is present but malformed (entries beyond the disk,
 * overlapping primaries, a broken logical chain, both GPT headers damaged),
 * NDZ_EIO or NDZ_ENOMEM; err says what (without the disk's name, which the
 * caller adds with ndz_error_prefix).
 */
int ndz_part_read(struct ndz_io *disk, struct ndz_ptable *t, struct ndz_error *err);

/*
 * ndz_bsd_read - decode a BSD disklabel at sector 1 of slice. Partition starts
 * are made relative to the slice; the raw partition 'c' is left out.
 * Returns 0 with scheme BSD, 0 with scheme NONE when there is no label, or
 * NDZ_EPART/NDZ_EIO/NDZ_ENOMEM with err filled as by ndz_part_read.
 */
int ndz_bsd_read(struct ndz_io *slice, struct ndz_ptable *t, struct ndz_error *err);

/* ndz_part_find - the partition with that index, or NULL. */
const struct ndz_part *ndz_part_find(const struct ndz_ptable *t, int index);

/* ndz_part_type_name - a short name for a type code of scheme ("linux", "ntfs/fat", ...). */
const char *ndz_part_type_name(enum ndz_scheme scheme, uint32_t type);

/* ndz_part_holds_bsd - whether a partition of this type may hold a BSD disklabel. */
int ndz_part_holds_bsd(enum ndz_scheme scheme, uint32_t type);

#endif
