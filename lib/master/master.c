/* The image master's session table, pool, rate division, state file and upload admission. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "hostlimit.h"
#include "core/json.h"
#include "master.h"
#include "core/fields.h"
#include "core/file.h"


struct upload {
	int used;
	char name[NDZ_CTL_NAME_MAX + 1];
	uint32_t from;
};

struct ndz_master {
	const struct ndz_mconf *conf;
	struct ndz_master_session s[NDZ_MASTER_SESSIONS];
	struct upload up[NDZ_MASTER_UPLOADS];
	struct ndz_hostlimit limit;    /* host-rate, host-burst */
	unsigned limit_rate, limit_burst;      /* what limit was last given */
	struct ndz_master_counters n;
	struct ndz_admit admit;        /* TCP connections before their first message */
	uint32_t server;
	int (*hold)(void *ctx, const struct ndz_master_session *s);
	void *hold_ctx;
	int hold_ask;                  /* 1: a GET asks the program (NDZ_MASTER_HOLD) */
	int held_pid;                  /* told held (ndz_master_held), for the next GET */
};

int ndz_master_create(const struct ndz_mconf *c, struct ndz_master **out, struct ndz_error *e)
{
	struct ndz_master *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "master: session table");
	m->conf = c;
	ndz_admit_init(&m->admit);
	m->limit_rate = c->host_rate;
	m->limit_burst = c->host_burst;
	ndz_hostlimit_init(&m->limit, c->host_rate, c->host_burst);
	*out = m;
	return 0;
}

void ndz_master_free(struct ndz_master *m)
{
	free(m);
}

void ndz_master_set_conf(struct ndz_master *m, const struct ndz_mconf *c)
{
	m->conf = c;
}

const struct ndz_mconf *ndz_master_conf(const struct ndz_master *m)
{
	return m->conf;
}

struct ndz_master_counters *ndz_master_counters(struct ndz_master *m)
{
	return &m->n;
}

size_t ndz_master_live(const struct ndz_master *m)
{
	size_t k = 0;

	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++)
		k += m->s[i].pid != 0;
	return k;
}

const struct ndz_master_session *ndz_master_session(const struct ndz_master *m, size_t i)
{
	return &m->s[i];
}

int ndz_master_host_ok(struct ndz_master *m, uint32_t addr, uint64_t now_ns)
{
	const struct ndz_mconf *c = m->conf;

	if (c->host_rate != m->limit_rate || c->host_burst != m->limit_burst) {
		m->limit_rate = c->host_rate;
		m->limit_burst = c->host_burst;
		ndz_hostlimit_set(&m->limit, c->host_rate, c->host_burst, now_ns);
	}
	return ndz_hostlimit_ok(&m->limit, addr, now_ns);
}

void ndz_master_set_server(struct ndz_master *m, uint32_t server)
{
	m->server = server;
}

void ndz_master_set_hold(struct ndz_master *m,
			 int (*hold)(void *ctx, const struct ndz_master_session *s), void *ctx)
{
	m->hold = hold;
	m->hold_ctx = ctx;
}

/*
 * Will the running session in slot take one more client? Asked to hold, one that has
 * exited is ended here, one that is exiting is retired: the GET starts a new one.
 */
static void hold_verdict(struct ndz_master *m, struct ndz_master_session *s, int r)
{
	if (r == NDZ_MASTER_GONE)
		ndz_master_end(m, s->pid);
	else if (r == NDZ_MASTER_ENDING)
		s->replaced = 1;
}

static int holds(struct ndz_master *m, struct ndz_master_session *s)
{
	int r;

	if (s->pid > 0 && s->pid == m->held_pid) {  /* told held (ask mode): once */
		m->held_pid = 0;
		return 1;
	}
	r = m->hold && s->pid > 0 ? m->hold(m->hold_ctx, s) : NDZ_MASTER_HELD;
	hold_verdict(m, s, r);
	return r == NDZ_MASTER_HELD;
}

