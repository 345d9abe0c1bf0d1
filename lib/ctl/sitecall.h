/*
 * A site master's fetches from its parent master (doc/PROTOCOL.md, "Site fetch";
 * doc/SITES.md): one SITE request over TCP to the parent's control port asks for
 * an image's content index, its signed manifest, or a run of its chunks by number;
 * the reply carries the bytes. The layouts are fixed little-endian, encoded and
 * decoded only here; the client side of one fetch too.
 */
#ifndef NDZ_SITECALL_H
#define NDZ_SITECALL_H

#include <stddef.h>
#include <stdint.h>

#include "ctl.h"
#include "core/err.h"

#define NDZ_SITE_REQ_FIXED (NDZ_CTL_REQ_HDR + 12)   /* before the name */
#define NDZ_SITE_REQ_MAX   (NDZ_SITE_REQ_FIXED + NDZ_CTL_NAME_MAX)
#define NDZ_SITE_REP_LEN   (NDZ_CTL_REP_HDR + 8)    /* before the bytes */
#define NDZ_SITE_CHUNKS    16                       /* chunks one request asks for, at most */
#define NDZ_SITE_BLOB_MAX  (1u << 30)               /* a reply's bytes, at most */

/* What a SITE request asks for. */
enum ndz_site_what {
	NDZ_SITE_INDEX = 1,            /* IMAGE.index, whole */
	NDZ_SITE_MANIFEST = 2,         /* IMAGE.manifest, whole (none: UNKNOWN) */
	NDZ_SITE_CHUNKS_OF = 3,        /* chunks [first, first + count) of IMAGE */
	NDZ_SITE_REPORT = 4,           /* the site's lab, count bytes after the request;
					* name: the site's name */
	NDZ_SITE_IDENT = 5,            /* IMAGE's identity (NDZ_SITE_IDENT_LEN bytes): what a
					* recheck asks instead of the index */
};

/*
 * An image's identity, as a parent answers an IDENT request: the image's size and the
 * SHA-256 of its content index and of its signed manifest. Any change of the image
 * changes its index (its UUID, every chunk's entry), so two images with the same
 * identity are the same image; a recheck (doc/SITES.md, "Updates") compares it with
 * the identity of the files it holds and fetches the index only on a difference.
 */
#define NDZ_SITE_IDENT_LEN 80
struct ndz_site_ident {
	uint64_t bytes;                /* the image file's size */
	int manifest;                  /* 1: it has a manifest (else manifest_sha is 0) */
	uint8_t index_sha[32], manifest_sha[32];
};

/*
 * ndz_site_ident_encode / _decode - the identity as an IDENT reply's bytes (fixed
 * little-endian, doc/PROTOCOL.md "Site fetch"); decode: 0, or NDZ_EPROTO (not
 * NDZ_SITE_IDENT_LEN bytes, a reserved bit set) with e (may be NULL) set.
 * ndz_site_ident_files - the identity of an image file and its companions (index, and
 * manifest: NULL or a missing file is none): 0, or NDZ_ENOIMAGE (no image or no index
 * file), NDZ_EIO / NDZ_ENOMEM with e set.
 */
void ndz_site_ident_encode(const struct ndz_site_ident *id, uint8_t buf[NDZ_SITE_IDENT_LEN]);
int ndz_site_ident_decode(const uint8_t *buf, size_t len, struct ndz_site_ident *id,
			  struct ndz_error *e);
int ndz_site_ident_files(const char *image, const char *index, const char *manifest,
			 struct ndz_site_ident *id, struct ndz_error *e);

/* ndz_site_ident_same - 1 when a and b name the same image, else 0. */
int ndz_site_ident_same(const struct ndz_site_ident *a, const struct ndz_site_ident *b);

#define NDZ_SITE_REPORT_MAX (2u * NDZ_CTL_TEXT_BIG + 4)  /* a REPORT's body, at most */
#define NDZ_SITE_TASKS_MAX  (16u * NDZ_CTL_LAB_MAX)      /* a REPORT reply's tasks */

struct ndz_site_req {
	uint32_t id;
	uint8_t what;                  /* enum ndz_site_what */
	uint32_t first, count;         /* CHUNKS_OF: 1 to NDZ_SITE_CHUNKS; REPORT: the body's
					* bytes (1 to NDZ_SITE_REPORT_MAX); else 0 */
	char name[NDZ_CTL_NAME_MAX + 1];
};

/*
 * ndz_site_req_encode - the request r into buf (cap bytes): its length, or
 * NDZ_EINVAL (a bad what, count or name) / NDZ_ERANGE (cap too small) with e set.
 * ndz_site_req_decode - the request from len bytes: 0, or NDZ_EPROTO (not a SITE
 * request) / NDZ_EINVAL (malformed: what encode refuses, trailing bytes) with e
 * (may be NULL) set.
 */
int ndz_site_req_encode(const struct ndz_site_req *r, uint8_t *buf, size_t cap,
			struct ndz_error *e);
int ndz_site_req_decode(const uint8_t *buf, size_t len, struct ndz_site_req *r,
			struct ndz_error *e);

/*
 * ndz_site_report_encode - a REPORT's body: the site's nodes as a table for people
 * (tlen bytes) and as JSON (jlen bytes): u32 table length, the table, the JSON; into
 * *out (malloc'ed) and *len. 0, or NDZ_EINVAL (too long) / NDZ_ENOMEM with e.
 * ndz_site_report_decode - the two parts of len bytes, pointing into buf: 0, or
 * NDZ_EPROTO with e.
 */
