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
#include "codec/zip.h"
#include "scan.h"
#include "trust/key.h"

enum ndz_job_event {
	NDZ_JOB_START,                 /* phase, of, verb, total, chunks_total */
	NDZ_JOB_PROGRESS,              /* bytes, chunks: done so far (never less) */
	NDZ_JOB_PHASE,                 /* phase: "flushing", "verifying" */
	NDZ_JOB_WARN,                  /* msg: a warning for the user (names the object) */
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

#endif
