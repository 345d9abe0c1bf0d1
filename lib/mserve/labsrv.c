/* The master's lab service: node asks and reports, admin requests (their client side is lib/ctl/labcall). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <sodium.h>

#include "master/hostlimit.h"
#include "http.h"
#include "master/images.h"
#include "core/json.h"
#include "labsrv.h"
#include "master/pxe.h"
#include "master/wol.h"
#include "core/clock.h"
#include "ctl/labcall.h"
#include "mcast/net.h"

#define ADMIN_WAIT_MS 1000             /* an admin peer's time to send its request */
#define ADMIN_CONNS 4                  /* admin connections served at once, per listener */

struct ndz_labsrv {
	struct ndz_lab *lab;
	struct ndz_lab *undo;          /* the lab before an admin change, until it is saved */
	const struct ndz_mconf *c;
	struct ndz_labsrv_hooks h;
	char state_path[PATH_MAX], sock_path[PATH_MAX];
	char token[NDZ_CTL_TOKEN_MAX + 1];  /* zero-padded; "" : TCP admin off */
	int ufd, tfd;                  /* admin listeners: unix, TCP */
	int dirty;                     /* the state file is behind (a save failed) */
	int said;                      /* ... and that was told */
	uint8_t out[NDZ_CTL_LABREP_MAX];  /* UDP replies */
	unsigned threads[2];           /* admin connections being served: unix, TCP */
	struct ndz_http_ext http[NDZ_LABSRV_HTTP_EXTS];  /* ndz_labsrv_http's */
	struct sockaddr_in ctl;        /* the control socket's address (ndz_labsrv_set_ctl) */
	struct ndz_hostlimit limit;    /* ASK and REPORT datagrams per address */
};

static void say(const struct ndz_labsrv *s, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(const struct ndz_labsrv *s, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!s->h.say)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->h.say(s->h.ctx, level, "%s", msg);
}

/* A refusal: through the refused hook (always told), else said at level 0. */
static void refused(const struct ndz_labsrv *s, const char *rule, const char *addr,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void refused(const struct ndz_labsrv *s, const char *rule, const char *addr,
		    const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (s->h.refused)
		s->h.refused(rule, addr, "%s", msg);
	else
		say(s, 0, "refused: %s %s", addr, msg);
}

static void set_times(struct ndz_labsrv *s)
{
	ndz_lab_set_times(s->lab, (uint64_t)s->c->group_window * 1000,
			  (uint64_t)s->c->node_timeout * 1000);
}

void ndz_labsrv_set_conf(struct ndz_labsrv *s, const struct ndz_mconf *c)
{
	s->c = c;
	set_times(s);
	ndz_hostlimit_set(&s->limit, c->lab_host_rate, c->lab_host_burst, ndz_now_ns());
}

static int listen_unix(struct ndz_labsrv *s, struct ndz_error *e)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;

	if (strlen(s->sock_path) >= sizeof(sa.sun_path))
		return ndz_error_set(e, NDZ_EINVAL, 0, "admin socket %s: path too long", s->sock_path);
	strcpy(sa.sun_path, s->sock_path);
	if (lstat(s->sock_path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), live;

		live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		if (fd >= 0)
			close(fd);
		if (live)
			return ndz_error_set(e, NDZ_EBUSY, 0, "admin socket %s: another master "
					     "answers on it", s->sock_path);
		unlink(s->sock_path);  /* left by an earlier master */
	}
	s->ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->ufd < 0 || bind(s->ufd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int err = errno;

		if (s->ufd >= 0)
			close(s->ufd);
		s->ufd = -1;           /* nothing of ours to remove: the name may be another's */
		return ndz_error_set(e, NDZ_ENET, err, "admin socket %s", s->sock_path);
	}
	if (chmod(s->sock_path, 0660) != 0 || listen(s->ufd, 8) != 0)
		return ndz_error_set(e, NDZ_ENET, errno, "admin socket %s", s->sock_path);
	return 0;
}

static int listen_tcp(struct ndz_labsrv *s, const char *spec, struct ndz_error *e)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	uint16_t port;
	int one = 1;

	if (ndz_ctl_hostport(spec, 0, host, sizeof(host), &port, NULL) != 0 || !port ||
	    ndz_net_addr(host, &sa.sin_addr.s_addr, NULL) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "admin-listen: bad address '%s' (ADDR:PORT)",
				     spec);
	sa.sin_port = htons(port);
	s->tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->tfd >= 0)
		setsockopt(s->tfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s->tfd < 0 || bind(s->tfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(s->tfd, 8) != 0)
		return ndz_error_set(e, NDZ_ENET, errno, "admin-listen %s", spec);
	return 0;
}

int ndz_labsrv_check_state(const struct ndz_mconf *c, const char *run_dir,
			   struct ndz_error *e)
{
	char path[PATH_MAX], dir[PATH_MAX], *slash;
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s%s", c->lab_state ? c->lab_state : run_dir,
			     c->lab_state ? "" : "/lab") >= sizeof(path))
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab state %s: path too long", path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		slash[slash == dir] = 0;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab state %s: not a regular file", path);
	if (stat(dir, &st) != 0) {
		/* the run directory is made at start; any other is the administrator's */
		if (!c->lab_state && errno == ENOENT)
			return 0;
		return ndz_error_set(e, NDZ_EIO, errno, "lab state %s: directory %s", path, dir);
	}
	if (!S_ISDIR(st.st_mode))
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab state %s: %s is not a directory",
				     path, dir);
	if (access(dir, W_OK | X_OK) != 0)
		return ndz_error_set(e, NDZ_EIO, errno, "lab state %s: directory %s cannot be "
				     "written", path, dir);
	return 0;
}

int ndz_labsrv_open(const struct ndz_mconf *c, const char *run_dir,
		    const struct ndz_labsrv_hooks *h, struct ndz_labsrv **out,
		    struct ndz_error *e)
{
	struct ndz_labsrv *s = calloc(1, sizeof(*s));
	const char *sock = c->admin_socket;
	size_t skipped = 0;
	int rc;

