/* The send rate from the clients' losses (see adapt.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adapt.h"
#include "core/err.h"

#define MAX_TRACKED 256                /* clients tracked an interval; the rest pooled */
#define NO_LOSS     0.002              /* excess below: grow fast (no one is losing more) */
#define LOW_LOSS    0.01               /* excess below: grow slowly */
#define HIGH_LOSS   0.02               /* excess above: back off */
#define MAX_BASE    0.05               /* loss above this is never taken as the medium's */
#define BASE_WINDOW 20                 /* intervals the baseline is the least loss of */
#define MIN_SAMPLE  32                 /* packets an interval needs to tell anything */
#define LONGEST     20                 /* intervals one lasts at most to get them */
#define START_GROW  1.2                /* a lossless interval's growth, until the first drop */
#define PROBE_GROW  1.01               /* a nearly lossless interval's growth after it */
#define EASE        0.99               /* a little lost after the first drop: this much */
#define DROP_KEEP   0.95               /* after a drop: this much of what got through */
#define EARLY_LOSS  0.25               /* during the start, this much lost ends an interval early */
#define MAX_DROP    0.75               /* the most one drop takes off (loss, and rate) */
#define APP_LIMITED 0.8                /* sent less than this of the rate: not the path's limit */
#define WINDOW      10                 /* intervals of what got through, for a drop's floor */
#define FLOOR_KEEP  0.92               /* a drop keeps this much of what got through in them */
#define RECENT_KEEP 0.7                /* a drop soon after another keeps this much */
#define WORSE_LOSS  0.1                /* while waiting, drop again for this much more */
#define DROP_WAIT   2                  /* intervals to wait after a drop (requests lag) */
#define DELAY_DECAY 0.98               /* the report delay's estimate, kept per interval */
#define NEAR_GOT    0.97               /* from this much of what got through, grow once a delay */
#define THRU_N      32                 /* delivery samples kept */
#define THRU_AGE    15                 /* intervals a sample counts for */
#define THRU_MIN    2                  /* sendings needed to hold from them */
#define CHANGES     32                 /* rate changes remembered */
#define THRU_LOSS   0.01               /* a sample needs this much lost (a full queue) */
#define PROBE_AFTER 50                 /* intervals held there, lossless, before growing 1% above */

struct lost {
	uint32_t client;
	uint64_t n;
};

struct ndz_adapt {
	struct ndz_adapt_opts o;
	double rate;
	uint64_t start_ns, next_ns;    /* this interval's start and planned end */
	uint64_t sent;
	struct lost lost[MAX_TRACKED];
	unsigned nlost;
	uint64_t pooled;               /* the losses of clients past MAX_TRACKED, summed */
	uint64_t prev_sent;            /* in the interval before */
	double prev_rate;              /* the rate of the interval before */
	double recent[BASE_WINDOW];    /* the last intervals' losses, for the baseline */
	unsigned nrecent;
	int hold;                      /* intervals to wait after a drop */
	uint64_t win_sent[WINDOW], win_lost[WINDOW], win_ns[WINDOW]; /* the last intervals' */
	unsigned nwin;
	double drop_excess;            /* the loss the last drop was for */
	unsigned since_drop;           /* intervals since the last drop (up to WINDOW) */
	int found;                     /* a drop happened: grow slowly from now on */
	unsigned clean;                /* intervals in a row grown since the last loss */
	double delay;                  /* how late losses are reported (ns), a decaying maximum */
	double got;                    /* what got through at the last drop (bit/s) */
	int measured;                  /* got is from the caller's samples, not a guess */
	uint64_t change_ns;            /* when the rate last changed after the start */
	double thru[THRU_N];           /* delivery samples (bit/s) of sendings that lost */
	uint64_t thru_ns[THRU_N];      /* when each came */
	uint64_t thru_start[THRU_N];   /* when its sending began */
	unsigned nthru;
	uint64_t changes[CHANGES];     /* when the rate last changed by more than 2% */
	unsigned nchanges;
	uint64_t now_ns;               /* the latest time the caller passed */
	uint64_t t0;                   /* creation time, for the trace */
	struct ndz_adapt_step last;
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

int ndz_adapt_create(const struct ndz_adapt_opts *o, uint64_t now_ns, struct ndz_adapt **out,
		     struct ndz_error *e)
{
	struct ndz_adapt *a;

