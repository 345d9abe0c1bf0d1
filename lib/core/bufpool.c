/* A bounded, thread-safe pool of fixed-size buffers (see bufpool.h). */
#include <pthread.h>
#include <stdlib.h>

#include "bufpool.h"

struct ndz_bufpool {
	pthread_mutex_t lock;
	pthread_cond_t cv;             /* a buffer came back */
	size_t size;
	unsigned max, allocated;
	uint8_t **free;                /* nfree buffers, of max */
	unsigned nfree;
};

int ndz_bufpool_create(size_t size, unsigned max, struct ndz_bufpool **out,
		       struct ndz_error *e)
{
	struct ndz_bufpool *p;

	*out = NULL;
	if (!size || !max)
		return ndz_error_set(e, NDZ_EINVAL, 0, "buffer pool: %u buffers of %zu bytes",
				     max, size);
	p = calloc(1, sizeof(*p));
	if (!p || !(p->free = calloc(max, sizeof(*p->free)))) {
		free(p);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "buffer pool: out of memory");
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->size = size;
	p->max = max;
	*out = p;
	return 0;
}

void ndz_bufpool_free(struct ndz_bufpool *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->nfree; i++)
		free(p->free[i]);
	free(p->free);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* A buffer now, or NULL (lock held). */
static uint8_t *take(struct ndz_bufpool *p)
{
	uint8_t *b;

	if (p->nfree)
		return p->free[--p->nfree];
	if (p->allocated == p->max)
		return NULL;
	/* page-aligned: a chunk written as it is may go O_DIRECT (frisbee -r) */
	if (posix_memalign((void **)&b, 4096, p->size) != 0)
		b = NULL;
	if (b)
		p->allocated++;
	return b;
}

uint8_t *ndz_bufpool_try_get(struct ndz_bufpool *p, struct ndz_error *e)
{
	uint8_t *b;
	int full;

	pthread_mutex_lock(&p->lock);
	b = take(p);
	full = p->allocated >= p->max;
	pthread_mutex_unlock(&p->lock);
	if (!b && !full)
		ndz_error_set(e, NDZ_ENOMEM, 0, "chunk buffers: %s", ndz_strerror(NDZ_ENOMEM));
	return b;
}

uint8_t *ndz_bufpool_get(struct ndz_bufpool *p, struct ndz_error *e)
{
	uint8_t *b;

	pthread_mutex_lock(&p->lock);
	while (!(b = take(p)) && p->allocated)
		pthread_cond_wait(&p->cv, &p->lock);
	pthread_mutex_unlock(&p->lock);
	if (!b)
		ndz_error_set(e, NDZ_ENOMEM, 0, "chunk buffers: %s", ndz_strerror(NDZ_ENOMEM));
	return b;
}

void ndz_bufpool_put(struct ndz_bufpool *p, uint8_t *buf)
{
	if (!buf)
		return;
	pthread_mutex_lock(&p->lock);
	p->free[p->nfree++] = buf;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->lock);
}

void ndz_bufpool_release(void *ctx, uint8_t *buf)
{
	ndz_bufpool_put(ctx, buf);
}

size_t ndz_bufpool_size(const struct ndz_bufpool *p)
{
	return p->size;
}

void ndz_bufpool_stats(struct ndz_bufpool *p, unsigned *allocated, unsigned *taken)
{
	pthread_mutex_lock(&p->lock);
	*allocated = p->allocated;
	*taken = p->allocated - p->nfree;
	pthread_mutex_unlock(&p->lock);
}