void ndz_master_set_hold_ask(struct ndz_master *m, int on)
{
	m->hold_ask = on;
	m->held_pid = 0;
}

/* Ask mode: the first running session of name a GET would be answered with and that
   was not told held: its slot, or -1 (none: the GET goes on). */
static int to_ask(const struct ndz_master *m, const char *name)
{
	if (!m->hold_ask)
		return -1;
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++)
		if (m->s[i].pid > 0 && !m->s[i].replaced && strcmp(m->s[i].image, name) == 0)
			return m->s[i].pid == m->held_pid ? -1 : (int)i;
	return -1;
}

void ndz_master_held(struct ndz_master *m, const struct ndz_master_plan *p, int verdict)
{
	struct ndz_master_session *s;

	if (p->slot < 0 || p->slot >= NDZ_MASTER_SESSIONS)
		return;
	s = &m->s[p->slot];
	if (s->pid <= 0 || s->pid != p->pid)
		return;                /* gone meanwhile: the GET looks again */
	if (verdict == NDZ_MASTER_HELD)
		m->held_pid = s->pid;
	else
		hold_verdict(m, s, verdict);
}

/* 127.0.0.1 or an address some image allows. */
static int may_ask(const struct ndz_master *m, uint32_t addr)
{
	return ndz_mconf_allows_any(m->conf, addr) || ntohl(addr) == INADDR_LOOPBACK;
}

int ndz_master_request(struct ndz_master *m, const uint8_t *buf, size_t len, uint32_t addr,
		       uint64_t now_ns, struct ndz_ctl_req *req, struct ndz_master_plan *p,
		       struct ndz_ctl_rep *rep, struct ndz_error *e)
{
	int rc = ndz_ctl_req_decode(buf, len, req, NULL);
	char a[16];

	memset(rep, 0, sizeof(*rep));
	memset(p, 0, sizeof(*p));
	p->slot = -1;
	m->n.requests++;
	inet_ntop(AF_INET, &addr, a, sizeof(a));
	if (rc == NDZ_EPROTO || rc == NDZ_EPROTOVER) {
		m->n.dropped++;
		ndz_error_set(e, rc, 0, "malformed: a datagram of %zu bytes that is no request",
			      len);
		return NDZ_MASTER_DROP;
	}
	if (!ndz_master_host_ok(m, addr, now_ns)) {
		m->n.rate_limited++;
		ndz_error_set(e, NDZ_ERATE, 0, "rate limit: over its request rate");
		return NDZ_MASTER_DROP;
	}
	rep->type = req->type == NDZ_CTL_STATUS || req->type == NDZ_CTL_UPLOAD ? req->type :
		    NDZ_CTL_GET;
	rep->id = req->id;
	if (rc != 0 || req->type == NDZ_CTL_UPLOAD) {  /* uploads come by TCP */
		rep->status = NDZ_CTL_MALFORMED;
		m->n.malformed++;
		ndz_error_set(e, NDZ_EINVAL, 0, "malformed request");
	} else if (!may_ask(m, addr)) {
		rep->status = NDZ_CTL_DENIED;
		m->n.denied++;
		if (req->type == NDZ_CTL_GET)
			ndz_error_set(e, NDZ_EDENIED, 0, "no allow rule matches %s for image '%s' "
				      "(nor for any image)", a, req->name);
		else
			ndz_error_set(e, NDZ_EDENIED, 0, "no image allows %s", a);
	} else if (req->type == NDZ_CTL_STATUS) {
		rep->status = NDZ_CTL_USE_TCP; /* a 12-byte datagram must not buy 16 KB */
		m->n.status_udp++;
	} else {
		return ndz_master_resume(m, req, addr, p, rep, e);
	}
	return NDZ_MASTER_REPLY;
}

