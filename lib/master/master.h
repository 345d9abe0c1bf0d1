/*
 * The image master's decisions as a pure object over a clock: the session table
 * (one frisbeed per image), the multicast address pool and port choice, the
 * division of a total rate among sessions, adoption of sessions an earlier master
 * left running, the state file (doc/PROTOCOL.md, "The master's state file"), the
 * per-host request limiter, upload admission and quota, the counters and the
 * STATUS JSON. No sockets, no processes, no printing, no files but the state
 * file (ndz_master_save, ndz_master_load): the program starts and steers the
 * frisbeeds (lib/mserve/session) and tells this object what happened; the time is
 * passed in. Not locked: the caller serialises.
 */
#ifndef NDZ_MASTER_H
#define NDZ_MASTER_H

#include <stddef.h>
#include <stdint.h>

#include "ctl/ctl.h"
#include "mconf.h"
#include "core/err.h"

#define NDZ_MASTER_SESSIONS 1024       /* table size; max-sessions is at most this */
#define NDZ_MASTER_UPLOADS 64          /* max-uploads is at most this */
#define NDZ_MASTER_MIN_RATE 8000       /* bits/s: the least rate a session is given */

struct ndz_master_session {
	int pid;                       /* its frisbeed; 0: slot free */
	int adopted;                   /* left by an earlier master: watched, not reaped */
	int replaced;                  /* its image was uploaded anew: no new clients */
	char image[NDZ_CTL_NAME_MAX + 1];
	uint32_t group;                /* network order */
	uint16_t port;
	uint64_t rate;                 /* bits/s it was last given */
	uint32_t chunks;               /* the image's identity, told to clients */
	uint64_t source_bytes;
	uint8_t uuid[16];
	uint64_t clients;              /* GET replies that named it */
	uint64_t started_ns;
};

/* The master's counters, one per line of counters.def (with their JSON and /metrics names). */
struct ndz_master_counters {
#define NDZ_COUNTER(field, json, family, label, family2, label2) uint64_t field;
#include "counters.def"
#undef NDZ_COUNTER
};

/*
 * ndz_master_counter - the i-th counter of counters.def in n: its name in the STATUS
 * JSON (a static string) with *v its value, or NULL past the last.
 */
const char *ndz_master_counter(const struct ndz_master_counters *n, size_t i, uint64_t *v);

struct ndz_master;

/*
 * ndz_master_create - an empty master under configuration c (borrowed: it must
 * live until replaced with ndz_master_set_conf or the master is freed). 0 and *out
 * (free with ndz_master_free), or NDZ_ENOMEM with e set.
 */
int ndz_master_create(const struct ndz_mconf *c, struct ndz_master **out, struct ndz_error *e);

/* ndz_master_free - accepts NULL. */
void ndz_master_free(struct ndz_master *m);

/* ndz_master_set_conf - a reloaded configuration (borrowed); sessions stay. */
void ndz_master_set_conf(struct ndz_master *m, const struct ndz_mconf *c);

/* ndz_master_conf - the configuration in force. */
const struct ndz_mconf *ndz_master_conf(const struct ndz_master *m);

/* ndz_master_counters - the counters; the program adds its own (network) ones. */
struct ndz_master_counters *ndz_master_counters(struct ndz_master *m);

/* ndz_master_live - sessions running (slots with a pid). */
size_t ndz_master_live(const struct ndz_master *m);

/*
 * ndz_master_session - slot i (0 <= i < NDZ_MASTER_SESSIONS); its pid is 0 when
 * free. The pointer stays valid as long as m.
 */
const struct ndz_master_session *ndz_master_session(const struct ndz_master *m, size_t i);

/*
 * ndz_master_host_ok - the per-host request limiter (host-rate per second, bursts
 * of host-burst; lib/master/hostlimit, the lab's datagram limiter, a bucket for each
 * address): 1 when a request from addr (network order) at now_ns may be served (and
 * counts), 0 when it is over. A new host-rate or host-burst of the configuration
 * (ndz_master_set_conf) applies from the next call on.
 */
int ndz_master_host_ok(struct ndz_master *m, uint32_t addr, uint64_t now_ns);

/* ndz_master_set_server - the sessions' source address told to clients (network order). */
void ndz_master_set_server(struct ndz_master *m, uint32_t server);

/* What a GET leads to (ndz_master_get). */
struct ndz_master_plan {
	int slot;                      /* the session's slot */
	int start;                     /* 1: the slot is reserved for a new session: start
					* its frisbeed, then ndz_master_started or
					* ndz_master_start_failed */
	const struct ndz_mconf_image *image;
	int hold;                      /* 1 (ask mode): ask the running session in slot, its
					* frisbeed pid, to hold, then ndz_master_held and
					* ndz_master_resume; nothing is counted yet */
	int pid;
};

