/* The receiving session's one driver: lock, checking thread, call order (see cdrive.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cdrive.h"
#include "core/clock.h"

#define BATCH NDZ_NET_BATCH_MAX
#define NAP_DGRAMS 32u                 /* a pause after a wake-up lets this many gather */
#define NAP_MAX_US 1000u               /* but never longer (far less than the socket holds) */
#define WIRE_EXTRA 42u                 /* Ethernet, IP and UDP bytes around a datagram */

struct ndz_cdrive {
	struct ndz_cdrive_opts o;
	struct ndz_client *cl;         /* under lock */
	struct ndz_dgram *dg;          /* a batch received (the caller's thread) */
	unsigned batch, nap_us;
	uint64_t rate_bps;             /* the server's cap (0: none) */
	size_t big;                    /* the largest datagram received so far */
	pthread_mutex_t lock;
	pthread_cond_t cond;           /* the checking thread waits here for chunks */
	int failed, stop, abandon;     /* under lock */
	int thread_on;
	pthread_t thread;
};

static uint64_t now_of(const struct ndz_cdrive *d)
{
	return d->o.io.now(d->o.io.ctx);
}

/* The session's way out (ndz_client_opts.send): the table's send. */
/*
 * The pause after a wake-up: about NAP_DGRAMS datagrams of the largest size seen
 * at the server's rate. Sized by what arrives, so a group of BLOCKS datagrams (several
 * blocks each) gathers as many datagrams a wake-up as one of single blocks.
 */
static void size_nap(struct ndz_cdrive *d)
{
	uint64_t nap;

	if (!d->rate_bps)
		return;
	nap = (uint64_t)NAP_DGRAMS * (d->big + WIRE_EXTRA) * 8 * 1000000 / d->rate_bps;
	d->nap_us = nap > NAP_MAX_US ? NAP_MAX_US : (unsigned)nap;
}

static int drive_send(void *ctx, const uint8_t *dgram, size_t len)
{
	struct ndz_cdrive *d = ctx;

	return d->o.io.send(d->o.io.ctx, dgram, len);
}

/*
 * A chunk received in part (ndz_client_want): the sink patches the target with it,
 * which checks each piece against the content index. Lock held, as feed_one.
 */
static int feed_partial(struct ndz_cdrive *d, int slot, uint32_t chunk, const uint8_t *buf,
			const uint8_t *want)
{
	const struct ndz_cdrive_sink *k = &d->o.sink;
	uint8_t bits[NDZ_BITMAP_BYTES];
	int r, why = 0;

	memcpy(bits, want, sizeof(bits));      /* the session's may move meanwhile */
	if (!k->patch) {
		ndz_client_whole(d->cl, slot);
		return 1;
	}
	pthread_mutex_unlock(&d->lock);
	r = k->patch(k->ctx, chunk, buf, bits, &why);
	pthread_mutex_lock(&d->lock);
	switch (r) {
	case NDZ_CDRIVE_PATCHED:
		ndz_client_verdict(d->cl, slot, NDZ_VERDICT_ACCEPT, 0, 1, now_of(d));
		ndz_client_written(d->cl, slot);
		break;
	case NDZ_CDRIVE_PATCH_WHOLE:
		ndz_client_whole(d->cl, slot);
		break;
	case NDZ_CDRIVE_PATCH_BAD:
		r = ndz_client_verdict(d->cl, slot, NDZ_VERDICT_DAMAGED, why, 1, now_of(d));
		if (k->refetch)
			k->refetch(k->ctx, chunk, NDZ_VERDICT_DAMAGED, why, r);
		break;
	default:
		ndz_client_verdict(d->cl, slot, NDZ_VERDICT_FATAL, why, 1, now_of(d));
		d->failed = 1;
		break;
	}
	return 1;
}

/*
 * One complete chunk, if any, checked and (when good) written, each without the
 * lock; a chunk that fails is dropped and fetched again. Called and returns with the
 * lock held: 1 when there was one, 0 when none is ready.
 */
static int feed_one(struct ndz_cdrive *d)
{
	const struct ndz_cdrive_sink *k = &d->o.sink;
	struct ndz_chunk_hdr h;
	enum ndz_verdict how;
	uint32_t chunk;
	uint8_t *buf;
	const uint8_t *want;
	int slot, why = 0, intact = 1, r;

	if ((slot = ndz_client_ready(d->cl, &chunk, &buf)) < 0)
		return 0;
	if ((want = ndz_client_slot_want(d->cl, slot)))
		return feed_partial(d, slot, chunk, buf, want);
	memset(&h, 0, sizeof(h));
	pthread_mutex_unlock(&d->lock);
	how = k->check(k->ctx, buf, chunk, &h, &why, &intact);
	pthread_mutex_lock(&d->lock);
	if (how != NDZ_VERDICT_ACCEPT) {
		int partial = ndz_client_verdict(d->cl, slot, how, why, intact, now_of(d));

		if (how == NDZ_VERDICT_FATAL)
			d->failed = 1;
		else if (k->refetch)
			k->refetch(k->ctx, chunk, how, why, partial);
		return 1;
	}
	ndz_client_verdict(d->cl, slot, how, 0, intact, now_of(d));
	/* the very buffer it was received into goes on, without a copy */
	buf = ndz_client_take_buf(d->cl, slot);
	pthread_mutex_unlock(&d->lock);
	r = k->write(k->ctx, chunk, buf, &h);
	pthread_mutex_lock(&d->lock);
	if (r < 0)
		d->failed = 1;
	ndz_client_written(d->cl, slot);
	return 1;
}