int ndz_master_resume(struct ndz_master *m, const struct ndz_ctl_req *req, uint32_t addr,
		      struct ndz_master_plan *p, struct ndz_ctl_rep *rep, struct ndz_error *e)
{
	int rc = ndz_master_get(m, req->name, addr, p, e);

	if (rc == 0 && p->hold)
		return NDZ_MASTER_HOLD;
	if (rc == 0 && p->start)
		return NDZ_MASTER_START;
	if (rc == 0)
		ndz_master_served(m, p->slot);
	ndz_master_answer(m, p, rc, rep);
	return NDZ_MASTER_REPLY;
}

void ndz_master_answer(const struct ndz_master *m, const struct ndz_master_plan *p, int rc,
		       struct ndz_ctl_rep *rep)
{
	const struct ndz_master_session *s = rc == 0 ? &m->s[p->slot] : NULL;

	rep->status = (uint16_t)ndz_ctl_status_of(rc < 0 && p->start ? NDZ_EIO : rc);
	if (!s)
		return;
	rep->group = s->group;
	rep->port = s->port;
	rep->server = m->server;
	memcpy(rep->uuid, s->uuid, 16);
	rep->chunks = s->chunks;
	rep->source_bytes = s->source_bytes;
	rep->rate_bps = s->rate;
}

int ndz_master_accept(struct ndz_master *m, uint32_t addr, unsigned threads, uint64_t now_ns,
		      struct ndz_error *e)
{
	const struct ndz_mconf *c = m->conf;
	char a[16];
	int rc;

	inet_ntop(AF_INET, &addr, a, sizeof(a));
	m->n.requests++;
	if (!ndz_master_host_ok(m, addr, now_ns)) {
		m->n.rate_limited++;
		return ndz_error_set(e, NDZ_ERATE, 0, "%s: over its request rate", a);
	}
	if (!ndz_mconf_may_connect(c, addr) && ntohl(addr) != INADDR_LOOPBACK) {
		m->n.denied++;
		m->n.tcp_denied++;
		return ndz_error_set(e, NDZ_EDENIED, 0, "%s: connection refused: no image allows it",
				     a);
	}
	rc = ndz_admit_take(&m->admit, addr, c->max_pending, c->max_pending_host, e);
	/* threads past their first message are bounded by max-uploads, twice (draining) */
	if (rc == 0 && threads < 2 * c->max_uploads + c->max_pending)
		return 0;
	if (rc == 0) {
		ndz_admit_release(&m->admit, addr);
		ndz_error_set(e, NDZ_ECONNS, 0, "max-pending connections wait");
	}
	m->n.tcp_busy++;
	ndz_error_prefix(e, "%s: connection refused", a);
	return NDZ_ECONNS;
}

void ndz_master_release(struct ndz_master *m, uint32_t addr)
{
	ndz_admit_release(&m->admit, addr);
}

/* An image's own rate, or the default. */
static uint64_t image_rate(const struct ndz_mconf *c, const struct ndz_mconf_image *im)
{
	return im && im->rate ? im->rate : c->rate;
}

/* Whole kbit/s, at least the least rate. */
static uint64_t round_rate(uint64_t r)
{
	return r < NDZ_MASTER_MIN_RATE ? NDZ_MASTER_MIN_RATE : r / 1000 * 1000;
}

int ndz_master_get(struct ndz_master *m, const char *name, uint32_t addr,
		   struct ndz_master_plan *p, struct ndz_error *e)
{
	const struct ndz_mconf *c = m->conf;
	const struct ndz_mconf_image *im = ndz_mconf_find(c, name);
	struct ndz_master_session *slot = NULL;
	size_t running;
	uint32_t idx;

	int k;

