/*
 * The master's control protocol (doc/PROTOCOL.md, "Control protocol"): one UDP
 * request, one reply, fixed little-endian layouts encoded and decoded only here;
 * and the client side of one exchange (ask, wait, retry). Uploads use the same
 * messages over TCP (lib/upload).
 */
#ifndef NDZ_CTL_H
#define NDZ_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct sockaddr_in;

#define NDZ_CTL_MAGIC      0x435a444eu /* "NDZC" */
#define NDZ_CTL_VERSION    1
#define NDZ_CTL_PORT       3563        /* the master's default UDP port */
#define NDZ_CTL_NAME_MAX   64          /* image name bytes */
#define NDZ_CTL_REQ_HDR    12
#define NDZ_CTL_REQ_MAX    (NDZ_CTL_REQ_HDR + 8 + NDZ_CTL_NAME_MAX)
#define NDZ_CTL_REP_HDR    12
#define NDZ_CTL_GET_LEN    (NDZ_CTL_REP_HDR + 48)
#define NDZ_CTL_JSON_MAX   16000       /* STATUS replies are cut to this */
#define NDZ_CTL_REP_MAX    (NDZ_CTL_REP_HDR + 2 + NDZ_CTL_JSON_MAX)
#define NDZ_CTL_MSG_MAX    512         /* DONE messages are cut to this */
#define NDZ_CTL_WAIT_S     900         /* a GET answered WAIT is asked again this long */

enum ndz_ctl_type {
	NDZ_CTL_GET = 1,                 /* image name -> session */
	NDZ_CTL_STATUS = 2,              /* -> JSON; TCP only (a UDP reply would amplify) */
	NDZ_CTL_UPLOAD = 3,              /* TCP: name, size -> go ahead, then DONE */
	NDZ_CTL_DONE = 4,                /* TCP, reply only: the upload's outcome */
	NDZ_CTL_ASK = 5,                 /* lab: a node asks what to do (ndz_ctl_lab_*) */
	NDZ_CTL_REPORT = 6,              /* lab: a node reports progress or its result */
	NDZ_CTL_ADMIN = 7,               /* lab: an admin request (unix socket or TCP) */
	NDZ_CTL_SITE = 8,                /* TCP: a site master fetches from its parent
					  * (lib/ctl/sitecall: encoded there) */
};

/* Reply status codes; on the wire as they are. */
enum ndz_ctl_status {
	NDZ_CTL_OK = 0,
	NDZ_CTL_UNKNOWN = 1,             /* no such image */
	NDZ_CTL_DENIED = 2,              /* the requester may not have it */
	NDZ_CTL_POOL = 3,                /* no multicast address free */
	NDZ_CTL_TOO_MANY = 4,            /* the session limit is reached */
	NDZ_CTL_MALFORMED = 5,           /* the request made no sense */
	NDZ_CTL_FAILED = 6,              /* the session (or upload) could not be started */
	NDZ_CTL_BUSY = 7,                /* another upload to that name is running */
	NDZ_CTL_QUOTA = 8,               /* the upload would exceed the quota */
	NDZ_CTL_BADIMAGE = 9,            /* the uploaded bytes are not a sound image */
	NDZ_CTL_TIMEOUT = 10,            /* the uploader went quiet */
	NDZ_CTL_UPLOADS = 11,            /* max-uploads are running */
	NDZ_CTL_USE_TCP = 12,            /* STATUS is answered over TCP only */
	NDZ_CTL_CONNS = 13,              /* TCP: too many connections not yet heard */
	NDZ_CTL_NONODE = 14,             /* lab: no such node or group, or no task */
	NDZ_CTL_WAIT = 15,               /* GET at a site master: the image is on its way from
					  * the parent (doc/SITES.md); ask again */
};

struct ndz_ctl_req {
	uint8_t type;                    /* enum ndz_ctl_type */
	uint32_t id;                     /* echoed in the reply */
	char name[NDZ_CTL_NAME_MAX + 1]; /* GET, UPLOAD: NUL-terminated image name; STATUS: "" */
	uint64_t size;                   /* UPLOAD: the image's bytes; 0: not known */
};

struct ndz_ctl_rep {
	uint8_t type;                    /* the request's type */
	uint16_t status;                 /* enum ndz_ctl_status */
	uint32_t id;
	/* GET, status OK */
	uint32_t group, server;          /* IPv4 addresses, network byte order */
	uint16_t port;
	uint8_t uuid[16];
	uint32_t chunks;
	uint64_t source_bytes, rate_bps;
	/* STATUS: json_len bytes of JSON at json; DONE (any status): a message for
	 * people (decode points into the datagram) */
	const char *json;
	size_t json_len;
};

