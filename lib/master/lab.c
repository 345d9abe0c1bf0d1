/* The lab's nodes and tasks: asks, reports, the group start window, lost nodes, the state file. */
#include <ctype.h>
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
	/* each node's results, newest first ([0] is its last result), at most
	   NDZ_LAB_HISTORY; nhist of them set */
	struct ndz_lab_result hist[NDZ_LAB_NODES][NDZ_LAB_HISTORY];
	uint8_t nhist[NDZ_LAB_NODES];
	uint64_t window_ms, timeout_ms;
	struct ndz_lab_stats st;
	uint64_t origin_s;             /* ndz_lab_origin's: stamped on the tasks set next */
	char origin_by[NDZ_LAB_BY_MAX + 1];
	uint32_t batch;                /* the last batch given */
	int changed;
	/* images whose lineage is not their own name (ndz_lab_lineage), oldest first */
	struct {
		char image[NDZ_CTL_NAME_MAX + 1], lineage[NDZ_CTL_NAME_MAX + 1];
	} lin[NDZ_LAB_LINEAGES];
	size_t nlin;
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
		memset(l->hist[i], 0, sizeof(l->hist[i]));
		l->nhist[i] = 0;
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
	memset(l->hist[i], 0, sizeof(l->hist[i]));
	l->nhist[i] = 0;
	l->changed = 1;
	return 0;
}

static void set_task(struct ndz_lab_node *n, uint8_t task, const char *arg, uint8_t opts,
		     uint32_t batch, const struct ndz_lab *l)
{
	n->why = NDZ_LAB_WHY_NO;
	n->set_s = l && task != NDZ_LAB_NONE ? l->origin_s : 0;
	snprintf(n->by, sizeof(n->by), "%s", l && task != NDZ_LAB_NONE ? l->origin_by : "");
	n->started_ms = 0;
	n->task = task;
	n->opts = task == NDZ_LAB_RELOAD ? opts : 0;
	snprintf(n->arg, sizeof(n->arg), "%s", task == NDZ_LAB_NONE ? "" : arg);
	n->state = task == NDZ_LAB_NONE ? NDZ_LAB_IDLE : NDZ_LAB_PENDING;
	n->batch = batch;
	n->go = 0;
	n->asked_ms = 0;
	n->bytes = n->total = n->skipped = 0;
}

/* ---- lineage (doc/ndzctl.8, "Seeding") ---- */

static int lin_find(const struct ndz_lab *l, const char *image)
{
	for (size_t k = 0; k < l->nlin; k++)
		if (strcmp(l->lin[k].image, image) == 0)
			return (int)k;
	return -1;
}

const char *ndz_lab_lineage(const struct ndz_lab *l, const char *image)
{
	int k = lin_find(l, image);

	return k >= 0 ? l->lin[k].lineage : image;
}

/* image's lineage is lineage from now on (its own name: the entry goes); the oldest goes when full */
static void lin_set(struct ndz_lab *l, const char *image, const char *lineage)
{
	int k = lin_find(l, image);

	if (k >= 0) {
		memmove(&l->lin[k], &l->lin[k + 1], sizeof(l->lin[0]) * (l->nlin - (size_t)k - 1));
		l->nlin--;
	}
	if (strcmp(image, lineage) == 0)
		return;
	if (l->nlin == NDZ_LAB_LINEAGES) {
		memmove(&l->lin[0], &l->lin[1], sizeof(l->lin[0]) * (NDZ_LAB_LINEAGES - 1));
		l->nlin--;
	}
	snprintf(l->lin[l->nlin].image, sizeof(l->lin[0].image), "%s", image);
	snprintf(l->lin[l->nlin].lineage, sizeof(l->lin[0].lineage), "%s", lineage);
	l->nlin++;
}

/* n's reload task (just set, opts as the admin gave them) seeds, or not, and why */
static void choose_seed(const struct ndz_lab *l, struct ndz_lab_node *n, uint8_t opts)
{
	if (opts & NDZ_LAB_FULL)
		n->why = NDZ_LAB_WHY_FULL;
	else if (opts & NDZ_LAB_SEED)
		n->why = NDZ_LAB_WHY_ASKED;
	else if (n->disk.set && strcmp(n->disk.lineage, ndz_lab_lineage(l, n->arg)) == 0)
		n->why = NDZ_LAB_WHY_LINEAGE;
	else
		n->why = NDZ_LAB_WHY_NO;
	/* a seeded reload always ends verified: what it kept is read back too */
	if (n->why == NDZ_LAB_WHY_ASKED || n->why == NDZ_LAB_WHY_LINEAGE)
		n->opts |= NDZ_LAB_SEED | NDZ_LAB_VERIFY;
}

