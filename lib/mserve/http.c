/*
 * The master's HTTP endpoint over libmicrohttpd: one daemon per address, each with
 * its own polling thread; requests are answered from that thread, taking the
 * caller's lock only to read the master (never while writing to the network).
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "ctl/ctl.h"
#include "http.h"
#include "core/json.h"
#include "session.h"
#include "mcast/net.h"
#include "core/clock.h"

#define JSON_MASTER (128 * 1024)       /* /status.json: the master's part ... */
#define JSON_CAP (JSON_MASTER + 2 * 1024 * 1024)  /* ... then the extra sections (a full
						   * lab of 1024 nodes is at most 1 MiB) */
#define METRICS_CAP (512 * 1024)

struct ndz_http {
	struct ndz_http_hooks h;
	struct MHD_Daemon *d[NDZ_MCONF_HTTP_MAX];
	uint16_t port[NDZ_MCONF_HTTP_MAX];
	size_t n;
	atomic_uint_fast64_t requests;
};

/* A POST's body, gathered across the access handler's calls. */
struct post {
	size_t len;
	int over;                      /* longer than NDZ_HTTP_BODY_MAX */
	char body[NDZ_HTTP_BODY_MAX + 1];
};

static const char page[] =
	"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	"<title>mfrisbeed</title>\n<style>\n"
	"body{font-family:sans-serif;margin:1em 2em}table{border-collapse:collapse;margin-bottom:1em}\n"
	"td,th{border:1px solid #bbb;padding:.2em .6em;text-align:left}th{background:#eee}\n"
	"#state{color:#666}\n</style></head><body>\n"
	"<h1>mfrisbeed</h1><p id=\"state\">loading…</p>\n"
	"<h2>Sessions</h2><table><thead><tr><th>image</th><th>group</th><th>port</th>"
	"<th>clients</th><th>receivers</th><th>bytes sent</th><th>rate</th><th>age</th></tr>"
	"</thead><tbody id=\"sessions\"></tbody></table>\n"
	"<h2>Clients</h2><table><thead><tr><th>image</th><th>address</th><th>state</th>"
	"<th>progress</th><th>written</th><th>rate</th><th>last heard</th></tr></thead>"
	"<tbody id=\"clients\"></tbody></table>\n"
	"<h2>Nodes</h2><table><thead><tr><th>MAC</th><th>name</th><th>group</th><th>task</th>"
	"<th>state</th><th>progress</th><th>last result</th></tr></thead>"
	"<tbody id=\"nodes\"></tbody></table>\n"
	"<h2>Uploads</h2><table><thead><tr><th>image</th><th>from</th></tr></thead>"
	"<tbody id=\"uploads\"></tbody></table>\n"
	"<h2>Images</h2><table><thead><tr><th>name</th><th>path</th><th>rate</th></tr></thead>"
	"<tbody id=\"images\"></tbody></table>\n"
	"<h2>Counters</h2><table><tbody id=\"counters\"></tbody></table>\n"
	"<div id=\"extra\"></div>\n"
	"<script>\n"
	"'use strict';\n"
	"const last = {};\n"
	"function fmt(n, unit) {\n"
	"  const k = ['', 'k', 'M', 'G', 'T']; let i = 0;\n"
	"  while (n >= 1000 && i < 4) { n /= 1000; i++; }\n"
	"  return (i ? n.toFixed(1) : String(Math.round(n))) + ' ' + k[i] + unit;\n"
	"}\n"
	"function pct(a, b) { return b ? (100 * a / b).toFixed(1) + ' %' : ''; }\n"
	"function fill(id, rows) {\n"
	"  const tb = document.getElementById(id); tb.textContent = '';\n"
	"  for (const r of rows) {\n"
	"    const tr = document.createElement('tr');\n"
	"    for (const c of r) { const td = document.createElement('td');"
	" td.textContent = c; tr.appendChild(td); }\n"
	"    tb.appendChild(tr);\n"
	"  }\n"
	"}\n"
	"function show(s) {\n"
	"  const now = Date.now();\n"
	"  fill('sessions', (s.sessions || []).map(x => {\n"
	"    const key = x.image + ' ' + x.group + ' ' + x.pid, p = last[key];\n"
	"    const rate = p && now > p.t ? (x.bytes_sent - p.b) * 8000 / (now - p.t) : 0;\n"
	"    last[key] = { t: now, b: x.bytes_sent };\n"
	"    return [x.image, x.group, x.port, x.clients, x.receivers, fmt(x.bytes_sent, 'B'),"
	" fmt(Math.max(rate, 0), 'bit/s'), x.age_s + ' s'];\n"
	"  }));\n"
	"  const cl = [];\n"
	"  for (const x of s.sessions || [])\n"
	"    for (const c of x.client_list || [])\n"
	"      cl.push([x.image, c.address, c.state, pct(c.chunks_done, c.chunks_total),"
	" fmt(c.bytes_written, 'B'), fmt(c.write_bps, 'bit/s'), c.age_s + ' s ago']);\n"
	"  fill('clients', cl);\n"
	"  fill('nodes', ((s.lab || {}).nodes || []).map(n => [n.mac, n.name, n.group,"
	" n.task === 'none' ? '' : n.task + ' ' + n.image + (n.opts.length ? ' (' + n.opts.join(', ') + ')' : ''),"
	" n.state, n.state === 'running' ? pct(n.bytes, n.total) : '',"
	" n.last ? (n.last.ok ? 'ok: ' : 'failed: ') + n.last.task + ' ' + n.last.image +"
	" (n.last.ok ? ', ' + fmt(n.last.bytes, 'B') + ' in ' + (n.last.ms / 1000).toFixed(1) + ' s'"
	" : ': ' + n.last.reason) : '']));\n"
	"  fill('uploads', (s.uploading || []).map(x => [x.image, x.from]));\n"
	"  fill('images', (s.images || []).map(x => [x.name, x.path, fmt(x.rate_bps, 'bit/s')]));\n"
	"  fill('counters', Object.entries(s.counters || {}));\n"
	"  const ex = document.getElementById('extra'); ex.textContent = '';\n"
	"  for (const k of Object.keys(s)) {\n"
	"    if (['sessions', 'uploading', 'images', 'counters', 'max_sessions', 'pool_size', 'lab']"
	".includes(k)) continue;\n"
	"    const h = document.createElement('h2'); h.textContent = k; ex.appendChild(h);\n"
	"    const pre = document.createElement('pre');"
	" pre.textContent = JSON.stringify(s[k], null, 1); ex.appendChild(pre);\n"
	"  }\n"
	"  document.getElementById('state').textContent = (s.sessions || []).length +"
	" ' sessions; updated ' + new Date(now).toLocaleTimeString();\n"
	"}\n"
	"async function tick() {\n"
	"  try {\n"
	"    const r = await fetch('status.json', { cache: 'no-store' });\n"
	"    show(await r.json());\n"
	"  } catch (err) {\n"
	"    document.getElementById('state').textContent = 'no answer: ' + err;\n"
	"  }\n"
	"}\n"
	"tick(); setInterval(tick, 2000);\n"
	"</script></body></html>\n";

