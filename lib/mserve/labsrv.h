/*
 * The master's lab service: lib/master/lab behind the lab messages
 * (doc/PROTOCOL.md, "Lab messages"). Nodes ask and report by UDP on the control
 * port; admins send requests over a unix socket (its file mode 0660 gives the
 * right) or over TCP with the token (compared in constant time). The client side
 * of both exchanges, for ndzctl and the boot environment, is lib/ctl/labcall. The
 * sockets are opened here; lib/mserve/mserve polls them and calls in, holding the
 * master's lock (mlock.h).
 */
#ifndef NDZ_LABSRV_H
#define NDZ_LABSRV_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "ctl/ctl.h"
#include "master/lab.h"
#include "master/mconf.h"
#include "mlock.h"
#include "core/err.h"
#include "core/json.h"

#define NDZ_LABSRV_FDS 2               /* pollfds ndz_labsrv_pollfds fills */

struct ndz_labsrv;

/* What the lab service tells and asks of the program. */
struct ndz_labsrv_hooks {
	void *ctx;
	/* the master's STATUS JSON into buf (cap bytes); its length (NULL: "{}"); called
	 * without the lock (it asks the sessions, then takes the lock itself) */
	size_t (*status_json)(void *ctx, char *buf, size_t cap);
	/* tell people: level 0 an error, 1 what happens (-v), 2 more (-vv) */
	void (*say)(void *ctx, int level, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* held by the caller around every call in; admin connections are then each
	 * served on a thread of their own, which takes it once the request is read
	 * (NULL: served inline, the caller waiting up to a second for a slow peer) */
	struct ndz_mlock *lock;        /* the master's (mlock.h) */
	/* images info/remove/rename (lib/master/images.h): the master's sessions and
	 * uploads (NULL: none known), and the configuration reread after files changed
	 * (NULL: not reread) */
	struct ndz_master *ms;
	int (*reload)(void *ctx, struct ndz_error *e);
	/* a request refused by rule, always told: a node's datagram (the lab's per-host
	 * limit, no allow rule, malformed), an admin request with a wrong token (NULL:
	 * said at level 0); lib/cli's cli_refusal fits */
	void (*refused)(const char *rule, const char *addr, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* under the lock: a parent's nodes list gets its sites' nodes (lib/mserve/site):
	 * as a table, each line after a SITE column, or JSON, a "sites" member; the
	 * lab's own text is in j already. Returns how many sites; NULL: none */
	size_t (*sites)(void *ctx, int table, struct ndz_jbuf *j);
	/* under the lock: a reload, capture or cancel for a node or group this lab does
	 * not have, at a parent: sent to the site that has it. 0 with what happened in
	 * j, or NDZ_ENOENT (no site has it either); NULL: none */
	int (*forward)(void *ctx, const struct ndz_ctl_labreq *r, struct ndz_jbuf *j,
		       struct ndz_error *e);
	/* under the lock: something the lab's state file keeps changed (a node's task,
	 * state or result), so that a site reports it at once; NULL: none */
	void (*changed)(void *ctx);
};

/*
 * ndz_labsrv_admin - under the lock: the admin request r, as if it came on the admin
 * socket (a task a parent sent this site master): 0 with the outcome in j, or a
 * negative code with e.
 */
int ndz_labsrv_admin(struct ndz_labsrv *s, const struct ndz_ctl_labreq *r, struct ndz_jbuf *j,
		     struct ndz_error *e);

/*
 * ndz_labsrv_nodes - under the lock: the lab's nodes into j, as ndzctl nodes list
 * shows them at this master alone (table 1) or as its JSON (table 0).
 */
void ndz_labsrv_nodes(struct ndz_labsrv *s, int table, struct ndz_jbuf *j);


/*
 * ndz_labsrv_check_state - may the lab's state file (c->lab_state, else
 * run_dir/lab) be written by us: its directory there and writable, the file, if
 * there, a regular one (a missing run directory is fine: the master makes it).
 * Nothing is written. 0, or a negative code with e naming the path and the reason.
 */
int ndz_labsrv_check_state(const struct ndz_mconf *c, const char *run_dir,
			   struct ndz_error *e);

/*
 * ndz_labsrv_open - the lab of configuration c (borrowed, as ndz_labsrv_set_conf)
 * with its state file (c->lab_state, else run_dir/lab) loaded and written back (so
 * a state that cannot be saved fails here, not at the first change), its admin unix socket (c->admin_socket,
 * else run_dir/admin; "none": no socket) made with mode 0660, and c->admin_listen
 * opened when set (then c->token_file must hold a token: 16 to 64 printable bytes
 * on its first line). 0 and *out (free with ndz_labsrv_free), or a negative code
 * with e naming what failed; nothing stays open on failure.
 */
int ndz_labsrv_open(const struct ndz_mconf *c, const char *run_dir,
		    const struct ndz_labsrv_hooks *h, struct ndz_labsrv **out,
		    struct ndz_error *e);

/* ndz_labsrv_free - close the sockets, remove the unix socket's file; accepts NULL. */
void ndz_labsrv_free(struct ndz_labsrv *s);

/*
 * ndz_labsrv_set_conf - a reloaded configuration (borrowed): images, times,
 * Wake-on-LAN, the per-address limit.
 */
void ndz_labsrv_set_conf(struct ndz_labsrv *s, const struct ndz_mconf *c);

/*
 * ndz_labsrv_udp - when the len bytes from from are a lab request, answer it at
 * now_ms through the UDP socket fd and return 1 (an admin request, which UDP does
 * not carry, is answered DENIED; a host no rule of the configuration names,
 * DENIED); else 0: the caller handles the datagram. An address over the
 * configuration's lab-host-rate and lab-host-burst (lib/master/hostlimit: 256
 * addresses tracked, the least recently heard evicted) gets no reply: the drop is told through the refused hook
 * (rule "lab rate limit") and counted (ndz_master_counters' lab_rate_limited).
 */
int ndz_labsrv_udp(struct ndz_labsrv *s, int fd, const uint8_t *buf, size_t len,
		   const struct sockaddr_in *from, uint64_t now_ms);

/*
 * ndz_labsrv_prepare - once a turn of the program's loop, before its poll: lost
 * nodes at now_ms, the state file saved when something in it changed (a failure
 * told through the say hook, tried again next turn), and the admin listeners into
 * p[0..NDZ_LABSRV_FDS-1] (fd -1 when not open).
 * ndz_labsrv_serve - after the poll: accept on the listeners p says are ready;
 * each connection carries one request, which its peer must send within a second;
 * at most 4 are served at once per listener, more are closed at once.
 */
void ndz_labsrv_prepare(struct ndz_labsrv *s, uint64_t now_ms, struct pollfd *p);
void ndz_labsrv_serve(struct ndz_labsrv *s, const struct pollfd *p, uint64_t now_ms);

/*
 * ndz_labsrv_http - the lab's part of the HTTP endpoint (lib/mserve/http.h), a table
 * of NDZ_LABSRV_HTTP_EXTS entries valid as long as s: the status section "lab" (the
 * nodes with their task, state, progress, history as ndz_lab_json writes them;
 * without the history when they do not fit with it), its /metrics families
 * (ndz_lab_nodes by state, ndz_lab_reloads_total and ndz_lab_captures_total by
 * result, ndz_lab_reload_duration_seconds), the actions POST /lab (doc/HTTP.md: a
 * JSON object whose "op" is one of ndzctl's, done by the same code as the admin
 * socket's, or "wake"), GET /image/NAME (ndz_images_info's JSON, as ndzctl images
 * info), and network boot (doc/PXE.md): GET /boot.ipxe (every node's first
 * script), GET /boot/MAC (the node's own script, lib/master/pxe, from
 * ndz_lab_peek: serving it changes nothing; a bad MAC is 400), GET /pxe/FILE (a
 * file of the configuration's pxe-dir, ndz_pxe_open; else 404). Every script
 * served is told through the say hook, every GET refused (a bad MAC, a file not
 * served) through the refused hook.
 */
#define NDZ_LABSRV_HTTP_EXTS 4
struct ndz_http_ext;
const struct ndz_http_ext *ndz_labsrv_http(struct ndz_labsrv *s);

/*
 * ndz_labsrv_set_ctl - the master's UDP control socket fd, which the boot scripts
 * send nodes to (ndz.master=ADDR, ":PORT" added when not NDZ_CTL_PORT; ADDR is the
 * socket's own address, or when it listens on all, the one the node reached the
 * HTTP endpoint at). Not called: NDZ_CTL_PORT.
 */
void ndz_labsrv_set_ctl(struct ndz_labsrv *s, int fd);

#endif