	memset(p, 0, sizeof(*p));
	p->slot = -1;
	if (im && ndz_mconf_allows(im, addr) && (k = to_ask(m, name)) >= 0) {
		p->slot = k;               /* not counted yet: the GET comes again */
		p->hold = 1;
		p->pid = m->s[k].pid;
		p->image = im;
		return 0;
	}
	m->n.get++;
	if (!im) {
		m->n.unknown++;
		return ndz_error_set(e, NDZ_ENOIMAGE, 0, "image '%s': no such image", name);
	}
	if (!ndz_mconf_allows(im, addr)) {
		char a[16];

		m->n.denied++;
		inet_ntop(AF_INET, &addr, a, sizeof(a));
		return ndz_error_set(e, NDZ_EDENIED, 0, "no allow rule matches %s for image '%s'", a,
				     name);
	}
	p->image = im;
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++)
		if (m->s[i].pid > 0 && !m->s[i].replaced && strcmp(m->s[i].image, name) == 0 &&
		    holds(m, &m->s[i])) {
			p->slot = (int)i;
			return 0;
		}
	running = ndz_master_live(m);  /* less one that has gone */
	if (running >= c->max_sessions) {
		m->n.too_many++;
		return ndz_error_set(e, NDZ_ESESSIONS, 0, "image '%s': max-sessions %u run", name,
				     c->max_sessions);
	}
	/* the lowest pool address no session (ours or adopted) holds */
	for (idx = 0; idx < c->pool_size; idx++) {
		uint32_t g = htonl(c->pool_base + idx);
		size_t i;

		for (i = 0; i < NDZ_MASTER_SESSIONS; i++)
			if (m->s[i].pid && m->s[i].group == g)
				break;
		if (i == NDZ_MASTER_SESSIONS)
			break;
	}
	if (idx == c->pool_size) {
		m->n.pool++;
		return ndz_error_set(e, NDZ_EPOOL, 0, "image '%s': all %u pool addresses in use",
				     name, c->pool_size);
	}
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS && !slot; i++)
		if (!m->s[i].pid)
			slot = &m->s[i];
	if (!slot) {
		m->n.too_many++;
		return ndz_error_set(e, NDZ_ESESSIONS, 0, "image '%s': the session table is full",
				     name);
	}
	memset(slot, 0, sizeof(*slot));
	slot->pid = -1;                /* reserved until started */
	snprintf(slot->image, sizeof(slot->image), "%s", name);
	slot->group = htonl(c->pool_base + idx);
	slot->port = (uint16_t)(c->port_lo + idx % ((unsigned)c->port_hi - c->port_lo + 1));
	slot->rate = image_rate(c, im);
	if (c->total_rate && slot->rate > c->total_rate / (running + 1))
		slot->rate = c->total_rate / (running + 1);
	slot->rate = round_rate(slot->rate);
	p->slot = (int)(slot - m->s);
	p->start = 1;
	return 0;
}

void ndz_master_started(struct ndz_master *m, int slot, int pid, const uint8_t uuid[16],
			uint32_t chunks, uint64_t source_bytes, uint64_t now_ns)
{
	struct ndz_master_session *s = &m->s[slot];

	s->pid = pid;
	s->adopted = 0;
	s->replaced = 0;
	memcpy(s->uuid, uuid, 16);
	s->chunks = chunks;
	s->source_bytes = source_bytes;
	s->started_ns = now_ns;
	s->clients = 1;
	m->n.started++;
	m->n.ok++;
}

void ndz_master_start_failed(struct ndz_master *m, int slot)
{
	memset(&m->s[slot], 0, sizeof(m->s[slot]));
	m->n.failed++;
}

void ndz_master_served(struct ndz_master *m, int slot)
{
	m->s[slot].clients++;
	m->n.ok++;
}

int ndz_master_end(struct ndz_master *m, int pid)
{
	if (pid <= 0)
		return -1;
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++)
		if (m->s[i].pid == pid) {
			memset(&m->s[i], 0, sizeof(m->s[i]));
			m->n.ended++;
			return (int)i;
		}
	return -1;
}