	*out = NULL;
	if (!s)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "lab: out of memory");
	s->ufd = s->tfd = -1;
	s->c = c;
	ndz_hostlimit_init(&s->limit, c->lab_host_rate, c->lab_host_burst);
	if (h)
		s->h = *h;
	if ((rc = ndz_lab_create(0, 0, &s->lab, e)) != 0 ||
	    (rc = ndz_lab_create(0, 0, &s->undo, e)) != 0)
		goto fail;
	set_times(s);
	if ((size_t)snprintf(s->state_path, sizeof(s->state_path), "%s%s",
			     c->lab_state ? c->lab_state : run_dir, c->lab_state ? "" : "/lab") >=
	    sizeof(s->state_path) ||
	    (size_t)snprintf(s->sock_path, sizeof(s->sock_path), "%s%s", sock ? sock : run_dir,
			     sock ? "" : "/admin") >= sizeof(s->sock_path)) {
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "%s: path too long", run_dir);
		goto fail;
	}
	if ((rc = ndz_lab_load(s->lab, s->state_path, &skipped, e)) != 0)
		goto fail;
	if (skipped)
		say(s, 0, "%s: %zu lines skipped (not ours)", s->state_path, skipped);
	/* written now: a state the master cannot keep is found at start, not at the
	 * first change */
	if ((rc = ndz_lab_save(s->lab, s->state_path, e)) != 0) {
		ndz_error_prefix(e, "lab state (lab-state)");
		goto fail;
	}
	if (strcmp(s->sock_path, "none") == 0)
		s->sock_path[0] = 0;
	else if ((rc = listen_unix(s, e)) != 0)
		goto fail;
	if (c->admin_listen) {
		if (!c->token_file) {
			rc = ndz_error_set(e, NDZ_EINVAL, 0, "admin-listen needs a token-file");
			goto fail;
		}
		if ((rc = ndz_ctl_read_token(c->token_file, s->token, sizeof(s->token), e)) ||
		    (rc = listen_tcp(s, c->admin_listen, e)))
			goto fail;
	}
	*out = s;
	return 0;
fail:
	ndz_labsrv_free(s);
	return rc;
}

void ndz_labsrv_free(struct ndz_labsrv *s)
{
	if (!s)
		return;
	if (s->ufd >= 0) {
		close(s->ufd);
		unlink(s->sock_path);
	}
	if (s->tfd >= 0)
		close(s->tfd);
	sodium_memzero(s->token, sizeof(s->token));
	ndz_lab_free(s->lab);
	ndz_lab_free(s->undo);
	free(s);
}

/* The state file, when something in it changed (or an earlier save failed). */
static int save(struct ndz_labsrv *s, struct ndz_error *e)
{
	int rc;

	if (ndz_lab_changed(s->lab)) {
		s->dirty = 1;
		if (s->h.changed)
			s->h.changed(s->h.ctx);
	}
	if (!s->dirty)
		return 0;
	if ((rc = ndz_lab_save(s->lab, s->state_path, e)) == 0)
		s->dirty = s->said = 0;
	return rc;
}

static void save_or_say(struct ndz_labsrv *s)
{
	struct ndz_error e = { 0 };

	if (save(s, &e) != 0 && !s->said) {
		say(s, 0, "%s (tried again while the lab changes)", ndz_error_msg(&e));
		s->said = 1;
	}
}

void ndz_labsrv_prepare(struct ndz_labsrv *s, uint64_t now_ms, struct pollfd *p)
{
	size_t lost = ndz_lab_tick(s->lab, now_ms);

	if (lost)
		say(s, 1, "%zu node%s lost (silent past node-timeout, %u s); %s task%s pending",
		    lost, lost == 1 ? "" : "s", s->c->node_timeout, lost == 1 ? "its" : "their",
		    lost == 1 ? " stays" : "s stay");
	save_or_say(s);
	p[0] = (struct pollfd){ .fd = s->ufd, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = s->tfd, .events = POLLIN };
}

/* ---- nodes: UDP ---- */

static void tell_result(const struct ndz_labsrv *s, const uint8_t mac[6],
			const struct ndz_ctl_labreq *r, const char *task, const char *image)
{
	char m[18];

	ndz_labcall_format_mac(mac, m, sizeof(m));
	if (r->kind == NDZ_LAB_OK)
		say(s, 1, "node %s: %s %s: ok, %" PRIu64 " bytes in %" PRIu64 " ms, %" PRIu64
		    " chunks skipped", m, task, image, r->bytes, r->ms, r->skipped);
	else if (r->kind == NDZ_LAB_FAIL)
		say(s, 0, "node %s: %s %s: failed: %s", m, task, image, r->text);
	else
		say(s, 2, "node %s: %" PRIu64 " of %" PRIu64 " bytes", m, r->bytes, r->total);
}

int ndz_labsrv_udp(struct ndz_labsrv *s, int fd, const uint8_t *buf, size_t len,
		   const struct sockaddr_in *from, uint64_t now_ms)
{
	struct ndz_ctl_labreq r;
	struct ndz_ctl_labrep rep = { 0 };
	uint32_t addr = from->sin_addr.s_addr;
	int n;

	if (!ndz_ctl_is_lab(buf, len))
		return 0;
	/* ---- the per-host limit (begin): a flood from one address costs it its answers ---- */
	if (!ndz_hostlimit_ok(&s->limit, addr, now_ms * 1000000u)) {
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &from->sin_addr, a, sizeof(a));
		if (s->h.ms)
			ndz_master_counters(s->h.ms)->lab_rate_limited++;
		if (s->h.refused)
			s->h.refused("lab rate limit", a, "lab datagram over lab-host-rate (%u a "
				     "second, bursts of %u): dropped", s->c->lab_host_rate,
				     s->c->lab_host_burst);
		else
			say(s, 1, "refused: %s lab datagram over the lab rate limit: dropped", a);
		return 1;
	}
	/* ---- the per-host limit (end) ---- */
	n = ndz_ctl_lab_decode(buf, len, &r, NULL);
	rep.type = r.type;
	rep.id = r.id;
	if (n != 0) {
		char a[INET_ADDRSTRLEN];

		rep.status = NDZ_CTL_MALFORMED;
		refused(s, "malformed", inet_ntop(AF_INET, &from->sin_addr, a, sizeof(a)),
			"lab datagram of %zu bytes: malformed", len);
	} else if (r.type == NDZ_CTL_ADMIN || !ndz_mconf_may_connect(s->c, addr)) {
		char a[INET_ADDRSTRLEN], m[18];

		rep.status = NDZ_CTL_DENIED;
		inet_ntop(AF_INET, &from->sin_addr, a, sizeof(a));
		ndz_labcall_format_mac(r.mac, m, sizeof(m));
		if (r.type == NDZ_CTL_ADMIN)
			refused(s, "access denied", a, "admin request over UDP: access denied: admin "
				"requests come over the admin socket or admin-listen");
		else
			refused(s, "access denied", a, "lab %s of node %s: access denied: no allow or "
				"upload rule of any image covers it", r.type == NDZ_CTL_ASK ? "ask" :
				"report", m);
	} else if (r.type == NDZ_CTL_ASK) {
		struct ndz_lab_answer a;

		ndz_lab_ask(s->lab, r.mac, addr, now_ms, &a);
		rep.task = a.task;
		rep.opts = a.opts;
		rep.wait_ms = a.wait_ms;
		memcpy(rep.name, a.arg, sizeof(rep.name));
		if (a.task == NDZ_LAB_RELOAD || a.task == NDZ_LAB_CAPTURE) {
			char m[18];

			ndz_labcall_format_mac(r.mac, m, sizeof(m));
			say(s, 2, "node %s asks: %s %s", m, ndz_labcall_strtask(a.task), a.arg);
		}
	} else {
		struct ndz_lab_report rp = { .kind = r.kind, .bytes = r.bytes, .total = r.total,
					     .ms = r.ms, .skipped = r.skipped };
		char m[18], task[16] = "?", image[NDZ_CTL_NAME_MAX + 1] = "?";
		int i, rc;

		ndz_labcall_format_mac(r.mac, m, sizeof(m));
		if ((i = ndz_lab_find(s->lab, m)) >= 0) {    /* what it was, for the log */
			const struct ndz_lab_node *nd = ndz_lab_node(s->lab, (size_t)i);

			snprintf(task, sizeof(task), "%s", ndz_labcall_strtask(nd->task));
			snprintf(image, sizeof(image), "%s", nd->arg);
		}
		memcpy(rp.reason, r.text, sizeof(rp.reason));
		rc = ndz_lab_report(s->lab, r.mac, &rp, now_ms, ndz_wall_ns() / 1000000000u, NULL);
		if (rc < 0) {
			rep.status = rc == NDZ_EINVAL ? NDZ_CTL_MALFORMED : NDZ_CTL_NONODE;
		} else if (rc == 0) {       /* 1: the last result again, already told */
			const struct ndz_mconf_image *im = ndz_mconf_find(s->c, image);
			uint8_t uuid[16];
			uint32_t chunks;
			uint64_t src;

			/* the uuid of what the disk holds now, from the image's file */
			if (r.kind != NDZ_LAB_PROGRESS && im &&
			    ndz_images_identity(im->path, uuid, &chunks, &src, NULL) == 0)
				ndz_lab_disk_uuid(s->lab, r.mac, image, uuid);
			tell_result(s, r.mac, &r, task, image);
			save_or_say(s);
		}
	}
	n = ndz_ctl_labrep_encode(&rep, s->out, sizeof(s->out), NULL);
	if (n > 0)
		sendto(fd, s->out, (size_t)n, 0, (const struct sockaddr *)from, sizeof(*from));
	return 1;
}

