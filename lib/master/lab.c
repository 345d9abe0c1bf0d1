/* The lab's nodes and tasks: asks, reports, the group start window, lost nodes, the state file. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "lab.h"
#include "core/fields.h"
#include "core/file.h"

struct ndz_lab {
	struct ndz_lab_node n[NDZ_LAB_NODES];
	struct ndz_lab_result last[NDZ_LAB_NODES];
	uint64_t window_ms, timeout_ms;
	uint32_t batch;                /* the last batch given */
	int changed;
};

int ndz_lab_create(uint64_t window_ms, uint64_t timeout_ms, struct ndz_lab **out,
		   struct ndz_error *e)
{
	struct ndz_lab *l = calloc(1, sizeof(*l));

	*out = NULL;
	if (!l)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "lab: out of memory");
	ndz_lab_set_times(l, window_ms, timeout_ms);
	*out = l;
	return 0;
}

void ndz_lab_free(struct ndz_lab *l)
{
	free(l);
}

void ndz_lab_set_times(struct ndz_lab *l, uint64_t window_ms, uint64_t timeout_ms)
{
	l->window_ms = window_ms;
	l->timeout_ms = timeout_ms ? timeout_ms : NDZ_LAB_TIMEOUT_MS;
}

static int by_mac(const struct ndz_lab *l, const uint8_t mac[6])
{
	for (int i = 0; i < NDZ_LAB_NODES; i++)
		if (l->n[i].used && memcmp(l->n[i].mac, mac, 6) == 0)
			return i;
	return -1;
}

int ndz_lab_find(const struct ndz_lab *l, const char *key)
{
	uint8_t mac[6];

	if (ndz_labcall_parse_mac(key, mac, NULL) == 0)
		return by_mac(l, mac);
	for (int i = 0; i < NDZ_LAB_NODES; i++)
		if (l->n[i].used && l->n[i].name[0] && strcmp(l->n[i].name, key) == 0)
			return i;
	return -1;
}

size_t ndz_lab_count(const struct ndz_lab *l)
{
	size_t c = 0;

	for (int i = 0; i < NDZ_LAB_NODES; i++)
		c += l->n[i].used != 0;
	return c;
}

static int name_ok(const char *s)
{
	return !s || !*s || (ndz_ctl_valid_name(s) && strcmp(s, "-") != 0);
}

int ndz_lab_node_add(struct ndz_lab *l, const uint8_t mac[6], const char *name,
		     const char *group, struct ndz_error *e)
{
	int i = by_mac(l, mac);
	char m[18];

	ndz_labcall_format_mac(mac, m, sizeof(m));
	if (!name_ok(name) || !name_ok(group))
		return ndz_error_set(e, NDZ_EINVAL, 0, "node %s: a name or group is not "
				     NDZ_CTL_NAME_RULE, m);
	if (name && *name) {
		int j = ndz_lab_find(l, name);

		if (j >= 0 && j != i)
			return ndz_error_set(e, NDZ_EEXIST, 0, "node %s: another node is named '%s'",
					     m, name);
	}
	if (i < 0) {
		for (i = 0; i < NDZ_LAB_NODES && l->n[i].used; i++)
			;
		if (i == NDZ_LAB_NODES)
			return ndz_error_set(e, NDZ_ERANGE, 0, "node %s: the lab holds %d nodes",
					     m, NDZ_LAB_NODES);
		memset(&l->n[i], 0, sizeof(l->n[i]));
		memset(&l->last[i], 0, sizeof(l->last[i]));
		l->n[i].used = 1;
		memcpy(l->n[i].mac, mac, 6);
	}
	snprintf(l->n[i].name, sizeof(l->n[i].name), "%s", name ? name : "");
	snprintf(l->n[i].group, sizeof(l->n[i].group), "%s", group ? group : "");
	l->changed = 1;
	return 0;
}

