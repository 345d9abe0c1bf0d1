/* A session server's answers on its control endpoint (lib/ctl/sessctl's wire). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "ctl/sessctl.h"
#include "server.h"
#include "sessans.h"

struct ndz_sessans {
	struct ndz_sessctl *ctl;
	struct ndz_server *srv;
	pthread_mutex_t *lock;         /* the program's, over srv */
	pthread_cond_t *wake;          /* NULL: nobody to wake */
};


static int server_status(void *ctx, struct ndz_sessctl_status *out)
{
	struct ndz_sessans *ss = ctx;
	struct ndz_server_stats st;
	uint64_t now = ndz_now_ns(), k[4];
	int n;

	pthread_mutex_lock(ss->lock);
	ndz_server_get_stats(ss->srv, &st);
	out->rate_bps = ndz_server_info(ss->srv)->rate_bps;
	/* with the client list: per client its state and progress, as fields and as JSON */
	out->nclient = ndz_server_states(ss->srv, now, k, out->client, NDZ_SESSCTL_CLIENTS);
	n = ndz_server_status_json(ss->srv, now, out->json, sizeof(out->json), NULL);
	pthread_mutex_unlock(ss->lock);
	out->states = 1;
	out->active = k[NDZ_SESSCTL_RX_ACTIVE];
	out->done = k[NDZ_SESSCTL_RX_DONE];
	out->failed = k[NDZ_SESSCTL_RX_FAILED];
	out->lost = k[NDZ_SESSCTL_RX_LOST];
	out->clients = st.clients;
	out->bytes_sent = st.bytes_sent;
	if (n < 0)
		return n;
	out->json_len = (size_t)n;
	return 0;
}

/* A new cap (the image master dividing its total): fixed from now on, no -W auto. */
static int server_rate(void *ctx, uint64_t rate)
{
	struct ndz_sessans *ss = ctx;
	int r;

	pthread_mutex_lock(ss->lock);
	r = ndz_server_set_rate(ss->srv, rate, ndz_now_ns(), NULL);
	if (ss->wake)
		pthread_cond_broadcast(ss->wake);
	pthread_mutex_unlock(ss->lock);
	return r;
}

static int server_identify(void *ctx, struct ndz_sessctl_identity *out)
{
	struct ndz_sessans *ss = ctx;
	const struct ndz_join_info *in;

	pthread_mutex_lock(ss->lock);
	in = ndz_server_info(ss->srv);
	memcpy(out->uuid, in->uuid, 16);
	out->chunks = in->chunks;
	out->source_bytes = in->source_bytes;
	snprintf(out->path, sizeof(out->path), "%s", ndz_server_name(ss->srv));
	pthread_mutex_unlock(ss->lock);
	return 0;
}

/* A client was sent here: the idle clock starts anew, unless the session is over. */
static int server_hold(void *ctx)
{
	struct ndz_sessans *ss = ctx;
	int r;

	pthread_mutex_lock(ss->lock);
	r = ndz_server_hold(ss->srv, ndz_now_ns());
	pthread_mutex_unlock(ss->lock);
	return r;
}

int ndz_sessans_start(const char *path, struct ndz_server *srv, pthread_mutex_t *lock,
		      pthread_cond_t *wake, struct ndz_sessans **out, struct ndz_error *e)
{
	static const struct ndz_sessctl_ops ops = { server_status, server_rate,
						    server_identify, server_hold };
	struct ndz_sessans *ss = calloc(1, sizeof(*ss));
	int rc;

	*out = NULL;
	if (!ss)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: session control", path);
	ss->srv = srv;
	ss->lock = lock;
	ss->wake = wake;
	if ((rc = ndz_sessctl_start(path, &ops, ss, &ss->ctl, e)) != 0) {
		free(ss);
		return rc;
	}
	*out = ss;
	return 0;
}

void ndz_sessans_stop(struct ndz_sessans *ss)
{
	if (!ss)
		return;
	ndz_sessctl_stop(ss->ctl);
	free(ss);
}
