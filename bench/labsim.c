/*
 * labsim: N simulated lab nodes against an image master (bench/lab.sh), speaking the
 * lab messages (doc/PROTOCOL.md, "Lab messages") through lib/master's node side
 * (ndz_labcall_node: the one encoder, four tries 700 ms apart). Node k (0..N-1)
 * has MAC PREFIX:hi:lo with hi:lo = k + 1. Each node, on a thread of its own, starts
 * at a random point of the first second, asks until told its task (sleeping as a
 * "wait" answer says), then reports progress once a second for SECONDS, then ok.
 * Prints the round trips the nodes saw, asks, progress reports and results apart:
 * count, median, p90, p99, max (ms), and the calls that failed (no answer, or a status not OK).
 *   labsim MASTER[:PORT] PREFIX N SECONDS     e.g. labsim 10.77.0.1 52:54:00:aa 100 60
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "ctl/labcall.h"

#define SIM_MAX 1000

struct node {
	pthread_t t;
	int k;
	uint8_t mac[6];
	unsigned seed;
	double *ask_ms, *rep_ms, *ok_ms;  /* round trips, ms: asks, progress, the result */
	size_t nask, nrep, nok, cap_ask, cap_rep, cap_ok;
	int failed, waits;
	char task[NDZ_CTL_NAME_MAX + 16];
};

static const char *master;
static int seconds;

static void sleep_ms(uint64_t ms)
{
	nanosleep(&(struct timespec){ (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 }, NULL);
}

/* one exchange; its round trip appended to *v; 0 or -1 (no answer, not OK) */
static int call(struct node *n, struct ndz_ctl_labreq *r, struct ndz_ctl_labrep *rep,
		double **v, size_t *len, size_t *cap)
{
	static __thread uint8_t buf[NDZ_CTL_LABREP_MAX];
	struct ndz_error e = { 0 };
	uint64_t t0 = ndz_now_ns();
	int rc = ndz_labcall_node(master, r, buf, sizeof(buf), rep, &e);
	double ms = (double)(ndz_now_ns() - t0) / 1e6;

	r->id++;
	if (rc != 0 || rep->status != NDZ_CTL_OK) {
		if (n->failed++ < 3)
			fprintf(stderr, "labsim: node %d: %s\n", n->k,
				rc ? ndz_error_msg(&e) : ndz_ctl_strstatus(rep->status));
		return -1;
	}
	if (*len == *cap) {
		double *nv = realloc(*v, (*cap ? *cap * 2 : 64) * sizeof(**v));

		if (!nv)
			return -1;
		*v = nv;
		*cap = *cap ? *cap * 2 : 64;
	}
	(*v)[(*len)++] = ms;
	return 0;
}

static void *run(void *arg)
{
	struct node *n = arg;
	struct ndz_ctl_labreq r = { .id = (uint32_t)n->k << 16 };
	struct ndz_ctl_labrep rep;
	uint64_t total = 1ull << 34, start, next;

	memcpy(r.mac, n->mac, 6);
	sleep_ms((uint64_t)(rand_r(&n->seed) % 1000));
	r.type = NDZ_CTL_ASK;
	for (;;) {
		if (call(n, &r, &rep, &n->ask_ms, &n->nask, &n->cap_ask) != 0) {
			sleep_ms(1000);
			continue;
		}
		if (rep.task != NDZ_LAB_WAIT)
			break;
		n->waits++;
		sleep_ms(rep.wait_ms);
	}
	snprintf(n->task, sizeof(n->task), "%s %s", ndz_labcall_strtask(rep.task), rep.name);
	if (rep.task != NDZ_LAB_RELOAD)
		return NULL;
	r.type = NDZ_CTL_REPORT;
	r.kind = NDZ_LAB_PROGRESS;
	r.total = total;
	start = next = ndz_now_ms();
	for (int s = 1; s <= seconds; s++) {
		next += 1000;
		sleep_ms(next - ndz_now_ms() <= 1000 ? next - ndz_now_ms() : 0);
		r.bytes = total / (uint64_t)seconds * (uint64_t)s;
		call(n, &r, &rep, &n->rep_ms, &n->nrep, &n->cap_rep);
	}
	r.kind = NDZ_LAB_OK;
	r.bytes = total;
	r.ms = ndz_now_ms() - start;
	call(n, &r, &rep, &n->ok_ms, &n->nok, &n->cap_ok);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void stats(const char *what, double *v, size_t n)
{
	if (!n) {
		printf("%s: none\n", what);
		return;
	}
	qsort(v, n, sizeof(*v), cmp);
	printf("%s: %zu round trips, median %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms\n",
	       what, n, v[n / 2], v[n * 90 / 100], v[n * 99 / 100], v[n - 1]);
}

static void gather(double **all, size_t *len, const double *v, size_t n)
{
	double *nv = realloc(*all, (*len + n + 1) * sizeof(**all));

	if (!nv) {
		fprintf(stderr, "labsim: out of memory\n");
		exit(1);
	}
	memcpy(nv + *len, v, n * sizeof(*v));
	*all = nv;
	*len += n;
}

int main(int argc, char **argv)
{
	static struct node nodes[SIM_MAX];
	double *asks = NULL, *reps = NULL, *oks = NULL;
	size_t na = 0, nr = 0, no = 0;
	int n, failed = 0, waits = 0, told = 0;
	uint8_t pre[6];
	char mac[32];

	if (argc != 5 || (n = atoi(argv[3])) < 1 || n > SIM_MAX || (seconds = atoi(argv[4])) < 0) {
		fprintf(stderr, "usage: labsim MASTER[:PORT] PREFIX(4 bytes, aa:bb:cc:dd) N(1-%d) SECONDS\n",
			SIM_MAX);
		return 2;
	}
	master = argv[1];
	snprintf(mac, sizeof(mac), "%s:00:00", argv[2]);
	if (ndz_labcall_parse_mac(mac, pre, NULL) != 0) {
		fprintf(stderr, "labsim: bad prefix '%s'\n", argv[2]);
		return 2;
	}
	for (int k = 0; k < n; k++) {
		nodes[k].k = k;
		memcpy(nodes[k].mac, pre, 4);
		nodes[k].mac[4] = (uint8_t)((k + 1) >> 8);
		nodes[k].mac[5] = (uint8_t)(k + 1);
		nodes[k].seed = (unsigned)k * 2654435761u + 1;
		if (pthread_create(&nodes[k].t, NULL, run, &nodes[k]) != 0) {
			fprintf(stderr, "labsim: no thread for node %d\n", k);
			return 1;
		}
	}
	for (int k = 0; k < n; k++) {
		pthread_join(nodes[k].t, NULL);
		gather(&asks, &na, nodes[k].ask_ms, nodes[k].nask);
		gather(&reps, &nr, nodes[k].rep_ms, nodes[k].nrep);
		gather(&oks, &no, nodes[k].ok_ms, nodes[k].nok);
		failed += nodes[k].failed;
		waits += nodes[k].waits;
		told += strncmp(nodes[k].task, "reload ", 7) == 0;
	}
	printf("nodes %d, told to reload %d, wait answers %d, failed calls %d\n", n, told, waits,
	       failed);
	stats("asks", asks, na);
	stats("progress reports", reps, nr);
	stats("results (ok)", oks, no);
	return failed || told != n;
}