int ndz_lab_node_remove(struct ndz_lab *l, const char *key, struct ndz_error *e)
{
	int i = ndz_lab_find(l, key);

	if (i < 0)
		return ndz_error_set(e, NDZ_ENOENT, 0, "node '%.64s': no such node", key);
	memset(&l->n[i], 0, sizeof(l->n[i]));
	memset(&l->last[i], 0, sizeof(l->last[i]));
	l->changed = 1;
	return 0;
}

static void set_task(struct ndz_lab_node *n, uint8_t task, const char *arg, uint8_t opts,
		     uint32_t batch)
{
	n->task = task;
	n->opts = task == NDZ_LAB_RELOAD ? opts : 0;
	snprintf(n->arg, sizeof(n->arg), "%s", task == NDZ_LAB_NONE ? "" : arg);
	n->state = task == NDZ_LAB_NONE ? NDZ_LAB_IDLE : NDZ_LAB_PENDING;
	n->batch = batch;
	n->go = 0;
	n->asked_ms = 0;
	n->bytes = n->total = n->skipped = 0;
}

int ndz_lab_task(struct ndz_lab *l, const char *target, uint8_t task, const char *arg,
		 uint8_t opts, uint8_t (*macs)[6], size_t cap, struct ndz_error *e)
{
	int i = ndz_lab_find(l, target), count = 0;

	if (task != NDZ_LAB_NONE && task != NDZ_LAB_RELOAD && task != NDZ_LAB_CAPTURE)
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab: bad task %u", task);
	if (task != NDZ_LAB_NONE && (!arg || !ndz_ctl_valid_name(arg)))
		return ndz_error_set(e, NDZ_EINVAL, 0, "image name '%.64s': not " NDZ_CTL_NAME_RULE,
				     arg ? arg : "");
	if (opts & ~NDZ_LAB_OPTS || (task != NDZ_LAB_RELOAD && opts))
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab: options only go with a reload");
	l->batch++;
	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		struct ndz_lab_node *n = &l->n[k];

		if (!n->used || (i >= 0 ? k != i : !n->group[0] || strcmp(n->group, target) != 0))
			continue;
		if (task == NDZ_LAB_CAPTURE && i < 0)
			return ndz_error_set(e, NDZ_EINVAL, 0, "group '%.64s': a capture names one node",
					     target);
		set_task(n, task, arg, opts, l->batch);
		if (macs && (size_t)count < cap)
			memcpy(macs[count], n->mac, 6);
		count++;
	}
	if (!count)
		return ndz_error_set(e, NDZ_ENOENT, 0, "'%.64s': no such node or group", target);
	l->changed = 1;
	return count;
}

/* Start batch b if every pending node of it has asked or the window passed since the first. */
size_t ndz_lab_image_tasks(struct ndz_lab *l, const char *image, const char *to)
{
	size_t count = 0;

	for (size_t k = 0; k < NDZ_LAB_NODES; k++) {
		struct ndz_lab_node *n = &l->n[k];

		if (!n->used || n->task != NDZ_LAB_RELOAD || strcmp(n->arg, image) != 0)
			continue;
		count++;
		if (to && !to[0])
			set_task(n, NDZ_LAB_NONE, NULL, 0, 0);
		else if (to)
			snprintf(n->arg, sizeof(n->arg), "%s", to);
	}
	if (count && to)
		l->changed = 1;
	return count;
}

static int batch_go(struct ndz_lab *l, uint32_t b, uint64_t now, uint32_t *wait_ms)
{
	uint64_t first = UINT64_MAX;
	int all = 1;

	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		const struct ndz_lab_node *n = &l->n[k];

		if (!n->used || n->batch != b || n->task != NDZ_LAB_RELOAD ||
		    n->state != NDZ_LAB_PENDING)
			continue;
		if (!n->asked_ms)
			all = 0;
		else if (n->asked_ms < first)
			first = n->asked_ms;
	}
	if (!all && now < first + l->window_ms) {
		uint64_t left = first + l->window_ms - now;

		*wait_ms = (uint32_t)(left < NDZ_LAB_ASK_AGAIN_MS ? left : NDZ_LAB_ASK_AGAIN_MS);
		return 0;
	}
	for (int k = 0; k < NDZ_LAB_NODES; k++)
		if (l->n[k].used && l->n[k].batch == b)
			l->n[k].go = 1;
	return 1;
}