/*
 * ndz_ctl_req_encode / ndz_ctl_rep_encode - the datagram for r into buf (cap bytes).
 * Return its length, or NDZ_EINVAL (a name too long or with a NUL, a bad type, a
 * reply JSON too long) or NDZ_ERANGE (cap too small), with e (may be NULL) set.
 */
int ndz_ctl_req_encode(const struct ndz_ctl_req *r, uint8_t *buf, size_t cap,
		       struct ndz_error *e);
int ndz_ctl_rep_encode(const struct ndz_ctl_rep *r, uint8_t *buf, size_t cap,
		       struct ndz_error *e);

/*
 * ndz_ctl_req_decode - a request from len bytes. 0; NDZ_EPROTO when it is not one
 * of ours (short, bad magic: drop it silently); NDZ_EPROTOVER for another
 * version; NDZ_EINVAL when the header is ours but the rest is not (unknown type,
 * bad name length, a NUL in the name, trailing bytes): r->type and r->id are set
 * then, so that the master can answer MALFORMED. e (may be NULL: the master's hot
 * path) says which.
 */
int ndz_ctl_req_decode(const uint8_t *buf, size_t len, struct ndz_ctl_req *r,
		       struct ndz_error *e);

/*
 * ndz_ctl_rep_decode - a reply from len bytes. 0 or NDZ_EPROTO / NDZ_EPROTOVER with
 * e (may be NULL) set. For STATUS, r->json points into buf (not NUL-terminated).
 */
int ndz_ctl_rep_decode(const uint8_t *buf, size_t len, struct ndz_ctl_rep *r,
		       struct ndz_error *e);

/*
 * ndz_ctl_req_need / ndz_ctl_rep_need - for reading from a stream (TCP): given the
 * have bytes read so far, the whole message's length (more than have: read on).
 * NDZ_EPROTO / NDZ_EPROTOVER when the header is not ours, NDZ_EINVAL for a length
 * no message has, with e (may be NULL) saying so. Pure length arithmetic, passed to
 * ndz_upload_read_msg, which names the peer.
 */
int ndz_ctl_req_need(const uint8_t *buf, size_t have, struct ndz_error *e);
int ndz_ctl_rep_need(const uint8_t *buf, size_t have, struct ndz_error *e);

/*
 * ndz_ctl_valid_name - 1 when s can name an image: 1 to NDZ_CTL_NAME_MAX letters,
 * digits, '.', '_' or '-', not '.' first (NDZ_CTL_NAME_RULE says so for people),
 * else 0. The one rule of every client (frisbee, frisbee-upload, ndzctl) and the master.
 */
int ndz_ctl_valid_name(const char *s);
#define NDZ_CTL_NAME_RULE "1 to 64 letters, digits, '.', '_' or '-', not '.' first"

/* ndz_ctl_strstatus - the message for a reply status ("unknown image", ...). */
const char *ndz_ctl_strstatus(unsigned status);

/*
 * ndz_ctl_status_of - the reply status that tells a peer about the library error
 * code (0: NDZ_CTL_OK). The one table from NDZ_E* codes to wire statuses: no
 * library function returns a wire status. Image faults (checksums, headers,
 * regions, truncation, a size not as declared) are NDZ_CTL_BADIMAGE; codes
 * without a status of their own (NDZ_EIO, NDZ_ENOMEM, ...) are NDZ_CTL_FAILED.
 */
unsigned ndz_ctl_status_of(int code);
/*
 * ndz_ctl_resolve - the IPv4 address of the master host (a dotted address or a name)
 * with port into *to. Returns 0, or NDZ_EINVAL with e saying "master HOST: unknown
 * host".
 */
int ndz_ctl_resolve(const char *host, uint16_t port, struct sockaddr_in *to,
		    struct ndz_error *e);

/*
 * ndz_ctl_exchange - the client side of a UDP request to the master at host:port (a
 * dotted IPv4 address or a name): send the len encoded bytes of out, then wait wait_ms
 * for a datagram from that address that take(arg, buf, n) accepts (returns 1); tries
 * attempts. The datagrams land in buf (cap bytes). The one sender of ndz_ctl_query and
 * the lab's node calls. Returns 0, NDZ_ETIMEDOUT (nothing accepted), NDZ_EINVAL (host
 * unknown) or NDZ_ENET, with e naming the master.
 */
int ndz_ctl_exchange(const char *host, uint16_t port, const uint8_t *out, size_t len,
		     int tries, int wait_ms, uint8_t *buf, size_t cap,
		     int (*take)(void *arg, const uint8_t *buf, size_t n), void *arg,
		     struct ndz_error *e);