size_t ndz_master_rates(const struct ndz_master *m, struct ndz_master_rate *out, size_t cap)
{
	const struct ndz_mconf *c = m->conf;
	size_t k = ndz_master_live(m), n = 0;

	if (!c->total_rate || !k)
		return 0;
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS && n < cap; i++) {
		const struct ndz_master_session *s = &m->s[i];
		uint64_t want;

		if (s->pid <= 0)
			continue;
		want = image_rate(c, ndz_mconf_find(c, s->image));
		if (want > c->total_rate / k)
			want = c->total_rate / k;
		want = round_rate(want);
		if (want == s->rate / 1000 * 1000)
			continue;
		out[n].slot = (int)i;
		out[n].rate = want;
		n++;
	}
	return n;
}

void ndz_master_set_rate(struct ndz_master *m, int slot, uint64_t rate)
{
	m->s[slot].rate = rate;
}

int ndz_master_state(const struct ndz_master *m, char *buf, size_t cap, struct ndz_error *e)
{
	struct ndz_jbuf j;

	ndz_jbuf_init(&j, buf, cap);
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++) {
		const struct ndz_master_session *s = &m->s[i];
		char a[16];

		if (s->pid <= 0)
			continue;
		inet_ntop(AF_INET, &s->group, a, sizeof(a));
		ndz_jbuf_printf(&j, "%d %s %s %u %llu %u %llu ", s->pid, s->image, a, s->port,
				(unsigned long long)s->rate, s->chunks,
				(unsigned long long)s->source_bytes);
		for (int k = 0; k < 16; k++)
			ndz_jbuf_printf(&j, "%02x", s->uuid[k]);
		ndz_jbuf_printf(&j, "\n");
	}
	if (j.over)
		return ndz_error_set(e, NDZ_ERANGE, 0, "master state: longer than %zu bytes", cap);
	return (int)j.len;
}

#define STATE_LINE_MAX 512                   /* a state line is under 200 bytes */

int ndz_master_state_parse_line(const char *line, size_t len, struct ndz_master_session *s,
				struct ndz_error *e)
{
	static const char *const what[] = { "pid", "image", "group", "port", "rate", "chunks",
					    "source bytes", "uuid" };
	char buf[STATE_LINE_MAX], *tok[8];
	uint64_t v;