static enum MHD_Result answer(struct MHD_Connection *c, unsigned code, const char *type,
			      const char *body, size_t len, int copy)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, copy ?
			MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET, HEAD, POST");
	if (code == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"mfrisbeed\"");
	rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

/* A JSON error: {"error": "msg"}. */
static enum MHD_Result fail(struct MHD_Connection *c, unsigned code, const char *msg)
{
	char buf[NDZ_ERRMSG_MAX + 32];
	struct ndz_jbuf j;

	ndz_jbuf_init(&j, buf, sizeof(buf));
	ndz_jbuf_printf(&j, "{\"error\": ");
	ndz_jbuf_string(&j, msg);
	ndz_jbuf_printf(&j, "}\n");
	return answer(c, code, "application/json", buf, j.len, 1);
}

/*
 * The running sessions' own statistics: listed under the lock, asked without it (a
 * slow frisbeed must not hold every other request), found again under it.
 */
static struct ndz_session_lives *lives(struct ndz_http *s)
{
	struct ndz_session_lives *l;

	ndz_mlock_take(s->h.lock);
	ndz_session_lives_list(s->h.ms, &l, NULL);  /* none: zeros */
	ndz_mlock_give(s->h.lock);
	ndz_session_lives_ask(l, s->h.live, s->h.ctx);
	return l;
}