/* What to do with a datagram on the control port (ndz_master_request). */
enum {
	NDZ_MASTER_DROP = 0,           /* nothing: not ours, or over its host's rate */
	NDZ_MASTER_REPLY = 1,          /* send rep */
	NDZ_MASTER_START = 2,          /* start p's session, then ndz_master_answer, send rep */
	NDZ_MASTER_HOLD = 3,           /* ask p's session to hold (ndz_master_set_hold_ask) */
};

/*
 * ndz_master_request - a datagram of len bytes from addr (network order) at now_ns:
 * decoded into *req, counted, limited (ndz_master_host_ok), checked (127.0.0.1 or
 * an address some image allows may ask), and answered into *rep: MALFORMED, DENIED
 * (e says "no allow rule matches ADDR for image 'NAME' (nor for any image)" or "no
 * image allows ADDR"), USE_TCP for STATUS, or a GET's answer (ndz_master_get's
 * codes in e). Returns NDZ_MASTER_DROP (e says why: NDZ_ERATE "rate limit: ...",
 * or "malformed: ..." for what does not decode), NDZ_MASTER_REPLY,
 * NDZ_MASTER_START (*p) or, in ask mode, NDZ_MASTER_HOLD (*p).
 */
int ndz_master_request(struct ndz_master *m, const uint8_t *buf, size_t len, uint32_t addr,
		       uint64_t now_ns, struct ndz_ctl_req *req, struct ndz_master_plan *p,
		       struct ndz_ctl_rep *rep, struct ndz_error *e);

/*
 * ndz_master_resume - a GET's decision again, after NDZ_MASTER_HOLD and
 * ndz_master_held (the request already counted and limited): returns as
 * ndz_master_request (NDZ_MASTER_HOLD again when another session is to be asked,
 * or the one asked has gone meanwhile).
 */
int ndz_master_resume(struct ndz_master *m, const struct ndz_ctl_req *req, uint32_t addr,
		      struct ndz_master_plan *p, struct ndz_ctl_rep *rep, struct ndz_error *e);

/*
 * ndz_master_answer - the reply to the GET that reserved p's slot, whose start
 * ended with rc (0: started; else ndz_master_start_failed was called): OK with the
 * session, or FAILED.
 */
void ndz_master_answer(const struct ndz_master *m, const struct ndz_master_plan *p, int rc,
		       struct ndz_ctl_rep *rep);

/*
 * ndz_master_accept - a TCP connection from addr at now_ns, while threads
 * connection threads run: 0 when it may be heard (it holds one of the places of
 * connections before their first message: ndz_master_release gives it back), or
 * NDZ_ERATE (over its host's rate: close it without a word), NDZ_EDENIED (nothing
 * allows the host, which is not 127.0.0.1) or NDZ_ECONNS (max-pending-host of its
 * connections, or max-pending in all, wait, or too many threads run), with e
 * saying why. Counted either way.
 */
int ndz_master_accept(struct ndz_master *m, uint32_t addr, unsigned threads, uint64_t now_ns,
		      struct ndz_error *e);

/* ndz_master_release - a connection of addr's is past its first message, or gone. */
void ndz_master_release(struct ndz_master *m, uint32_t addr);

/* What a session says when asked to hold for a client (ndz_master_set_hold). */
enum {
	NDZ_MASTER_HELD = 0,           /* it stays (or could not say: busy, an old frisbeed) */
	NDZ_MASTER_GONE = 1,           /* its frisbeed has exited: the slot is freed */
	NDZ_MASTER_ENDING = 2,         /* it is exiting idle but still there: no new clients */
};

/*
 * ndz_master_set_hold - before a GET is answered with a running session, hold
 * (called with ctx and the session; NULL: never asked) asks it to stay for the
 * client (the program asks its frisbeed: lib/mserve/session, ndz_session_hold)
 * and returns one of the NDZ_MASTER_HELD/GONE/ENDING above. GONE: the session is
 * ended as ndz_master_end does (the program has forgotten its socket); ENDING: it
 * keeps its address and clients but gets no new ones, as if replaced. Either way
 * the GET goes on as if there were no such session: a new one is started.
 */
void ndz_master_set_hold(struct ndz_master *m,
			 int (*hold)(void *ctx, const struct ndz_master_session *s), void *ctx);