	memset(s, 0, sizeof(*s));
	/* eight fields, each separated by one space */
	if (len >= sizeof(buf) || memchr(line, 0, len))
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: not eight fields");
	memcpy(buf, line, len);
	buf[len] = 0;
	if (ndz_fields_split(buf, " ", 1, tok, 8, NULL) != 8)
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: not eight fields");
	for (int k = 0; k < 8; k++)
		if (!*tok[k])
			return ndz_error_set(e, NDZ_EINVAL, 0, "state line: empty %s", what[k]);
	if (ndz_parse_dec(tok[0], 0x7fffffff, &v, NULL) || v == 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: bad pid");
	s->pid = (int)v;
	if (strlen(tok[1]) > NDZ_CTL_NAME_MAX || !ndz_ctl_valid_name(tok[1]))
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: bad image name");
	strcpy(s->image, tok[1]);
	if (strlen(tok[2]) > 15 || inet_pton(AF_INET, tok[2], &s->group) != 1)
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: bad group");
	if (ndz_parse_dec(tok[3], 65535, &v, NULL) || v == 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: bad port");
	s->port = (uint16_t)v;
	if (ndz_parse_dec(tok[4], UINT64_MAX, &s->rate, NULL))
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: bad rate");
	if (ndz_parse_dec(tok[5], UINT32_MAX, &v, NULL))
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: bad chunks");
	s->chunks = (uint32_t)v;
	if (ndz_parse_dec(tok[6], UINT64_MAX, &s->source_bytes, NULL))
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: bad source bytes");
	if (strlen(tok[7]) != 32 || ndz_hex_decode(tok[7], s->uuid, 16, NULL))
		return ndz_error_set(e, NDZ_EINVAL, 0, "state line: bad uuid");
	s->adopted = 1;
	return 0;
}

size_t ndz_master_adopt(struct ndz_master *m, const char *text, size_t len,
			int (*alive)(void *ctx, const struct ndz_master_session *s),
			int (*current)(void *ctx, const char *image, uint8_t uuid[16]),
			void *ctx, uint64_t now_ns)
{
	struct ndz_lines lines;
	char line[STATE_LINE_MAX];
	size_t adopted = 0;
	int r;

	ndz_lines_init(&lines, "state", text, len);
	while ((r = ndz_lines_next(&lines, line, sizeof(line), 0, NULL)) != 0) {
		struct ndz_master_session s;
		uint8_t now[16];
		size_t i, free_slot = NDZ_MASTER_SESSIONS;

		if (r > 0 && ndz_master_state_parse_line(line, strlen(line), &s, NULL) == 0) {
			for (i = 0; i < NDZ_MASTER_SESSIONS; i++) {
				if (m->s[i].pid && (m->s[i].group == s.group || m->s[i].pid == s.pid))
					break;
				if (!m->s[i].pid && free_slot == NDZ_MASTER_SESSIONS)
					free_slot = i;
			}
			if (i == NDZ_MASTER_SESSIONS && free_slot < NDZ_MASTER_SESSIONS &&
			    alive(ctx, &s)) {
				/* uploaded anew while no master ran: it keeps its clients only */
				if (current && current(ctx, s.image, now) == 0 &&
				    memcmp(now, s.uuid, 16) != 0)
					s.replaced = 1;
				s.started_ns = now_ns;
				m->s[free_slot] = s;
				adopted++;
			}
		}
	}
	return adopted;
}

#define STATE_MAX (NDZ_MASTER_SESSIONS * 160)  /* a state file's bytes, at most */

int ndz_master_save(const struct ndz_master *m, const char *path, struct ndz_error *e)
{
	char *text = malloc(STATE_MAX);
	int n, rc;

	if (!text)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", path);
	n = ndz_master_state(m, text, STATE_MAX, e);
	rc = n < 0 ? n : ndz_file_replace(path, text, (size_t)n, 0644, e);
	free(text);
	return rc;
}

int ndz_master_load(struct ndz_master *m, const char *path,
		    int (*alive)(void *ctx, const struct ndz_master_session *s),
		    int (*current)(void *ctx, const char *image, uint8_t uuid[16]),
		    void *ctx, uint64_t now_ns, struct ndz_error *e)
{
	FILE *f = fopen(path, "r");
	char *text;
	size_t len;
	int rc;

	if (!f && errno == ENOENT)
		return 0;
	if (!f)
		return ndz_error_set(e, NDZ_EIO, errno, "%s", path);
	text = malloc(STATE_MAX);
	if (!text) {
		fclose(f);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", path);
	}
	len = fread(text, 1, STATE_MAX, f);
	if (ferror(f))
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s", path);
	else
		rc = (int)ndz_master_adopt(m, text, len, alive, current, ctx, now_ns);
	fclose(f);
	free(text);
	return rc;
}

int ndz_master_upload_begin(struct ndz_master *m, const char *name, uint32_t addr,
			    uint64_t size, uint64_t (*usage)(void *ctx, const char *final),
			    void *ctx, char *final, size_t cap, int *slot, uint64_t *limit,
			    struct ndz_error *e)
{
	const struct ndz_mconf *c = m->conf;
	struct upload *u = NULL;
	unsigned running = 0;
	int rc;

	*slot = -1;
	*limit = 0;
	m->n.uploads++;
	rc = ndz_mconf_upload_target(c, name, addr, final, cap, e);
	for (size_t i = 0; rc == 0 && i < NDZ_MASTER_UPLOADS; i++) {
		if (m->up[i].used && strcmp(m->up[i].name, name) == 0)
			rc = ndz_error_set(e, NDZ_EBUSY, 0, "image '%s': another upload to it runs",
					   name);
		running += m->up[i].used != 0;
		if (!m->up[i].used && !u)
			u = &m->up[i];
	}
	if (rc == 0 && (!u || running >= c->max_uploads))
		rc = ndz_error_set(e, NDZ_EUPLOADS, 0, "max-uploads %u run", c->max_uploads);
	if (rc == 0 && c->quota) {
		uint64_t used = usage(ctx, final);

		if (used >= c->quota || (size && size > c->quota - used))
			rc = ndz_error_set(e, NDZ_EQUOTA, 0, "image '%s': %llu bytes of the quota "
					   "of %llu are used", name, (unsigned long long)used,
					   (unsigned long long)c->quota);
		else
			*limit = c->quota - used;
	}
	if (rc != 0) {
		m->n.uploads_refused++;
		return rc;
	}
	memset(u, 0, sizeof(*u));
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->used = 1;
	u->from = addr;
	*slot = (int)(u - m->up);
	return 0;
}

void ndz_master_upload_stored(struct ndz_master *m, int slot)
{
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++)
		if (m->s[i].pid && strcmp(m->s[i].image, m->up[slot].name) == 0)
			m->s[i].replaced = 1;
}

size_t ndz_master_serving(const struct ndz_master *m, const char *name)
{
	size_t k = 0;

	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++)
		k += m->s[i].pid && strcmp(m->s[i].image, name) == 0;
	return k;
}