/* ---- admins: unix socket or TCP ---- */

static unsigned status_for(int rc)
{
	switch (rc) {
	case 0: return NDZ_CTL_OK;
	case NDZ_ENOENT: return NDZ_CTL_NONODE;
	case NDZ_ENOIMAGE: return NDZ_CTL_UNKNOWN;
	case NDZ_ERANGE: return NDZ_CTL_TOO_MANY;
	case NDZ_EINVAL: return NDZ_CTL_MALFORMED;
	default: return NDZ_CTL_FAILED;
	}
}

static void images_json(const struct ndz_labsrv *s, int table, struct ndz_jbuf *j)
{
	if (table)
		ndz_jbuf_printf(j, "%-24s  %14s  %s\n", "IMAGE", "BYTES", "PATH");
	else
		ndz_jbuf_printf(j, "{\"images\":[");
	for (size_t k = 0; k < s->c->nimages; k++) {
		const struct ndz_mconf_image *im = &s->c->images[k];
		struct stat st;

		if (table) {
			ndz_jbuf_printf(j, "%-24s  %14lld  %s\n", im->name, stat(im->path, &st) == 0 ?
					(long long)st.st_size : -1LL, im->path);
			continue;
		}
		ndz_jbuf_printf(j, "%s{\"name\":", k ? "," : "");
		ndz_jbuf_string(j, im->name);
		ndz_jbuf_printf(j, ",\"path\":");
		ndz_jbuf_string(j, im->path);
		ndz_jbuf_printf(j, ",\"bytes\":%lld}", stat(im->path, &st) == 0 ?
				(long long)st.st_size : -1LL);
	}
	if (!table)
		ndz_jbuf_printf(j, "]}");
}

/* Do what r asks; the reply's text (JSON or a message) into j; returns a library code. */
static int admin_do(struct ndz_labsrv *s, const struct ndz_ctl_labreq *r, const char *mjson,
		    size_t mlen, uint64_t now_ms,
		    struct ndz_jbuf *j, struct ndz_error *e)
{
	uint8_t mac[6], macs[NDZ_LAB_NODES][6];
	int n;

