/* The capture and restore jobs (job.h): imagezip's and imageunzip's policy as calls. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/format.h"
#include "core/ranges.h"
#include "codec/convert.h"
#include "codec/job.h"
#include "trust/index.h"
#include "trust/seal.h"

static void tell(ndz_job_report_fn fn, void *ctx, const struct ndz_job_report *r)
{
	if (fn)
		fn(ctx, r);
}

/* ---- capture ---- */

struct capture {
	const struct ndz_capture_opts *o;
	struct ndz_io *out;
	uint64_t written;
};

/* The chunk as stored (the sealer's sink: encrypted and hashed already), in order. */
static int capture_write(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	struct capture *c = ctx;
	int rc;

	(void)index;
	rc = ndz_io_write_full(c->out, chunk, NDZ_CHUNK_SIZE, c->written, e);
	if (rc < 0)
		return rc;
	c->written += NDZ_CHUNK_SIZE;
	return 0;
}

/* Progress counts the disk bytes read of those in use, as the summary does. */
static void capture_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct capture *c = ctx;
	struct ndz_job_report r = { .event = NDZ_JOB_PROGRESS, .bytes = done };

	(void)total;
	tell(c->o->report, c->o->report_ctx, &r);
}

int ndz_capture(const struct ndz_capture_opts *o, struct ndz_capture_result *res,
		struct ndz_error *e)
{
	const struct ndz_scan_result *scan = o->scan;
	struct capture c = { .o = o };
	struct ndz_seal_opts so = { .crypt = o->crypt, .cipher = o->cipher, .sign = !!o->sign,
				    .next = capture_write, .next_ctx = &c };
	struct ndz_job_report r = { 0 };
	struct ndz_zip_opts z = o->zip;
	struct ndz_zip_stats stats;
	struct ndz_index index = { 0 };
	struct ndz_io *view = NULL, *zview = NULL, *from;
	struct ndz_seal *seal = NULL;
	int rc, manifest_made = 0, index_made = 0;
	uint64_t in_use = ndz_ranges_total(&scan->alloc) * NDZ_SECTOR_SIZE;

	memset(res, 0, sizeof(*res));
	memset(&stats, 0, sizeof(stats));
	res->source_bytes = scan->bytes;
	/* --sign and --encrypt: the sealer between the compressor and the image */
	if ((rc = ndz_seal_create(&so, &seal, e)) < 0)
		return rc;
	z.reserve = ndz_seal_reserve(seal);
	z.index = o->index ? &index : NULL;
	rc = ndz_io_open_sub(o->src, scan->base, scan->bytes, &view, NULL);
	/* blocks to be imaged as zeros (a clean journal's body) read as zeros */
	if (rc == 0 && scan->zero.n)
		rc = ndz_io_open_zeroed(view, &scan->zero, &zview, NULL);
	if (rc < 0) {
		ndz_error_set(e, rc, 0, "%s: %s", o->name, ndz_strerror(rc));
		goto out;
	}
	from = zview ? zview : view;
	z.image_kind = scan->image_kind;
	z.part_index = scan->part_index;
	z.part_type = scan->part_type;
	z.part_start = scan->part_start;
	if ((rc = o->out.open(o->out.ctx, &c.out, e)) < 0)
		goto out;

	r.event = NDZ_JOB_START;
	r.phase = "reading";
	r.of = "disk";
	r.verb = "read";
	r.total = in_use;
	tell(o->report, o->report_ctx, &r);
	z.progress = capture_progress;
	z.progress_ctx = &c;
	if (o->to_orig) {
		stats.in_bytes = in_use;
		rc = ndz_orig_zip_v3(from, scan->bytes, &scan->alloc, z.level, ndz_seal_chunk, seal,
				     &stats.chunks, e);
		stats.out_bytes = (uint64_t)stats.chunks * NDZ_CHUNK_SIZE;
	} else {
		rc = ndz_zip(from, scan->bytes, &scan->alloc, &z, ndz_seal_chunk, seal, &stats, e);
	}
	memset(&r, 0, sizeof(r));
	r.event = NDZ_JOB_PROGRESS;
	r.bytes = stats.in_bytes;
	tell(o->report, o->report_ctx, &r);
	if (rc == 0) {
		r.event = NDZ_JOB_PHASE;
		r.phase = "flushing";
		tell(o->report, o->report_ctx, &r);
	}
	/* The manifest is in place before the image is: a signed image never lacks it. */
	if (rc == 0 && o->sign) {
		rc = ndz_seal_finish(seal, o->sign, o->manifest, e);
		manifest_made = rc == 0;
	}
	/* The index too: an image whose index is in place before it never lacks it. */
	if (rc == 0 && o->index) {
		uint8_t *ib = NULL;
		size_t ilen = 0;

		rc = ndz_index_encode(&index, o->sign, &ib, &ilen, e);
		if (rc == 0)
			rc = ndz_index_save(o->index, ib, ilen, e);
		free(ib);
		index_made = rc == 0;
	}
	if (rc == 0)
		rc = o->out.commit(o->out.ctx, e);
	memset(&r, 0, sizeof(r));
	r.event = NDZ_JOB_END;
	r.ok = rc == 0;
	r.bytes = stats.in_bytes;
	tell(o->report, o->report_ctx, &r);
	if (rc < 0) {
		/* an upload that ended first (refused, rejected, gone) tells the cause */
		o->out.abort(o->out.ctx, e);
		if (e && e->code < 0)
			rc = e->code;
		if (manifest_made)
			unlink(o->manifest);
		if (index_made)
			unlink(o->index);
	}
	res->in_bytes = stats.in_bytes;
	res->out_bytes = stats.out_bytes;
	res->chunks = stats.chunks;
out:
	ndz_index_release(&index);
	ndz_seal_free(seal);
	ndz_io_close(zview);
	ndz_io_close(view);
	return rc;
}