/* Does n have a task to run (pending, running or lost)? Else it boots local. */
static int has_task(const struct ndz_lab_node *n)
{
	return n->task != NDZ_LAB_NONE && n->state != NDZ_LAB_FAILED;
}

void ndz_lab_ask(struct ndz_lab *l, const uint8_t mac[6], uint32_t addr, uint64_t now_ms,
		 struct ndz_lab_answer *a)
{
	int i = by_mac(l, mac);
	struct ndz_lab_node *n = i >= 0 ? &l->n[i] : NULL;

	memset(a, 0, sizeof(*a));
	a->task = NDZ_LAB_LOCAL;
	if (!n)
		return;
	n->addr = addr;
	n->heard_ms = now_ms;
	if (!has_task(n))
		return;
	if (!n->asked_ms)
		n->asked_ms = now_ms ? now_ms : 1;
	if (n->task == NDZ_LAB_RELOAD && !n->go && !batch_go(l, n->batch, now_ms, &a->wait_ms)) {
		a->task = NDZ_LAB_WAIT;
		return;
	}
	a->task = n->task;
	a->opts = n->opts;
	memcpy(a->arg, n->arg, sizeof(a->arg));
	n->state = NDZ_LAB_RUNNING;
}

int ndz_lab_peek(const struct ndz_lab *l, const uint8_t mac[6], struct ndz_lab_answer *a)
{
	int i = by_mac(l, mac);
	const struct ndz_lab_node *n = i >= 0 ? &l->n[i] : NULL;

	memset(a, 0, sizeof(*a));
	a->task = NDZ_LAB_LOCAL;
	if (n && has_task(n)) {
		a->task = n->task;
		a->opts = n->opts;
		memcpy(a->arg, n->arg, sizeof(a->arg));
	}
	return i;
}

static void clean_reason(char *dst, size_t cap, const char *src)
{
	size_t k = 0;

	for (; src[k] && k + 1 < cap; k++)
		dst[k] = (unsigned char)src[k] < 0x20 || src[k] == 0x7f ? '?' : src[k];
	dst[k] = 0;
}

/*
 * Is r the result n reported last, sent again (its reply was lost)? The same
 * outcome and figures (and reason), with the task it ended still ended.
 */
static int is_repeat(const struct ndz_lab_node *n, const struct ndz_lab_result *last,
		     const struct ndz_lab_report *r)
{
	char why[NDZ_LAB_REASON_MAX + 1];

	if (r->kind == NDZ_LAB_PROGRESS || !last->set || last->ok != (r->kind == NDZ_LAB_OK) ||
	    last->bytes != r->bytes || last->ms != r->ms || last->skipped != r->skipped)
		return 0;
	if (last->ok)
		return n->task == NDZ_LAB_NONE;
	clean_reason(why, sizeof(why), r->reason[0] ? r->reason : "no reason given");
	return n->state == NDZ_LAB_FAILED && strcmp(why, last->reason) == 0;
}