	switch (r->op) {
	case NDZ_CTL_OP_NODE_ADD:
		if ((n = ndz_labcall_parse_mac(r->args[0], mac, e)) ||
		    (n = ndz_lab_node_add(s->lab, mac, r->args[1], r->args[2], e)))
			return n;
		ndz_jbuf_printf(j, "node %s added", r->args[0]);
		return 0;
	case NDZ_CTL_OP_NODE_LIST:
		if (r->flags & NDZ_CTL_FLAG_TABLE)
			ndz_lab_table(s->lab, now_ms, j);
		else
			ndz_lab_json(s->lab, now_ms, 0, j);
		if (s->h.sites)                /* a parent: its sites' nodes too */
			s->h.sites(s->h.ctx, (r->flags & NDZ_CTL_FLAG_TABLE) != 0, j);
		return 0;
	case NDZ_CTL_OP_NODE_REMOVE:
		if ((n = ndz_lab_node_remove(s->lab, r->args[0], e)))
			return n;
		ndz_jbuf_printf(j, "node %s removed", r->args[0]);
		return 0;
	case NDZ_CTL_OP_RELOAD:
		/* a site master fetches what it does not hold (doc/SITES.md) */
		if (!ndz_mconf_find(s->c, r->args[1]) && !s->c->parent && !s->c->store)
			return ndz_error_set(e, NDZ_ENOIMAGE, 0, "image '%s': no such image",
					     r->args[1]);
		/* fall through */
	case NDZ_CTL_OP_CAPTURE:
	case NDZ_CTL_OP_CANCEL: {
		uint8_t task = r->op == NDZ_CTL_OP_RELOAD ? NDZ_LAB_RELOAD :
			       r->op == NDZ_CTL_OP_CAPTURE ? NDZ_LAB_CAPTURE : NDZ_LAB_NONE;
		int woke = 0;

		if ((n = ndz_lab_task(s->lab, r->args[0], task, r->args[1],
				      task == NDZ_LAB_RELOAD ? r->flags & (NDZ_LAB_OPTS | NDZ_LAB_FULL) : 0,
				      macs,
				      NDZ_LAB_NODES, e)) == NDZ_ENOENT && s->h.forward) {
			struct ndz_error why = { 0 };  /* a node of a site: its master does it */

			if (s->h.forward(s->h.ctx, r, j, &why) == 0) {
				ndz_error_clear(e);
				return 0;
			}
		}
		if (n < 0)
			return n;
		ndz_jbuf_printf(j, "%s%s%s: %d node%s", task ? ndz_labcall_strtask(task) : "cancel",
				task ? " " : "", task ? r->args[1] : "", n, n == 1 ? "" : "s");
		if (task == NDZ_LAB_RELOAD) {  /* those that seed because of what their disk holds */
			int seeded = 0;

			for (int k = 0; k < n && k < NDZ_LAB_NODES; k++) {
				char m[18];
				int i;

				ndz_labcall_format_mac(macs[k], m, sizeof(m));
				i = ndz_lab_find(s->lab, m);
				seeded += i >= 0 && ndz_lab_node(s->lab, (size_t)i)->why ==
					  NDZ_LAB_WHY_LINEAGE;
			}
			if (seeded)
				ndz_jbuf_printf(j, " (%d seeded: %s the image's lineage)", seeded,
						seeded == 1 ? "its disk holds" : "their disks hold");
		}
		if ((r->flags & NDZ_CTL_FLAG_WAKE) && task != NDZ_LAB_NONE) {
			struct ndz_error we = { 0 };

			woke = ndz_wol_send(s->c->wake_iface, (const uint8_t(*)[6])macs, (size_t)n, 0,
					    &we);
			if (woke < 0)
				ndz_jbuf_printf(j, "; %s", ndz_error_msg(&we));
			else
				ndz_jbuf_printf(j, ", %d woken", woke);
		}
		say(s, 1, "admin: %s %s %s: %d node%s", task ? ndz_labcall_strtask(task) : "cancel",
		    r->args[0], r->args[1], n, n == 1 ? "" : "s");
		return 0;
	}
	case NDZ_CTL_OP_STATUS: {
		size_t len;

		if (r->flags & NDZ_CTL_FLAG_TABLE) {
			ndz_lab_table(s->lab, now_ms, j);
			return 0;
		}
		ndz_jbuf_printf(j, "{\"lab\":");
		ndz_lab_json(s->lab, now_ms, 0, j);
		ndz_jbuf_printf(j, ",\"master\":");
		len = mlen;
		if (!mjson || len == 0 || j->over || len + 2 >= j->cap - j->len) {
			ndz_jbuf_printf(j, "{}}");
			return 0;
		}
		memcpy(j->p + j->len, mjson, len);
		j->len += len;
		j->p[j->len] = 0;
		ndz_jbuf_printf(j, "}");
		return 0;
	}
	case NDZ_CTL_OP_IMAGES:
		images_json(s, (r->flags & NDZ_CTL_FLAG_TABLE) != 0, j);
		return 0;
	/* ---- images info, remove, rename (begin) ---- */
	case NDZ_CTL_OP_IMAGE_INFO:
	case NDZ_CTL_OP_IMAGE_REMOVE:
	case NDZ_CTL_OP_IMAGE_RENAME: {
		struct ndz_images_ctx x = { s->c, s->h.ms, s->lab, s->h.reload, s->h.ctx };
		int force = (r->flags & NDZ_CTL_FLAG_FORCE) != 0;

		if (r->op == NDZ_CTL_OP_IMAGE_INFO)
			return ndz_images_info(&x, r->args[0], (r->flags & NDZ_CTL_FLAG_TABLE) != 0,
					       j, e);
		n = r->op == NDZ_CTL_OP_IMAGE_REMOVE ?
		    ndz_images_remove(&x, r->args[0], force, j, e) :
		    ndz_images_rename(&x, r->args[0], r->args[1], force, j, e);
		if (n == 0)
			say(s, 1, "admin: %s", j->p);
		return n;
	}
	/* ---- images info, remove, rename (end) ---- */
	default:
		return ndz_error_set(e, NDZ_EINVAL, 0, "admin: unknown operation %u", r->op);
	}
}

/* Does r change the lab (0: no, 1: its tasks, 2: image files, and tasks with them)? */
static int changes(const struct ndz_ctl_labreq *r)
{
	switch (r->op) {
	case NDZ_CTL_OP_NODE_ADD:
	case NDZ_CTL_OP_NODE_REMOVE:
	case NDZ_CTL_OP_RELOAD:
	case NDZ_CTL_OP_CAPTURE:
	case NDZ_CTL_OP_CANCEL:
		return 1;
	case NDZ_CTL_OP_IMAGE_REMOVE:
	case NDZ_CTL_OP_IMAGE_RENAME:
		return 2;
	default:
		return 0;
	}
}

/*
 * Before a change: the lab as it is, to undo the change when it cannot be saved.
 * An image's files cannot be put back, so before one of those the state must be
 * writable now. 0, or the refusal in e.
 */
static int admin_change(struct ndz_labsrv *s, const struct ndz_ctl_labreq *r,
			struct ndz_error *e)
{
	int rc;

	if (!changes(r))
		return 0;
	ndz_lab_copy(s->undo, s->lab);
	if (changes(r) == 2 && (rc = ndz_lab_save(s->lab, s->state_path, e)) != 0) {
		say(s, 0, "admin: refused: %s", ndz_error_msg(e));
		ndz_error_prefix(e, "lab state %s cannot be saved, nothing changed",
				 s->state_path);
		return NDZ_EIO;
	}
	return 0;
}

/* After a change: saved, or undone and refused (the lab as before, e says why). */
static int admin_saved(struct ndz_labsrv *s, const struct ndz_ctl_labreq *r,
		       struct ndz_error *e)
{
	struct ndz_error why = { 0 };

	if (!changes(r) || save(s, &why) == 0)
		return 0;
	say(s, 0, "admin: refused, the lab state cannot be saved: %s", ndz_error_msg(&why));
	if (changes(r) == 1) {
		ndz_lab_copy(s->lab, s->undo);
		return ndz_error_set(e, NDZ_EIO, why.sys, "lab state %s cannot be saved, the "
				     "change was not made: %s", s->state_path, ndz_error_msg(&why));
	}
	return ndz_error_set(e, NDZ_EIO, why.sys, "lab state %s cannot be saved (the image's "
			     "files did change): %s", s->state_path, ndz_error_msg(&why));
}

/*
 * An admin request from by ("admin socket", "admin-listen ADDR", "http ADDR"), the
 * one path of ndzctl's and the page's: the lab kept to undo, the request done, the
 * change saved or undone; its text into j. A library code.
 */
static int admin_run(struct ndz_labsrv *s, const struct ndz_ctl_labreq *r, const char *mjson,
		     size_t mlen, const char *by, struct ndz_jbuf *j, struct ndz_error *e)
{
	int n;

	ndz_lab_origin(s->lab, (uint64_t)time(NULL), by);
	n = admin_change(s, r, e);
	if (n == 0)
		n = admin_do(s, r, mjson, mlen, ndz_now_ms(), j, e);
	if (n == 0)
		n = admin_saved(s, r, e);
	ndz_lab_origin(s->lab, 0, NULL);
	save_or_say(s);
	return n;
}

/* One admin connection: its own thread when the hooks give a lock, else inline. */
struct conn {
	struct ndz_labsrv *s;          /* touched only under lock: it may be gone before */
	struct ndz_mlock *lock;
	int fd, tcp;
	size_t (*status_json)(void *ctx, char *buf, size_t cap);  /* s's, copied */
	void *ctx;
	char token[NDZ_CTL_TOKEN_MAX + 1];  /* s's, copied */
};

/*
 * A STATUS request's master part, asked before the lock is taken (the hook waits on
 * the sessions' sockets). NULL when r is no such request, or no memory.
 */
