/* The serving session's one driver: lock, threads, call order (see sdrive.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/format.h"
#include "pace.h"
#include "sdrive.h"

#define MS 1000000ull
#define IDLE_NS (200 * MS)             /* an idle sender plans again at least this often */

struct ndz_sdrive {
	struct ndz_sdrive_opts o;
	struct ndz_server *srv;        /* under lock */
	struct ndz_server_batch *b;    /* the sender's */
	pthread_mutex_t lock;
	pthread_cond_t cond;           /* the idle sender waits here */
	int woken, idle, pending;      /* under lock */
	uint64_t idle_until, send_at;
	struct ndz_error fatal;        /* what stopped a thread (under lock) */
	atomic_int stop;
	int threads_on;
	pthread_t rt, st;
	uint8_t rbuf[NDZ_NET_DGRAM_MAX];
};

static uint64_t now_of(const struct ndz_sdrive *d)
{
	return d->o.io.now(d->o.io.ctx);
}

static void send_reply(struct ndz_sdrive *d, const struct ndz_server_reply *rp)
{
	for (unsigned i = 0; i < rp->count; i++)
		d->o.io.send(d->o.io.ctx, rp->bufs[i], rp->lens[i]);
}

int ndz_sdrive_create(struct ndz_server *srv, const struct ndz_sdrive_opts *o,
		      struct ndz_sdrive **out, struct ndz_error *e)
{
	struct ndz_sdrive *d;

	*out = NULL;
	if (!o->io.recv || !o->io.send || !o->io.send_many || !o->io.read || !o->io.now)
		return ndz_error_set(e, NDZ_EINVAL, 0, "server driver: an I/O function missing");
	d = calloc(1, sizeof(*d));
	if (!d || !(d->b = malloc(sizeof(*d->b)))) {
		free(d);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "server driver: out of memory");
	}
	d->o = *o;
	d->srv = srv;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	*out = d;
	return 0;
}

void ndz_sdrive_free(struct ndz_sdrive *d)
{
	if (!d)
		return;
	ndz_sdrive_stop(d);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d->b);
	free(d);
}

int ndz_sdrive_receive(struct ndz_sdrive *d, int timeout_ms, int *admitted,
		       struct ndz_error *e)
{
	struct ndz_server_reply rp;
	struct ndz_pkt p;
	uint32_t from;
	int n, r;

	n = d->o.io.recv(d->o.io.ctx, d->rbuf, sizeof(d->rbuf), timeout_ms, &from, e);
	if (n <= 0)
		return n;
	pthread_mutex_lock(&d->lock);
	r = ndz_server_packet(d->srv, d->rbuf, (size_t)n, from, now_of(d), &rp, &p);
	if (r == 2) {
		d->woken = 1;
		pthread_cond_signal(&d->cond);
	}
	pthread_mutex_unlock(&d->lock);
	if (r > 0 && d->o.packet)
		d->o.packet(d->o.ctx, &p, from);
	send_reply(d, &rp);
	if (admitted)
		*admitted = r;
	return 1;
}

enum ndz_sdrive_next ndz_sdrive_send_step(struct ndz_sdrive *d, uint64_t *at)
{
	struct ndz_server_batch *b = d->b;
	struct ndz_error e = { 0 };
	char msg[256];
	uint64_t now = now_of(d);
	int r;