/* n's disk holds image now (partial: part of it), its uuid not known yet */
static void disk_holds(const struct ndz_lab *l, struct ndz_lab_node *n, const char *image,
		       int partial)
{
	memset(&n->disk, 0, sizeof(n->disk));
	n->disk.set = 1;
	n->disk.partial = partial;
	snprintf(n->disk.image, sizeof(n->disk.image), "%s", image);
	snprintf(n->disk.lineage, sizeof(n->disk.lineage), "%s", ndz_lab_lineage(l, image));
}

int ndz_lab_disk_uuid(struct ndz_lab *l, const uint8_t mac[6], const char *image,
		      const uint8_t uuid[16])
{
	int i = by_mac(l, mac);
	struct ndz_lab_node *n = i >= 0 ? &l->n[i] : NULL;

	if (!n || !n->disk.set || strcmp(n->disk.image, image) != 0 ||
	    memcmp(n->disk.uuid, uuid, 16) == 0)
		return 0;
	memcpy(n->disk.uuid, uuid, 16);
	l->changed = 1;
	return 1;
}

static const char *const whys[] = { "no", "asked", "lineage", "full" };

const char *ndz_lab_strwhy(unsigned why)
{
	return why < 4 ? whys[why] : "?";
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
	if (opts & ~(NDZ_LAB_OPTS | NDZ_LAB_FULL) || (task != NDZ_LAB_RELOAD && opts))
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab: options only go with a reload");
	if ((opts & NDZ_LAB_SEED) && (opts & NDZ_LAB_FULL))
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab: a reload seeds or is full, not both");
	l->batch++;
	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		struct ndz_lab_node *n = &l->n[k];

		if (!n->used || (i >= 0 ? k != i : !n->group[0] || strcmp(n->group, target) != 0))
			continue;
		if (task == NDZ_LAB_CAPTURE && i < 0)
			return ndz_error_set(e, NDZ_EINVAL, 0, "group '%.64s': a capture names one node",
					     target);
		set_task(n, task, arg, opts & NDZ_LAB_OPTS, l->batch, l);
		if (task == NDZ_LAB_RELOAD)
			choose_seed(l, n, opts);
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
			set_task(n, NDZ_LAB_NONE, NULL, 0, 0, NULL);
		else if (to)
			snprintf(n->arg, sizeof(n->arg), "%s", to);
	}
	if (count && to)
		l->changed = 1;
	if (to && to[0] && strcmp(image, to) != 0) {
		/* a rename: to is image's versions now, and the disks that held image hold to */
		lin_set(l, to, ndz_lab_lineage(l, image));
		lin_set(l, image, image);
		for (size_t k = 0; k < NDZ_LAB_NODES; k++)
			if (l->n[k].used && l->n[k].disk.set && strcmp(l->n[k].disk.image, image) == 0)
				snprintf(l->n[k].disk.image, sizeof(l->n[k].disk.image), "%s", to);
		l->changed = 1;
	}
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
	if (!n->started_ms)
		n->started_ms = now_ms ? now_ms : 1;
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

/*
 * A reason for people: control characters become '?', and '"' and '\\' (which JSON
 * doubles) become '\'' and '/', so a reason is never longer in JSON than it is (a
 * full lab's JSON fits an admin reply).
 */