int ndz_lab_report(struct ndz_lab *l, const uint8_t mac[6], const struct ndz_lab_report *r,
		   uint64_t now_ms, uint64_t wall_s, struct ndz_error *e)
{
	int i = by_mac(l, mac);
	struct ndz_lab_node *n = i >= 0 ? &l->n[i] : NULL;
	struct ndz_lab_result *res;
	char m[18];

	ndz_labcall_format_mac(mac, m, sizeof(m));
	if (r->kind > NDZ_LAB_FAIL)
		return ndz_error_set(e, NDZ_EINVAL, 0, "node %s: bad report kind %u", m, r->kind);
	if (n && is_repeat(n, &l->last[i], r)) {
		n->heard_ms = now_ms;
		return 1;
	}
	if (!n || n->task == NDZ_LAB_NONE || n->state == NDZ_LAB_FAILED)
		return ndz_error_set(e, NDZ_ENOENT, 0, "node %s: a report without a task", m);
	n->heard_ms = now_ms;
	n->bytes = r->bytes;
	n->total = r->total;
	n->skipped = r->skipped;
	if (r->kind == NDZ_LAB_PROGRESS) {
		n->state = NDZ_LAB_RUNNING;
		return 0;
	}
	res = &l->last[i];
	memset(res, 0, sizeof(*res));
	res->set = 1;
	res->ok = r->kind == NDZ_LAB_OK;
	res->task = n->task;
	memcpy(res->arg, n->arg, sizeof(res->arg));
	res->bytes = r->bytes;
	res->ms = r->ms;
	res->skipped = r->skipped;
	res->wall_s = wall_s;
	if (!res->ok)
		clean_reason(res->reason, sizeof(res->reason), r->reason[0] ? r->reason : "no reason given");
	n->bytes = n->total = n->skipped = 0;   /* the result holds them now */
	if (res->ok)
		set_task(n, NDZ_LAB_NONE, "", 0, 0);
	else
		n->state = NDZ_LAB_FAILED;
	l->changed = 1;
	return 0;
}

size_t ndz_lab_tick(struct ndz_lab *l, uint64_t now_ms)
{
	size_t c = 0;

	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		struct ndz_lab_node *n = &l->n[k];

		if (n->used && n->state == NDZ_LAB_RUNNING && now_ms > n->heard_ms + l->timeout_ms) {
			n->state = NDZ_LAB_LOST;
			c++;
		}
	}
	return c;
}

int ndz_lab_changed(struct ndz_lab *l)
{
	int c = l->changed;

	l->changed = 0;
	return c;
}

void ndz_lab_copy(struct ndz_lab *dst, const struct ndz_lab *src)
{
	if (dst != src)
		memcpy(dst, src, sizeof(*dst));
}

const struct ndz_lab_node *ndz_lab_node(const struct ndz_lab *l, size_t i)
{
	return &l->n[i];
}

const struct ndz_lab_result *ndz_lab_last(const struct ndz_lab *l, size_t i)
{
	return &l->last[i];
}

static const char *const states[] = { "idle", "pending", "running", "lost", "failed" };

const char *ndz_lab_strstate(unsigned state)
{
	return state < 5 ? states[state] : "?";
}

static const char *const optnames[] = { "seed", "zero", "verify" };

