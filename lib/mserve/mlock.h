/*
 * The master's lock: one per service, made and owned by lib/mserve/mserve, which
 * hands it to its own parts (http, mconn, labsrv); nobody outside the room makes
 * one. It guards the configuration, the master object and the lab; nothing waits
 * on a socket while holding it.
 */
#ifndef NDZ_MLOCK_H
#define NDZ_MLOCK_H

#include "core/err.h"

struct ndz_mlock;

/* ndz_mlock_create - a lock, not held. 0 with *out, or NDZ_ENOMEM with e set. */
int ndz_mlock_create(struct ndz_mlock **out, struct ndz_error *e);

/* ndz_mlock_free - accepts NULL; the lock must not be held. */
void ndz_mlock_free(struct ndz_mlock *l);

/* ndz_mlock_take / ndz_mlock_give - take it (waiting for it), give it back. */
void ndz_mlock_take(struct ndz_mlock *l);
void ndz_mlock_give(struct ndz_mlock *l);

#endif
