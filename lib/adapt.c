/* The send rate from the clients' losses (see adapt.h). */
#include <stdlib.h>
#include <string.h>

#include "adapt.h"
#include "err.h"

#define MAX_TRACKED 256                /* clients tracked an interval; the rest pooled */
#define NO_LOSS     0.002              /* excess below: grow fast (no one is losing more) */
#define LOW_LOSS    0.01               /* excess below: grow slowly */
#define HIGH_LOSS   0.02               /* excess above: back off */
#define MAX_BASE    0.05               /* loss above this is never taken as the medium's */
#define BASE_WINDOW 10                 /* intervals the baseline is the least loss of */
#define MIN_SAMPLE  32                 /* packets an interval needs to tell anything */

struct lost {
	uint32_t client;
	uint64_t n;
};

struct ndz_adapt {
	struct ndz_adapt_opts o;
	double rate;
	uint64_t next_ns;
	uint64_t sent;
	struct lost lost[MAX_TRACKED];
	unsigned nlost;
	uint64_t pooled;               /* the losses of clients past MAX_TRACKED, summed */
	uint64_t prev_sent;            /* in the interval before */
	double prev_rate;              /* the rate of the interval before */
	double recent[BASE_WINDOW];    /* the last intervals' losses, for the baseline */
	unsigned nrecent;
	int hold;                      /* intervals to wait after a drop */
	int found;                     /* a drop happened: grow slowly from now on */
};

/*
 * The loss the medium has anyway (a lossy link, a busy client): the least of the
 * last intervals', capped. Only loss beyond it is taken as the rate's doing.
 */
static double baseline(struct ndz_adapt *a, double loss)
{
	double least = loss;

	a->recent[a->nrecent++ % BASE_WINDOW] = loss;
	for (unsigned i = 0; i < BASE_WINDOW && i < a->nrecent; i++)
		if (a->recent[i] < least)
			least = a->recent[i];
	return least < MAX_BASE ? least : MAX_BASE;
}

int ndz_adapt_create(const struct ndz_adapt_opts *o, uint64_t now_ns, struct ndz_adapt **out)
{
	struct ndz_adapt *a;

	*out = NULL;
	if (!o->min_bps || o->min_bps > o->max_bps || o->start_bps < o->min_bps ||
	    o->start_bps > o->max_bps)
		return NDZ_EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NDZ_ENOMEM;
	a->o = *o;
	if (!a->o.interval_ns)
		a->o.interval_ns = 200000000;
	a->rate = a->prev_rate = (double)o->start_bps;
	a->next_ns = now_ns + a->o.interval_ns;
	*out = a;
	return 0;
}

void ndz_adapt_free(struct ndz_adapt *a)
{
	free(a);
}

void ndz_adapt_sent(struct ndz_adapt *a, uint64_t packets)
{
	a->sent += packets;
}

void ndz_adapt_lost(struct ndz_adapt *a, uint32_t client, uint64_t packets)
{
	for (unsigned i = 0; i < a->nlost; i++)
		if (a->lost[i].client == client) {
			a->lost[i].n += packets;
			return;
		}
	if (a->nlost < MAX_TRACKED) {
		a->lost[a->nlost].client = client;
		a->lost[a->nlost++].n = packets;
	} else {
		a->pooled += packets;
	}
}

uint64_t ndz_adapt_rate(struct ndz_adapt *a, uint64_t now_ns)
{
	uint64_t worst = a->pooled, basis;
	double loss, excess, used = a->rate;

	if (now_ns < a->next_ns)
		return (uint64_t)a->rate;
	for (unsigned i = 0; i < a->nlost; i++)
		if (a->lost[i].n > worst)
			worst = a->lost[i].n;
	/* requests come a little after the losses: some are of the interval before */
	basis = (a->sent + a->prev_sent) / 2;
	if (basis < a->sent / 2)
		basis = a->sent / 2;
	if (a->sent < MIN_SAMPLE || !basis) {
		/* idle or nearly: nothing to learn from */
	} else {
		loss = (double)worst / (double)basis;
		excess = loss - baseline(a, loss);
		if (a->hold) {
			a->hold--;
		} else if (excess > HIGH_LOSS) {
			/* what got through of the interval before is what the path takes */
			double through = a->prev_rate * (1 - excess) * 0.97;

			a->rate = through < a->rate * 0.85 ? through : a->rate * 0.85;
			a->found = 1;
			a->hold = 1;
		} else if (excess < NO_LOSS && !a->found) {
			a->rate *= 1.25;
		} else if (excess < LOW_LOSS) {
			a->rate *= 1.03;
		}
	}
	a->prev_sent = a->sent;
	a->prev_rate = used;
	if (a->rate < (double)a->o.min_bps)
		a->rate = (double)a->o.min_bps;
	if (a->rate > (double)a->o.max_bps)
		a->rate = (double)a->o.max_bps;
	a->sent = 0;
	a->nlost = 0;
	a->pooled = 0;
	a->next_ns = now_ns + a->o.interval_ns;
	return (uint64_t)a->rate;
}
