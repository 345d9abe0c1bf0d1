/* Unit tests for lib/core/pool.c: every job runs once, in order on one thread; the bound. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/pool.h"

struct tally {
	pthread_mutex_t lock;
	unsigned runs[1000];
	unsigned order[1000];
	unsigned n;
};

struct item {
	struct tally *t;
	unsigned i;
};

static void count_job(void *arg)
{
	struct item *it = arg;

	pthread_mutex_lock(&it->t->lock);
	it->t->runs[it->i]++;
	it->t->order[it->t->n++] = it->i;
	pthread_mutex_unlock(&it->t->lock);
}

static void run_all(unsigned threads, unsigned queue)
{
	static struct tally t;
	static struct item items[1000];
	struct ndz_pool *p;
	struct ndz_error e = { 0 };
	unsigned i;

	memset(&t, 0, sizeof(t));
	pthread_mutex_init(&t.lock, NULL);
	assert_int_equal(ndz_pool_create(threads, queue, &p, &e), 0);
	assert_int_equal(ndz_pool_threads(p), threads);
	for (i = 0; i < 1000; i++) {
		items[i] = (struct item){ &t, i };
		ndz_pool_add(p, count_job, &items[i]);
	}
	ndz_pool_wait(p);
	/* wait returned: every job has run, each exactly once */
	pthread_mutex_lock(&t.lock);
	assert_int_equal(t.n, 1000);
	for (i = 0; i < 1000; i++)
		assert_int_equal(t.runs[i], 1);
	if (threads == 1)                          /* one thread: first in, first out */
		for (i = 0; i < 1000; i++)
			assert_int_equal(t.order[i], i);
	pthread_mutex_unlock(&t.lock);
	ndz_pool_free(p);
	pthread_mutex_destroy(&t.lock);
}

static void test_every_job_runs_once(void **state)
{
	(void)state;
	run_all(1, 1);
	run_all(1, 16);
	run_all(2, 1);
	run_all(4, 3);
	run_all(8, 64);
}

static void test_no_threads_runs_inline(void **state)
{
	static struct tally t;
	struct item it = { &t, 7 };
	struct ndz_pool *p;

	(void)state;
	memset(&t, 0, sizeof(t));
	pthread_mutex_init(&t.lock, NULL);
	assert_int_equal(ndz_pool_create(0, 4, &p, NULL), 0);
	assert_int_equal(ndz_pool_threads(p), 0);
	ndz_pool_add(p, count_job, &it);
	assert_int_equal(t.runs[7], 1);            /* already run, in this thread */
	assert_int_equal(ndz_pool_try_add(p, count_job, &it), 1);
	assert_int_equal(t.runs[7], 2);
	ndz_pool_wait(p);
	ndz_pool_free(p);
	pthread_mutex_destroy(&t.lock);
}

/* A job that holds its thread until the test opens the gate. */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int started, open, done;
};

static void gate_job(void *arg)
{
	struct gate *g = arg;

	pthread_mutex_lock(&g->lock);
	g->started++;
	pthread_cond_broadcast(&g->cv);
	while (!g->open)
		pthread_cond_wait(&g->cv, &g->lock);
	g->done++;
	pthread_mutex_unlock(&g->lock);
}

static void gate_init(struct gate *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cv, NULL);
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = 1;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->lock);
}

static void test_queue_is_bounded(void **state)
{
	struct gate g;
	struct ndz_pool *p;
	int i;

	(void)state;
	gate_init(&g);
	assert_int_equal(ndz_pool_create(1, 2, &p, NULL), 0);
	ndz_pool_add(p, gate_job, &g);
	/* the thread holds the first job: two more fill the queue */
	pthread_mutex_lock(&g.lock);
	while (!g.started)
		pthread_cond_wait(&g.cv, &g.lock);
	pthread_mutex_unlock(&g.lock);
	assert_int_equal(ndz_pool_try_add(p, gate_job, &g), 1);
	assert_int_equal(ndz_pool_try_add(p, gate_job, &g), 1);
	for (i = 0; i < 3; i++)
		assert_int_equal(ndz_pool_try_add(p, gate_job, &g), 0);
	pthread_mutex_lock(&g.lock);
	assert_int_equal(g.done, 0);
	pthread_mutex_unlock(&g.lock);
	gate_open(&g);
	ndz_pool_wait(p);
	assert_int_equal(g.done, 3);
	/* room again */
	assert_int_equal(ndz_pool_try_add(p, gate_job, &g), 1);
	ndz_pool_wait(p);
	assert_int_equal(g.done, 4);
	ndz_pool_free(p);
}

/* add blocks on a full queue until a thread takes a job; it does not drop it. */
struct adder {
	struct ndz_pool *p;
	struct gate *g;
	int returned;
	pthread_mutex_t lock;
};

static void *add_one(void *arg)
{
	struct adder *a = arg;

	ndz_pool_add(a->p, gate_job, a->g);
	pthread_mutex_lock(&a->lock);
	a->returned = 1;
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

static void test_add_waits_for_room(void **state)
{
	struct gate g;
	struct adder a;
	pthread_t t;

	(void)state;
	gate_init(&g);
	memset(&a, 0, sizeof(a));
	pthread_mutex_init(&a.lock, NULL);
	assert_int_equal(ndz_pool_create(1, 1, &a.p, NULL), 0);
	a.g = &g;
	ndz_pool_add(a.p, gate_job, &g);
	pthread_mutex_lock(&g.lock);
	while (!g.started)
		pthread_cond_wait(&g.cv, &g.lock);
	pthread_mutex_unlock(&g.lock);
	ndz_pool_add(a.p, gate_job, &g);           /* the queue is now full */
	assert_int_equal(pthread_create(&t, NULL, add_one, &a), 0);
	/* the third add cannot return while the gate holds the only thread */
	pthread_mutex_lock(&g.lock);
	assert_int_equal(g.done, 0);
	pthread_mutex_unlock(&g.lock);
	pthread_mutex_lock(&a.lock);
	assert_int_equal(a.returned, 0);
	pthread_mutex_unlock(&a.lock);
	gate_open(&g);
	pthread_join(t, NULL);
	assert_int_equal(a.returned, 1);
	ndz_pool_wait(a.p);
	assert_int_equal(g.done, 3);
	ndz_pool_free(a.p);
}

/* free runs what is still queued before it joins. */
static void test_free_runs_queued_jobs(void **state)
{
	static struct tally t;
	static struct item items[50];
	struct ndz_pool *p;
	unsigned i;

	(void)state;
	memset(&t, 0, sizeof(t));
	pthread_mutex_init(&t.lock, NULL);
	assert_int_equal(ndz_pool_create(2, 50, &p, NULL), 0);
	for (i = 0; i < 50; i++) {
		items[i] = (struct item){ &t, i };
		ndz_pool_add(p, count_job, &items[i]);
	}
	ndz_pool_free(p);
	assert_int_equal(t.n, 50);
	for (i = 0; i < 50; i++)
		assert_int_equal(t.runs[i], 1);
	ndz_pool_free(NULL);
	pthread_mutex_destroy(&t.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_job_runs_once),
		cmocka_unit_test(test_no_threads_runs_inline),
		cmocka_unit_test(test_queue_is_bounded),
		cmocka_unit_test(test_add_waits_for_room),
		cmocka_unit_test(test_free_runs_queued_jobs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
