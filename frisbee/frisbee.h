/* frisbee's state, shared by its main file, its trust policy (policy.c), seeding
 * (seed.c), target (target.c) and messages (notes.c); none calls into frisbee.c. */
#ifndef FRISBEE_FRISBEE_H
#define FRISBEE_FRISBEE_H

#include <pthread.h>
#include <stdint.h>

#include "cli/cli.h"
#include "core/bufpool.h"
#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "core/orig.h"
#include "mcast/cdrive.h"
#include "mcast/client.h"
#include "mcast/net.h"
#include "codec/seed.h"
#include "trust/index.h"
#include "trust/verify.h"
#include "codec/unzip.h"

struct client {
	/* options */
	const char *target_path;
	int zero_fill, discard, raw, progress, give_up_s;
	const char *manifest_path;     /* --manifest */
	struct ndz_key pub, crypt;     /* --key: type NDZ_KEY_NONE when not given */
	struct ndz_verify *verify;     /* the trust policy (lib/trust/verify.h) */
	struct ndz_client_opts co;     /* the session's (lib/mcast/client.h) */
	int seed, verify_after;        /* --seed, --verify */
	int direct;                    /* --direct 1, --no-direct 0, else -1: devices only */

	struct ndz_net *net;
	struct ndz_cdrive *drv;        /* the session's driver (lib/mcast/cdrive) */
	struct ndz_client *cl;         /* its session: only while no checking thread runs */
	struct ndz_bufpool *pool;      /* chunk buffers: received into, decoded from */
	struct ndz_join_info info;     /* the joined image */
	char source[40];               /* "server ADDR": the image, in messages */

	struct ndz_error err;          /* why the load failed */
	struct ndz_error ferr;         /* the checker's reason to stop (a key that cannot open
					  an authentic chunk); err takes it after the join */
	struct ndz_error werr;         /* the checker's: a write that failed (-r) */
	struct ndz_error serr;         /* the seed scan's: why it failed */

	struct ndz_io *target;
	struct ndz_unzip *unzip;
	struct cli_progress prog;

	/* --seed, --verify (seed.c) */
	struct ndz_index ix;           /* the image's content index, when have_index */
	int have_index, scanning;
	int created;                   /* open_target made the target file: nothing to seed */
	struct ndz_seed *sd;           /* the scan's checker */
	pthread_t scan_thread;
	struct ndz_seed *psd;          /* the checking thread's: patches partial chunks */
	struct ndz_seed_patch_stats pst; /* what it patched (the checking thread's) */
	uint32_t partial;              /* chunks the scan asked for in part */
	uint64_t partial_blocks;       /* and the blocks of those */
};

/* net_note - the session's notes (ndz_client_opts.note) as messages (notes.c). */
void net_note(void *ctx, const struct ndz_client_note *n);

/*
 * target.c: target_room - what the target holds (UINT64_MAX: no bound), before the
 * join; open_target - open it and start the restore pipeline, or die; finish - wait
 * for everything to be written and flushed: 0, or the error, with c->err.
 */
uint64_t target_room(const struct client *c);
void open_target(struct client *c);
int finish(struct client *c);

/*
 * seed.c: seed_index - after the join and the manifest, fetch the content index
 * (--seed, --verify); seed_start - after open_target, before the session starts:
 * the scan thread; seed_stop - join it (after stop is set); seed_verify - after the
 * flush, with --verify: 0, or -1 with c->err; seed_free - the index.
 */
void seed_index(struct client *c);
void seed_start(struct client *c);
void seed_stop(struct client *c);
int seed_verify(struct client *c);
void seed_free(struct client *c);
/*
 * seed_patch - the driver's sink.patch (lib/mcast/cdrive.h): the target patched with
 * the lacking pieces of chunk, received in part in buf (the blocks set in blocks).
 */
int seed_patch(struct client *c, uint32_t chunk, const uint8_t *buf, const uint8_t *blocks,
	       int *why);

/* notes.c: summary - the result line and the counts of what was dropped. */
void summary(struct client *c, int code, const struct ndz_client_stats *st);

/* --orig-key: an original Frisbee V4 image's Blowfish key (lib/orig.h), policy.c's */
extern const char *orig_key_path;
/* --orig-pubkey: its RSA public key, in orig_keys too; the verifier checks each chunk */
extern const char *orig_pub_path;
extern struct ndz_orig_keys orig_keys;

/*
 * The trust policy (policy.c), by lib/trust's verifier.
 * check_chunk - check a complete chunk: the verifier's verdict.
 * check_trust - the verifier's rule for the served image, its manifest fetched
 * first when need be.
 */
enum ndz_verdict check_chunk(struct client *c, uint8_t *buf, uint32_t chunk,
			     struct ndz_chunk_hdr *h, int *why, int *intact);
void check_trust(struct client *c);

#endif