static char *master_json(const struct conn *c, const uint8_t *in, size_t len, size_t *out)
{
	struct ndz_ctl_labreq r;
	char *buf;

	*out = 0;
	if (!c->status_json || ndz_ctl_lab_decode(in, len, &r, NULL) != 0 ||
	    r.type != NDZ_CTL_ADMIN || r.op != NDZ_CTL_OP_STATUS || (r.flags & NDZ_CTL_FLAG_TABLE) ||
	    !(buf = malloc(NDZ_CTL_TEXT_BIG + 1)))
		return NULL;
	*out = c->status_json(c->ctx, buf, NDZ_CTL_TEXT_BIG + 1);
	return buf;
}

static void *serve_conn(void *arg)
{
	struct conn *c = arg;
	struct ndz_labsrv *s = c->s;
	uint64_t end = ndz_now_ms() + ADMIN_WAIT_MS;
	uint8_t in[NDZ_CTL_LAB_MAX], *out = malloc(NDZ_CTL_LABREP_MAX);
	char *text = malloc(NDZ_CTL_TEXT_BIG + 1);
	struct ndz_ctl_labreq r;
	struct ndz_ctl_labrep rep = { 0 };
	struct ndz_error e = { 0 };
	struct ndz_jbuf j;
	char *mjson = NULL;
	size_t mlen = 0;
	int need = -1, n, heard;

	/* the request is read without the lock: a slow peer holds only this thread */
	heard = out && text && ndz_labcall_read_by(c->fd, in, NDZ_CTL_REQ_HDR, end) == 0 &&
		(need = ndz_ctl_lab_need(in, NDZ_CTL_REQ_HDR, 0, NULL)) > 0 &&
		(size_t)need <= sizeof(in) &&
		ndz_labcall_read_by(c->fd, in + NDZ_CTL_REQ_HDR, (size_t)need - NDZ_CTL_REQ_HDR, end) == 0;
	if (heard && c->tcp == 0)      /* TCP: not before its token is checked */
		mjson = master_json(c, in, (size_t)need, &mlen);
	if (heard && c->tcp == 1 && ndz_ctl_lab_decode(in, (size_t)need, &r, NULL) == 0 &&
	    r.type == NDZ_CTL_ADMIN && sodium_memcmp(r.token, c->token, NDZ_CTL_TOKEN_MAX) == 0)
		mjson = master_json(c, in, (size_t)need, &mlen);
	if (c->lock)
		ndz_mlock_take(c->lock);
	s->threads[c->tcp]--;
	if (!heard)
		goto out;
	ndz_jbuf_init(&j, text, NDZ_CTL_TEXT_BIG + 1);
	if (ndz_ctl_lab_decode(in, (size_t)need, &r, &e) != 0 || r.type != NDZ_CTL_ADMIN) {
		rep.status = NDZ_CTL_MALFORMED;
		ndz_jbuf_printf(&j, "%s", r.type == NDZ_CTL_ADMIN ? ndz_error_msg(&e) :
				"not an admin request");
	} else if (c->tcp && sodium_memcmp(r.token, s->token, NDZ_CTL_TOKEN_MAX) != 0) {
		rep.status = NDZ_CTL_DENIED;
		struct sockaddr_in peer = { 0 };
		socklen_t pl = sizeof(peer);
		char a[INET_ADDRSTRLEN] = "?";

		if (getpeername(c->fd, (struct sockaddr *)&peer, &pl) == 0 &&
		    peer.sin_family == AF_INET)
			inet_ntop(AF_INET, &peer.sin_addr, a, sizeof(a));
		ndz_jbuf_printf(&j, "admin token does not match");
		refused(s, "admin token", a, "admin request over TCP (admin-listen): access "
			"denied: the token does not match token-file's");
	} else {
		struct sockaddr_in peer = { 0 };
		socklen_t pl = sizeof(peer);
		char by[NDZ_LAB_BY_MAX + 1] = "admin socket", a[INET_ADDRSTRLEN];

		if (c->tcp && getpeername(c->fd, (struct sockaddr *)&peer, &pl) == 0 &&
		    peer.sin_family == AF_INET)
			snprintf(by, sizeof(by), "admin-listen %s",
				 inet_ntop(AF_INET, &peer.sin_addr, a, sizeof(a)));
		n = admin_run(s, &r, mjson, mlen, by, &j, &e);
		rep.status = (uint16_t)status_for(n);
		if (n < 0) {
			ndz_jbuf_init(&j, text, NDZ_CTL_TEXT_BIG + 1);
			ndz_jbuf_printf(&j, "%s", ndz_error_msg(&e));
		}
	}
	rep.type = NDZ_CTL_ADMIN;
	rep.id = r.id;
	rep.text = text;
	rep.text_len = j.len;
	n = ndz_ctl_labrep_encode(&rep, out, NDZ_CTL_LABREP_MAX, NULL);
	if (c->lock)
		ndz_mlock_give(c->lock);
	if (n > 0)
		ndz_labcall_write_by(c->fd, out, (size_t)n, ndz_now_ms() + ADMIN_WAIT_MS);
	goto done;
out:
	if (c->lock)
		ndz_mlock_give(c->lock);
done:
	close(c->fd);
	free(mjson);
	free(out);
	free(text);
	free(c);
	return NULL;
}

static void accept_one(struct ndz_labsrv *s, int lfd, int tcp)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct conn *c;
	pthread_attr_t at;
	pthread_t t;

	if (fd < 0)
		return;
	if (s->threads[tcp] >= ADMIN_CONNS || !(c = malloc(sizeof(*c)))) {
		close(fd);             /* more are waiting to be heard than an admin needs */
		return;
	}
	*c = (struct conn){ s, s->h.lock, fd, tcp, s->h.status_json, s->h.ctx, { 0 } };
	memcpy(c->token, s->token, sizeof(c->token));
	s->threads[tcp]++;
	if (!s->h.lock) {
		serve_conn(c);
		return;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, serve_conn, c) != 0) {
		s->threads[tcp]--;
		close(fd);
		free(c);
	}
	pthread_attr_destroy(&at);
}

void ndz_labsrv_serve(struct ndz_labsrv *s, const struct pollfd *p, uint64_t now_ms)
{
	(void)now_ms;
	if (p[0].fd >= 0 && (p[0].revents & POLLIN))
		accept_one(s, s->ufd, 0);
	if (p[1].fd >= 0 && (p[1].revents & POLLIN))
		accept_one(s, s->tfd, 1);
}

/* The HTTP status's "lab" section (called under the master's lock). */
static size_t http_json(void *ctx, char *buf, size_t cap)
{
	struct ndz_labsrv *s = ctx;
	struct ndz_jbuf j;

	/* with each node's history; a lab too large for that without it */
	for (size_t hist = NDZ_LAB_HISTORY;; hist = 0) {
		ndz_jbuf_init(&j, buf, cap);
		ndz_lab_json(s->lab, ndz_now_ms(), hist, &j);
		if (!j.over || !hist)
			break;
	}
	return j.over ? 0 : j.len;
}

