/*
 * A session's control endpoint (doc/PROTOCOL.md, "Session control"): each frisbeed
 * the master starts answers on a unix socket in the master's run directory, in the
 * control protocol's framing (lib/ctl/ctl.h), four questions: STATUS (its
 * statistics), RATE (a new cap), IDENTIFY (its pid and image) and HOLD (a client
 * was just sent to it: stay, or say it is ending). The frisbeed side
 * is a thread started here that answers through callbacks; the master side asks.
 */
#ifndef NDZ_SESSCTL_H
#define NDZ_SESSCTL_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include "core/err.h"

/* Message types, beside enum ndz_ctl_type; on a session's unix socket only. */
enum ndz_sessctl_type {
	NDZ_SESSCTL_STATUS = 16,         /* -> clients, bytes sent, rate, JSON statistics,
					  * the clients' states: counts and a list */
	NDZ_SESSCTL_RATE = 17,           /* rate_bps -> OK (the new cap is in force) */
	NDZ_SESSCTL_IDENTIFY = 18,       /* -> pid, image uuid, chunks, bytes, path */
	NDZ_SESSCTL_HOLD = 19,           /* -> held: 1 (idle clock reset), 0 (ending) */
};

#define NDZ_SESSCTL_JSON_MAX 8000      /* a STATUS reply's JSON, at most */
#define NDZ_SESSCTL_PATH_MAX 1024      /* an IDENTIFY reply's image path, at most */
#define NDZ_SESSCTL_CLIENTS 64         /* a STATUS reply's client entries, at most */
#define NDZ_SESSCTL_CLIENT_LEN 41      /* one client entry's bytes on the wire */
#define NDZ_SESSCTL_MSG_MAX (12 + 26 + NDZ_SESSCTL_JSON_MAX + 34 + \
			     NDZ_SESSCTL_CLIENTS * NDZ_SESSCTL_CLIENT_LEN + NDZ_SESSCTL_PATH_MAX)

/* A client's state as a session server tells it (lib/mcast's enum ndz_rx_state). */
enum ndz_sessctl_rx {
	NDZ_SESSCTL_RX_ACTIVE = 0,     /* heard lately, not left */
	NDZ_SESSCTL_RX_DONE = 1,       /* left with the image complete */
	NDZ_SESSCTL_RX_FAILED = 2,     /* left failed */
	NDZ_SESSCTL_RX_LOST = 3,       /* silent too long without leaving */
};

/* One client of a session, as STATUS tells it. */
struct ndz_sessctl_client {
	uint32_t id;
	uint32_t addr;                 /* network order */
	uint8_t state;                 /* enum ndz_sessctl_rx */
	uint32_t chunks_done, chunks_total;
	uint64_t bytes_written;
	uint64_t write_bps;
	uint64_t age_ns;               /* since it was last heard */
};

struct ndz_sessctl_status {
	uint64_t clients;              /* clients seen since it started */
	uint64_t bytes_sent;
	uint64_t rate_bps;             /* its cap now */
	char json[NDZ_SESSCTL_JSON_MAX + 1]; /* its statistics as frisbeed --stats-json */
	size_t json_len;
	int states;                    /* 1: the fields below were told (0: a frisbeed before them) */
	uint64_t active, done, failed, lost;   /* its clients by state */
	size_t nclient;                /* entries in client, the most recently heard first */
	struct ndz_sessctl_client client[NDZ_SESSCTL_CLIENTS];
};

/* ndz_sessctl_state_name - "active", "done", "failed", "lost" ("unknown" past them). */
const char *ndz_sessctl_state_name(unsigned state);

struct ndz_jbuf;

/*
 * ndz_sessctl_client_json - c as the one JSON object of a client list entry ("id",
 * "address", "state", "chunks_done", "chunks_total", "bytes_written", "write_bps",
 * "age_s"), appended to j: frisbeed --stats-json and the master's status alike.
 */
void ndz_sessctl_client_json(const struct ndz_sessctl_client *c, struct ndz_jbuf *j);

struct ndz_sessctl_identity {
	int32_t pid;                   /* the answering process (filled in by the endpoint) */
	uint8_t uuid[16];              /* the image it serves */
	uint32_t chunks;
	uint64_t source_bytes;
	char path[NDZ_SESSCTL_PATH_MAX + 1];
};

/*
 * What the endpoint answers with; called on the endpoint's thread, one at a time.
 * Each returns 0, or a negative NDZ_E* code (answered as ndz_ctl_status_of says).
 */
struct ndz_sessctl_ops {
	int (*status)(void *ctx, struct ndz_sessctl_status *out);
	int (*rate)(void *ctx, uint64_t rate_bps);
	int (*identify)(void *ctx, struct ndz_sessctl_identity *out);
	int (*hold)(void *ctx);        /* 1: held, 0: ending (exits now), or NDZ_E* */
};