/* The checking thread: chunks off the receiving thread, which never waits on a write. */
static void *checker(void *arg)
{
	struct ndz_cdrive *d = arg;

	pthread_mutex_lock(&d->lock);
	while (!d->abandon && !d->failed) {
		if (feed_one(d))
			continue;
		if (d->stop)
			break;
		pthread_cond_wait(&d->cond, &d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int ndz_cdrive_create(const struct ndz_client_opts *co, const struct ndz_cdrive_opts *o,
		      struct ndz_cdrive **out, struct ndz_error *e)
{
	struct ndz_client_opts c = *co;
	struct ndz_cdrive *d;
	int r;

	*out = NULL;
	if (!o->io.recv || !o->io.send || !o->io.now || !o->sink.check || !o->sink.write)
		return ndz_error_set(e, NDZ_EINVAL, 0, "session driver: an I/O or sink "
				     "function missing");
	d = calloc(1, sizeof(*d));
	if (!d)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "session driver: out of memory");
	d->o = *o;
	d->batch = o->batch ? o->batch : BATCH;
	d->nap_us = 250;
	d->dg = malloc(d->batch * sizeof(*d->dg));
	if (!d->dg) {
		free(d);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "session driver: out of memory");
	}
	c.send = drive_send;
	c.ctx = d;
	if ((r = ndz_client_create(&c, now_of(d), &d->cl, e)) < 0) {
		free(d->dg);
		free(d);
		return r;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	*out = d;
	return 0;
}

void ndz_cdrive_free(struct ndz_cdrive *d)
{
	if (!d)
		return;
	ndz_cdrive_stop(d, 1);
	ndz_client_free(d->cl);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d->dg);
	free(d);
}

struct ndz_client *ndz_cdrive_client(struct ndz_cdrive *d)
{
	return d->cl;
}

int ndz_cdrive_step(struct ndz_cdrive *d, int timeout_ms, struct ndz_error *e)
{
	uint64_t now;
	int n, s, ready = 0;

	pthread_mutex_lock(&d->lock);
	s = ndz_client_state(d->cl);
	pthread_mutex_unlock(&d->lock);
	/* while receiving, a pause after a wake-up lets a batch gather */
	n = d->o.io.recv(d->o.io.ctx, d->dg, d->batch, timeout_ms,
			 s == NDZ_CLIENT_RECEIVING ? d->nap_us : 0, e);
	if (n < 0)
		return n;
	now = now_of(d);
	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < n; i++) {
		ready += ndz_client_input(d->cl, d->dg[i].data, (size_t)d->dg[i].len,
					  d->dg[i].from, now);
		if (d->dg[i].len > 0 && d->dg[i].len <= NDZ_NET_DGRAM_MAX &&
		    (size_t)d->dg[i].len > d->big) {
			d->big = (size_t)d->dg[i].len;
			size_nap(d);
		}
	}
	ndz_client_tick(d->cl, now);
	if (d->thread_on) {
		if (ready)
			pthread_cond_broadcast(&d->cond);
	} else {
		while (!d->failed && !d->stop && feed_one(d))
			;
	}
	s = ndz_client_state(d->cl);
	pthread_mutex_unlock(&d->lock);
	return s;
}

int ndz_cdrive_run(struct ndz_cdrive *d, int state, struct ndz_error *e)
{
	pthread_mutex_lock(&d->lock);
	ndz_client_tick(d->cl, now_of(d));
	pthread_mutex_unlock(&d->lock);
	for (;;) {
		struct ndz_client_stats st;
		int s, failed, r;

		pthread_mutex_lock(&d->lock);
		s = ndz_client_state(d->cl);
		ndz_client_get_stats(d->cl, &st);
		failed = d->failed;
		pthread_mutex_unlock(&d->lock);
		if ((s == NDZ_CLIENT_RECEIVING || s == NDZ_CLIENT_COMPLETE) && d->o.sink.progress)
			d->o.sink.progress(d->o.sink.ctx, &st);
		if (s != state || failed)
			return s;
		if ((r = ndz_cdrive_step(d, 20, e)) < 0)
			return r;
	}
}