/* /status.json: the STATUS JSON with the extra sections spliced in before its last '}'. */
static enum MHD_Result status_json(struct ndz_http *s, struct MHD_Connection *c)
{
	char *buf = malloc(JSON_CAP);
	size_t len;
	enum MHD_Result rc;

	struct ndz_session_lives *l;

	if (!buf)
		return fail(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	l = lives(s);
	ndz_mlock_take(s->h.lock);
	/* not cut to a datagram's size as by UDP/TCP; the rest of the buffer for sections */
	len = ndz_master_status_json(s->h.ms, ndz_now_ns(), ndz_session_lives_find, l, buf,
				     JSON_MASTER);
	for (size_t i = 0; i < s->h.next && len > 0 && buf[len - 1] == '}'; i++) {
		const struct ndz_http_ext *x = &s->h.ext[i];
		size_t head = strlen(x->name) + 6, n;

		if (!x->json || len + head + 2 >= JSON_CAP)
			continue;
		n = x->json(x->ctx, buf + len - 1 + head, JSON_CAP - (len - 1 + head) - 1);
		if (n == 0 || len - 1 + head + n + 1 >= JSON_CAP) {
			buf[len] = 0;  /* a section that does not fit is left out */
			continue;
		}
		memcpy(buf + len - 1, ", \"", 3);
		memcpy(buf + len + 2, x->name, strlen(x->name));
		memcpy(buf + len + 2 + strlen(x->name), "\": ", 3);
		len = len - 1 + head + n;
		buf[len++] = '}';
		buf[len] = 0;
	}
	ndz_mlock_give(s->h.lock);
	ndz_session_lives_free(l);
	buf[len++] = '\n';
	rc = answer(c, MHD_HTTP_OK, "application/json", buf, len, 1);
	free(buf);
	return rc;
}

static void metric(struct ndz_jbuf *j, const char *name, const char *type, const char *help)
{
	ndz_jbuf_printf(j, "# HELP ndz_%s %s\n# TYPE ndz_%s %s\n", name, help, name, type);
}

static void counter(struct ndz_jbuf *j, const char *name, const char *label, uint64_t v)
{
	ndz_jbuf_printf(j, "ndz_%s%s %llu\n", name, label, (unsigned long long)v);
}

/* The /metrics families of the master's counters, in order, with their help. */
static const struct {
	const char *name, *help;
} families[] = {
	{ "requests_total", "Control requests (UDP and TCP) by type." },
	{ "replies_total", "GET replies by result." },
	{ "failures_total", "Requests and connections refused or dropped, by reason." },
	{ "sessions_started_total", "Sessions started." },
	{ "sessions_ended_total", "Sessions ended." },
	{ "uploads_total", "Uploads by outcome." },
	{ "config_reloads_total", "Configuration reloads (SIGHUP, POST /reload-config) by outcome." },
};

/* The counters' rows (lib/master/counters.def): up to two, family and label. */
static const struct counter_row {
	const char *family[2], *label[2];
	size_t off;  /* of the value in struct ndz_master_counters */
} counter_rows[] = {
#define NDZ_COUNTER(field, json, family, label, family2, label2) \
	{ { family, family2 }, { label, label2 }, offsetof(struct ndz_master_counters, field) },
#include "master/counters.def"
#undef NDZ_COUNTER
};

int ndz_http_metrics(const struct ndz_master *m,
		     void (*live)(void *ctx, const struct ndz_master_session *s,
				  struct ndz_master_live *out),
		     void *ctx, uint64_t http_requests, char *buf, size_t cap,
		     struct ndz_error *e)
{
	const struct ndz_master_counters *n = ndz_master_counters((struct ndz_master *)m);
	/* (on the heap: each session's client list makes the table megabytes) */
	struct ndz_master_live *lv = calloc(NDZ_MASTER_SESSIONS, sizeof(*lv));
	uint64_t receivers = 0, bytes = 0;
	struct ndz_jbuf j;
	char a[16];