/*
 * ndz_master_set_hold_ask - ask mode (on 1): the program asks the session itself,
 * without its lock (a frisbeed may take a second to answer). A GET that would be
 * answered with a running session not yet told held returns a plan with hold set
 * (ndz_master_get: 0; ndz_master_request / ndz_master_resume: NDZ_MASTER_HOLD),
 * counting nothing; the program asks p's session (a copy of it taken under the
 * lock), tells the verdict with ndz_master_held and decides again with
 * ndz_master_resume (or ndz_master_get).
 */
void ndz_master_set_hold_ask(struct ndz_master *m, int on);

/*
 * ndz_master_held - the verdict (NDZ_MASTER_HELD/GONE/ENDING) of the session p
 * asked to hold: GONE ends it, ENDING retires it, HELD lets the next GET of its
 * image be answered with it without asking again. Nothing when that session has
 * gone meanwhile (another pid in its slot).
 */
void ndz_master_held(struct ndz_master *m, const struct ndz_master_plan *p, int verdict);

/*
 * ndz_master_get - a GET for name from addr (network order): the running session
 * of that image (not one whose image was replaced, and one that holds: see
 * ndz_master_set_hold), or a reserved slot for a new
 * one with the lowest pool address no session holds, its port (port_lo + pool
 * index, wrapped into the port range) and its starting rate (the image's or the
 * default, at most an equal share of total-rate with the new one counted, at least
 * NDZ_MASTER_MIN_RATE, in whole kbit/s). Counts the request. Returns 0 with *p, or
 * NDZ_ENOIMAGE, NDZ_EDENIED, NDZ_ESESSIONS (max-sessions run) or NDZ_EPOOL with e
 * saying so; ndz_ctl_status_of turns them into the reply's status.
 */
int ndz_master_get(struct ndz_master *m, const char *name, uint32_t addr,
		   struct ndz_master_plan *p, struct ndz_error *e);

/*
 * ndz_master_started - the reserved slot's frisbeed runs as pid, serving an image
 * of that identity (uuid, chunks, source_bytes) since now_ns. The session counts
 * one client (the GET that started it).
 */
void ndz_master_started(struct ndz_master *m, int slot, int pid, const uint8_t uuid[16],
			uint32_t chunks, uint64_t source_bytes, uint64_t now_ns);

/* ndz_master_start_failed - the reserved slot's frisbeed could not be started: freed. */
void ndz_master_start_failed(struct ndz_master *m, int slot);

/* ndz_master_served - one more GET reply names the running session in slot. */
void ndz_master_served(struct ndz_master *m, int slot);

/*
 * ndz_master_end - the frisbeed pid has left: its slot is freed. Returns the slot
 * it had, or -1 when no session has that pid.
 */
int ndz_master_end(struct ndz_master *m, int pid);

/* A rate change the division asks for (ndz_master_rates). */
struct ndz_master_rate {
	int slot;
	uint64_t rate;                 /* bits/s, whole kbit/s, >= NDZ_MASTER_MIN_RATE */
};

/*
 * ndz_master_rates - under a total-rate every running session gets an equal share,
 * at most its image's own rate: the sessions whose rate differs from their share,
 * at most cap of them into out. Returns how many. The program tells each frisbeed
 * and, when it took it, calls ndz_master_set_rate. None without a total-rate.
 */
size_t ndz_master_rates(const struct ndz_master *m, struct ndz_master_rate *out, size_t cap);

/* ndz_master_set_rate - the session in slot now sends at rate bits/s. */
void ndz_master_set_rate(struct ndz_master *m, int slot, uint64_t rate);

/*
 * ndz_master_state - the state file's text for the running sessions into buf (cap
 * bytes): one line per session, "PID IMAGE GROUP PORT RATE CHUNKS SOURCE_BYTES
 * UUID\n". Returns its length, or NDZ_ERANGE with e set when it does not fit.
 */
int ndz_master_state(const struct ndz_master *m, char *buf, size_t cap, struct ndz_error *e);

/*
 * ndz_master_state_parse_line - one line of a state file (without its newline)
 * into *s (adopted set, clients 0). 0, or NDZ_EINVAL with e saying what is wrong.
 */
int ndz_master_state_parse_line(const char *line, size_t len, struct ndz_master_session *s,
				struct ndz_error *e);

/*
 * ndz_master_adopt - take on the sessions a state file's text (len bytes) lists,
 * started at now_ns: each line that parses, whose group is free in the table and
 * for which alive (called with ctx and the parsed session) says 1 (the program
 * checks that the frisbeed is there and serves that image). current, when not NULL,
 * is asked for the identity of the image file now under that name (0 with uuid set,
 * else not known): an image uploaded anew while no master ran marks the session
 * replaced. Lines that do not parse are skipped. Returns how many were adopted.
 */
