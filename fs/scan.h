/*
 * What to image: partition tables and filesystems turned into the list of
 * allocated sectors. The one entry point imagezip calls.
 */
#ifndef NDZ_SCAN_H
#define NDZ_SCAN_H

#include <stdint.h>

#include "core/err.h"
#include "core/io.h"
#include "core/ranges.h"

/*
 * What to do with one partition instead of probing it (-S N=TYPE, -R N, -I N);
 * N may name a BSD partition inside slice N by its letter: 3a, 3d.
 */
enum ndz_scan_action {
	NDZ_SCAN_FORCE = 1,            /* treat as filesystem fstype */
	NDZ_SCAN_RAW,                  /* image every sector */
	NDZ_SCAN_IGNORE,               /* leave out of the image */
};

#define NDZ_SCAN_MAX_OVERRIDES 32

struct ndz_scan_override {
	int index;                     /* partition number; 0: a source without a table */
	int sub;                       /* BSD partition in it: 1 = 'a', ...; 0: the partition */
	enum ndz_scan_action action;
	char fstype[16];               /* module name for NDZ_SCAN_FORCE (ndz_fs_by_name) */
};

struct ndz_scan_report;

struct ndz_scan_opts {
	int partition;                 /* -s N: image partition N alone; 0: whole source */
	int raw;                       /* take the whole source raw, no filesystem awareness */
	uint64_t min_free;             /* -F: free runs shorter than this (bytes) are kept */
	/* a warning for the user (raw fallback and the like); may be NULL */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
	int keep_pagefile;             /* NTFS: keep pagefile.sys/hiberfil.sys contents */
	int keep_journal;              /* ext3/4: keep a clean journal's body, not zeros */
	struct ndz_scan_override overrides[NDZ_SCAN_MAX_OVERRIDES];
	int noverrides;
	/* when not NULL, filled with what was found (-i); release with ndz_scan_report_release */
	struct ndz_scan_report *report;
};

/* What the scan did with one entry of the report. */
enum ndz_scan_how {
	NDZ_HOW_NONE = 0,              /* not decided (the scan stopped on an error) */
	NDZ_HOW_FS,                    /* read through a filesystem module */
	NDZ_HOW_RAW,                   /* every sector kept */
	NDZ_HOW_IGNORED,               /* left out (-I) */
	NDZ_HOW_EXTENDED,              /* an MBR extended partition, holding logical ones */
	NDZ_HOW_BSDLABEL,              /* a slice with a BSD disklabel, its partitions follow */
};

/* ndz_scan_how_name - the name -i prints for how ("fs", "raw", ...); "?" for NONE. */
const char *ndz_scan_how_name(enum ndz_scan_how how);

/* One line of the -i report: a partition, a BSD partition inside one, or the whole source. */
struct ndz_scan_entry {
	int index;                     /* partition number; 0: the source had no table */
	int sub;                       /* BSD partition inside it: 1 = 'a', ...; else 0 */
	uint64_t start;                /* first sector on the source */
	uint64_t count;                /* sectors */
	uint32_t type;                 /* MBR type byte, NDZ_GPT_* code or BSD fstype */
	const char *type_name;         /* static string */
	enum ndz_scan_how how;
	char fs[16];                   /* module name, or "" */
	char detail[256];              /* from the module ("ext4, 4096-byte blocks") */
	uint64_t used_bytes;           /* bytes of this partition that go into the image */
	uint64_t free_bytes;           /* bytes left out */
	uint64_t zero_bytes;           /* of used_bytes, imaged as zeros (a clean journal) */
	char note[512];                /* what looked wrong and what was done: raw, the union */
};

struct ndz_scan_report {
	const char *scheme;            /* "none", "mbr", "gpt" */
	uint64_t source_bytes;
	uint64_t image_bytes;          /* bytes the image will hold, before compression */
	char note[320];                /* about the table itself (backup GPT used, ...) */
	struct ndz_scan_entry *v;
	size_t n;
};

/* ndz_scan_report_release - free what r holds; accepts a zeroed report. */
void ndz_scan_report_release(struct ndz_scan_report *r);

/*
 * ndz_scan_override_parse - add one -S N=TYPE (action FORCE, arg "N=TYPE"),
 * -R N or -I N (arg "N") to o; N is a number, or a number and a BSD partition
 * letter ("3a"). Returns 0, NDZ_EINVAL for a malformed argument
 * or an unknown filesystem type, NDZ_ERANGE when the list is full.
 */
int ndz_scan_override_parse(struct ndz_scan_opts *o, enum ndz_scan_action action,
			    const char *arg);

struct ndz_scan_result {
	struct ndz_ranges alloc;       /* sectors to image, relative to base */
	struct ndz_ranges zero;        /* of those, sectors to image as zeros (fs.h "zeros") */
	uint64_t base;                 /* byte offset of the image's sector 0 in the source */
	uint64_t bytes;                /* bytes the image covers from base */
	uint16_t image_kind;           /* NDZ_KIND_* (lib/format.h) */
	uint16_t part_index;
	uint32_t part_type;
	uint64_t part_start;           /* sectors */
};

/* ndz_scan_opts_init - defaults: whole source, filesystem-aware, min_free 32 KiB. */
void ndz_scan_opts_init(struct ndz_scan_opts *o);

/*
 * ndz_scan - decide what of src to image. Whole source: the partition table
 * sectors, the gap before the first partition, every partition's allocated
 * sectors (unknown or inconsistent ones raw, with a warning). With o->partition
 * the image is that partition alone (base = its start). A source without a
 * table is probed as one filesystem. Returns 0 and fills res (release with
 * ndz_scan_result_release), or a negative code with err naming src: NDZ_ENOENT
 * (no such partition), NDZ_EPART (-s N with a malformed table), NDZ_EIO, NDZ_ENOMEM.
 */
int ndz_scan(struct ndz_io *src, const struct ndz_scan_opts *o, struct ndz_scan_result *res,
	     struct ndz_error *err);

/* ndz_scan_result_release - free what res holds; accepts a zeroed res. */
void ndz_scan_result_release(struct ndz_scan_result *res);

#endif