static void clean_reason(char *dst, size_t cap, const char *src)
{
	size_t k = 0;

	for (; src[k] && k + 1 < cap; k++)
		dst[k] = (unsigned char)src[k] < 0x20 || src[k] == 0x7f ? '?' :
			 src[k] == '"' ? '\'' : src[k] == '\\' ? '/' : src[k];
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

const uint64_t ndz_lab_bucket_s[NDZ_LAB_BUCKETS] = { 10, 30, 60, 120, 300, 600, 1800, 3600 };

static void count_result(struct ndz_lab_stats *st, const struct ndz_lab_result *r)
{
	st->results[r->task == NDZ_LAB_CAPTURE][r->ok]++;
	if (r->task != NDZ_LAB_RELOAD || !r->ok)
		return;
	for (int b = 0; b < NDZ_LAB_BUCKETS; b++)
		st->reload_le[b] += r->ms <= ndz_lab_bucket_s[b] * 1000;
	st->reload_count++;
	st->reload_ms_sum += r->ms;
}

const struct ndz_lab_stats *ndz_lab_stats(const struct ndz_lab *l)
{
	return &l->st;
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
	if (n && is_repeat(n, &l->hist[i][0], r)) {
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
	/* the history moves down one; the oldest result beyond NDZ_LAB_HISTORY goes */
	memmove(&l->hist[i][1], &l->hist[i][0], sizeof(l->hist[i][0]) * (NDZ_LAB_HISTORY - 1));
	if (l->nhist[i] < NDZ_LAB_HISTORY)
		l->nhist[i]++;
	res = &l->hist[i][0];
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
	count_result(&l->st, res);
	if (res->ok && n->task == NDZ_LAB_CAPTURE) {
		/* a new version of what the disk held: its lineage */
		if (n->disk.set)
			lin_set(l, n->arg, n->disk.lineage);
		disk_holds(l, n, n->arg, 0);
	} else if (n->task == NDZ_LAB_RELOAD) {
		disk_holds(l, n, n->arg, !res->ok);
	}
	n->bytes = n->total = n->skipped = 0;   /* the result holds them now */
	if (res->ok)
		set_task(n, NDZ_LAB_NONE, "", 0, 0, NULL);
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
	return &l->hist[i][0];
}

const struct ndz_lab_result *ndz_lab_history(const struct ndz_lab *l, size_t i, size_t k)
{
	return k < l->nhist[i] ? &l->hist[i][k] : NULL;
}

void ndz_lab_origin(struct ndz_lab *l, uint64_t wall_s, const char *by)
{
	l->origin_s = wall_s;
	snprintf(l->origin_by, sizeof(l->origin_by), "%s", by ? by : "");
}

static const char *const states[] = { "idle", "pending", "running", "lost", "failed" };

const char *ndz_lab_strstate(unsigned state)
{
	return state < 5 ? states[state] : "?";
}

static const char *const optnames[] = { "seed", "zero", "verify" };

/* one result as JSON */
static void result_json(const struct ndz_lab_result *r, struct ndz_jbuf *j)
{
	ndz_jbuf_printf(j, "{\"ok\":%s,\"task\":\"%s\",\"image\":", r->ok ? "true" : "false",
			ndz_labcall_strtask(r->task));
	ndz_jbuf_string(j, r->arg);
	ndz_jbuf_printf(j, ",\"bytes\":%" PRIu64 ",\"ms\":%" PRIu64 ",\"skipped\":%" PRIu64
			",\"time\":%" PRIu64 ",\"reason\":", r->bytes, r->ms, r->skipped, r->wall_s);
	ndz_jbuf_string(j, r->reason);
	ndz_jbuf_printf(j, "}");
}

/* the uuid as 32 lower-case hex digits, "" when not known (all zero) */
static void uuid_text(const uint8_t uuid[16], char out[33])
{
	static const uint8_t zero[16];

	out[0] = 0;
	if (memcmp(uuid, zero, 16) != 0)
		for (int k = 0; k < 16; k++)
			snprintf(out + 2 * k, 3, "%02x", uuid[k]);
}

/*
 * What a disk holds as JSON: its image and whether it is partial. Its lineage is
 * the image's ("lineages"); its uuid is in the state file: a full lab's JSON fits
 * an admin reply (NDZ_CTL_TEXT_BIG) only without them.
 */
static void disk_json(const struct ndz_lab_disk *d, struct ndz_jbuf *j)
{
	if (!d->set) {
		ndz_jbuf_printf(j, "null");
		return;
	}
	ndz_jbuf_printf(j, "{\"image\":");
	ndz_jbuf_string(j, d->image);
	ndz_jbuf_printf(j, ",\"partial\":%s}", d->partial ? "true" : "false");
}

/* Of n's batch (a reload not yet started): its pending nodes that asked, and all. */
static void batch_count(const struct ndz_lab *l, uint32_t b, unsigned *asked, unsigned *of)
{
	*asked = *of = 0;
	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		const struct ndz_lab_node *n = &l->n[k];

		if (!n->used || n->batch != b || n->task != NDZ_LAB_RELOAD ||
		    n->state != NDZ_LAB_PENDING)
			continue;
		++*of;
		*asked += n->asked_ms != 0;
	}
}

void ndz_lab_json(const struct ndz_lab *l, uint64_t now_ms, size_t hist, struct ndz_jbuf *j)
{
	int first = 1;

	ndz_jbuf_printf(j, "{\"nodes\":[");
	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		const struct ndz_lab_node *n = &l->n[k];
		const struct ndz_lab_result *r = &l->hist[k][0];
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
		if (r->set)
			result_json(r, j);
		else
			ndz_jbuf_printf(j, "null");
		ndz_jbuf_printf(j, ",\"set_time\":%" PRIu64 ",\"by\":", n->set_s);
		ndz_jbuf_string(j, n->by);
		ndz_jbuf_printf(j, ",\"running_ms\":%" PRIu64 ",\"waiting\":",
				n->started_ms && now_ms > n->started_ms &&
				(n->state == NDZ_LAB_RUNNING || n->state == NDZ_LAB_LOST) ?
				now_ms - n->started_ms : 0);
		if (n->task == NDZ_LAB_RELOAD && n->state == NDZ_LAB_PENDING && !n->go &&
		    n->asked_ms) {
			unsigned asked, of;

			batch_count(l, n->batch, &asked, &of);
			ndz_jbuf_printf(j, "{\"asked\":%u,\"of\":%u}", asked, of);
		} else {
			ndz_jbuf_printf(j, "null");
		}
		ndz_jbuf_printf(j, ",\"seed\":\"%s\",\"disk\":", ndz_lab_strwhy(n->why));
		disk_json(&n->disk, j);
		ndz_jbuf_printf(j, ",\"history\":[");
		for (unsigned h = 0; h < l->nhist[k] && h < hist; h++) {
			if (h)
				ndz_jbuf_printf(j, ",");
			result_json(&l->hist[k][h], j);
		}
		ndz_jbuf_printf(j, "]}");
	}
	ndz_jbuf_printf(j, "],\"lineages\":{");
	for (size_t k = 0; k < l->nlin; k++) {
		ndz_jbuf_printf(j, "%s", k ? "," : "");
		ndz_jbuf_string(j, l->lin[k].image);
		ndz_jbuf_printf(j, ":");
		ndz_jbuf_string(j, l->lin[k].lineage);
	}
	ndz_jbuf_printf(j, "}}");
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
	ndz_jbuf_printf(j, "%-17s  %-12s  %-10s  %-20s  %-7s  %-8s  %-12s  %s\n", "MAC", "NAME",
			"GROUP", "TASK", "STATE", "PROGRESS", "DISK", "LAST RESULT");
	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		const struct ndz_lab_node *n = &l->n[k];
		const struct ndz_lab_result *r = &l->hist[k][0];
		char m[18], task[112], prog[48] = "-", last[320] = "-", h[24], disk[72] = "-";

		if (!n->used)
			continue;
		ndz_labcall_format_mac(n->mac, m, sizeof(m));
		snprintf(task, sizeof(task), "%s%s%s", n->task ? ndz_labcall_strtask(n->task) : "-",
			 n->task ? " " : "", n->arg);
		for (int b = 0; b < 3; b++)    /* the options as ndzctl reload takes them */
			if (n->opts & (1u << b))
				snprintf(task + strlen(task), sizeof(task) - strlen(task), " --%s",
					 optnames[b]);
		if (n->task == NDZ_LAB_RELOAD && n->why == NDZ_LAB_WHY_LINEAGE)
			snprintf(task + strlen(task), sizeof(task) - strlen(task), " (lineage)");
		else if (n->task == NDZ_LAB_RELOAD && n->why == NDZ_LAB_WHY_FULL)
			snprintf(task + strlen(task), sizeof(task) - strlen(task), " --full");
		if (n->disk.set)
			snprintf(disk, sizeof(disk), "%s%s", n->disk.partial ? "~" : "", n->disk.image);
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
		ndz_jbuf_printf(j, "%-17s  %-12s  %-10s  %-20s  %-7s  %-8s  %-12s  %s\n", m,
				dash(n->name), dash(n->group), task, ndz_lab_strstate(n->state), prog,
				disk, last);
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
	/* a node's line is at most ~800 bytes, a result's ~400 */
	size_t cap = 64 + (size_t)NDZ_LAB_NODES * (1280 + NDZ_LAB_HISTORY * 512) +
		     (size_t)NDZ_LAB_LINEAGES * 160, len;
	char *buf = malloc(cap);
	int rc;

	if (!buf)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: out of memory", path);
	len = (size_t)snprintf(buf, cap, HEADER);
	for (int k = 0; k < NDZ_LAB_NODES && len < cap; k++) {
		const struct ndz_lab_node *n = &l->n[k];
		const struct ndz_lab_result *r = &l->hist[k][0];
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
		/* the older results, newest first (doc/PROTOCOL.md) */
		for (unsigned h = 1; h < l->nhist[k] && len < cap; h++) {
			r = &l->hist[k][h];
			len += (size_t)snprintf(buf + len, cap - len, "result %s %s %s %s %" PRIu64
						" %" PRIu64 " %" PRIu64 " %" PRIu64 " %s\n", m,
						r->ok ? "ok" : "failed", ndz_labcall_strtask(r->task),
						dash(r->arg), r->bytes, r->ms, r->skipped, r->wall_s,
						dash(r->reason));
		}
		/* what its disk holds, and why its reload seeds (doc/PROTOCOL.md) */
		if ((n->disk.set || n->why != NDZ_LAB_WHY_NO) && len < cap) {
			char u[33];

			uuid_text(n->disk.uuid, u);
			len += (size_t)snprintf(buf + len, cap - len, "disk %s %s %s %s %s %s\n", m,
						ndz_lab_strwhy(n->why), dash(n->disk.image), dash(u),
						dash(n->disk.lineage), !n->disk.set ? "-" :
						n->disk.partial ? "partial" : "whole");
		}
	}
	for (size_t k = 0; k < l->nlin && len < cap; k++)
		len += (size_t)snprintf(buf + len, cap - len, "lineage %s %s\n", l->lin[k].image,
					l->lin[k].lineage);
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

/*
 * A result's fields, as a node's line and a result line both give them: LAST LTASK
 * LIMAGE BYTES MS SKIPPED TIME (f[0..6]) and REASON into r. LAST "-" (none) only
 * when none_ok; r->set is 0 then. 0, or -1 when they are not ours.
 */
static int result_fields(char **f, const char *reason, int none_ok, struct ndz_lab_result *r)
{
	uint64_t v[4];
	int last, task;

	memset(r, 0, sizeof(*r));
	last = word(f[0], (const char *const[]){ "-", "ok", "failed" }, 3);
	task = task_word(f[1], 3);
	if (last < 0 || (!last && !none_ok) || name_field(f[2], r->arg))
		return -1;
	for (int k = 0; k < 4; k++)
		if (u64_field(f[3 + k], &v[k]))
			return -1;
	if (!last)
		return 0;
	if (task != NDZ_LAB_RELOAD && task != NDZ_LAB_CAPTURE)
		return -1;
	r->set = 1;
	r->ok = last == 1;
	r->task = (uint8_t)task;
	r->bytes = v[0];
	r->ms = v[1];
	r->skipped = v[2];
	r->wall_s = v[3];
	if (strcmp(reason, "-") != 0)
		clean_reason(r->reason, sizeof(r->reason), reason);
	return 0;
}

/*
 * An older result of a node given above it ("result MAC ok|failed TASK IMAGE BYTES MS
 * SKIPPED TIME REASON"), after those already read; -1 when it is not one of ours.
 */
static int parse_result(struct ndz_lab *l, char *line)
{
	char *f[9], *reason;
	struct ndz_lab_result r;
	uint8_t mac[6];
	int i;

	if (ndz_fields_split(line, " ", 0, f, 9, &reason) != 9 || !reason ||
	    strcmp(f[0], "result") != 0 || ndz_labcall_parse_mac(f[1], mac, NULL) ||
	    (i = by_mac(l, mac)) < 0 || !l->nhist[i] || l->nhist[i] >= NDZ_LAB_HISTORY ||
	    result_fields(f + 2, reason, 0, &r))
		return -1;
	l->hist[i][l->nhist[i]++] = r;
	return 0;
}

static int hex_uuid(const char *s, uint8_t uuid[16])
{
	if (strcmp(s, "-") == 0) {
		memset(uuid, 0, 16);
		return 0;
	}
	if (strlen(s) != 32)
		return -1;
	for (int k = 0; k < 16; k++) {
		unsigned v;

		if (!isxdigit((unsigned char)s[2 * k]) || !isxdigit((unsigned char)s[2 * k + 1]) ||
		    sscanf(s + 2 * k, "%2x", &v) != 1)
			return -1;
		uuid[k] = (uint8_t)v;
	}
	return 0;
}

/*
 * What a node given above holds ("disk MAC WHY IMAGE UUID LINEAGE STATE"); -1 when it
 * is not one of ours.
 */
static int parse_disk(struct ndz_lab *l, char *line)
{
	char *f[7];
	struct ndz_lab_disk d = { 0 };
	uint8_t mac[6];
	int i, why, st;

	if (ndz_fields_split(line, " ", 0, f, 7, NULL) != 7 || strcmp(f[0], "disk") != 0 ||
	    ndz_labcall_parse_mac(f[1], mac, NULL) || (i = by_mac(l, mac)) < 0 ||
	    (why = word(f[2], whys, 4)) < 0 ||
	    (why != NDZ_LAB_WHY_NO && l->n[i].task != NDZ_LAB_RELOAD) ||
	    name_field(f[3], d.image) || hex_uuid(f[4], d.uuid) || name_field(f[5], d.lineage) ||
	    (st = word(f[6], (const char *const[]){ "-", "whole", "partial" }, 3)) < 0 ||
	    (st != 0) != (d.image[0] != 0) || (st != 0) != (d.lineage[0] != 0) ||
	    (!st && strcmp(f[4], "-") != 0))
		return -1;
	d.set = st != 0;
	d.partial = st == 2;
	l->n[i].why = (uint8_t)why;
	l->n[i].disk = d;
	return 0;
}

/* "lineage IMAGE LINEAGE": -1 when it is not one of ours */
static int parse_lineage(struct ndz_lab *l, char *line)
{
	char *f[3], image[NDZ_CTL_NAME_MAX + 1], lineage[NDZ_CTL_NAME_MAX + 1];

	if (ndz_fields_split(line, " ", 0, f, 3, NULL) != 3 || strcmp(f[0], "lineage") != 0 ||
	    name_field(f[1], image) || name_field(f[2], lineage) || !image[0] || !lineage[0] ||
	    lin_find(l, image) >= 0 || l->nlin == NDZ_LAB_LINEAGES)
		return -1;
	lin_set(l, image, lineage);
	return 0;
}

/* One line (without its newline) into slot k; -1 when it is not one of ours. */
static int parse_line(struct ndz_lab *l, char *line)
{
	if (strncmp(line, "result ", 7) == 0)
		return parse_result(l, line);
	if (strncmp(line, "disk ", 5) == 0)
		return parse_disk(l, line);
	if (strncmp(line, "lineage ", 8) == 0)
		return parse_lineage(l, line);

	char *f[15], *reason, *o[8];
	struct ndz_lab_node n = { .used = 1 };
	struct ndz_lab_result r;
	uint64_t batch;
	int task, st, k;

	if (ndz_fields_split(line, " ", 0, f, 15, &reason) != 15 ||
	    !reason || ndz_labcall_parse_mac(f[0], n.mac, NULL) || by_mac(l, n.mac) >= 0 ||
	    name_field(f[1], n.name) || name_field(f[2], n.group) ||
	    (n.name[0] && ndz_lab_find(l, n.name) >= 0) ||
	    (task = task_word(f[3], 3)) < 0 || name_field(f[4], n.arg) ||
	    (task != NDZ_LAB_NONE) != (n.arg[0] != 0) ||
	    (st = word(f[6], states, 5)) < 0 || st == NDZ_LAB_RUNNING || st == NDZ_LAB_LOST ||
	    (st == NDZ_LAB_IDLE) != (task == NDZ_LAB_NONE) || u64_field(f[7], &batch) ||
	    batch > UINT32_MAX || result_fields(f + 8, reason, 1, &r))
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
	n.task = (uint8_t)task;
	n.state = (uint8_t)st;
	n.batch = (uint32_t)batch;
	for (k = 0; k < NDZ_LAB_NODES && l->n[k].used; k++)
		;
	if (k == NDZ_LAB_NODES)
		return -1;
	l->n[k] = n;
	l->hist[k][0] = r;
	l->nhist[k] = r.set;
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