size_t ndz_master_retire(struct ndz_master *m, const char *name)
{
	size_t k = 0;

	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++)
		if (m->s[i].pid && strcmp(m->s[i].image, name) == 0) {
			m->s[i].replaced = 1;
			k++;
		}
	return k;
}

int ndz_master_uploading(const struct ndz_master *m, const char *name)
{
	for (size_t i = 0; i < NDZ_MASTER_UPLOADS; i++)
		if (m->up[i].used && strcmp(m->up[i].name, name) == 0)
			return 1;
	return 0;
}

void ndz_master_upload_end(struct ndz_master *m, int slot, int stored)
{
	m->up[slot].used = 0;
	if (stored > 0)
		m->n.uploads_stored++;
	else if (stored == 0)
		m->n.uploads_rejected++;
	else
		m->n.uploads_refused++;
}

unsigned ndz_master_uploads(const struct ndz_master *m)
{
	unsigned k = 0;

	for (size_t i = 0; i < NDZ_MASTER_UPLOADS; i++)
		k += m->up[i].used != 0;
	return k;
}

/* The counters in the status JSON, in its order, by their names there. */
static const struct {
	const char *name;
	size_t off;
} counter_names[] = {
#define NDZ_COUNTER(field, json, family, label, family2, label2) \
	{ json, offsetof(struct ndz_master_counters, field) },
#include "counters.def"
#undef NDZ_COUNTER
};

const char *ndz_master_counter(const struct ndz_master_counters *n, size_t i, uint64_t *v)
{
	if (i >= sizeof(counter_names) / sizeof(counter_names[0]))
		return NULL;
	*v = *(const uint64_t *)(const void *)((const char *)n + counter_names[i].off);
	return counter_names[i].name;
}

