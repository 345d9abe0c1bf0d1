/*
 * fakesess [frisbeed's options] -- IMAGE: a stand-in for frisbeed that the image
 * master can start (mfrisbeed -F): it serves nothing, but answers on its --control
 * socket. By default it answers that it is ending to the first HOLD, as a frisbeed
 * that has just decided to exit idle does, and then exits as that one would;
 * IDENTIFY with its pid. Exits after 30 s in any case.
 *
 * With NDZ_FAKESESS=slow:SECONDS in its environment (the master's, passed on) it is
 * a session slow to answer: STATUS, HOLD and RATE are each answered (held, no
 * clients) only after SECONDS, so the master's question times out first; it stays
 * until SIGTERM or 3 * SECONDS + 30 s.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "ctl/sessctl.h"

static atomic_int asked;
static volatile sig_atomic_t stop;
static unsigned slow_s;                /* 0: the default stand-in */

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* the slow mode's wait before an answer (cut short by SIGTERM) */
static void slowly(void)
{
	for (uint64_t end = ndz_now_ms() + slow_s * 1000ull; !stop && ndz_now_ms() < end;)
		usleep(20000);
}

static int status(void *ctx, struct ndz_sessctl_status *out)
{
	(void)ctx;
	slowly();
	memset(out, 0, sizeof(*out));
	return 0;
}

static int rate(void *ctx, uint64_t r)
{
	(void)ctx;
	(void)r;
	slowly();
	return 0;
}

static int identify(void *ctx, struct ndz_sessctl_identity *out)
{
	(void)ctx;
	(void)out;
	return 0;
}

static int hold(void *ctx)
{
	(void)ctx;
	if (slow_s) {
		slowly();
		return 1;
	}
	atomic_store(&asked, 1);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct ndz_sessctl_ops plain = { NULL, NULL, identify, hold };
	static const struct ndz_sessctl_ops slow = { status, rate, identify, hold };
	const char *control = NULL, *mode = getenv("NDZ_FAKESESS");
	struct ndz_sessctl *s = NULL;
	struct ndz_error e = { 0 };
	struct sigaction sa;
	uint64_t end;

	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "--control") == 0)
			control = argv[i + 1];
	if (!control) {
		fprintf(stderr, "fakesess: no --control\n");
		return 2;
	}
	if (mode && (strncmp(mode, "slow:", 5) != 0 || (slow_s = (unsigned)atoi(mode + 5)) == 0 ||
		     slow_s > 600)) {
		fprintf(stderr, "fakesess: NDZ_FAKESESS: '%s' is not slow:SECONDS (1-600)\n", mode);
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	end = ndz_now_ms() + (slow_s ? (3 * slow_s + 30) * 1000ull : 30000);
	if (ndz_sessctl_start(control, slow_s ? &slow : &plain, NULL, &s, &e) != 0) {
		fprintf(stderr, "fakesess: %s\n", ndz_error_msg(&e));
		return 1;
	}
	while (!atomic_load(&asked) && !stop && ndz_now_ms() < end)
		usleep(10000);
	usleep(50000);                 /* a frisbeed stops its threads before it exits */
	ndz_sessctl_stop(s);
	return 0;
}
