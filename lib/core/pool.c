/* A fixed set of threads running jobs from a bounded first-in-first-out queue. */
#include <pthread.h>
#include <stdlib.h>

#include "err.h"
#include "pool.h"

struct job {
	ndz_job_fn fn;
	void *arg;
};

struct ndz_pool {
	pthread_mutex_t lock;
	pthread_cond_t work_cv;        /* a job was queued, or the pool is closing */
	pthread_cond_t room_cv;        /* a job was taken: the queue has room */
	pthread_cond_t idle_cv;        /* the last job running ended with none queued */
	struct job *queue;             /* a ring of cap entries */
	unsigned cap, head, count;
	unsigned busy;                 /* jobs running */
	int closing;
	pthread_t *threads;
	unsigned nthreads;
};

static void *pool_thread(void *arg)
{
	struct ndz_pool *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct job j;

		while (!p->count && !p->closing)
			pthread_cond_wait(&p->work_cv, &p->lock);
		if (!p->count)                     /* closing, and nothing left to run */
			break;
		j = p->queue[p->head];
		p->head = (p->head + 1) % p->cap;
		p->count--;
		p->busy++;
		pthread_cond_signal(&p->room_cv);
		pthread_mutex_unlock(&p->lock);
		j.fn(j.arg);
		pthread_mutex_lock(&p->lock);
		if (--p->busy == 0 && !p->count)
			pthread_cond_broadcast(&p->idle_cv);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Stop and join the first n threads, and free p. */
static void pool_end(struct ndz_pool *p, unsigned n)
{
	unsigned i;

	pthread_mutex_lock(&p->lock);
	p->closing = 1;
	pthread_cond_broadcast(&p->work_cv);
	pthread_mutex_unlock(&p->lock);
	for (i = 0; i < n; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->work_cv);
	pthread_cond_destroy(&p->room_cv);
	pthread_cond_destroy(&p->idle_cv);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p->queue);
	free(p);
}

int ndz_pool_create(unsigned threads, unsigned queue_size, struct ndz_pool **out,
		    struct ndz_error *e)
{
	struct ndz_pool *p = calloc(1, sizeof(*p));
	unsigned i;

	*out = NULL;
	if (!p)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "thread pool: %s", ndz_strerror(NDZ_ENOMEM));
	p->cap = queue_size ? queue_size : 1;
	p->queue = calloc(p->cap, sizeof(*p->queue));
	p->threads = calloc(threads ? threads : 1, sizeof(*p->threads));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work_cv, NULL);
	pthread_cond_init(&p->room_cv, NULL);
	pthread_cond_init(&p->idle_cv, NULL);
	if (!p->queue || !p->threads) {
		pool_end(p, 0);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "thread pool: %s", ndz_strerror(NDZ_ENOMEM));
	}
	for (i = 0; i < threads; i++) {
		int rc = pthread_create(&p->threads[i], NULL, pool_thread, p);

		if (rc != 0) {
			pool_end(p, i);
			return ndz_error_set(e, NDZ_ENOMEM, rc, "thread pool: cannot start thread %u",
					     i + 1);
		}
	}
	p->nthreads = threads;
	*out = p;
	return 0;
}

/* Queue j (lock held, room checked). */
static void push(struct ndz_pool *p, ndz_job_fn fn, void *arg)
{
	struct job *j = &p->queue[(p->head + p->count) % p->cap];

	j->fn = fn;
	j->arg = arg;
	p->count++;
	pthread_cond_signal(&p->work_cv);
}

void ndz_pool_add(struct ndz_pool *p, ndz_job_fn fn, void *arg)
{
	if (!p->nthreads) {
		fn(arg);
		return;
	}
	pthread_mutex_lock(&p->lock);
	while (p->count == p->cap)
		pthread_cond_wait(&p->room_cv, &p->lock);
	push(p, fn, arg);
	pthread_mutex_unlock(&p->lock);
}

int ndz_pool_try_add(struct ndz_pool *p, ndz_job_fn fn, void *arg)
{
	int queued = 0;

	if (!p->nthreads) {
		fn(arg);
		return 1;
	}
	pthread_mutex_lock(&p->lock);
	if (p->count < p->cap) {
		push(p, fn, arg);
		queued = 1;
	}
	pthread_mutex_unlock(&p->lock);
	return queued;
}

void ndz_pool_wait(struct ndz_pool *p)
{
	pthread_mutex_lock(&p->lock);
	while (p->count || p->busy)
		pthread_cond_wait(&p->idle_cv, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

unsigned ndz_pool_threads(const struct ndz_pool *p)
{
	return p->nthreads;
}

void ndz_pool_free(struct ndz_pool *p)
{
	if (p)
		pool_end(p, p->nthreads);
}