/* One request or reply, decoded. */
struct ndz_sessctl_msg {
	uint8_t type;                  /* enum ndz_sessctl_type */
	uint16_t status;               /* replies: enum ndz_ctl_status */
	uint32_t id;
	uint64_t rate_bps;             /* RATE requests */
	struct ndz_sessctl_status st;  /* STATUS replies */
	struct ndz_sessctl_identity who; /* IDENTIFY replies */
	uint8_t held;                  /* HOLD replies: 1 held, 0 ending */
};

/*
 * ndz_sessctl_encode - m as a request (reply 0) or a reply (reply 1) into buf (cap
 * bytes). Returns its length, or NDZ_EINVAL (a bad type, a JSON or path too long, too
 * many client entries) or NDZ_ERANGE (cap too small), with e set. A STATUS reply with
 * st.states 0 goes without the states (as a frisbeed before them sent it).
 */
int ndz_sessctl_encode(const struct ndz_sessctl_msg *m, int reply, uint8_t *buf, size_t cap,
		       struct ndz_error *e);

/*
 * ndz_sessctl_decode - a request (reply 0) or reply (reply 1) of len bytes into *m.
 * 0, or NDZ_EPROTO (not ours, or not that kind) / NDZ_EPROTOVER / NDZ_EINVAL (a
 * header of ours with a body that is not), with e set. This is the one decoder of a
 * STATUS reply's fields: the master reads a session's clients from st, never from
 * its JSON.
 */
int ndz_sessctl_decode(const uint8_t *buf, size_t len, int reply, struct ndz_sessctl_msg *m,
		       struct ndz_error *e);

/*
 * ndz_sessctl_path - the endpoint's path for the session on group (network order)
 * and port under run_dir: "RUN_DIR/session-GROUP-PORT.sock", into buf (cap bytes).
 * 0, or NDZ_ERANGE with e set when it does not fit (a unix socket's name is short).
 */
int ndz_sessctl_path(const char *run_dir, uint32_t group, uint16_t port, char *buf, size_t cap,
		     struct ndz_error *e);

struct ndz_sessctl;

/*
 * ndz_sessctl_start - listen on path (a file left there is replaced; mode 0600) and
 * answer, on a thread of its own with all signals blocked, each connection's one
 * request with ops (called with ctx), from peers of this process's user. Returns 0
 * and *out (stop with ndz_sessctl_stop), or NDZ_ERANGE (path too long), NDZ_ENET or
 * NDZ_ENOMEM with e set.
 */
int ndz_sessctl_start(const char *path, const struct ndz_sessctl_ops *ops, void *ctx,
		      struct ndz_sessctl **out, struct ndz_error *e);

/* ndz_sessctl_stop - stop answering, join the thread, remove the socket; NULL ok. */
void ndz_sessctl_stop(struct ndz_sessctl *s);

/*
 * ndz_sessctl_ask - send req to the endpoint at path and wait at most timeout_ms
 * for its reply into *rep. 0 when the reply came with status OK; NDZ_ENOENT (no
 * endpoint there), NDZ_ENET, NDZ_ETIMEDOUT, NDZ_EPROTO, or NDZ_EREFUSED (the
 * endpoint answered another status) with e naming path.
 */
int ndz_sessctl_ask(const char *path, const struct ndz_sessctl_msg *req, int timeout_ms,
		    struct ndz_sessctl_msg *rep, struct ndz_error *e);

/* ndz_sessctl_status - ask STATUS; as ndz_sessctl_ask, *out filled on 0. */
int ndz_sessctl_status(const char *path, int timeout_ms, struct ndz_sessctl_status *out,
		       struct ndz_error *e);

/* ndz_sessctl_rate - ask RATE rate_bps; as ndz_sessctl_ask. */
int ndz_sessctl_rate(const char *path, uint64_t rate_bps, int timeout_ms, struct ndz_error *e);

/* ndz_sessctl_identify - ask IDENTIFY; as ndz_sessctl_ask, *out filled on 0. */
int ndz_sessctl_identify(const char *path, int timeout_ms, struct ndz_sessctl_identity *out,
			 struct ndz_error *e);

/*
 * ndz_sessctl_hold - ask HOLD (a client was just sent to the session): 1 when it
 * holds (it stays for its idle timeout from now), 0 when it is ending (it decided
 * to exit idle before), else a negative code as ndz_sessctl_ask's (NDZ_ENOENT:
 * nothing listens; NDZ_EREFUSED: a frisbeed that does not know HOLD).
 */
int ndz_sessctl_hold(const char *path, int timeout_ms, struct ndz_error *e);

#endif