void ndz_lab_json(const struct ndz_lab *l, uint64_t now_ms, struct ndz_jbuf *j)
{
	int first = 1;

	ndz_jbuf_printf(j, "{\"nodes\":[");
	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		const struct ndz_lab_node *n = &l->n[k];
		const struct ndz_lab_result *r = &l->last[k];
		char m[18], a[INET_ADDRSTRLEN] = "";
		struct in_addr in = { .s_addr = n->addr };

		if (!n->used)
			continue;
		ndz_labcall_format_mac(n->mac, m, sizeof(m));
		if (n->addr)
			inet_ntop(AF_INET, &in, a, sizeof(a));
		ndz_jbuf_printf(j, "%s{\"mac\":\"%s\",\"name\":", first ? "" : ",", m);
		first = 0;
		ndz_jbuf_string(j, n->name);
		ndz_jbuf_printf(j, ",\"group\":");
		ndz_jbuf_string(j, n->group);
		ndz_jbuf_printf(j, ",\"addr\":\"%s\",\"task\":\"%s\",\"image\":", a,
				ndz_labcall_strtask(n->task));
		ndz_jbuf_string(j, n->arg);
		ndz_jbuf_printf(j, ",\"opts\":[");
		for (int b = 0, c = 0; b < 3; b++)
			if (n->opts & (1u << b))
				ndz_jbuf_printf(j, "%s\"%s\"", c++ ? "," : "", optnames[b]);
		ndz_jbuf_printf(j, "],\"state\":\"%s\",\"bytes\":%" PRIu64 ",\"total\":%" PRIu64
				",\"skipped\":%" PRIu64 ",\"silent_ms\":%" PRIu64 ",\"last\":",
				ndz_lab_strstate(n->state), n->bytes, n->total, n->skipped,
				n->heard_ms && now_ms > n->heard_ms ? now_ms - n->heard_ms : 0);
		if (!r->set) {
			ndz_jbuf_printf(j, "null}");
			continue;
		}
		ndz_jbuf_printf(j, "{\"ok\":%s,\"task\":\"%s\",\"image\":", r->ok ? "true" : "false",
				ndz_labcall_strtask(r->task));
		ndz_jbuf_string(j, r->arg);
		ndz_jbuf_printf(j, ",\"bytes\":%" PRIu64 ",\"ms\":%" PRIu64 ",\"skipped\":%" PRIu64
				",\"time\":%" PRIu64 ",\"reason\":", r->bytes, r->ms, r->skipped,
				r->wall_s);
		ndz_jbuf_string(j, r->reason);
		ndz_jbuf_printf(j, "}}");
	}
	ndz_jbuf_printf(j, "]}");
}

static const char *dash(const char *s)
{
	return *s ? s : "-";
}

/* bytes for people: "1.5 GB" (powers of 1000) */
static const char *human(uint64_t b, char *buf, size_t cap)
{
	static const char *const unit[] = { "B", "kB", "MB", "GB", "TB", "PB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1000 && u < 5) {
		v /= 1000;
		u++;
	}
	snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

void ndz_lab_table(const struct ndz_lab *l, uint64_t now_ms, struct ndz_jbuf *j)
{
	ndz_jbuf_printf(j, "%-17s  %-12s  %-10s  %-20s  %-7s  %-8s  %s\n", "MAC", "NAME", "GROUP",
			"TASK", "STATE", "PROGRESS", "LAST RESULT");
	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		const struct ndz_lab_node *n = &l->n[k];
		const struct ndz_lab_result *r = &l->last[k];
		char m[18], task[96], prog[48] = "-", last[320] = "-", h[24];

		if (!n->used)
			continue;
		ndz_labcall_format_mac(n->mac, m, sizeof(m));
		snprintf(task, sizeof(task), "%s%s%s", n->task ? ndz_labcall_strtask(n->task) : "-",
			 n->task ? " " : "", n->arg);
		for (int b = 0; b < 3; b++)    /* the options as ndzctl reload takes them */
			if (n->opts & (1u << b))
				snprintf(task + strlen(task), sizeof(task) - strlen(task), " --%s",
					 optnames[b]);
		if (n->total && (n->state == NDZ_LAB_RUNNING || n->state == NDZ_LAB_LOST))
			snprintf(prog, sizeof(prog), "%.0f%%", 100.0 * (double)n->bytes /
				 (double)n->total);
		if (n->state == NDZ_LAB_LOST)
			snprintf(prog + strlen(prog), sizeof(prog) - strlen(prog), " %" PRIu64 "s",
				 (now_ms - n->heard_ms) / 1000);
		if (r->set && r->ok)
			snprintf(last, sizeof(last), "ok: %s %s, %s in %.1f s, %" PRIu64 " chunks skipped",
				 ndz_labcall_strtask(r->task), r->arg, human(r->bytes, h, sizeof(h)),
				 (double)r->ms / 1000, r->skipped);
		else if (r->set)
			snprintf(last, sizeof(last), "failed: %s %s: %s", ndz_labcall_strtask(r->task),
				 r->arg, r->reason);
		ndz_jbuf_printf(j, "%-17s  %-12s  %-10s  %-20s  %-7s  %-8s  %s\n", m, dash(n->name),
				dash(n->group), task, ndz_lab_strstate(n->state), prog, last);
	}
}