	pthread_mutex_lock(&d->lock);
	if (d->idle && !d->woken && now < d->idle_until) {
		*at = d->idle_until;
		pthread_mutex_unlock(&d->lock);
		return NDZ_SDRIVE_IDLE;
	}
	d->idle = 0;
	if (!d->pending) {
		d->woken = 0;
		switch (ndz_server_plan(d->srv, now, b)) {
		case NDZ_SERVER_WAIT:     /* until woken, or the plan's time (a gather's end) */
			d->idle = 1;
			*at = d->idle_until = now + (b->delay_ns && b->delay_ns < IDLE_NS ?
						     b->delay_ns : IDLE_NS);
			pthread_mutex_unlock(&d->lock);
			return NDZ_SDRIVE_IDLE;
		case NDZ_SERVER_LOAD:
			pthread_mutex_unlock(&d->lock);
			r = d->o.io.read(d->o.io.ctx, ndz_server_chunk_buf(d->srv), b->chunk);
			pthread_mutex_lock(&d->lock);
			if (ndz_server_check_chunk(d->srv, b->chunk, r, &e) < 0) {
				ndz_error_set(&d->fatal, e.code, 0, "%s; stopping", ndz_error_msg(&e));
				pthread_mutex_unlock(&d->lock);
				return NDZ_SDRIVE_STOP;
			}
			pthread_mutex_unlock(&d->lock);
			return NDZ_SDRIVE_AGAIN;
		case NDZ_SERVER_SEND:
			d->pending = 1;
			d->send_at = now + b->delay_ns;
			break;
		}
		/* encoding (and repairs) need not hold up the receiver (server.h) */
		pthread_mutex_unlock(&d->lock);
		if (d->o.io.send_vec)
			ndz_server_build_vec(d->srv, b);
		else
			ndz_server_build(d->srv, b);
		pthread_mutex_lock(&d->lock);
		now = now_of(d);
	}
	if (now < d->send_at && !b->control) {
		*at = d->send_at;
		pthread_mutex_unlock(&d->lock);
		return NDZ_SDRIVE_PACE;
	}
	pthread_mutex_unlock(&d->lock);
	r = d->o.io.send_vec ? d->o.io.send_vec(d->o.io.ctx, b->out, b->ndgrams, &e) :
			       d->o.io.send_many(d->o.io.ctx, b->bufs, b->lens, b->ndgrams, &e);
	b->offloaded = r > 0 && d->o.io.send_vec ? (unsigned)r : 0;
	if (r < 0 && d->o.warn)
		d->o.warn(d->o.ctx, &e);
	pthread_mutex_lock(&d->lock);
	ndz_server_sent(d->srv, b, now_of(d));
	d->pending = 0;
	/* -W auto: each interval's decision, once */
	if (d->o.trace && ndz_server_rate_trace(d->srv, msg, sizeof(msg)))
		d->o.trace(d->o.ctx, msg);
	pthread_mutex_unlock(&d->lock);
	return NDZ_SDRIVE_AGAIN;
}

int ndz_sdrive_woken(struct ndz_sdrive *d)
{
	int w;

	pthread_mutex_lock(&d->lock);
	w = d->woken;
	pthread_mutex_unlock(&d->lock);
	return w;
}

static void *receiver(void *arg)
{
	struct ndz_sdrive *d = arg;
	struct ndz_error e = { 0 };

	while (!atomic_load(&d->stop)) {
		if (ndz_sdrive_receive(d, 200, NULL, &e) < 0) {    /* for the caller to report */
			pthread_mutex_lock(&d->lock);
			ndz_error_copy(&d->fatal, &e);
			pthread_mutex_unlock(&d->lock);
			break;
		}
	}
	return NULL;
}

/* The sender: steps, sleeping to pace, waiting while idle (woken by a packet or the
 * control socket: either plans again). */
static void *sender(void *arg)
{
	struct ndz_sdrive *d = arg;

	while (!atomic_load(&d->stop)) {
		uint64_t at;
		enum ndz_sdrive_next n = ndz_sdrive_send_step(d, &at);

		if (n == NDZ_SDRIVE_STOP)
			break;
		if (n == NDZ_SDRIVE_PACE) {
			ndz_pace_sleep_until(at);
		} else if (n == NDZ_SDRIVE_IDLE) {
			uint64_t now = now_of(d);      /* at: IDLE_NS at most from the plan */
			uint64_t t = ndz_wall_ns() + (at > now ? at - now : 0);
			struct timespec ts = { (time_t)(t / 1000000000u), (long)(t % 1000000000u) };

			pthread_mutex_lock(&d->lock);
			if (!d->woken && !atomic_load(&d->stop))
				pthread_cond_timedwait(&d->cond, &d->lock, &ts);
			d->idle = 0;
			pthread_mutex_unlock(&d->lock);
		}
	}
	return NULL;
}