int ndz_cdrive_start(struct ndz_cdrive *d, struct ndz_error *e)
{
	const struct ndz_join_info *info;
	int r;

	pthread_mutex_lock(&d->lock);
	r = ndz_client_start(d->cl, now_of(d), e);
	info = ndz_client_info(d->cl);
	/* 250 us when the server has no cap; else by its rate, from one-block datagrams on */
	d->rate_bps = info->rate_bps;
	if (d->big < NDZ_PKT_BLOCK_LEN)
		d->big = NDZ_PKT_BLOCK_LEN;
	size_nap(d);
	pthread_mutex_unlock(&d->lock);
	if (r < 0 || !d->o.threaded)
		return r;
	if (pthread_create(&d->thread, NULL, checker, d))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "session driver: cannot start a thread");
	d->thread_on = 1;
	return 0;
}

void ndz_cdrive_stop(struct ndz_cdrive *d, int abandon)
{
	pthread_mutex_lock(&d->lock);
	d->stop = 1;
	if (abandon)
		d->abandon = 1;        /* what is not written yet stays unwritten */
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (d->thread_on)
		pthread_join(d->thread, NULL);
	d->thread_on = 0;
}

int ndz_cdrive_failed(struct ndz_cdrive *d)
{
	int f;

	pthread_mutex_lock(&d->lock);
	f = d->failed;
	pthread_mutex_unlock(&d->lock);
	return f;
}

void ndz_cdrive_fail(struct ndz_cdrive *d)
{
	pthread_mutex_lock(&d->lock);
	d->failed = 1;
	pthread_mutex_unlock(&d->lock);
}

void ndz_cdrive_scan(struct ndz_cdrive *d, uint32_t front)
{
	pthread_mutex_lock(&d->lock);
	ndz_client_scan(d->cl, front, now_of(d));
	pthread_mutex_unlock(&d->lock);
}

uint32_t ndz_cdrive_scan_next(struct ndz_cdrive *d)
{
	uint32_t r;

	pthread_mutex_lock(&d->lock);
	r = !d->stop && !d->failed ? ndz_client_scan_next(d->cl) : UINT32_MAX;
	pthread_mutex_unlock(&d->lock);
	return r;
}

int ndz_cdrive_scanned(struct ndz_cdrive *d, uint32_t chunk)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = ndz_client_scanned(d->cl, chunk, now_of(d));
	pthread_mutex_unlock(&d->lock);
	return r;
}

int ndz_cdrive_needs(struct ndz_cdrive *d, uint32_t chunk)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = !d->stop && !d->failed ? ndz_client_needs(d->cl, chunk) : -1;
	pthread_mutex_unlock(&d->lock);
	return r;
}

int ndz_cdrive_want(struct ndz_cdrive *d, uint32_t chunk, const uint8_t *blocks)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = d->stop || d->failed ? 0 : ndz_client_want(d->cl, chunk, blocks);
	if (r && d->thread_on)
		pthread_cond_broadcast(&d->cond);  /* it may be complete now */
	pthread_mutex_unlock(&d->lock);
	return r;
}

int ndz_cdrive_have(struct ndz_cdrive *d, uint32_t chunk)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = ndz_client_have(d->cl, chunk, now_of(d));
	pthread_mutex_unlock(&d->lock);
	return r;
}

int ndz_cdrive_state(struct ndz_cdrive *d)
{
	int s;

	pthread_mutex_lock(&d->lock);
	s = ndz_client_state(d->cl);
	pthread_mutex_unlock(&d->lock);
	return s;
}

void ndz_cdrive_stats(struct ndz_cdrive *d, struct ndz_client_stats *st)
{
	pthread_mutex_lock(&d->lock);
	ndz_client_get_stats(d->cl, st);
	pthread_mutex_unlock(&d->lock);
}

int ndz_cdrive_leave(struct ndz_cdrive *d, int status, struct ndz_error *e)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = ndz_client_leave(d->cl, status, now_of(d), e);
	pthread_mutex_unlock(&d->lock);
	return r;
}

/* ---- the table over a multicast socket ---- */
static int net_recv(void *ctx, struct ndz_dgram *d, unsigned max, int timeout_ms,
		    unsigned nap_us, struct ndz_error *e)
{
	return ndz_net_recv_many(ctx, d, max, timeout_ms, nap_us, e);
}

static int net_send(void *ctx, const uint8_t *dgram, size_t len)
{
	return ndz_net_send(ctx, dgram, len, NULL) == 0 ? 0 : errno ? errno : EIO;
}

static uint64_t net_now(void *ctx)
{
	(void)ctx;
	return ndz_now_ns();
}

struct ndz_cdrive_io ndz_cdrive_net_io(struct ndz_net *n)
{
	return (struct ndz_cdrive_io){ net_recv, net_send, net_now, n };
}