	if (!lv)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "metrics: %s", ndz_strerror(NDZ_ENOMEM));
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++) {
		const struct ndz_master_session *s = ndz_master_session(m, i);

		if (s->pid > 0 && live)
			live(ctx, s, &lv[i]);
		receivers += lv[i].receivers;
		bytes += lv[i].bytes_sent;
	}
	ndz_jbuf_init(&j, buf, cap);
	metric(&j, "sessions", "gauge", "Sessions running (one frisbeed per image).");
	counter(&j, "sessions", "", ndz_master_live(m));
	metric(&j, "receivers", "gauge", "Receivers the running sessions have, in all.");
	counter(&j, "receivers", "", receivers);
	metric(&j, "bytes_sent", "gauge", "Bytes the running sessions have sent, in all.");
	counter(&j, "bytes_sent", "", bytes);
	metric(&j, "uploads_running", "gauge", "Uploads running.");
	counter(&j, "uploads_running", "", ndz_master_uploads(m));
	for (int k = 0; k < 3; k++) {          /* each a row per running session */
		static const struct {
			const char *name, *type, *help;
		} per[] = {
			{ "session_receivers", "gauge", "Receivers of a running session." },
			{ "session_clients_total", "counter", "GET replies that named a session." },
			{ "session_bytes_sent_total", "counter", "Bytes a running session has sent." },
		};

		metric(&j, per[k].name, per[k].type, per[k].help);
		for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++) {
			const struct ndz_master_session *s = ndz_master_session(m, i);
			uint64_t v = k == 0 ? lv[i].receivers : k == 1 ? s->clients : lv[i].bytes_sent;

			if (s->pid > 0)
				ndz_jbuf_printf(&j, "ndz_%s{image=\"%s\",group=\"%s\"} %llu\n",
						per[k].name, s->image, ndz_net_ntoa(s->group, a),
						(unsigned long long)v);
		}
	}
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		metric(&j, families[f].name, "counter", families[f].help);
		for (size_t i = 0; i < sizeof(counter_rows) / sizeof(counter_rows[0]); i++) {
			const struct counter_row *c = &counter_rows[i];

			for (int k = 0; k < 2; k++)
				if (c->family[k] && strcmp(c->family[k], families[f].name) == 0)
					counter(&j, families[f].name, c->label[k],
						*(const uint64_t *)((const char *)n + c->off));
		}
	}
	metric(&j, "http_requests_total", "counter", "HTTP requests answered.");
	counter(&j, "http_requests_total", "", http_requests);
	free(lv);
	if (j.over)
		return ndz_error_set(e, NDZ_ERANGE, 0, "metrics longer than %zu bytes", cap - 1);
	return (int)j.len;
}

static enum MHD_Result metrics(struct ndz_http *s, struct MHD_Connection *c)
{
	char *buf = malloc(METRICS_CAP);
	struct ndz_error e = { 0 };
	enum MHD_Result rc;
	int len;

	struct ndz_session_lives *l;

