/*
 * A small thread pool: a fixed set of threads taking jobs, first in first out,
 * from a bounded queue. The one place threads are made for lib/'s parallel work.
 */
#ifndef NDZ_POOL_H
#define NDZ_POOL_H

#include "err.h"

struct ndz_pool;

/* A job: fn(arg), run once on one of the pool's threads. */
typedef void (*ndz_job_fn)(void *arg);

/*
 * ndz_pool_create - a pool of threads threads and a queue of queue_size jobs
 * waiting at most (at least 1 is used). threads 0 makes a pool without threads
 * whose jobs run at once in the thread that adds them. A job may wait for another
 * only if the pool has a thread for each job that can be waiting at once.
 * Returns 0 and *out (free with ndz_pool_free), or NDZ_ENOMEM with e set and *out
 * NULL (no thread is left running).
 */
int ndz_pool_create(unsigned threads, unsigned queue_size, struct ndz_pool **out,
		    struct ndz_error *e);

/*
 * ndz_pool_add - queue fn(arg); blocks while the queue is full. Must not be called
 * once ndz_pool_free has begun.
 */
void ndz_pool_add(struct ndz_pool *p, ndz_job_fn fn, void *arg);

/* ndz_pool_try_add - queue fn(arg) if there is room: 1 when queued, 0 when full. */
int ndz_pool_try_add(struct ndz_pool *p, ndz_job_fn fn, void *arg);

/* ndz_pool_wait - return once every job added so far has run to its end. */
void ndz_pool_wait(struct ndz_pool *p);

/* ndz_pool_threads - the number of threads (0 for a pool that runs jobs inline). */
unsigned ndz_pool_threads(const struct ndz_pool *p);

/*
 * ndz_pool_free - run the jobs still queued, stop and join the threads, free.
 * Accepts NULL.
 */
void ndz_pool_free(struct ndz_pool *p);

#endif