/* ---- network boot over HTTP: the iPXE scripts and the boot environment's files ---- */

void ndz_labsrv_set_ctl(struct ndz_labsrv *s, int fd)
{
	socklen_t l = sizeof(s->ctl);

	if (getsockname(fd, (struct sockaddr *)&s->ctl, &l) != 0 || s->ctl.sin_family != AF_INET)
		memset(&s->ctl, 0, sizeof(s->ctl));
}

/*
 * GET /boot.ipxe and /boot/MAC (under the master's lock). Only a peek: the node's
 * environment asks once booted, and that ask is what starts its task.
 */
static int http_boot(void *ctx, const char *path, const struct ndz_http_conn *c,
		     struct ndz_http_reply *r, struct ndz_error *e)
{
	struct ndz_labsrv *s = ctx;
	const struct ndz_mconf *conf = s->c;
	struct ndz_lab_answer a;
	struct ndz_pxe_where w;
	char peer[16], here[16], master[32], url[NDZ_PXE_URL_MAX + 1], m[18];
	uint16_t port = s->ctl.sin_port ? ntohs(s->ctl.sin_port) : NDZ_CTL_PORT;
	uint8_t mac[6];
	int i, n;

	ndz_net_ntoa(c->peer.sin_addr.s_addr, peer);
	if (strcmp(path, "/boot.ipxe") == 0) {
		const char *g = ndz_pxe_generic();

		r->len = strlen(g);
		memcpy(r->body, g, r->len);
		say(s, 1, "pxe: %s: the generic boot script", peer);
		return 0;
	}
	if (strncmp(path, "/boot/", 6) != 0)
		return ndz_error_set(e, NDZ_ENOENT, 0, "not found");
	if (ndz_labcall_parse_mac(path + 6, mac, e) != 0) {
		refused(s, "pxe", peer, "pxe: GET %.80s: not a MAC address", path);
		return NDZ_EINVAL;
	}
	ndz_labcall_format_mac(mac, m, sizeof(m));
	if (!c->local.sin_addr.s_addr)
		return ndz_error_set(e, NDZ_EIO, 0, "boot script of %s: the connection's own "
				     "address is unknown", m);
	/* the master as the node reached it (the control socket's own address if it has
	 * one), with the control port when it is not the default */
	ndz_net_ntoa(s->ctl.sin_addr.s_addr ? s->ctl.sin_addr.s_addr : c->local.sin_addr.s_addr,
		     here);
	snprintf(master, sizeof(master), port == NDZ_CTL_PORT ? "%s" : "%s:%u", here,
		 (unsigned)port);
	if (conf->pxe_url)
		snprintf(url, sizeof(url), "%s", conf->pxe_url);
	else
		snprintf(url, sizeof(url), "http://%s:%u/pxe",
			 ndz_net_ntoa(c->local.sin_addr.s_addr, here), ntohs(c->local.sin_port));
	w = (struct ndz_pxe_where){ url, master, conf->pxe_args, conf->pxe_local };
	i = ndz_lab_peek(s->lab, mac, &a);
	n = ndz_pxe_script(mac, &a, i >= 0 ? ndz_lab_node(s->lab, (size_t)i) : NULL, &w, r->body,
			   r->cap, e);
	if (n < 0) {                   /* ours, not the node's: 500 */
		say(s, 0, "pxe: %s", ndz_error_msg(e));
		return NDZ_EIO;
	}
	r->len = (size_t)n;
	if (a.task == NDZ_LAB_RELOAD || a.task == NDZ_LAB_CAPTURE)
		say(s, 1, "pxe: node %s at %s: boot script: the boot environment (%s %s)", m, peer,
		    ndz_pxe_why(&a, NULL), a.arg);
	else
		say(s, 1, "pxe: node %s at %s: boot script: the local disk (%s)", m, peer,
		    ndz_pxe_why(&a, i >= 0 ? ndz_lab_node(s->lab, (size_t)i) : NULL));
	return 0;
}

/* GET /pxe/FILE: a file of the pxe-dir, streamed; anything else is 404 (and told). */
static int http_file(void *ctx, const char *path, const struct ndz_http_conn *c,
		     struct ndz_http_reply *r, struct ndz_error *e)
{
	struct ndz_labsrv *s = ctx;
	struct ndz_error why = { 0 };
	char peer[16];
	int fd;

	ndz_net_ntoa(c->peer.sin_addr.s_addr, peer);
	if (!s->c->pxe_dir)
		ndz_error_set(&why, NDZ_ENOENT, 0, "no pxe-dir in the configuration");
	fd = s->c->pxe_dir ? ndz_pxe_open(s->c->pxe_dir, path + 5, &r->size, &why) : -1;
	if (fd < 0) {
		refused(s, "pxe", peer, "pxe: GET %.80s: %s", path, ndz_error_msg(&why));
		return ndz_error_set(e, NDZ_ENOENT, 0, "not found");
	}
	r->fd = fd;
	say(s, 2, "pxe: %s: %s, %llu bytes", peer, path, (unsigned long long)r->size);
	return 0;
}

/* ---- the page's actions: POST /lab (doc/HTTP.md) ---- */

/* The fields a POST /lab body may have. */
struct jreq {
	char op[24], node[NDZ_CTL_NAME_MAX + 1], mac[24], name[NDZ_CTL_NAME_MAX + 1];
	char group[NDZ_CTL_NAME_MAX + 1], image[NDZ_CTL_NAME_MAX + 1];
	char to[NDZ_CTL_NAME_MAX + 1];
	uint8_t opts;
	int wake, force;
};

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* A JSON string at p (after its '"') into dst (cap bytes): past its closing quote, or NULL. */
static const char *jstring(const char *p, char *dst, size_t cap)
{
	size_t n = 0;

	for (; *p && *p != '"'; p++) {
		char c = *p;

		if ((unsigned char)c < 0x20)
			return NULL;
		if (c == '\\') {
			switch (*++p) {
			case '"': case '\\': case '/': c = *p; break;
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			default: return NULL;   /* names need no more */
			}
		}
		if (n + 1 >= cap)
			return NULL;
		dst[n++] = c;
	}
	if (*p != '"')
		return NULL;
	dst[n] = 0;
	return p + 1;
}