	if (!buf)
		return fail(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	l = lives(s);
	ndz_mlock_take(s->h.lock);
	len = ndz_http_metrics(s->h.ms, ndz_session_lives_find, l, atomic_load(&s->requests), buf,
			       METRICS_CAP, &e);
	ndz_mlock_give(s->h.lock);
	ndz_session_lives_free(l);
	rc = len < 0 ? fail(c, MHD_HTTP_INTERNAL_SERVER_ERROR, ndz_error_msg(&e)) :
		answer(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", buf,
		       (size_t)len, 1);
	free(buf);
	return rc;
}

int ndz_http_token_ok(const char *path, const char *auth)
{
	unsigned char want[crypto_generichash_BYTES], got[crypto_generichash_BYTES];
	char tok[NDZ_CTL_TOKEN_MAX + 1];
	size_t an;
	int ok;

	if (!path || !auth || strncmp(auth, "Bearer ", 7) != 0 || sodium_init() < 0 ||
	    ndz_ctl_read_token(path, tok, sizeof(tok), NULL) != 0)
		return 0;
	for (auth += 7; *auth == ' '; auth++)
		;
	an = strlen(auth);
	while (an && auth[an - 1] == ' ')
		an--;
	/* equal-length digests: the comparison's time tells nothing, not even the length */
	crypto_generichash(want, sizeof(want), (const unsigned char *)tok, strlen(tok), NULL, 0);
	crypto_generichash(got, sizeof(got), (const unsigned char *)auth, an, NULL, 0);
	ok = sodium_memcmp(want, got, sizeof(want)) == 0;
	sodium_memzero(tok, sizeof(tok));
	return ok;
}

static enum MHD_Result action(struct ndz_http *s, struct MHD_Connection *c, const char *url,
			      const struct post *b)
{
	char out[16 * 1024];
	struct ndz_error e = { 0 };
	const struct ndz_http_ext *x = NULL;
	int rc;

	if (strcmp(url, "/reload-config") == 0) {
		ndz_mlock_take(s->h.lock);
		rc = s->h.reload ? s->h.reload(s->h.ctx, &e) :
			ndz_error_set(&e, NDZ_ENOTSUP, 0, "no reload here");
		ndz_mlock_give(s->h.lock);
		return rc == 0 ? answer(c, MHD_HTTP_OK, "application/json", "{\"ok\": true}\n", 13, 0) :
			fail(c, MHD_HTTP_INTERNAL_SERVER_ERROR, ndz_error_msg(&e));
	}
	for (size_t i = 0; i < s->h.next && !x; i++)
		if (s->h.ext[i].post && url[0] == '/' && strcmp(url + 1, s->h.ext[i].name) == 0)
			x = &s->h.ext[i];
	if (!x)
		return fail(c, MHD_HTTP_NOT_FOUND, "no such action");
	out[0] = 0;
	ndz_mlock_take(s->h.lock);
	rc = x->post(x->ctx, b->body, b->len, out, sizeof(out), &e);
	ndz_mlock_give(s->h.lock);
	if (rc != 0)
		return fail(c, rc == NDZ_EINVAL ? MHD_HTTP_BAD_REQUEST : rc == NDZ_ENOENT ||
			    rc == NDZ_ENOIMAGE ? MHD_HTTP_NOT_FOUND : MHD_HTTP_INTERNAL_SERVER_ERROR,
			    ndz_error_msg(&e));
	if (!out[0])
		return answer(c, MHD_HTTP_OK, "application/json", "{\"ok\": true}\n", 13, 0);
	out[sizeof(out) - 1] = 0;
	return answer(c, MHD_HTTP_OK, "application/json", out, strlen(out), 1);
}

/* Is the request authorised? The token file's path is the configuration's, read under the lock. */
static int authorised(struct ndz_http *s, struct MHD_Connection *c)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	char path[4096] = "";
	const struct ndz_mconf *conf;