int ndz_sdrive_start(struct ndz_sdrive *d, struct ndz_error *e)
{
	if (pthread_create(&d->rt, NULL, receiver, d))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "server driver: cannot start threads");
	if (pthread_create(&d->st, NULL, sender, d)) {
		atomic_store(&d->stop, 1);
		pthread_join(d->rt, NULL);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "server driver: cannot start threads");
	}
	d->threads_on = 1;
	return 0;
}

void ndz_sdrive_stop(struct ndz_sdrive *d)
{
	atomic_store(&d->stop, 1);
	pthread_mutex_lock(&d->lock);
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (d->threads_on) {
		pthread_join(d->rt, NULL);
		pthread_join(d->st, NULL);
	}
	d->threads_on = 0;
}

void ndz_sdrive_announce(struct ndz_sdrive *d)
{
	struct ndz_server_reply rp;

	pthread_mutex_lock(&d->lock);
	ndz_server_announce(d->srv, &rp);
	pthread_mutex_unlock(&d->lock);
	send_reply(d, &rp);
}

int ndz_sdrive_idle(struct ndz_sdrive *d)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = ndz_server_idle(d->srv, now_of(d));
	pthread_mutex_unlock(&d->lock);
	return r;
}

int ndz_sdrive_fatal(struct ndz_sdrive *d, struct ndz_error *e)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = d->fatal.code;
	if (r)
		ndz_error_copy(e, &d->fatal);
	pthread_mutex_unlock(&d->lock);
	return r;
}

void ndz_sdrive_stats(struct ndz_sdrive *d, struct ndz_server_stats *st)
{
	pthread_mutex_lock(&d->lock);
	ndz_server_get_stats(d->srv, st);
	pthread_mutex_unlock(&d->lock);
}

int ndz_sdrive_status_json(struct ndz_sdrive *d, char *buf, size_t cap, struct ndz_error *e)
{
	int n;

	pthread_mutex_lock(&d->lock);
	n = ndz_server_status_json(d->srv, now_of(d), buf, cap, e);
	pthread_mutex_unlock(&d->lock);
	return n;
}

pthread_mutex_t *ndz_sdrive_lock(struct ndz_sdrive *d)
{
	return &d->lock;
}

pthread_cond_t *ndz_sdrive_wake(struct ndz_sdrive *d)
{
	return &d->cond;
}

/* ---- the table over a multicast socket and an image file ---- */
static int net_recv(void *ctx, uint8_t *buf, size_t cap, int timeout_ms, uint32_t *from,
		    struct ndz_error *e)
{
	struct ndz_sdrive_net *n = ctx;

	return ndz_net_recv(n->net, buf, cap, timeout_ms, from, e);
}

static int net_send(void *ctx, const uint8_t *dgram, size_t len)
{
	struct ndz_sdrive_net *n = ctx;

	return ndz_net_send(n->net, dgram, len, NULL) == 0 ? 0 : errno ? errno : EIO;
}

static int net_send_many(void *ctx, const uint8_t *const *bufs, const size_t *lens,
			 unsigned count, struct ndz_error *e)
{
	struct ndz_sdrive_net *n = ctx;

	return ndz_net_send_many(n->net, bufs, lens, count, e);
}

static int net_send_vec(void *ctx, const struct ndz_net_out *d, unsigned count,
			struct ndz_error *e)
{
	struct ndz_sdrive_net *n = ctx;

	return ndz_net_send_vec(n->net, d, count, e);
}

static int img_read(void *ctx, uint8_t *buf, uint32_t chunk)
{
	struct ndz_sdrive_net *n = ctx;

	return ndz_io_read_full(n->img, buf, NDZ_CHUNK_SIZE, (uint64_t)chunk * NDZ_CHUNK_SIZE,
				NULL, NULL);
}

static uint64_t net_now(void *ctx)
{
	(void)ctx;
	return ndz_now_ns();
}

struct ndz_sdrive_io ndz_sdrive_net_io(struct ndz_sdrive_net *n)
{
	return (struct ndz_sdrive_io){ net_recv, net_send, net_send_many, img_read, net_now, n,
				       net_send_vec };
}