/* Body into q: one flat object of the known keys; 0, or NDZ_EINVAL with e saying why. */
static int jparse(const char *body, struct jreq *q, struct ndz_error *e)
{
	/* "full" is the admin's flag NDZ_LAB_FULL (0x10), not a node's option */
	static const char *const optn[] = { "seed", "zero", "verify", "", "full" };
	const char *p = skip_ws(body);
	char key[16], val[NDZ_CTL_NAME_MAX + 1];

	memset(q, 0, sizeof(*q));
	if (*p++ != '{')
		return ndz_error_set(e, NDZ_EINVAL, 0, "the body is no JSON object");
	p = skip_ws(p);
	while (*p == '"') {
		struct { const char *k; char *dst; size_t cap; } strs[] = {
			{ "op", q->op, sizeof(q->op) }, { "node", q->node, sizeof(q->node) },
			{ "target", q->node, sizeof(q->node) }, { "mac", q->mac, sizeof(q->mac) },
			{ "name", q->name, sizeof(q->name) }, { "group", q->group, sizeof(q->group) },
			{ "image", q->image, sizeof(q->image) }, { "to", q->to, sizeof(q->to) },
		};
		size_t k;

		if (!(p = jstring(p + 1, key, sizeof(key))) || *(p = skip_ws(p)) != ':')
			return ndz_error_set(e, NDZ_EINVAL, 0, "a bad key in the body");
		p = skip_ws(p + 1);
		for (k = 0; k < sizeof(strs) / sizeof(strs[0]) && strcmp(key, strs[k].k); k++)
			;
		if (k < sizeof(strs) / sizeof(strs[0])) {
			if (*p != '"' || !(p = jstring(p + 1, strs[k].dst, strs[k].cap)))
				return ndz_error_set(e, NDZ_EINVAL, 0, "\"%s\": a string of at most "
						     "%zu bytes", key, strs[k].cap - 1);
		} else if (!strcmp(key, "wake") || !strcmp(key, "force")) {
			int v = strncmp(p, "true", 4) == 0;

			if (!v && strncmp(p, "false", 5) != 0)
				return ndz_error_set(e, NDZ_EINVAL, 0, "\"%s\": true or false", key);
			*(key[0] == 'w' ? &q->wake : &q->force) = v;
			p += v ? 4 : 5;
		} else if (!strcmp(key, "opts")) {
			if (*p != '[')
				return ndz_error_set(e, NDZ_EINVAL, 0, "\"opts\": a list");
			for (p = skip_ws(p + 1); *p == '"';) {
				int b;

				if (!(p = jstring(p + 1, val, sizeof(val))))
					return ndz_error_set(e, NDZ_EINVAL, 0, "\"opts\": bad");
				for (b = 0; b < 5 && (!val[0] || strcmp(val, optn[b])); b++)
					;
				if (b == 5)
					return ndz_error_set(e, NDZ_EINVAL, 0, "option '%s': seed, zero, "
							     "verify or full", val);
				q->opts |= (uint8_t)(1u << b);
				p = skip_ws(p);
				if (*p == ',')
					p = skip_ws(p + 1);
			}
			if (*p++ != ']')
				return ndz_error_set(e, NDZ_EINVAL, 0, "\"opts\": a list of strings");
		} else {
			return ndz_error_set(e, NDZ_EINVAL, 0, "unknown key \"%s\"", key);
		}
		p = skip_ws(p);
		if (*p == ',')
			p = skip_ws(p + 1);
	}
	if (*p++ != '}' || *skip_ws(p))
		return ndz_error_set(e, NDZ_EINVAL, 0, "the body is no flat JSON object");
	return 0;
}

/* A node, or the nodes of a group: their MACs into macs; how many, or NDZ_ENOENT. */
static int target_macs(const struct ndz_labsrv *s, const char *target, uint8_t (*macs)[6],
		       struct ndz_error *e)
{
	int i = ndz_lab_find(s->lab, target), n = 0;

	if (i >= 0) {
		memcpy(macs[0], ndz_lab_node(s->lab, (size_t)i)->mac, 6);
		return 1;
	}
	for (size_t k = 0; k < NDZ_LAB_NODES; k++) {
		const struct ndz_lab_node *nd = ndz_lab_node(s->lab, k);

		if (nd->used && target[0] && strcmp(nd->group, target) == 0)
			memcpy(macs[n++], nd->mac, 6);
	}
	return n ? n : ndz_error_set(e, NDZ_ENOENT, 0, "'%s': no such node or group", target);
}

/* POST /lab: the body's op done as ndzctl's (admin_run), the answer as JSON. */
static int http_post(void *ctx, const char *body, size_t len, const char *by, char *out,
		     size_t cap, struct ndz_error *e)
{
	static const struct { const char *name; uint8_t op; } ops[] = {
		{ "node-add", NDZ_CTL_OP_NODE_ADD }, { "node-remove", NDZ_CTL_OP_NODE_REMOVE },
		{ "reload", NDZ_CTL_OP_RELOAD }, { "capture", NDZ_CTL_OP_CAPTURE },
		{ "cancel", NDZ_CTL_OP_CANCEL }, { "image-info", NDZ_CTL_OP_IMAGE_INFO },
		{ "image-remove", NDZ_CTL_OP_IMAGE_REMOVE },
		{ "image-rename", NDZ_CTL_OP_IMAGE_RENAME },
	};
	struct ndz_labsrv *s = ctx;
	struct ndz_ctl_labreq r = { .type = NDZ_CTL_ADMIN };
	struct jreq q;
	struct ndz_jbuf j, o;
	char *text;
	size_t k;
	int n;

	(void)len;
	if ((n = jparse(body, &q, e)) != 0)
		return n;
	ndz_jbuf_init(&o, out, cap);
	if (strcmp(q.op, "wake") == 0) {      /* Wake-on-LAN alone: no task set */
		uint8_t (*macs)[6] = malloc(NDZ_LAB_NODES * sizeof(*macs));

		if (!macs)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "wake: out of memory");
		if ((n = target_macs(s, q.node, macs, e)) > 0)
			n = ndz_wol_send(s->c->wake_iface, (const uint8_t(*)[6])macs, (size_t)n, 0, e);
		free(macs);
		if (n < 0)
			return n;
		say(s, 1, "%s: wake %s: %d woken", by, q.node, n);
		ndz_jbuf_printf(&o, "{\"ok\": true, \"text\": \"wake %s: %d woken\", \"woken\": %d}",
				q.node, n, n);
		return 0;
	}
	for (k = 0; k < sizeof(ops) / sizeof(ops[0]) && strcmp(q.op, ops[k].name); k++)
		;
	if (k == sizeof(ops) / sizeof(ops[0]))
		return ndz_error_set(e, NDZ_EINVAL, 0, "\"op\": '%s' is none of node-add, "
				     "node-remove, reload, capture, cancel, wake, image-info, "
				     "image-remove, image-rename", q.op);
	r.op = ops[k].op;
	switch (r.op) {
	case NDZ_CTL_OP_NODE_ADD:
		snprintf(r.args[0], sizeof(r.args[0]), "%s", q.mac);
		snprintf(r.args[1], sizeof(r.args[1]), "%s", q.name);
		snprintf(r.args[2], sizeof(r.args[2]), "%s", q.group);
		break;
	case NDZ_CTL_OP_IMAGE_INFO:
	case NDZ_CTL_OP_IMAGE_REMOVE:
	case NDZ_CTL_OP_IMAGE_RENAME:
		snprintf(r.args[0], sizeof(r.args[0]), "%s", q.image);
		snprintf(r.args[1], sizeof(r.args[1]), "%s", q.to);
		r.flags = q.force ? NDZ_CTL_FLAG_FORCE : 0;
		break;
	default:
		snprintf(r.args[0], sizeof(r.args[0]), "%s", q.node);
		snprintf(r.args[1], sizeof(r.args[1]), "%s", q.image);
		r.flags = (uint8_t)(q.opts | (q.wake ? NDZ_CTL_FLAG_WAKE : 0));
	}
	if (!r.args[0][0])
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: \"%s\" is needed", q.op,
				     r.op == NDZ_CTL_OP_NODE_ADD ? "mac" : r.op >= NDZ_CTL_OP_IMAGE_INFO ?
				     "image" : "node");
	if (!(text = malloc(NDZ_CTL_TEXT_BIG + 1)))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "lab: out of memory");
	ndz_jbuf_init(&j, text, NDZ_CTL_TEXT_BIG + 1);
	if ((n = admin_run(s, &r, NULL, 0, by, &j, e)) == 0) {
		say(s, 1, "%s: %s %s: %s", by, q.op, r.args[0], text);
		if (r.op == NDZ_CTL_OP_IMAGE_INFO) {
			ndz_jbuf_printf(&o, "{\"ok\": true, \"info\": ");
			if (o.len + j.len + 2 < cap) {
				memcpy(out + o.len, text, j.len);
				o.len += j.len;
				out[o.len] = 0;
			} else {
				o.over = 1;
			}
			ndz_jbuf_printf(&o, "}");
		} else {
			ndz_jbuf_printf(&o, "{\"ok\": true, \"text\": ");
			ndz_jbuf_string(&o, text);
			ndz_jbuf_printf(&o, "}");
		}
		if (o.over)
			n = ndz_error_set(e, NDZ_ERANGE, 0, "%s: the answer does not fit", q.op);
	}
	free(text);
	return n;
}