/* The state file: doc/PROTOCOL.md, "The lab's state file". */
#define HEADER "# ndz lab state 1\n"

static void opts_text(uint8_t opts, char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = 0;
	for (int b = 0; b < 3; b++)
		if (opts & (1u << b))
			len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? "," : "",
						optnames[b]);
	if (!len)
		snprintf(buf, cap, "-");
}

int ndz_lab_save(const struct ndz_lab *l, const char *path, struct ndz_error *e)
{
	size_t cap = 64 + (size_t)NDZ_LAB_NODES * 1024, len;  /* a line is at most ~800 */
	char *buf = malloc(cap);
	int rc;

	if (!buf)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: out of memory", path);
	len = (size_t)snprintf(buf, cap, HEADER);
	for (int k = 0; k < NDZ_LAB_NODES && len < cap; k++) {
		const struct ndz_lab_node *n = &l->n[k];
		const struct ndz_lab_result *r = &l->last[k];
		char m[18], o[24];
		uint8_t st = n->state == NDZ_LAB_RUNNING || n->state == NDZ_LAB_LOST ?
			     NDZ_LAB_PENDING : n->state;

		if (!n->used)
			continue;
		ndz_labcall_format_mac(n->mac, m, sizeof(m));
		opts_text(n->opts, o, sizeof(o));
		len += (size_t)snprintf(buf + len, cap - len, "%s %s %s %s %s %s %s %" PRIu32
					" %s %s %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
					" %s\n", m, dash(n->name), dash(n->group),
					ndz_labcall_strtask(n->task), dash(n->arg), o,
					ndz_lab_strstate(st), n->batch,
					!r->set ? "-" : r->ok ? "ok" : "failed",
					r->set ? ndz_labcall_strtask(r->task) : "-", dash(r->arg),
					r->bytes, r->ms, r->skipped, r->wall_s, dash(r->reason));
	}
	rc = len < cap ? ndz_file_replace(path, buf, len, 0640, e) :
	     ndz_error_set(e, NDZ_ERANGE, 0, "%s: the lab does not fit", path);
	free(buf);
	return rc;
}

/* a task's number by its name (ndz_labcall_strtask), among the first count; or -1 */
static int task_word(const char *s, int count)
{
	for (int k = 0; k < count; k++)
		if (strcmp(s, ndz_labcall_strtask((unsigned)k)) == 0)
			return k;
	return -1;
}

static int word(const char *s, const char *const *list, int count)
{
	for (int k = 0; k < count; k++)
		if (strcmp(s, list[k]) == 0)
			return k;
	return -1;
}

#define LOAD_MAX (16u << 20)              /* a lab file's bytes, at most */

static int u64_field(const char *s, uint64_t *v)
{
	return ndz_parse_dec(s, UINT64_MAX, v, NULL);
}

static int name_field(const char *s, char *dst)
{
	if (strcmp(s, "-") == 0) {
		dst[0] = 0;
		return 0;
	}
	if (!ndz_ctl_valid_name(s))
		return -1;
	strcpy(dst, s);
	return 0;
}