size_t ndz_master_adopt(struct ndz_master *m, const char *text, size_t len,
			int (*alive)(void *ctx, const struct ndz_master_session *s),
			int (*current)(void *ctx, const char *image, uint8_t uuid[16]),
			void *ctx, uint64_t now_ns);

/*
 * ndz_master_save - the state file at path replaced whole (lib/core/file.h:
 * ndz_file_replace, mode 0644) with ndz_master_state's text. 0, or a negative code
 * with e naming path.
 */
int ndz_master_save(const struct ndz_master *m, const char *path, struct ndz_error *e);

/*
 * ndz_master_load - ndz_master_adopt the sessions the state file at path lists.
 * Returns how many were adopted (0 when there is no such file), or NDZ_EIO with e
 * naming path when it cannot be read.
 */
int ndz_master_load(struct ndz_master *m, const char *path,
		    int (*alive)(void *ctx, const struct ndz_master_session *s),
		    int (*current)(void *ctx, const char *image, uint8_t uuid[16]),
		    void *ctx, uint64_t now_ns, struct ndz_error *e);

/*
 * ndz_master_upload_begin - may name be uploaded from addr (network order), size
 * bytes declared (0: not known)? Where it goes (ndz_mconf_upload_target) is written
 * to final (cap bytes); usage (called with ctx and final) says how many bytes the
 * upload directory holds but for final's file. When it may, an upload slot is taken
 * and 0 returned with *slot and *limit (the bytes the upload may write; 0: no
 * quota). Else NDZ_ENOIMAGE, NDZ_EDENIED, NDZ_EBUSY (an upload of that name runs),
 * NDZ_EUPLOADS (max-uploads run), NDZ_EQUOTA or NDZ_ERANGE (final too long), with
 * e saying why for the uploader. Counts the request either way.
 */
int ndz_master_upload_begin(struct ndz_master *m, const char *name, uint32_t addr,
			    uint64_t size, uint64_t (*usage)(void *ctx, const char *final),
			    void *ctx, char *final, size_t cap, int *slot, uint64_t *limit,
			    struct ndz_error *e);

/*
 * ndz_master_upload_stored - the upload in slot is renamed into place: sessions of
 * its image keep their clients but get no new ones.
 */
void ndz_master_upload_stored(struct ndz_master *m, int slot);

/*
 * ndz_master_upload_end - the upload in slot is over, its slot freed: stored 1 (it
 * was), 0 (rejected after it began), -1 (it could not begin after all: refused).
 */
void ndz_master_upload_end(struct ndz_master *m, int slot, int stored);

/*
 * ndz_master_serving - sessions running (replaced or not) of image name: how many.
 * ndz_master_retire - those sessions take no new clients (as after an upload of the
 * name): they finish with the clients they have; returns how many.
 * ndz_master_uploading - 1 when an upload to name runs, else 0.
 */
size_t ndz_master_serving(const struct ndz_master *m, const char *name);
size_t ndz_master_retire(struct ndz_master *m, const char *name);
int ndz_master_uploading(const struct ndz_master *m, const char *name);

/* ndz_master_uploads - uploads running. */
unsigned ndz_master_uploads(const struct ndz_master *m);

/* What a session's frisbeed says of itself, for the STATUS JSON. */
#define NDZ_MASTER_LIVE_CLIENTS 4096  /* a session's client list in the STATUS, at most */
struct ndz_master_live {
	uint64_t receivers, bytes_sent;  /* receivers: clients active now (seen, from an old
					  * frisbeed that does not tell states) */
	int states;                    /* 1: the counts and list below were told */
	uint64_t active, done, failed, lost;
	char clients[NDZ_MASTER_LIVE_CLIENTS]; /* its client list's entries as JSON objects,
					  * comma-separated ("" none); whole entries only */
};

/*
 * ndz_master_status_json - the STATUS reply's JSON (doc/PROTOCOL.md) at now_ns into
 * buf (cap bytes, NUL-terminated): sessions, counters, limits, uploads, images.
 * live (may be NULL: zeros) is asked for each session's own statistics, with its
 * clients' states and list when it tells them. When the lists do not fit they are
 * left empty (the counts stay); a status that still does not fit becomes
 * {"error": ...}. Returns its length (< cap).
 */
size_t ndz_master_status_json(const struct ndz_master *m, uint64_t now_ns,
			      void (*live)(void *ctx, const struct ndz_master_session *s,
					   struct ndz_master_live *out),
			      void *ctx, char *buf, size_t cap);

#endif
