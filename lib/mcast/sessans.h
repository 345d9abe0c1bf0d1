/*
 * A session server's control endpoint (lib/ctl/sessctl.h, the wire): STATUS answers
 * srv's statistics and JSON, RATE ndz_server_set_rate (then wake, when not NULL, is
 * broadcast, so that a sender waiting on it re-paces), IDENTIFY its image, HOLD
 * ndz_server_hold (so, under the lock the caller decides ndz_server_idle under, a
 * session that has answered held does not end for the idle timeout from then). Every
 * call into srv is made holding lock, the caller's lock over srv; srv, lock and wake
 * must outlive the endpoint.
 */
#ifndef NDZ_SESSANS_H
#define NDZ_SESSANS_H

#include <pthread.h>

#include "core/err.h"

struct ndz_server;
struct ndz_sessans;

/*
 * ndz_sessans_start - answer for srv on the unix socket path (ndz_sessctl_start).
 * 0 with *out, or what ndz_sessctl_start returns (NDZ_ENOMEM too), e saying why.
 */
int ndz_sessans_start(const char *path, struct ndz_server *srv, pthread_mutex_t *lock,
		      pthread_cond_t *wake, struct ndz_sessans **out, struct ndz_error *e);

/* ndz_sessans_stop - stop answering, remove the socket, free ss; NULL ok. */
void ndz_sessans_stop(struct ndz_sessans *ss);

#endif