/* One line (without its newline) into slot k; -1 when it is not one of ours. */
static int parse_line(struct ndz_lab *l, char *line)
{
	char *f[15], *reason, *o[8];
	struct ndz_lab_node n = { .used = 1 };
	struct ndz_lab_result r = { 0 };
	uint64_t batch, v[4];
	int task, st, last, lt, k;

	if (ndz_fields_split(line, " ", 0, f, 15, &reason) != 15 ||
	    !reason || ndz_labcall_parse_mac(f[0], n.mac, NULL) || by_mac(l, n.mac) >= 0 ||
	    name_field(f[1], n.name) || name_field(f[2], n.group) ||
	    (n.name[0] && ndz_lab_find(l, n.name) >= 0) ||
	    (task = task_word(f[3], 3)) < 0 || name_field(f[4], n.arg) ||
	    (task != NDZ_LAB_NONE) != (n.arg[0] != 0) ||
	    (st = word(f[6], states, 5)) < 0 || st == NDZ_LAB_RUNNING || st == NDZ_LAB_LOST ||
	    (st == NDZ_LAB_IDLE) != (task == NDZ_LAB_NONE) || u64_field(f[7], &batch) ||
	    batch > UINT32_MAX || (last = word(f[8], (const char *const[]){ "-", "ok", "failed" },
					      3)) < 0 ||
	    name_field(f[10], r.arg))
		return -1;
	if (strcmp(f[5], "-") != 0) {
		int no = ndz_fields_split(f[5], ",", 0, o, 8, NULL);

		if (no < 0)
			return -1;
		for (k = 0; k < no; k++) {
			int b = word(o[k], optnames, 3);

			if (b < 0 || task != NDZ_LAB_RELOAD)
				return -1;
			n.opts |= (uint8_t)(1u << b);
		}
	}
	lt = task_word(f[9], 3);
	for (k = 0; k < 4; k++)
		if (u64_field(f[11 + k], &v[k]))
			return -1;
	if (last && lt != NDZ_LAB_RELOAD && lt != NDZ_LAB_CAPTURE)
		return -1;
	n.task = (uint8_t)task;
	n.state = (uint8_t)st;
	n.batch = (uint32_t)batch;
	if (last) {
		r.set = 1;
		r.ok = last == 1;
		r.task = (uint8_t)lt;
		r.bytes = v[0];
		r.ms = v[1];
		r.skipped = v[2];
		r.wall_s = v[3];
		if (strcmp(reason, "-") != 0)
			clean_reason(r.reason, sizeof(r.reason), reason);
	}
	for (k = 0; k < NDZ_LAB_NODES && l->n[k].used; k++)
		;
	if (k == NDZ_LAB_NODES)
		return -1;
	l->n[k] = n;
	l->last[k] = r;
	if (n.batch > l->batch)
		l->batch = n.batch;
	return 0;
}

int ndz_lab_load(struct ndz_lab *l, const char *path, size_t *skipped, struct ndz_error *e)
{
	FILE *f = fopen(path, "r");
	char line[1023], *text = NULL;     /* a line is at most ~800 bytes */
	size_t bad = 0, len = 0, cap = 0, n;
	struct ndz_lines lines;
	int r;

	if (skipped)
		*skipped = 0;
	if (!f)
		return errno == ENOENT ? 0 : ndz_error_set(e, NDZ_EIO, errno, "%s", path);
	do {
		if (len == cap) {
			char *t = cap < LOAD_MAX ? realloc(text, cap += 65536) : NULL;

			if (!t) {
				free(text);
				fclose(f);
				return ndz_error_set(e, cap < LOAD_MAX ? NDZ_ENOMEM : NDZ_EINVAL, 0,
						     "%s: %s", path, cap < LOAD_MAX ? "out of memory" :
						     "larger than 16 MiB");
			}
			text = t;
		}
		n = fread(text + len, 1, cap - len, f);
		len += n;
	} while (n);
	if (ferror(f)) {
		free(text);
		fclose(f);
		return ndz_error_set(e, NDZ_EIO, errno, "%s", path);
	}
	fclose(f);
	/* a line too long, cut short by the file's end, or not one of ours is skipped */
	ndz_lines_init(&lines, path, text, len);
	while ((r = ndz_lines_next(&lines, line, sizeof(line), 0, NULL)) != 0) {
		if (r > 0 && line[0] == '#')
			continue;
		bad += r < 0 || lines.unterminated || parse_line(l, line) != 0;
	}
	free(text);
	if (skipped)
		*skipped = bad;
	return 0;
}