/* /metrics: the lab's nodes by state, its results, the reloads' durations. */
static size_t http_metrics(void *ctx, char *buf, size_t cap)
{
	struct ndz_labsrv *s = ctx;
	const struct ndz_lab_stats *st = ndz_lab_stats(s->lab);
	uint64_t by_state[6] = { 0 };  /* idle, pending, running, lost, failed; waiting */
	static const char *const tasks[] = { "reload", "capture" }, *const res[] = { "failed", "ok" };
	struct ndz_jbuf j;

	for (size_t k = 0; k < NDZ_LAB_NODES; k++) {
		const struct ndz_lab_node *n = ndz_lab_node(s->lab, k);

		if (!n->used)
			continue;
		if (n->state == NDZ_LAB_PENDING && n->asked_ms && !n->go &&
		    n->task == NDZ_LAB_RELOAD)
			by_state[5]++;
		else if (n->state < 5)
			by_state[n->state]++;
	}
	ndz_jbuf_init(&j, buf, cap);
	ndz_jbuf_printf(&j, "# HELP ndz_lab_nodes Lab nodes by state (waiting: a reload's node "
			"that asked, waiting for its group).\n# TYPE ndz_lab_nodes gauge\n");
	for (unsigned k = 0; k < 6; k++)
		ndz_jbuf_printf(&j, "ndz_lab_nodes{state=\"%s\"} %" PRIu64 "\n",
				k < 5 ? ndz_lab_strstate(k) : "waiting", by_state[k]);
	for (int t = 0; t < 2; t++) {
		ndz_jbuf_printf(&j, "# HELP ndz_lab_%ss_total Lab %ss the nodes reported, by "
				"result.\n# TYPE ndz_lab_%ss_total counter\n", tasks[t], tasks[t],
				tasks[t]);
		for (int o = 1; o >= 0; o--)
			ndz_jbuf_printf(&j, "ndz_lab_%ss_total{result=\"%s\"} %" PRIu64 "\n",
					tasks[t], res[o], st->results[t][o]);
	}
	ndz_jbuf_printf(&j, "# HELP ndz_lab_reload_duration_seconds How long the lab's "
			"successful reloads took (the node's own figure).\n"
			"# TYPE ndz_lab_reload_duration_seconds histogram\n");
	for (int b = 0; b < NDZ_LAB_BUCKETS; b++)
		ndz_jbuf_printf(&j, "ndz_lab_reload_duration_seconds_bucket{le=\"%" PRIu64 "\"} %"
				PRIu64 "\n", ndz_lab_bucket_s[b], st->reload_le[b]);
	ndz_jbuf_printf(&j, "ndz_lab_reload_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
			"ndz_lab_reload_duration_seconds_sum %" PRIu64 ".%03u\n"
			"ndz_lab_reload_duration_seconds_count %" PRIu64 "\n", st->reload_count,
			st->reload_ms_sum / 1000, (unsigned)(st->reload_ms_sum % 1000),
			st->reload_count);
	return j.over ? 0 : j.len;
}

/* GET /image/NAME: the image's facts as ndzctl images info gives them (JSON). */
static int http_image(void *ctx, const char *path, const struct ndz_http_conn *c,
		      struct ndz_http_reply *r, struct ndz_error *e)
{
	struct ndz_labsrv *s = ctx;
	struct ndz_images_ctx x = { s->c, s->h.ms, s->lab, NULL, NULL };
	struct ndz_jbuf j;
	int rc;

	(void)c;
	ndz_jbuf_init(&j, r->body, r->cap);
	if ((rc = ndz_images_info(&x, path + strlen("/image/"), 0, &j, e)) != 0)
		return rc;
	if (j.over)
		return ndz_error_set(e, NDZ_ERANGE, 0, "image %s: the answer does not fit",
				     path + strlen("/image/"));
	r->len = j.len;
	r->type = "application/json";
	return 0;
}

const struct ndz_http_ext *ndz_labsrv_http(struct ndz_labsrv *s)
{
	s->http[0] = (struct ndz_http_ext){ .name = "lab", .ctx = s, .json = http_json,
					    .post = http_post, .metrics = http_metrics };
	s->http[1] = (struct ndz_http_ext){ .name = "boot", .ctx = s, .prefix = "/boot",
					    .get = http_boot };
	s->http[2] = (struct ndz_http_ext){ .name = "pxe", .ctx = s, .prefix = "/pxe/",
					    .get = http_file };
	s->http[3] = (struct ndz_http_ext){ .name = "image", .ctx = s, .prefix = "/image/",
					    .get = http_image };
	return s->http;
}

void ndz_labsrv_nodes(struct ndz_labsrv *s, int table, struct ndz_jbuf *j)
{
	if (table)
		ndz_lab_table(s->lab, ndz_now_ms(), j);
	else
		ndz_lab_json(s->lab, ndz_now_ms(), 0, j);
}

int ndz_labsrv_admin(struct ndz_labsrv *s, const struct ndz_ctl_labreq *r, struct ndz_jbuf *j,
		     struct ndz_error *e)
{
	int n = admin_change(s, r, e);

	if (n == 0)
		n = admin_do(s, r, NULL, 0, ndz_now_ms(), j, e);
	if (n == 0)
		n = admin_saved(s, r, e);
	return n;
}