/* The STATUS JSON into j, each session's client list with it when clients is set. */
static void status_json(const struct ndz_master *m, uint64_t now_ns,
			void (*live)(void *ctx, const struct ndz_master_session *s,
				     struct ndz_master_live *out),
			void *ctx, struct ndz_jbuf *j, int clients)
{
	const struct ndz_master_counters *n = &m->n;
	const struct ndz_mconf *c = m->conf;
	struct ndz_master_live *l = malloc(sizeof(*l));
	const char *name;
	uint64_t v;
	int first = 1;

	ndz_jbuf_printf(j, "{\"sessions\": [");
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++) {
		const struct ndz_master_session *s = &m->s[i];
		char a[16];

		if (s->pid <= 0)
			continue;
		if (l)
			memset(l, 0, sizeof(*l));
		if (live && l)
			live(ctx, s, l);
		inet_ntop(AF_INET, &s->group, a, sizeof(a));
		ndz_jbuf_printf(j, "%s{\"image\": \"%s\", \"pid\": %d, \"group\": \"%s\", "
				"\"port\": %u, \"rate_bps\": %llu, \"clients\": %llu, "
				"\"age_s\": %.0f, \"adopted\": %s, \"replaced\": %s, "
				"\"receivers\": %llu, \"bytes_sent\": %llu",
				first ? "" : ", ", s->image, s->pid, a, s->port,
				(unsigned long long)s->rate, (unsigned long long)s->clients,
				now_ns > s->started_ns ? (double)(now_ns - s->started_ns) / 1e9 : 0.0,
				s->adopted ? "true" : "false", s->replaced ? "true" : "false",
				l ? (unsigned long long)l->receivers : 0ull,
				l ? (unsigned long long)l->bytes_sent : 0ull);
		if (l && l->states)
			ndz_jbuf_printf(j, ", \"active\": %llu, \"done\": %llu, \"failed\": %llu, "
					"\"lost\": %llu, \"client_list\": [%s]",
					(unsigned long long)l->active, (unsigned long long)l->done,
					(unsigned long long)l->failed, (unsigned long long)l->lost,
					clients ? l->clients : "");
		ndz_jbuf_printf(j, "}");
		first = 0;
	}
	ndz_jbuf_printf(j, "], \"counters\": {");
	for (size_t i = 0; (name = ndz_master_counter(n, i, &v)); i++)
		ndz_jbuf_printf(j, "%s\"%s\": %llu", i ? ", " : "", name, (unsigned long long)v);
	ndz_jbuf_printf(j, "}, \"max_sessions\": %u, \"pool_size\": %u, \"uploading\": [",
			c->max_sessions, c->pool_size);
	first = 1;
	for (size_t i = 0; i < NDZ_MASTER_UPLOADS; i++) {
		char a[16];

		if (!m->up[i].used)
			continue;
		inet_ntop(AF_INET, &m->up[i].from, a, sizeof(a));
		ndz_jbuf_printf(j, "%s{\"image\": \"%s\", \"from\": \"%s\"}", first ? "" : ", ",
				m->up[i].name, a);
		first = 0;
	}
	ndz_jbuf_printf(j, "], \"images\": [");
	for (size_t i = 0; i < c->nimages; i++) {
		const struct ndz_mconf_image *im = &c->images[i];

		ndz_jbuf_printf(j, "%s{\"name\": \"%s\", \"path\": ", i ? ", " : "", im->name);
		ndz_jbuf_string(j, im->path);
		ndz_jbuf_printf(j, ", \"rate_bps\": %llu}", (unsigned long long)image_rate(c, im));
	}
	ndz_jbuf_printf(j, "]}");
	free(l);
}

size_t ndz_master_status_json(const struct ndz_master *m, uint64_t now_ns,
			      void (*live)(void *ctx, const struct ndz_master_session *s,
					   struct ndz_master_live *out),
			      void *ctx, char *buf, size_t cap)
{
	struct ndz_jbuf j;

	ndz_jbuf_init(&j, buf, cap);
	status_json(m, now_ns, live, ctx, &j, 1);
	if (j.over) {                  /* too many clients: their lists go, empty */
		ndz_jbuf_init(&j, buf, cap);
		status_json(m, now_ns, live, ctx, &j, 0);
	}
	if (j.over) {
		ndz_jbuf_init(&j, buf, cap);
		ndz_jbuf_printf(&j, "{\"error\": \"status longer than %zu bytes\"}", cap - 1);
	}
	return j.len;
}