int ndz_site_report_encode(const char *table, size_t tlen, const char *json, size_t jlen,
			   uint8_t **out, size_t *len, struct ndz_error *e);
int ndz_site_report_decode(const uint8_t *buf, size_t len, const char **table, size_t *tlen,
			   const char **json, size_t *jlen, struct ndz_error *e);

/*
 * ndz_site_req_need - for reading the first message of a TCP connection to a master:
 * a SITE request's whole length (a REPORT's body follows it, not counted), else what ndz_ctl_req_need says (the other
 * requests). ndz_site_is_req - 1 when the len bytes start a SITE request.
 */
int ndz_site_req_need(const uint8_t *buf, size_t have, struct ndz_error *e);
int ndz_site_is_req(const uint8_t *buf, size_t len);

/*
 * ndz_site_rep_encode - the reply's fixed part (status: enum ndz_ctl_status; len:
 * the bytes that follow, 0 unless OK) into buf (NDZ_SITE_REP_LEN bytes).
 * ndz_site_rep_decode - the fixed part back: 0, or NDZ_EPROTO (not the reply to
 * id; a length over NDZ_SITE_BLOB_MAX) with e set.
 */
void ndz_site_rep_encode(uint32_t id, uint16_t status, uint64_t len,
			 uint8_t buf[NDZ_SITE_REP_LEN]);
int ndz_site_rep_decode(const uint8_t buf[NDZ_SITE_REP_LEN], uint32_t id, uint16_t *status,
			uint64_t *len, struct ndz_error *e);

/*
 * A site's connection to its parent: requests one after another on one TCP
 * connection (the parent answers them in turn), made when first needed and made
 * anew after a failure. ndz_site_link_init - none yet, to spec ("HOST[:PORT]", port
 * NDZ_CTL_PORT by default), waiting at most wait_s seconds for the connection and
 * each read. ndz_site_link_close - close it (it is made again when needed).
 */
struct ndz_site_link {
	char spec[300];
	int wait_s;
	int fd;                        /* -1: none */
};
void ndz_site_link_init(struct ndz_site_link *l, const char *spec, int wait_s);
void ndz_site_link_close(struct ndz_site_link *l);

/*
 * ndz_site_fetch - ask the parent for r on l. 0 with the reply's bytes in *out
 * (malloc'ed, the caller frees; NULL when none) and *len; NDZ_ENOIMAGE (the parent
 * has no such image or file), NDZ_EREFUSED (another refusal: denied, malformed), or
 * NDZ_ENET / NDZ_ETIMEDOUT / NDZ_ESHORTREAD / NDZ_EPROTO (the link: l is closed),
 * with e naming the parent.
 */
int ndz_site_fetch(struct ndz_site_link *l, const struct ndz_site_req *r, uint8_t **out,
		   size_t *len, struct ndz_error *e);

/*
 * ndz_site_ident - ask the parent for image name's identity on l: 0 with *id; NDZ_ENOTSUP
 * (an older parent, which answers MALFORMED to what it does not know and closes: l is
 * closed), else as ndz_site_fetch.
 */
int ndz_site_ident(struct ndz_site_link *l, const char *name, struct ndz_site_ident *id,
		   struct ndz_error *e);

/*
 * ndz_site_report - send the REPORT r (its count set to body_len) and its body on l,
 * and wait for the parent's reply: the tasks the parent sends this site, admin
 * requests (ndz_ctl_lab_encode's, one after another), into *tasks (malloc'ed, the
 * caller frees; NULL when none) and *tlen. 0, or as ndz_site_fetch.
 */
int ndz_site_report(struct ndz_site_link *l, struct ndz_site_req *r, const uint8_t *body,
		    size_t body_len, uint8_t **tasks, size_t *tlen, struct ndz_error *e);

/*
 * ndz_site_fetch_chunks - as ndz_site_fetch for a CHUNKS_OF request, but each chunk
 * is given to each(arg, k, chunk) as it arrives (k: its place in the request, chunk
 * NDZ_CHUNK_SIZE bytes, valid during the call), so that what came whole before a
 * lost link is kept. A negative return of each stops the fetch with that code. 0 once
 * every chunk came, else a code as ndz_site_fetch's (NDZ_EPROTO: a reply of another
 * length than the chunks asked), with e set.
 */
int ndz_site_fetch_chunks(struct ndz_site_link *l, const struct ndz_site_req *r,
			  int (*each)(void *arg, uint32_t k, const uint8_t *chunk),
			  void *arg, struct ndz_error *e);

/*
 * The chunk a session waits for: frisbeed --growing, serving an image a site master
 * is still fetching, writes the number of a chunk it has to wait for into IMAGE.want
 * (decimal, a line); the site's fetcher reads it before each request and fetches
 * from there, so that chunks come in the order clients ask for them.
 * ndz_site_want_write - best effort (nothing said when it cannot).
 * ndz_site_want_read - the chunk, or UINT32_MAX when none is told or it is not below
 * chunks.
 */
void ndz_site_want_write(const char *image, uint32_t chunk);
uint32_t ndz_site_want_read(const char *image, uint32_t chunks);

#endif
