/*
 * A pool of fixed-size buffers (chunk buffers): taken and given back by any thread,
 * bounded in number, allocated as first needed and reused. The chunk cache receives
 * into them and the restore pipeline decodes from the very buffer, so a chunk is not
 * copied on its way from the network to the decoder.
 */
#ifndef NDZ_BUFPOOL_H
#define NDZ_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct ndz_bufpool;

/*
 * ndz_bufpool_create - a pool of at most max buffers of size bytes each (both at
 * least 1). Returns 0 and *out (ndz_bufpool_free), or NDZ_EINVAL or NDZ_ENOMEM with
 * e (may be NULL) saying so. No buffer is allocated yet.
 */
int ndz_bufpool_create(size_t size, unsigned max, struct ndz_bufpool **out,
		       struct ndz_error *e);

/*
 * ndz_bufpool_free - free p and the buffers in it; accepts NULL. Every buffer taken
 * must have been given back.
 */
void ndz_bufpool_free(struct ndz_bufpool *p);

/*
 * ndz_bufpool_try_get - a buffer (size bytes, contents undefined, page-aligned) now: a free one,
 * or a new one while fewer than max exist; NULL when all max are taken, or with e
 * (may be NULL) set to NDZ_ENOMEM when none could be allocated. The caller owns it
 * until ndz_bufpool_put.
 */
uint8_t *ndz_bufpool_try_get(struct ndz_bufpool *p, struct ndz_error *e);

/*
 * ndz_bufpool_get - as ndz_bufpool_try_get, but waits while all are taken. NULL
 * only when no buffer exists and none can be allocated (e: NDZ_ENOMEM).
 */
uint8_t *ndz_bufpool_get(struct ndz_bufpool *p, struct ndz_error *e);

/* ndz_bufpool_put - give buf (from p) back; NULL is ignored. Wakes one waiter. */
void ndz_bufpool_put(struct ndz_bufpool *p, uint8_t *buf);

/*
 * ndz_bufpool_release - ndz_bufpool_put as a callback (ctx is the pool), for
 * whoever hands a taken buffer on (ndz_unzip_put_owned).
 */
void ndz_bufpool_release(void *ctx, uint8_t *buf);

/* ndz_bufpool_size - the bytes of each buffer. */
size_t ndz_bufpool_size(const struct ndz_bufpool *p);

/* ndz_bufpool_stats - buffers allocated so far, and of those, taken now. */
void ndz_bufpool_stats(struct ndz_bufpool *p, unsigned *allocated, unsigned *taken);

#endif