/*
 * ndz_ctl_query - send req to host:port (a dotted IPv4 address or a name) over
 * UDP and wait for the reply with its id: tries attempts, each waiting wait_ms.
 * The reply is decoded into rep, its bytes kept in buf (cap >= NDZ_CTL_REP_MAX).
 * Returns 0 (whatever the reply's status), NDZ_ETIMEDOUT (no reply), NDZ_EINVAL
 * (host unknown) or NDZ_ENET, with e naming the master.
 */
int ndz_ctl_query(const char *host, uint16_t port, const struct ndz_ctl_req *req, int tries,
		  int wait_ms, uint8_t *buf, size_t cap, struct ndz_ctl_rep *rep,
		  struct ndz_error *e);

/*
 * ndz_ctl_ask - ndz_ctl_query to the master at spec ("HOST[:PORT]", port
 * NDZ_CTL_PORT by default): four tries 700 ms apart, about 2.8 s in all; a WAIT
 * answer (a site master fetching the image from its parent) is asked again every
 * quarter second for up to NDZ_CTL_WAIT_S seconds. Returns 0
 * with rep (status OK); NDZ_EINVAL (a bad spec or host); NDZ_EREFUSED with e saying
 * "master HOST:PORT: image 'NAME': unknown image" (GET) or "master HOST:PORT: access
 * denied" (STATUS), a denial naming this host's address toward the master ("no
 * allow rule matches 10.0.0.5 for image 'NAME'"); NDZ_EINVAL, before asking, for a
 * name no image can have; or what ndz_ctl_query returns.
 */
int ndz_ctl_ask(const char *spec, const struct ndz_ctl_req *req, uint8_t *buf, size_t cap,
		struct ndz_ctl_rep *rep, struct ndz_error *e);

/*
 * ndz_ctl_local_addr - the address (dotted, into buf of cap >= 16 bytes) this host
 * reaches host:port from, as the master sees it without NAT; "this host's
 * address" when it cannot be told. Nothing is sent.
 */
void ndz_ctl_local_addr(const char *host, uint16_t port, char *buf, size_t cap);

/*
 * ndz_ctl_hostport - split "HOST[:PORT]" into host (copied into h, hcap bytes) and
 * port (defport when absent). 0 or NDZ_EINVAL with e (may be NULL) saying "bad
 * address 'S' (HOST[:PORT])".
 */
int ndz_ctl_hostport(const char *s, uint16_t defport, char *h, size_t hcap, uint16_t *port,
		     struct ndz_error *e);

/*
 * The lab's messages (doc/PROTOCOL.md, "Lab messages"): the same 12-byte header,
 * types NDZ_CTL_ASK, NDZ_CTL_REPORT (by UDP or TCP) and NDZ_CTL_ADMIN (unix socket
 * or TCP), encoded and decoded only here.
 */
#define NDZ_CTL_TEXT_MAX   160         /* a report's reason */
#define NDZ_CTL_TOKEN_MAX  64          /* an admin token, bytes */
#define NDZ_CTL_ARGS       3           /* an admin request's strings */
#define NDZ_CTL_LAB_MAX    (NDZ_CTL_REQ_HDR + 4 + NDZ_CTL_TOKEN_MAX + \
			    NDZ_CTL_ARGS * (NDZ_CTL_NAME_MAX + 1))
#define NDZ_CTL_TEXT_BIG   (1u << 20)  /* an admin reply's text (a lab of 1024 nodes) */
#define NDZ_CTL_LABREP_MAX (NDZ_CTL_REP_HDR + 8 + NDZ_CTL_TEXT_BIG)

/* Admin operations. */
enum ndz_ctl_op {
	NDZ_CTL_OP_NODE_ADD = 1,         /* args: MAC, name or "", group or "" */
	NDZ_CTL_OP_NODE_LIST = 2,        /* -> the lab's JSON */
	NDZ_CTL_OP_NODE_REMOVE = 3,      /* args: MAC or name */
	NDZ_CTL_OP_RELOAD = 4,           /* args: node or group, image; flags: options, wake */
	NDZ_CTL_OP_CAPTURE = 5,          /* args: node, image name */
	NDZ_CTL_OP_CANCEL = 6,           /* args: node or group */
	NDZ_CTL_OP_STATUS = 7,           /* -> {"lab":LAB JSON,"master":STATUS JSON} */
	NDZ_CTL_OP_IMAGES = 8,           /* -> {"images":[{"name":..,"path":..,"bytes":..}]} */
	NDZ_CTL_OP_IMAGE_INFO = 9,       /* args: image -> its facts (lib/master/images.h) */
	NDZ_CTL_OP_IMAGE_REMOVE = 10,    /* args: image; flags: FORCE */
	NDZ_CTL_OP_IMAGE_RENAME = 11,    /* args: image, new name; flags: FORCE */
};
#define NDZ_CTL_FLAG_WAKE  0x80          /* admin flags: send Wake-on-LAN; low bits NDZ_LAB_* options */
#define NDZ_CTL_FLAG_TABLE 0x40          /* NODE_LIST, STATUS, IMAGES, IMAGE_INFO: a table for
					  * people, not JSON */
