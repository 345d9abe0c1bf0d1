/* frisbee's target: its room before the join, opening it with the pipeline, finishing. */
#include <stdint.h>
#include <string.h>

#include "frisbee.h"

/*
 * What the target holds, before the join: a block device's or an existing file's
 * size (restored, not stored with -r: a file is sized as the image); UINT64_MAX when
 * there is no bound (a file made at the image's size) or open_target will say why not.
 */
uint64_t target_room(const struct client *c)
{
	struct ndz_error e = { 0 };
	struct ndz_io *io;
	uint64_t room = UINT64_MAX;

	if (ndz_io_open_file(c->target_path, 0, &io, &e) < 0)
		return room;
	if (!(c->raw && io->is_regular))
		room = io->size;
	ndz_io_close(io);
	return room;
}

void open_target(struct client *c)
{
	struct ndz_unzip_opts uo;
	uint64_t need = c->raw ? c->info.image_bytes : c->info.source_bytes;
	int r, created = 0;

	struct ndz_error e = { 0 };

	/* a file we create goes again if we fail or are stopped by a signal */
	cli_hold_signals(1);
	r = ndz_io_open_target(c->target_path, need, &created, &c->target, &e);
	if (r == 0 && created)
		cli_own_file(c->target_path);
	c->created = created;
	cli_hold_signals(0);
	if (r < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (c->raw && c->target->is_regular && c->target->size != need &&
	    (r = ndz_io_set_size(c->target, need, &e)) < 0) {
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	}
	if (c->target->size < need)
		cli_die(EXIT_FAIL, "%s: %s (%llu bytes, the image needs %llu)", c->target_path,
			ndz_strerror(NDZ_ETOOSMALL), (unsigned long long)c->target->size,
			(unsigned long long)need);
	/* past the page cache where the target takes it (a refusal is no error) */
	if ((c->direct > 0 || (c->direct < 0 && c->target->is_blockdev)) &&
	    ndz_io_direct(c->target, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (c->raw)
		return;
	ndz_unzip_opts_init(&uo);
	uo.zero_fill = c->zero_fill;
	uo.discard = c->discard;
	uo.target_zeroed = created;
	uo.name = c->source;
	uo.expect_chunks = c->info.chunks;
	if (orig_key_path)
		uo.orig_keys = &orig_keys;
	uo.expect_uuid_set = 1;
	memcpy(uo.expect_uuid, c->info.uuid, 16);
	/* the checking thread decrypts (check_chunk): the pipeline gets plain chunks */
	r = ndz_unzip_create(c->target, &uo, &c->unzip, NULL);
	if (r < 0)
		cli_die(EXIT_FAIL, "%s: %s", c->target_path, ndz_strerror(r));
}

/* -v: how the writes went (past the page cache or through it) */
static int said_writes(struct client *c, int rc)
{
	char s[200];

	if (rc == 0 && cli_verbose)
		cli_info("%s: %s", c->target_path, ndz_io_direct_describe(c->target, s, sizeof(s)));
	return rc;
}

int finish(struct client *c)
{
	struct ndz_unzip_stats us;

	if (c->ferr.code) {
		struct ndz_error pe = { 0 };

		if (!c->raw)
			ndz_unzip_finish(c->unzip, &us, &pe);
		return ndz_error_copy(&c->err, &c->ferr);
	}
	if (c->raw)
		return said_writes(c, ndz_io_flush(c->target, &c->err));
	return said_writes(c, ndz_unzip_finish(c->unzip, &us, &c->err));
}