	*out = NULL;
	if (!o->min_bps || o->min_bps > o->max_bps || o->start_bps < o->min_bps ||
	    o->start_bps > o->max_bps)
		return ndz_error_set(e, NDZ_EINVAL, 0, "rate controller: bounds %llu-%llu bits/s "
				     "and start %llu do not fit", (unsigned long long)o->min_bps,
				     (unsigned long long)o->max_bps,
				     (unsigned long long)o->start_bps);
	a = calloc(1, sizeof(*a));
	if (!a)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "rate controller: out of memory");
	a->o = *o;
	if (!a->o.interval_ns)
		a->o.interval_ns = 100000000;
	a->rate = a->prev_rate = (double)o->start_bps;
	a->next_ns = now_ns + a->o.interval_ns;
	a->start_ns = a->t0 = now_ns;
	a->since_drop = WINDOW;
	a->last.rate_bps = o->start_bps;
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

void ndz_adapt_delay(struct ndz_adapt *a, uint64_t delay_ns)
{
	double d = (double)delay_ns;

	if (d > (double)(LONGEST * a->o.interval_ns))
		d = (double)(LONGEST * a->o.interval_ns);
	if (d > a->delay)
		a->delay = d;
}

void ndz_adapt_through(struct ndz_adapt *a, uint64_t sent, uint64_t lost, uint64_t start_ns,
		       uint64_t end_ns)
{
	if (!a->o.packet_bits || end_ns <= start_ns || sent < MIN_SAMPLE || lost > sent ||
	    (double)lost < THRU_LOSS * (double)sent)
		return;
	for (unsigned i = 0; i < CHANGES && i < a->nchanges; i++)
		if (a->changes[i] > start_ns && a->changes[i] <= end_ns)
			return;        /* sent at two rates: says little */
	a->thru[a->nthru % THRU_N] = (double)(sent - lost) * (double)a->o.packet_bits * 1e9 /
				     (double)(end_ns - start_ns);
	a->thru_start[a->nthru % THRU_N] = start_ns;
	a->thru_ns[a->nthru++ % THRU_N] = a->now_ns;
}

/*
 * What got through while the path lost: the least of the recent samples of sendings
 * at one rate (one that began with the bottleneck's queue filling reads high, by what
 * the queue took; one sent with it full all along reads the path's rate); 0 unless
 * two sendings or more gave samples.
 */
static double through(const struct ndz_adapt *a, uint64_t now_ns)
{
	double least = 0;
	uint64_t first = 0;
	int two = 0;

	for (unsigned i = 0; i < THRU_N && i < a->nthru; i++) {
		if (now_ns - a->thru_ns[i] > THRU_AGE * a->o.interval_ns)
			continue;
		if (!least || a->thru[i] < least)
			least = a->thru[i];
		if (!first)
			first = a->thru_start[i];
		else if (a->thru_start[i] != first)
			two = 1;
	}
	return two ? least : 0;
}

/*
 * Backs off to what got through: the loss is of packets sent over about the last two
 * intervals, at their mean rate; then waits for the requests about packets sent
 * before. Within a second of the last drop, unless again (the wait saw far more
 * lost than that drop was for), it takes off at most 30%: those are mostly late
 * requests about the same losses.
 */
static void drop(struct ndz_adapt *a, double used, double excess, int again, int limited)
{
	double was = a->rate, t;
	int late = (int)ceil(a->delay / (double)a->o.interval_ns);

	a->drop_excess = excess;
	if (excess > MAX_DROP)
		excess = MAX_DROP;     /* requests bunched up: not all of this */
	a->rate = (a->prev_rate + used) / 2 * (1 - excess) * DROP_KEEP;
	if (a->found && a->o.packet_bits) {
		/*
		 * A burst's requests can come bunched into one interval; what got
		 * through in the last second's intervals, their median, is steadier:
		 * keep most of that. Not at the start, when the losses of the fastest
		 * intervals are not all in.
		 */
		double got[WINDOW], floor;
		unsigned n = 0;

		for (unsigned i = 0; i < WINDOW && i < a->nwin; i++) {
			unsigned j = n;
			double g;

			if (a->win_sent[i] < MIN_SAMPLE || !a->win_ns[i])
				continue;      /* idle */
			g = (double)(a->win_sent[i] - a->win_lost[i]) * (double)a->o.packet_bits *
			    1e9 / (double)a->win_ns[i];
			n++;

			while (j > 0 && got[j - 1] > g) {       /* insertion sort */
				got[j] = got[j - 1];
				j--;
			}
			got[j] = g;
		}
		floor = n ? got[n / 2] * FLOOR_KEEP : 0;
		if (floor > used && !limited)
			floor = used;  /* (an interval the clients asked little in says nothing) */
		if (a->rate < floor)
			a->rate = floor;
	}
	a->measured = (t = through(a, a->now_ns)) > 0;
	if (a->measured)
		a->rate = t * DROP_KEEP;       /* measured: better than any guess */
	if (!again && a->since_drop < WINDOW && a->rate < was * RECENT_KEEP)
		a->rate = was * RECENT_KEEP;   /* late requests of the last drop's losses */
	if (a->rate < was * (1 - MAX_DROP))
		a->rate = was * (1 - MAX_DROP); /* a stalled sender's intervals say little */
	a->got = a->rate / DROP_KEEP;
	a->since_drop = 0;
	a->found = 1;
	/* the requests about packets sent before the drop come for as long as reports lag */
	a->hold = late > DROP_WAIT ? late : DROP_WAIT;
}

/*
 * During the start, whether what a client has reported lost in this interval so far is
 * already far more than a drop needs: every interval more at the start's rate loses
 * most of what is sent above the link.
 */
static int early_loss(const struct ndz_adapt *a)
{
	uint64_t worst = a->pooled;

	if (a->found || a->sent < MIN_SAMPLE)
		return 0;
	for (unsigned i = 0; i < a->nlost; i++)
		if (a->lost[i].n > worst)
			worst = a->lost[i].n;
	return (double)worst > EARLY_LOSS * (double)(a->sent + a->prev_sent);
}

uint64_t ndz_adapt_rate(struct ndz_adapt *a, uint64_t now_ns)
{
	uint64_t worst = a->pooled, basis;
	double loss, base, excess, used = a->rate, was = a->rate;
	int limited = 0;
	enum ndz_adapt_action act;

	a->now_ns = now_ns;
	if (now_ns < a->next_ns && !early_loss(a))
		return (uint64_t)a->rate;
	if (a->sent && a->sent < MIN_SAMPLE && now_ns - a->start_ns < LONGEST * a->o.interval_ns) {
		/* too few to tell, but sending: at a low rate an interval lasts longer */
		a->next_ns = now_ns + a->o.interval_ns / 4;
		return (uint64_t)a->rate;
	}
	if (a->o.packet_bits && now_ns > a->next_ns - a->o.interval_ns) {
		/* what went out, when that is less than the rate allowed (nothing to send) */
		double actual = (double)a->sent * (double)a->o.packet_bits * 1e9 /
				(double)(now_ns - a->start_ns);

		if (actual < used)
			used = actual;
		limited = actual < a->rate * APP_LIMITED;
	}
	for (unsigned i = 0; i < a->nlost; i++)
		if (a->lost[i].n > worst)
			worst = a->lost[i].n;
	/* requests come a little after the losses: some are of the interval before */
	basis = (a->sent + a->prev_sent) / 2;
	if (basis < a->sent / 2)
		basis = a->sent / 2;
	a->win_sent[a->nwin % WINDOW] = a->sent;
	a->win_lost[a->nwin % WINDOW] = worst < a->sent ? worst : a->sent;
	a->win_ns[a->nwin++ % WINDOW] = now_ns - a->start_ns;
	if (a->found) {
		/*
		 * Reported this late, a client's requests are about a whole chunk's
		 * sending (it asks once the server moved on) and come bunched: about the
		 * packets of the last delay's intervals, not of this one alone (at a low
		 * rate an interval holds a few dozen packets, and one chunk's 15 lost would
		 * read as 40%, dropping the rate again and again). Not at the first drop,
		 * which the start's heavy loss must make deep.
		 */
		unsigned k = (unsigned)(a->delay / (double)a->o.interval_ns);
		uint64_t sum = 0;

		if (k > WINDOW)
			k = WINDOW;
		if (k > a->nwin)
			k = a->nwin;
		for (unsigned i = 1; k >= 2 && i <= k; i++)
			sum += a->win_sent[(a->nwin - i) % WINDOW];
		if (sum > basis)
			basis = sum;
	}
	act = NDZ_ADAPT_IDLE;
	loss = base = 0;
	if (a->sent < MIN_SAMPLE || !basis) {
		/* idle or nearly: nothing to learn from */
	} else {
		loss = (double)worst / (double)basis;
		if (loss > 1)
			loss = 1;      /* requests of older losses bunched up */
		base = baseline(a, loss);
		/*
		 * On a lossy medium the worst client's share of a small sample varies
		 * by itself: only loss beyond two standard deviations of it counts.
		 */
		excess = loss - base - 2 * sqrt(base / (double)basis);
		act = NDZ_ADAPT_EASE;
		if (a->hold && excess > 2 * a->drop_excess && excess > WORSE_LOSS) {
			/* far more lost than the drop was for: its first reports were partial */
			drop(a, used, excess, 1, limited);
			act = NDZ_ADAPT_DROP;
		} else if (a->hold) {
			double t;

			a->hold--;
			act = NDZ_ADAPT_WAIT;
			if (!a->hold && (t = through(a, now_ns)) > 0) {
				/*
				 * All the drop's losses are in: hold just under what got
				 * through meanwhile, measured, rather than the drop's guess
				 * (too deep after the start's bunched reports, too shallow
				 * when they came late).
				 */
				a->got = t;
				a->measured = 1;
				a->rate = t;
				a->change_ns = now_ns;
			}
		} else if (excess > HIGH_LOSS) {
			drop(a, used, excess, 0, limited);
			act = NDZ_ADAPT_DROP;
		} else if (limited && excess < LOW_LOSS) {
			/* the rate was not used up: nothing learnt about more */
			act = NDZ_ADAPT_HELD;
		} else if (excess < NO_LOSS && !a->found) {
			a->rate *= START_GROW;
			act = NDZ_ADAPT_START;
		} else if (a->measured && excess < LOW_LOSS && a->rate >= a->got * 0.999 &&
			   now_ns - a->change_ns < PROBE_AFTER * a->o.interval_ns) {
			/*
			 * Held at what got through at the last drop: above it a tbf's
			 * queue hides the overshoot for a second or more and then loses it all
			 * at once (a sawtooth). Only after long without loss is a step above
			 * tried, in case the path has grown.
			 */
			act = NDZ_ADAPT_TOP;
		} else if ((double)(now_ns - a->change_ns) < a->delay &&
			   a->rate * PROBE_GROW > a->got * NEAR_GOT) {
			/*
			 * Near what got through at the last drop, what the last change did is
			 * not known yet: losses are reported this late (a chunk's sending and
			 * the queue; 0.5 s at 20 Mbit/s), and growing on meanwhile overshoots by
			 * the time they come. Further below, growing every interval is safe.
			 */
			act = NDZ_ADAPT_LATE;
		} else if (excess >= LOW_LOSS) {
			/* a little lost: ease off, so lasting loss is not taken as the medium's */
			a->rate *= EASE;
			if (a->measured && a->got > a->rate)
				a->got = a->rate;      /* and hold lower from now on */
		} else {
			/* the longer nothing is lost, the faster: the path may have grown */
			if (a->measured && a->rate >= a->got * 0.999) {
				/* a rare probe above (see NDZ_ADAPT_TOP) */
				a->rate *= PROBE_GROW;
				a->got = a->rate;
			} else {
				a->rate *= 1 + (PROBE_GROW - 1) * (1 + a->clean / 8);
				if (a->measured && a->rate > a->got)
					a->rate = a->got;
			}
			if (a->clean < 7 * 8)
				a->clean++;    /* at most 8 times as fast */
			act = NDZ_ADAPT_GROW;
		}
		if (act != NDZ_ADAPT_GROW && act != NDZ_ADAPT_LATE)
			a->clean = 0;
		if (act == NDZ_ADAPT_GROW || act == NDZ_ADAPT_EASE || act == NDZ_ADAPT_DROP)
			a->change_ns = now_ns;
	}
	a->delay *= DELAY_DECAY;
	if (a->since_drop < WINDOW)
		a->since_drop++;
	a->prev_sent = a->sent;
	a->prev_rate = used;
	if (a->rate < (double)a->o.min_bps)
		a->rate = (double)a->o.min_bps;
	if (a->rate > (double)a->o.max_bps)
		a->rate = (double)a->o.max_bps;
	if (a->rate > was * 1.02 || a->rate < was * 0.98)
		a->changes[a->nchanges++ % CHANGES] = now_ns;
	a->last.seq++;
	a->last.t_ns = now_ns - a->t0;
	a->last.sent = a->sent;
	a->last.worst = worst;
	a->last.loss = loss;
	a->last.base = base;
	a->last.rate_bps = (uint64_t)a->rate;
	a->last.delay_ns = (uint64_t)a->delay;
	a->last.action = act;
	a->sent = 0;
	a->nlost = 0;
	a->pooled = 0;
	a->next_ns = now_ns + a->o.interval_ns;
	a->start_ns = now_ns;
	return (uint64_t)a->rate;
}

void ndz_adapt_last(const struct ndz_adapt *a, struct ndz_adapt_step *st)
{
	*st = a->last;
}

const char *ndz_adapt_action_name(enum ndz_adapt_action action)
{
	static const char *const names[] = { "idle", "start", "grow", "ease", "drop", "wait", "held",
						   "late", "top" };

	return (unsigned)action < sizeof(names) / sizeof(names[0]) ? names[action] : "?";
}