	ndz_mlock_take(s->h.lock);
	conf = ndz_master_conf(s->h.ms);
	if (conf && conf->token_file)   /* token-file: the one admin token */
		snprintf(path, sizeof(path), "%s", conf->token_file);
	ndz_mlock_give(s->h.lock);
	return ndz_http_token_ok(path[0] ? path : NULL, auth);
}

/* An extension's GET: its text, or its file streamed from the descriptor. */
static enum MHD_Result ext_get(struct ndz_http *s, struct MHD_Connection *c, const char *url,
			       const struct ndz_http_ext *x)
{
	const union MHD_ConnectionInfo *ci;
	struct ndz_http_conn conn = { { 0 }, { 0 } };
	struct ndz_http_reply r = { .cap = NDZ_HTTP_GET_MAX, .fd = -1 };
	struct ndz_error e = { 0 };
	struct MHD_Response *resp;
	enum MHD_Result ret;
	int rc;

	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci) {
		socklen_t l = sizeof(conn.local);

		if (getsockname(ci->connect_fd, (struct sockaddr *)&conn.local, &l) != 0 ||
		    conn.local.sin_family != AF_INET)
			memset(&conn.local, 0, sizeof(conn.local));
	}
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
		memcpy(&conn.peer, ci->client_addr, sizeof(conn.peer));
	if (!(r.body = malloc(r.cap)))
		return fail(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	ndz_mlock_take(s->h.lock);
	rc = x->get(x->ctx, url, &conn, &r, &e);
	ndz_mlock_give(s->h.lock);
	if (rc == 0 && r.fd < 0 && r.len > r.cap)
		rc = ndz_error_set(&e, NDZ_ERANGE, 0, "answer too long");
	if (rc == 0 && r.fd < 0) {
		ret = answer(c, MHD_HTTP_OK, r.type ? r.type : "text/plain; charset=utf-8", r.body,
			     r.len, 1);
		free(r.body);
		return ret;
	}
	free(r.body);
	if (rc != 0) {
		if (r.fd >= 0)
			close(r.fd);
		return fail(c, rc == NDZ_EINVAL ? MHD_HTTP_BAD_REQUEST : rc == NDZ_ENOENT ?
			    MHD_HTTP_NOT_FOUND : MHD_HTTP_INTERNAL_SERVER_ERROR, ndz_error_msg(&e));
	}
	/* streamed from the file (sendfile where it can): the response owns fd */
	if (!(resp = MHD_create_response_from_fd64(r.size, r.fd))) {
		close(r.fd);
		return fail(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot send the file");
	}
	MHD_add_response_header(resp, "Content-Type", r.type ? r.type : "application/octet-stream");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *data_size, void **con_cls)
{
	struct ndz_http *s = cls;
	struct post *b = *con_cls;
	int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
		strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

	(void)version;
	if (strcmp(method, MHD_HTTP_METHOD_POST) == 0) {
		if (!b) {
			/* refused before its body is read */
			if (!authorised(s, c)) {
				const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c,
					MHD_CONNECTION_INFO_CLIENT_ADDRESS);
				char a[INET_ADDRSTRLEN] = "?";

				if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
					inet_ntop(AF_INET, &((const struct sockaddr_in *)
						  ci->client_addr)->sin_addr, a, sizeof(a));
				if (s->h.refused)
					s->h.refused("admin token", a, "POST %.80s: access denied: %s",
						     url, MHD_lookup_connection_value(c,
						     MHD_HEADER_KIND, "Authorization") ?
						     "the token does not match token-file's" :
						     "no admin token (Authorization: Bearer)");
				atomic_fetch_add(&s->requests, 1);
				return fail(c, MHD_HTTP_UNAUTHORIZED, "an admin token is needed");
			}
			if (!(b = calloc(1, sizeof(*b))))
				return MHD_NO;
			*con_cls = b;
			return MHD_YES;
		}
		if (*data_size) {
			if (b->len + *data_size > NDZ_HTTP_BODY_MAX)
				b->over = 1;
			else
				memcpy(b->body + b->len, data, *data_size);
			b->len += b->over ? 0 : *data_size;
			*data_size = 0;
			return MHD_YES;
		}
		atomic_fetch_add(&s->requests, 1);
		b->body[b->len] = 0;
		if (b->over)
			return fail(c, MHD_HTTP_CONTENT_TOO_LARGE, "body too long");
		return action(s, c, url, b);
	}
	if (*data_size) {              /* a body where none belongs */
		*data_size = 0;
		return MHD_YES;
	}
	atomic_fetch_add(&s->requests, 1);
	if (!get)
		return fail(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed");
	if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
		return answer(c, MHD_HTTP_OK, "text/html; charset=utf-8", page, sizeof(page) - 1, 0);
	if (strcmp(url, "/status.json") == 0)
		return status_json(s, c);
	if (strcmp(url, "/metrics") == 0)
		return metrics(s, c);
	for (size_t i = 0; i < s->h.next; i++) {
		const struct ndz_http_ext *x = &s->h.ext[i];

		if (x->get && x->prefix && strncmp(url, x->prefix, strlen(x->prefix)) == 0)
			return ext_get(s, c, url, x);
	}
	return fail(c, MHD_HTTP_NOT_FOUND, "not found");
}

static void done(void *cls, struct MHD_Connection *c, void **con_cls,
		 enum MHD_RequestTerminationCode why)
{
	(void)cls;
	(void)c;
	(void)why;
	free(*con_cls);
	*con_cls = NULL;
}

int ndz_http_start(const struct ndz_mconf_listen *at, size_t n, const struct ndz_http_hooks *h,
		   struct ndz_http **out, struct ndz_error *e)
{
	struct ndz_http *s;

	*out = NULL;
	if (n == 0)
		return 0;
	if (n > NDZ_MCONF_HTTP_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "http: more than %d addresses",
				     NDZ_MCONF_HTTP_MAX);
	if (!(s = calloc(1, sizeof(*s))))
		return ndz_error_set(e, NDZ_ENOMEM, 0, NULL);
	s->h = *h;
	atomic_init(&s->requests, 0);
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(at[i].port),
					  .sin_addr.s_addr = at[i].addr };
		const union MHD_DaemonInfo *di;
		char a[16];

		s->d[i] = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL,
					   0, NULL, NULL, handle, s,
					   MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
					   MHD_OPTION_CONNECTION_LIMIT, (unsigned)NDZ_HTTP_CONN_MAX,
					   MHD_OPTION_PER_IP_CONNECTION_LIMIT,
					   (unsigned)NDZ_HTTP_CONN_PER_IP,
					   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)NDZ_HTTP_TIMEOUT_S,
					   MHD_OPTION_CONNECTION_MEMORY_LIMIT,
					   (size_t)NDZ_HTTP_CONN_MEM,
					   MHD_OPTION_LISTEN_BACKLOG_SIZE, 128u,
					   MHD_OPTION_NOTIFY_COMPLETED, done, s,
					   MHD_OPTION_END);
		if (!s->d[i]) {
			inet_ntop(AF_INET, &at[i].addr, a, sizeof(a));
			ndz_http_stop(s);
			return ndz_error_set(e, NDZ_ENET, 0, "http: cannot listen on %s:%u", a,
					     at[i].port);
		}
		s->n = i + 1;
		di = MHD_get_daemon_info(s->d[i], MHD_DAEMON_INFO_BIND_PORT);
		s->port[i] = di ? di->port : at[i].port;
	}
	*out = s;
	return 0;
}

uint16_t ndz_http_port(const struct ndz_http *s, size_t i)
{
	return s && i < s->n ? s->port[i] : 0;
}

uint64_t ndz_http_requests(const struct ndz_http *s)
{
	return s ? atomic_load(&s->requests) : 0;
}

void ndz_http_stop(struct ndz_http *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		MHD_stop_daemon(s->d[i]);
	free(s);
}