#define NDZ_CTL_FLAG_FORCE 0x20          /* IMAGE_REMOVE, IMAGE_RENAME: even while served */

struct ndz_ctl_labreq {
	uint8_t type;                    /* NDZ_CTL_ASK, _REPORT or _ADMIN */
	uint32_t id;
	uint8_t mac[6];                  /* ASK, REPORT */
	uint8_t kind;                    /* REPORT: enum ndz_lab_report_kind */
	uint64_t bytes, total, ms, skipped;  /* REPORT */
	char text[NDZ_CTL_TEXT_MAX + 1];     /* REPORT: the reason (failure) */
	uint8_t op, flags;               /* ADMIN */
	char token[NDZ_CTL_TOKEN_MAX + 1];   /* ADMIN: "" over the unix socket */
	char args[NDZ_CTL_ARGS][NDZ_CTL_NAME_MAX + 1];  /* ADMIN; unused ones "" */
};

struct ndz_ctl_labrep {
	uint8_t type;                    /* the request's */
	uint16_t status;                 /* enum ndz_ctl_status */
	uint32_t id;
	uint8_t task, opts;              /* ASK: enum ndz_lab_task, options */
	uint32_t wait_ms;                /* ASK: NDZ_LAB_WAIT */
	char name[NDZ_CTL_NAME_MAX + 1]; /* ASK: the image */
	const char *text;                /* ADMIN: JSON or a message (decode: into buf) */
	size_t text_len;
};

/*
 * ndz_ctl_lab_encode / ndz_ctl_labrep_encode - the message for r into buf (cap
 * bytes): its length, or NDZ_EINVAL (a bad type, a string too long; an image
 * operation whose names are not image names, with a second name other than
 * RENAME's, a third argument, or flags other than FORCE and TABLE) or NDZ_ERANGE
 * (cap too small) with e (may be NULL) set. lab_decode refuses what encode does.
 */
int ndz_ctl_lab_encode(const struct ndz_ctl_labreq *r, uint8_t *buf, size_t cap,
		       struct ndz_error *e);
int ndz_ctl_labrep_encode(const struct ndz_ctl_labrep *r, uint8_t *buf, size_t cap,
			  struct ndz_error *e);

/*
 * ndz_ctl_is_lab - 1 when the len bytes are (the start of) a lab request, which the
 * master's lab answers, else 0 (a control request or not ours).
 */
int ndz_ctl_is_lab(const uint8_t *buf, size_t len);

/*
 * ndz_ctl_lab_decode / ndz_ctl_labrep_decode - a lab request or reply from len
 * bytes: 0, NDZ_EPROTO (not a lab message; short; trailing bytes; a string not
 * NUL-free) or NDZ_EPROTOVER, with e (may be NULL) set. r->type and r->id are set
 * whenever the header is ours. labrep's text points into buf.
 */
int ndz_ctl_lab_decode(const uint8_t *buf, size_t len, struct ndz_ctl_labreq *r,
		       struct ndz_error *e);
int ndz_ctl_labrep_decode(const uint8_t *buf, size_t len, struct ndz_ctl_labrep *r,
			  struct ndz_error *e);

/*
 * ndz_ctl_lab_need - for reading a lab request (reply 0) or reply (reply 1) from a
 * stream: the whole message's length given the have bytes so far (more than have:
 * read on), or NDZ_EPROTO / NDZ_EINVAL with e (may be NULL) set.
 */
int ndz_ctl_lab_need(const uint8_t *buf, size_t have, int reply, struct ndz_error *e);

/*
 * ndz_ctl_read_token - the admin token (token-file: TCP admin requests and HTTP
 * actions alike), the first line of path, into tok (cap > NDZ_CTL_TOKEN_MAX,
 * zero-padded). 0, or NDZ_EIO / NDZ_EINVAL (not 16 to 64 printable bytes without
 * blanks) with e set.
 */
int ndz_ctl_read_token(const char *path, char *tok, size_t cap, struct ndz_error *e);

#endif
