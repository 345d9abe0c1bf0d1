/*
 * The capture and restore jobs: the whole policy of imagezip's and imageunzip's run
 * (what to image, the sealer, the manifest and the content index in place before
 * the image, cleanup on failure; the restore's checks before anything is written,
 * seeding, the read-back) as library calls, for the programs and for ndzctl node.
 * A job tells its progress and its end through one report callback, which the
 * terminal progress, --progress=json, --report-fd and the lab's reports all use.
 */
#ifndef NDZ_JOB_H
#define NDZ_JOB_H

#include <stdint.h>

#include "core/err.h"
#include "core/io.h"
#include "core/format.h"
#include "codec/seed.h"
#include "codec/unzip.h"
#include "codec/zip.h"
#include "scan.h"
#include "trust/key.h"

enum ndz_job_event {
	NDZ_JOB_START,                 /* phase, of, verb, total, chunks_total */
	NDZ_JOB_PROGRESS,              /* bytes, chunks: done so far (never less) */
	NDZ_JOB_PHASE,                 /* phase: "flushing", "verifying" */
	NDZ_JOB_WARN,                  /* msg: a warning for the user (names the object) */
	NDZ_JOB_INFO,                  /* msg: what a verbose program says */
	NDZ_JOB_END,                   /* ok; bytes, held. A failure's reason comes back
					  in the job's ndz_error, after this event */
};

struct ndz_job_report {
	enum ndz_job_event event;
	const char *phase;             /* START, PHASE */
	const char *of, *verb;         /* START: "disk" bytes "read", "written"... */
	uint64_t bytes, total;         /* total 0: unknown */
	uint32_t chunks, chunks_total; /* chunks_total 0: chunks not counted */
	uint32_t held;                 /* END: chunks the target held already (seeded) */
	int ok;                        /* END */
	const char *msg;               /* WARN */
};

/* The one report callback: called from the job's thread, in order, never at once. */
typedef void (*ndz_job_report_fn)(void *ctx, const struct ndz_job_report *r);

/*
 * Where a capture's image goes (a file through a temporary name, stdout, an
 * upload): opened once the scan has decided (so a scan's failure leaves nothing),
 * committed once the manifest and index are in place, dropped on failure.
 */
struct ndz_job_output {
	/* 0 and *io (the image, written in order; owned by the output), or a code with e */
	int (*open)(void *ctx, struct ndz_io **io, struct ndz_error *e);
	/* the image complete and flushed: put it in place (rename, the master's verdict) */
	int (*commit)(void *ctx, struct ndz_error *e);
	/* the job failed: drop what was written; e may be replaced by a truer cause */
	void (*abort)(void *ctx, struct ndz_error *e);
	void *ctx;
};

struct ndz_capture_opts {
	struct ndz_io *src;                  /* the source (not owned) */
	const char *name;                    /* the source's name, for messages */
	const struct ndz_scan_result *scan;  /* what to image: ndz_scan's (fs/scan.h) or
						--from-image's decision */
	struct ndz_zip_opts zip;             /* codec, level, threads, uuid; the job sets
						the rest */
	int to_orig;                         /* write the original V3 format, zlib at
						zip.level */
	const struct ndz_orig_reloc *labels; /* to_orig: disklabel relocations to keep */
	uint32_t nlabels;
	const struct ndz_key *sign;          /* sign: the manifest to manifest; or NULL */
	const char *manifest;
	const struct ndz_key *crypt;         /* encrypt every chunk; or NULL */
	int cipher;
	const char *index;                   /* write the content index there; or NULL */
	struct ndz_job_output out;
	ndz_job_report_fn report;
	void *report_ctx;
};

struct ndz_capture_result {
	uint64_t source_bytes;               /* what the image covers */
	uint64_t in_bytes, out_bytes;        /* bytes in use read; the image's bytes */
	uint32_t chunks;
};

/*
 * ndz_capture - capture what o->scan says of o->src as an image: seal, compress, then
 * the manifest and the content index in place before the output is committed, so a
 * signed image never lacks them; on failure the output is aborted and the manifest
 * and index removed. Reports START ("reading" disk bytes "read", the bytes in use),
 * PROGRESS, PHASE "flushing", END. Returns 0 with r, or a negative code with e.
 */
int ndz_capture(const struct ndz_capture_opts *o, struct ndz_capture_result *r,
		struct ndz_error *e);

/*
 * Where a restore writes: opened once the image's first header is known and its
 * keys checked, before anything is written (a whole disk or file, created at the
 * image's size when missing; or a partition of a disk). The target stays the
 * opener's (closed by the program after the job).
 */
struct ndz_job_target {
	/* 0 and *io; *created when a file was made (all holes); *base the target's first
	   sector on its disk (an original image's disklabels); or a code with e */
	int (*open)(void *ctx, const struct ndz_chunk_hdr *h0, struct ndz_io **io,
		    int *created, uint64_t *base, struct ndz_error *e);
	void *ctx;
};

struct ndz_restore_opts {
	struct ndz_io *in;                   /* the image, a file or a stream (not owned) */
	const char *name;                    /* IMAGE as given ("-": stdin) */
	struct ndz_job_target target;        /* open NULL: no target (-n without one) */
	struct ndz_unzip_opts unzip;         /* zero_fill, discard, verify_only, threads,
						mem_limit; the job sets the rest */
	const struct ndz_key *pub;           /* a public key: the signed manifest rules */
	const struct ndz_key *crypt;         /* an encryption key */
	const char *manifest;                /* default IMAGE.manifest */
	const char *orig_key, *orig_pub;     /* an original V4 image's key files */
	int seed;                            /* write only what the target lacks */
	int verify_after;                    /* read every chunk back after the flush */
	const char *index;                   /* default IMAGE.index */
	ndz_job_report_fn report;
	void *report_ctx;
};

struct ndz_restore_result {
	struct ndz_unzip_stats stats;        /* chunks restored, bytes written, zeroed */
	uint32_t held;                       /* chunks the target held already (seed) */
	struct ndz_seed_patch_stats patch;   /* chunks brought up piece by piece (seed) */
	int created;                         /* the target file was made by the job */
	int usage;                           /* the failure is the command line's: the
						options do not fit this image */
};

/*
 * ndz_restore - restore o->in: its rules before anything is written (the verifier:
 * keys, the signed manifest; the original format's key rules), the target opened
 * and measured, the content index for seed and verify (an unusable one: a warning
 * and every chunk, or with verify_after a failure before anything is written),
 * every chunk written (held ones only counted), flushed, then read back with
 * verify_after. Reports START ("writing" disk bytes "written", or with
 * verify_only "checking" image bytes "checked"), PROGRESS, PHASE "flushing" and
 * "verifying", WARN, INFO, END. Returns 0 with r, or a negative code with e (and
 * r->usage when the options do not fit the image).
 */
int ndz_restore(const struct ndz_restore_opts *o, struct ndz_restore_result *r,
		struct ndz_error *e);

#endif
