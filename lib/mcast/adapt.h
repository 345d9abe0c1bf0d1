/*
 * The server's send rate when none is given (frisbeed -W auto): found from what
 * the clients report lost. Every interval (100 ms) the loss of the client that lost
 * most (the blocks and repairs it asked for again, over what was sent) decides.
 * Until the first real loss the rate grows by a fifth an interval (the start; a
 * client reporting more than a quarter lost ends the interval at once). When
 * more than 2% is lost it drops to 95% of what got through (the rate of the last
 * two intervals less the loss, but at least 92% of the median of what got through
 * in the last second's intervals) and waits for the requests about packets sent
 * before (two intervals, or as long as losses are reported late), dropping again
 * at once only if far more is lost meanwhile; another drop within a second takes
 * off at most 30%, and none more than 75%. After that it grows by 1% while
 * (nearly) nothing is lost, faster the longer that lasts, and eases off by 1% while
 * a little is; but from 97% of what got through at the last drop on, after each
 * change it waits as long as losses are reported late (the caller measures that: a
 * request comes once the server has moved on from the chunk, so up to a chunk's
 * sending time, 0.45 s at 20 Mbit/s, after its packets), so as not to grow on
 * before the last step's losses are known. When the caller gives delivery samples
 * (ndz_adapt_through: what got through a sending that lost, sent at one rate), it
 * measures the path: a drop goes to 95% of the least recent sample, and once the
 * drop's wait is over the rate holds at it (a tbf's queue hides an overshoot for a
 * second or more, then loses it all), easing off lowers that hold, and only after
 * 5 s there without loss does it try 1% more. After the first drop, losses
 * reported that late count against what was sent over that delay, not over the
 * interval they arrive in (they come bunched, a chunk's at once). An interval in
 * which less went out than the rate allowed (the clients asked for little) teaches
 * nothing about more and the rate holds. Loss the medium has anyway (the least of
 * the last intervals', up to 5%) is not counted against the rate. No clock is read
 * here: the caller passes the time, so the controller runs on a simulated clock in
 * tests.
 */
#ifndef NDZ_ADAPT_H
#define NDZ_ADAPT_H

#include <stdint.h>

#include "core/err.h"

struct ndz_adapt;

struct ndz_adapt_opts {
	uint64_t min_bps, max_bps;     /* bounds, min >= 1 */
	uint64_t start_bps;            /* first rate, within the bounds */
	uint64_t interval_ns;          /* how often the rate changes; 0: 100 ms */
	uint64_t packet_bits;          /* a packet's size on the wire; 0: unknown */
};

/*
 * ndz_adapt_create - a controller at start_bps from now_ns; NDZ_EINVAL (bounds),
 * NDZ_ENOMEM, with e (may be NULL) saying which.
 */
int ndz_adapt_create(const struct ndz_adapt_opts *o, uint64_t now_ns, struct ndz_adapt **out,
		     struct ndz_error *e);
/* ndz_adapt_free - free a; accepts NULL. */
void ndz_adapt_free(struct ndz_adapt *a);

/* ndz_adapt_sent - packets (blocks or repairs) went out. */
void ndz_adapt_sent(struct ndz_adapt *a, uint64_t packets);

/*
 * ndz_adapt_lost - client asked again for packets it lost (the blocks of a PREQUEST,
 * the repairs of an RREQUEST; not a REQUEST for a chunk it never had).
 */
void ndz_adapt_lost(struct ndz_adapt *a, uint32_t client, uint64_t packets);

/*
 * ndz_adapt_delay - a request about lost packets came delay_ns after the first of the
 * packets it is about went out (the start of that chunk's sending): how late losses
 * are known, so that a change waits that long before the next.
 */
void ndz_adapt_delay(struct ndz_adapt *a, uint64_t delay_ns);

/*
 * ndz_adapt_through - a client lost lost of the sent packets of one sending (a
 * chunk's, its first packet at start_ns, its last at end_ns, on the clock passed to
 * ndz_adapt_rate): what got through it is a sample of the path's rate, exact when
 * the bottleneck's queue was full all along. Ignored below 1% lost, and when the
 * rate changed by more than 2% during it.
 */
void ndz_adapt_through(struct ndz_adapt *a, uint64_t sent, uint64_t lost, uint64_t start_ns,
		       uint64_t end_ns);

/* ndz_adapt_rate - the rate to send at, at now_ns (ends an interval when one is due). */
uint64_t ndz_adapt_rate(struct ndz_adapt *a, uint64_t now_ns);

/* What the last interval's end decided, for a trace (frisbeed -vv). */
enum ndz_adapt_action {
	NDZ_ADAPT_IDLE,                /* too little sent to tell */
	NDZ_ADAPT_START,               /* no loss yet: grow fast */
	NDZ_ADAPT_GROW,                /* small loss: grow slowly */
	NDZ_ADAPT_EASE,                /* moderate loss: ease off a little */
	NDZ_ADAPT_DROP,                /* back off */
	NDZ_ADAPT_WAIT,                /* after a drop: wait for the requests it caused */
	NDZ_ADAPT_HELD,                /* less sent than the rate allows: hold */
	NDZ_ADAPT_LATE,                /* the last change's losses are not all reported yet */
	NDZ_ADAPT_TOP,                 /* held at what got through at the last drop */
};

struct ndz_adapt_step {
	uint64_t seq;                  /* intervals ended so far (0: none yet) */
	uint64_t t_ns;                 /* when it ended, since the controller's creation */
	uint64_t sent, worst;          /* packets sent, and the most one client reported lost */
	double loss, base;             /* worst over what was sent; the medium's own loss */
	uint64_t rate_bps;             /* the rate from now on */
	uint64_t delay_ns;             /* how late losses are reported, as estimated */
	enum ndz_adapt_action action;
};

/* ndz_adapt_last - the last interval's decision into *st. */
void ndz_adapt_last(const struct ndz_adapt *a, struct ndz_adapt_step *st);

/* ndz_adapt_action_name - a word for action ("grow", "drop", ...). */
const char *ndz_adapt_action_name(enum ndz_adapt_action action);

#endif
