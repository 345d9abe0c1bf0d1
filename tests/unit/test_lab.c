/* Unit tests for lib/master/lab (tasks, asks, reports, group window, lost nodes, state file). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "master/lab.h"
#include "master/wol.h"
#include "master/mconf.h"

static const uint8_t M1[6] = { 0x52, 0x54, 0, 0, 0, 1 };
static const uint8_t M2[6] = { 0x52, 0x54, 0, 0, 0, 2 };
static const uint8_t M3[6] = { 0x52, 0x54, 0, 0, 0, 3 };

static struct ndz_lab *mk(uint64_t window, uint64_t timeout)
{
	struct ndz_lab *l;

	assert_int_equal(ndz_lab_create(window, timeout, &l, NULL), 0);
	return l;
}

static uint8_t ask(struct ndz_lab *l, const uint8_t *mac, uint64_t now, struct ndz_lab_answer *a)
{
	struct ndz_lab_answer tmp;

	if (!a)
		a = &tmp;
	ndz_lab_ask(l, mac, 0x0100000a, now, a);
	return a->task;
}

static int report(struct ndz_lab *l, const uint8_t *mac, uint8_t kind, uint64_t bytes,
		  const char *reason, uint64_t now)
{
	struct ndz_lab_report r = { .kind = kind, .bytes = bytes, .total = 1000, .ms = 42,
				    .skipped = 3 };

	snprintf(r.reason, sizeof(r.reason), "%s", reason ? reason : "");
	return ndz_lab_report(l, mac, &r, now, 1700000000, NULL);
}

static void test_mac(void **state)
{
	uint8_t m[6];
	char t[18];
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_labcall_parse_mac("52:54:00:AB:cd:0f", m, NULL), 0);
	ndz_labcall_format_mac(m, t, sizeof(t));
	assert_string_equal(t, "52:54:00:ab:cd:0f");
	assert_int_equal(ndz_labcall_parse_mac("52-54-00-ab-cd-0f", m, NULL), 0);
	assert_int_equal(ndz_labcall_parse_mac("52:54:00:ab:cd", m, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "bad MAC address '52:54:00:ab:cd' (aa:bb:cc:dd:ee:ff)");
	assert_int_equal(ndz_labcall_parse_mac("52:54:00:ab:cd:0g", m, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_labcall_parse_mac("52:54:00:ab:cd:0f:", m, NULL), NDZ_EINVAL);
}

static void test_nodes(void **state)
{
	struct ndz_lab *l = mk(0, 0);
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M2, "pc1", "room", &e), NDZ_EEXIST);
	assert_string_equal(ndz_error_msg(&e), "node 52:54:00:00:00:02: another node is named 'pc1'");
	assert_int_equal(ndz_lab_node_add(l, M2, "bad name", NULL, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_lab_node_add(l, M2, "-", NULL, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_lab_node_add(l, M2, NULL, "room", NULL), 0);
	assert_int_equal(ndz_lab_count(l), 2);
	assert_int_equal(ndz_lab_find(l, "pc1"), ndz_lab_find(l, "52:54:00:00:00:01"));
	/* the same MAC again: renamed, not added */
	assert_int_equal(ndz_lab_node_add(l, M1, "pc9", NULL, NULL), 0);
	assert_int_equal(ndz_lab_count(l), 2);
	assert_int_equal(ndz_lab_find(l, "pc1"), -1);
	assert_true(ndz_lab_changed(l));
	assert_false(ndz_lab_changed(l));
	assert_int_equal(ndz_lab_node_remove(l, "pc9", NULL), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_lab_node_remove(l, "pc9", &e), NDZ_ENOENT);
	assert_string_equal(ndz_error_msg(&e), "node 'pc9': no such node");
	assert_int_equal(ndz_lab_count(l), 1);
	ndz_lab_free(l);
	ndz_lab_free(NULL);
}

static void test_task_cycle(void **state)
{
	struct ndz_lab *l = mk(0, 0);
	struct ndz_lab_answer a;
	const struct ndz_lab_result *r;
	struct ndz_error e = { 0 };
	uint8_t macs[4][6];
	int i;

	(void)state;
	/* an unknown node boots local */
	assert_int_equal(ask(l, M1, 1, NULL), NDZ_LAB_LOCAL);
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", NULL, NULL), 0);
	assert_int_equal(ask(l, M1, 1, NULL), NDZ_LAB_LOCAL);
	assert_int_equal(ndz_lab_task(l, "nope", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, &e),
			 NDZ_ENOENT);
	assert_string_equal(ndz_error_msg(&e), "'nope': no such node or group");
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "bad/name", 0, NULL, 0, NULL),
			 NDZ_EINVAL);
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_CAPTURE, "img", NDZ_LAB_SEED, NULL, 0,
				      NULL), NDZ_EINVAL);
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "ubuntu",
				      NDZ_LAB_SEED | NDZ_LAB_VERIFY, macs, 4, NULL), 1);
	assert_memory_equal(macs[0], M1, 6);
	i = ndz_lab_find(l, "pc1");
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_PENDING);
	/* a report before the node asked is a report nobody asked for? no: the task is set */
	assert_int_equal(ask(l, M1, 10, &a), NDZ_LAB_RELOAD);
	assert_string_equal(a.arg, "ubuntu");
	assert_int_equal(a.opts, NDZ_LAB_SEED | NDZ_LAB_VERIFY);
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_RUNNING);
	assert_int_equal(ndz_lab_node(l, i)->addr, 0x0100000a);
	assert_int_equal(report(l, M1, NDZ_LAB_PROGRESS, 500, NULL, 20), 0);
	assert_int_equal(ndz_lab_node(l, i)->bytes, 500);
	assert_int_equal(report(l, M1, NDZ_LAB_OK, 1000, NULL, 30), 0);
	r = ndz_lab_last(l, i);
	assert_true(r->set && r->ok);
	assert_int_equal(r->bytes, 1000);
	assert_int_equal(r->skipped, 3);
	assert_string_equal(r->arg, "ubuntu");
	assert_int_equal(ndz_lab_node(l, i)->task, NDZ_LAB_NONE);
	/* the same result again (its answer was lost): taken, nothing changes */
	assert_int_equal(report(l, M1, NDZ_LAB_OK, 1000, NULL, 35), 1);
	assert_true(ndz_lab_last(l, i)->set && ndz_lab_last(l, i)->ok);
	assert_int_equal(ndz_lab_node(l, i)->task, NDZ_LAB_NONE);
	/* done: boot local next time; a report now is one nobody asked for */
	assert_int_equal(ask(l, M1, 40, NULL), NDZ_LAB_LOCAL);
	assert_int_equal(report(l, M1, NDZ_LAB_OK, 1, NULL, 50), NDZ_ENOENT);
	assert_int_equal(report(l, M3, NDZ_LAB_OK, 1, NULL, 50), NDZ_ENOENT);

	/* a failure: recorded with its reason, the node boots local, the task shows failed */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "wrong", 0, NULL, 0, NULL), 1);
	assert_int_equal(ask(l, M1, 60, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(report(l, M1, NDZ_LAB_FAIL, 0, "image 'wrong': unknown\nimage", 70), 0);
	r = ndz_lab_last(l, i);
	assert_true(r->set && !r->ok);
	assert_string_equal(r->reason, "image 'wrong': unknown?image");
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_FAILED);
	assert_int_equal(ask(l, M1, 80, NULL), NDZ_LAB_LOCAL);
	/* cancel clears it */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_NONE, NULL, 0, NULL, 0, NULL), 1);
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_IDLE);
	/* a capture */
	assert_int_equal(ndz_lab_task(l, "52:54:00:00:00:01", NDZ_LAB_CAPTURE, "golden", 0, NULL,
				      0, NULL), 1);
	assert_int_equal(ask(l, M1, 90, &a), NDZ_LAB_CAPTURE);
	assert_string_equal(a.arg, "golden");
	ndz_lab_free(l);
}

/* ndz_lab_peek: the answer an ask would give for each state, and nothing changes. */
static void test_peek(void **state)
{
	struct ndz_lab *l = mk(3000, 5000);
	struct ndz_lab_answer a;
	int i;

	(void)state;
	assert_int_equal(ndz_lab_peek(l, M1, &a), -1);
	assert_int_equal(a.task, NDZ_LAB_LOCAL);
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M2, "pc2", "room", NULL), 0);
	i = ndz_lab_find(l, "pc1");
	(void)ndz_lab_changed(l);
	/* idle */
	assert_int_equal(ndz_lab_peek(l, M1, &a), i);
	assert_int_equal(a.task, NDZ_LAB_LOCAL);
	/* pending, in a group that waits for both: a peek is no ask, so it starts nothing */
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_RELOAD, "ubuntu", NDZ_LAB_ZERO, NULL, 0,
				      NULL), 2);
	(void)ndz_lab_changed(l);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(ndz_lab_peek(l, M1, &a), i);
		assert_int_equal(a.task, NDZ_LAB_RELOAD);
		assert_int_equal(a.opts, NDZ_LAB_ZERO);
		assert_string_equal(a.arg, "ubuntu");
		assert_int_equal(ndz_lab_peek(l, M2, &a), ndz_lab_find(l, "pc2"));
	}
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_PENDING);
	assert_int_equal(ndz_lab_node(l, i)->asked_ms, 0);
	assert_int_equal(ndz_lab_node(l, i)->heard_ms, 0);
	assert_int_equal(ndz_lab_changed(l), 0);
	assert_int_equal(ask(l, M1, 1000, NULL), NDZ_LAB_WAIT);
	assert_int_equal(ndz_lab_peek(l, M1, &a), i);
	assert_int_equal(a.task, NDZ_LAB_RELOAD);   /* never a wait */
	/* the window counts from the first ask, not from a peek */
	assert_int_equal(ask(l, M1, 3999, NULL), NDZ_LAB_WAIT);
	assert_int_equal(ask(l, M1, 4000, NULL), NDZ_LAB_RELOAD);
	/* running, then lost: still its task */
	assert_int_equal(ndz_lab_peek(l, M1, &a), i);
	assert_int_equal(a.task, NDZ_LAB_RELOAD);
	assert_int_equal(ndz_lab_tick(l, 10000), 1);
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_LOST);
	assert_int_equal(ndz_lab_peek(l, M1, &a), i);
	assert_int_equal(a.task, NDZ_LAB_RELOAD);
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_LOST);
	/* done: local */
	assert_int_equal(report(l, M1, NDZ_LAB_OK, 1000, NULL, 11000), 0);
	assert_int_equal(ndz_lab_peek(l, M1, &a), i);
	assert_int_equal(a.task, NDZ_LAB_LOCAL);
	assert_string_equal(a.arg, "");
	/* failed: local */
	assert_int_equal(ndz_lab_peek(l, M2, &a), ndz_lab_find(l, "pc2"));
	assert_int_equal(ask(l, M2, 12000, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(report(l, M2, NDZ_LAB_FAIL, 0, "bad", 12001), 0);
	assert_int_equal(ndz_lab_peek(l, M2, &a), ndz_lab_find(l, "pc2"));
	assert_int_equal(a.task, NDZ_LAB_LOCAL);
	/* a capture */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_CAPTURE, "golden", 0, NULL, 0, NULL), 1);
	assert_int_equal(ndz_lab_peek(l, M1, &a), i);
	assert_int_equal(a.task, NDZ_LAB_CAPTURE);
	assert_string_equal(a.arg, "golden");
	assert_int_equal(a.opts, 0);
	ndz_lab_free(l);
}

static void test_lost(void **state)
{
	struct ndz_lab *l = mk(1000, 5000);
	int i;

	(void)state;
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", NULL, NULL), 0);
	i = ndz_lab_find(l, "pc1");
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 1);
	assert_int_equal(ask(l, M1, 100, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(ndz_lab_tick(l, 5100), 0);
	assert_int_equal(report(l, M1, NDZ_LAB_PROGRESS, 10, NULL, 5000), 0);
	assert_int_equal(ndz_lab_tick(l, 10000), 0);
	assert_int_equal(ndz_lab_tick(l, 10001), 1);
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_LOST);
	assert_int_equal(ndz_lab_node(l, i)->task, NDZ_LAB_RELOAD);
	assert_int_equal(ndz_lab_tick(l, 20000), 0);
	/* it comes back: asked again, it is told the same task */
	assert_int_equal(ask(l, M1, 30000, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(ndz_lab_node(l, i)->state, NDZ_LAB_RUNNING);
	ndz_lab_free(l);
}

static void test_group_window(void **state)
{
	struct ndz_lab *l = mk(3000, 60000);
	struct ndz_lab_answer a;

	(void)state;
	assert_int_equal(ndz_lab_node_add(l, M1, "a", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M2, "b", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M3, "c", "room", NULL), 0);
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_CAPTURE, "x", 0, NULL, 0, NULL),
			 NDZ_EINVAL);
	/* all three ask: the third starts the batch */
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 3);
	assert_int_equal(ask(l, M1, 1000, &a), NDZ_LAB_WAIT);
	assert_int_equal(a.wait_ms, NDZ_LAB_ASK_AGAIN_MS);
	assert_int_equal(ask(l, M2, 1500, NULL), NDZ_LAB_WAIT);
	assert_int_equal(ask(l, M3, 1600, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(ask(l, M1, 1700, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(ask(l, M2, 1700, NULL), NDZ_LAB_RELOAD);
	/* two ask, the third not: the window starts them; the latecomer joins at once */
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_RELOAD, "debian", 0, NULL, 0, NULL), 3);
	assert_int_equal(ask(l, M1, 10000, NULL), NDZ_LAB_WAIT);
	assert_int_equal(ask(l, M2, 11000, &a), NDZ_LAB_WAIT);
	assert_int_equal(a.wait_ms, NDZ_LAB_ASK_AGAIN_MS);
	assert_int_equal(ask(l, M1, 12999, &a), NDZ_LAB_WAIT);
	assert_int_equal(a.wait_ms, 1);
	assert_int_equal(ask(l, M1, 13000, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(ask(l, M3, 50000, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(ask(l, M2, 50000, NULL), NDZ_LAB_RELOAD);
	/* one node alone (its own batch) starts at once */
	assert_int_equal(ndz_lab_task(l, "b", NDZ_LAB_RELOAD, "debian", 0, NULL, 0, NULL), 1);
	assert_int_equal(ask(l, M2, 60000, NULL), NDZ_LAB_RELOAD);
	/* a node of the batch that failed does not hold the others */
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_RELOAD, "x", 0, NULL, 0, NULL), 3);
	assert_int_equal(ndz_lab_task(l, "c", NDZ_LAB_NONE, NULL, 0, NULL, 0, NULL), 1);
	assert_int_equal(ask(l, M1, 70000, NULL), NDZ_LAB_WAIT);
	assert_int_equal(ask(l, M2, 70001, NULL), NDZ_LAB_RELOAD);
	ndz_lab_free(l);
	/* no window: each starts when it asks */
	l = mk(0, 0);
	assert_int_equal(ndz_lab_node_add(l, M1, "a", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M2, "b", "room", NULL), 0);
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 2);
	assert_int_equal(ask(l, M1, 5, NULL), NDZ_LAB_RELOAD);
	ndz_lab_free(l);
}

static void test_wol_packet(void **state)
{
	uint8_t p[NDZ_WOL_LEN];

	(void)state;
	ndz_wol_packet(M2, p);
	for (int k = 0; k < 6; k++)
		assert_int_equal(p[k], 0xff);
	for (int k = 0; k < 16; k++)
		assert_memory_equal(p + 6 + 6 * k, M2, 6);
}

static void test_messages(void **state)
{
	struct ndz_ctl_labreq r = { .type = NDZ_CTL_REPORT, .id = 77, .kind = NDZ_LAB_FAIL,
				    .bytes = 1ull << 40, .total = 5, .ms = 6, .skipped = 7 }, d;
	struct ndz_ctl_labrep rep = { .type = NDZ_CTL_ASK, .id = 9, .task = NDZ_LAB_RELOAD,
				      .opts = 5, .wait_ms = 300 }, dr;
	static uint8_t b[NDZ_CTL_LABREP_MAX];
	int n;

	(void)state;
	memcpy(r.mac, M3, 6);
	strcpy(r.text, "no space");
	n = ndz_ctl_lab_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, 12 + 40 + 8);
	/* fixed little-endian fields where doc/PROTOCOL.md puts them */
	assert_int_equal(b[5], NDZ_CTL_REPORT);
	assert_int_equal(b[6], 8);
	assert_memory_equal(b + 12, M3, 6);
	assert_int_equal(b[18], NDZ_LAB_FAIL);
	assert_int_equal(b[25], 1);            /* bytes = 2^40: byte 5 of the LE64 at 20 */
	assert_true(ndz_ctl_is_lab(b, (size_t)n));
	assert_int_equal(ndz_ctl_lab_need(b, 12, 0, NULL), n);
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), 0);
	assert_memory_equal(d.mac, M3, 6);
	assert_int_equal(d.bytes, 1ull << 40);
	assert_int_equal(d.skipped, 7);
	assert_string_equal(d.text, "no space");
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n - 1, &d, NULL), NDZ_EPROTO);
	b[52] = 0;                             /* a NUL in the reason */
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), NDZ_EPROTO);

	memset(&r, 0, sizeof(r));
	r.type = NDZ_CTL_ADMIN;
	r.op = NDZ_CTL_OP_RELOAD;
	r.flags = NDZ_CTL_FLAG_WAKE | NDZ_LAB_VERIFY;
	strcpy(r.token, "0123456789abcdef");
	strcpy(r.args[0], "room");
	strcpy(r.args[1], "ubuntu");
	n = ndz_ctl_lab_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, 12 + 4 + 64 + 5 + 7 + 1);
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.op, NDZ_CTL_OP_RELOAD);
	assert_int_equal(d.flags, NDZ_CTL_FLAG_WAKE | NDZ_LAB_VERIFY);
	assert_string_equal(d.token, "0123456789abcdef");
	assert_string_equal(d.args[1], "ubuntu");
	assert_string_equal(d.args[2], "");
	b[n - 1] = 'x';                        /* the last string unterminated */
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), NDZ_EPROTO);

	strcpy(rep.name, "ubuntu");
	n = ndz_ctl_labrep_encode(&rep, b, sizeof(b), NULL);
	assert_int_equal(n, 12 + 8 + 6);
	assert_int_equal(ndz_ctl_lab_need(b, 12, 1, NULL), 16);
	assert_int_equal(ndz_ctl_lab_need(b, 16, 1, NULL), n);
	assert_false(ndz_ctl_is_lab(b, (size_t)n));   /* a reply is no request */
	assert_int_equal(ndz_ctl_labrep_decode(b, (size_t)n, &dr, NULL), 0);
	assert_int_equal(dr.task, NDZ_LAB_RELOAD);
	assert_int_equal(dr.opts, 5);
	assert_int_equal(dr.wait_ms, 300);
	assert_string_equal(dr.name, "ubuntu");
	memset(&rep, 0, sizeof(rep));
	rep.type = NDZ_CTL_ADMIN;
	rep.status = NDZ_CTL_NONODE;
	rep.text = "'x': no such node or group";
	rep.text_len = strlen(rep.text);
	n = ndz_ctl_labrep_encode(&rep, b, sizeof(b), NULL);
	assert_int_equal(ndz_ctl_lab_need(b, 16, 1, NULL), n);
	assert_int_equal(ndz_ctl_labrep_decode(b, (size_t)n, &dr, NULL), 0);
	assert_int_equal(dr.status, NDZ_CTL_NONODE);
	assert_int_equal(dr.text_len, rep.text_len);
	assert_memory_equal(dr.text, rep.text, rep.text_len);
	/* the master's own requests are no lab requests, and the other way round */
	{
		struct ndz_ctl_req g = { .type = NDZ_CTL_GET, .id = 1 };
		struct ndz_ctl_req q;

		strcpy(g.name, "ubuntu");
		n = ndz_ctl_req_encode(&g, b, sizeof(b), NULL);
		assert_false(ndz_ctl_is_lab(b, (size_t)n));
		assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), NDZ_EPROTO);
		r.type = NDZ_CTL_ASK;
		n = ndz_ctl_lab_encode(&r, b, sizeof(b), NULL);
		assert_int_equal(n, 20);
		assert_int_equal(ndz_ctl_req_decode(b, (size_t)n, &q, NULL), NDZ_EINVAL);
	}
}

static char path[64];

static void test_state_file(void **state)
{
	struct ndz_lab *l = mk(5000, 0), *m = mk(5000, 0);
	struct ndz_jbuf j1, j2;
	static char b1[8192], b2[8192];
	size_t skipped;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/test_lab.%d", (int)getpid());
	assert_int_equal(ndz_lab_load(l, path, &skipped, NULL), 0);  /* missing: empty */
	assert_int_equal(ndz_lab_count(l), 0);
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M2, NULL, "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M3, "pc3", NULL, NULL), 0);
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_RELOAD, "ubuntu", NDZ_LAB_ZERO | NDZ_LAB_SEED,
				      NULL, 0, NULL), 2);
	assert_int_equal(ndz_lab_task(l, "pc3", NDZ_LAB_RELOAD, "win", 0, NULL, 0, NULL), 1);
	assert_int_equal(ask(l, M3, 5, NULL), NDZ_LAB_RELOAD);
	assert_int_equal(report(l, M3, NDZ_LAB_FAIL, 7, "disk  too small", 6), 0);
	assert_int_equal(ask(l, M1, 5, NULL), NDZ_LAB_WAIT);
	assert_int_equal(ndz_lab_save(l, path, NULL), 0);
	f = fopen(path, "a");
	assert_non_null(f);
	fputs("garbage line\n52:54:00:00:00:09 x - none - - idle 0 - - - 0 0 0 0\n", f);
	fclose(f);
	assert_int_equal(ndz_lab_load(m, path, &skipped, NULL), 0);
	assert_int_equal(skipped, 2);
	assert_int_equal(ndz_lab_count(m), 3);
	ndz_jbuf_init(&j1, b1, sizeof(b1));
	ndz_jbuf_init(&j2, b2, sizeof(b2));
	/* the same JSON but for the address and silence, which are not kept */
	for (int i = 0; i < NDZ_LAB_NODES; i++) {
		struct ndz_lab_node *n = (struct ndz_lab_node *)ndz_lab_node(l, i);

		n->addr = 0;
		n->heard_ms = 0;
		n->asked_ms = 0;
	}
	ndz_lab_json(l, 100, NDZ_LAB_HISTORY, &j1);
	ndz_lab_json(m, 100, NDZ_LAB_HISTORY, &j2);
	assert_false(j1.over);
	assert_string_equal(b1, b2);
	assert_non_null(strstr(b1, "\"reason\":\"disk  too small\""));
	assert_non_null(strstr(b1, "\"opts\":[\"seed\",\"zero\",\"verify\"]"));
	/* the group still starts together after the restart */
	assert_int_equal(ask(m, M1, 1, NULL), NDZ_LAB_WAIT);
	assert_int_equal(ask(m, M2, 2, NULL), NDZ_LAB_RELOAD);
	unlink(path);
	ndz_lab_free(l);
	ndz_lab_free(m);
}

/*
 * The history: a node keeps its NDZ_LAB_HISTORY newest results, newest first, in the
 * JSON and through the state file; the task says when and by whom it was set and
 * how long it runs; a node of a batch not started says k of n asked.
 */
static void test_history(void **state)
{
	struct ndz_lab *l = mk(5000, 0), *m = mk(5000, 0);
	static char b1[65536], b2[65536];
	struct ndz_jbuf j1, j2;
	size_t skipped;
	char want[64];
	int i;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/test_lab_hist.%d", (int)getpid());
	assert_int_equal(ndz_lab_node_add(l, M1, "a", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M2, "b", "room", NULL), 0);
	i = ndz_lab_find(l, "a");
	assert_null(ndz_lab_history(l, (size_t)i, 0));
	for (int k = 0; k < NDZ_LAB_HISTORY + 3; k++) {
		char img[16];

		snprintf(img, sizeof(img), "img%d", k);
		ndz_lab_origin(l, 1700000000 + (uint64_t)k, "http 10.0.0.5");
		assert_int_equal(ndz_lab_task(l, "a", NDZ_LAB_RELOAD, img, 0, NULL, 0, NULL), 1);
		assert_int_equal(ndz_lab_node(l, (size_t)i)->set_s, 1700000000 + (uint64_t)k);
		assert_string_equal(ndz_lab_node(l, (size_t)i)->by, "http 10.0.0.5");
		assert_int_equal(ask(l, M1, 1000 * (uint64_t)k + 1, NULL), NDZ_LAB_RELOAD);
		assert_int_equal(report(l, M1, k % 3 ? NDZ_LAB_OK : NDZ_LAB_FAIL, (uint64_t)k,
					"bad disk", 1000 * (uint64_t)k + 2), 0);
		if (!(k % 3))   /* failed: cancelled before the next */
			assert_int_equal(ndz_lab_task(l, "a", NDZ_LAB_NONE, NULL, 0, NULL, 0, NULL), 1);
	}
	/* the newest NDZ_LAB_HISTORY, newest first; the oldest three are gone */
	for (int k = 0; k < NDZ_LAB_HISTORY; k++) {
		const struct ndz_lab_result *r = ndz_lab_history(l, (size_t)i, (size_t)k);
		char img[16];

		assert_non_null(r);
		snprintf(img, sizeof(img), "img%d", NDZ_LAB_HISTORY + 2 - k);
		assert_string_equal(r->arg, img);
		assert_int_equal(r->bytes, NDZ_LAB_HISTORY + 2 - k);
	}
	assert_null(ndz_lab_history(l, (size_t)i, NDZ_LAB_HISTORY));
	/* the figures for /metrics: 7 reloads ok (of 42 ms each), 4 failed, none captured */
	{
		const struct ndz_lab_stats *st = ndz_lab_stats(l);

		assert_int_equal(st->results[0][1], 7);
		assert_int_equal(st->results[0][0], 4);
		assert_int_equal(st->results[1][0] + st->results[1][1], 0);
		assert_int_equal(st->reload_count, 7);
		assert_int_equal(st->reload_ms_sum, 7 * 42);
		for (int b = 0; b < NDZ_LAB_BUCKETS; b++)
			assert_int_equal(st->reload_le[b], 7);
		/* a result sent again is not counted again */
		assert_int_equal(report(l, M1, NDZ_LAB_OK, NDZ_LAB_HISTORY + 2, NULL, 99999), 1);
		assert_int_equal(st->results[0][1], 7);
	}
	assert_ptr_equal(ndz_lab_history(l, (size_t)i, 0), ndz_lab_last(l, (size_t)i));
	/* a group reload: the first to ask waits, 1 of 2; running says for how long */
	ndz_lab_origin(l, 1800000000, "admin socket");
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 2);
	assert_int_equal(ask(l, M2, 50000, NULL), NDZ_LAB_WAIT);
	ndz_jbuf_init(&j1, b1, sizeof(b1));
	ndz_lab_json(l, 50001, NDZ_LAB_HISTORY, &j1);
	assert_false(j1.over);
	assert_non_null(strstr(b1, "\"waiting\":{\"asked\":1,\"of\":2}"));
	assert_non_null(strstr(b1, "\"set_time\":1800000000,\"by\":\"admin socket\""));
	assert_int_equal(ask(l, M1, 51000, NULL), NDZ_LAB_RELOAD);
	ndz_jbuf_init(&j1, b1, sizeof(b1));
	ndz_lab_json(l, 52000, NDZ_LAB_HISTORY, &j1);
	assert_non_null(strstr(b1, "\"running_ms\":1000,\"waiting\":null"));
	snprintf(want, sizeof(want), "\"image\":\"img%d\"", NDZ_LAB_HISTORY + 2);
	assert_non_null(strstr(b1, want));
	assert_null(strstr(b1, "\"image\":\"img2\""));
	/* through the state file: the same history */
	assert_int_equal(ndz_lab_save(l, path, NULL), 0);
	assert_int_equal(ndz_lab_load(m, path, &skipped, NULL), 0);
	assert_int_equal(skipped, 0);
	i = ndz_lab_find(m, "a");
	for (int k = 0; k < NDZ_LAB_HISTORY; k++) {
		const struct ndz_lab_result *r = ndz_lab_history(l, (size_t)ndz_lab_find(l, "a"),
								 (size_t)k);
		const struct ndz_lab_result *s = ndz_lab_history(m, (size_t)i, (size_t)k);

		assert_non_null(s);
		assert_string_equal(r->arg, s->arg);
		assert_int_equal(r->ok, s->ok);
		assert_int_equal(r->bytes, s->bytes);
		assert_int_equal(r->wall_s, s->wall_s);
		assert_string_equal(r->reason, s->reason);
	}
	assert_null(ndz_lab_history(m, (size_t)i, NDZ_LAB_HISTORY));
	/* a result line for a node not given above it is skipped, not taken */
	{
		FILE *f = fopen(path, "a");

		assert_non_null(f);
		fputs("result 52:54:00:00:00:09 ok reload x 1 2 3 4 -\n"
		      "result 52:54:00:00:00:01 maybe reload x 1 2 3 4 -\n", f);
		assert_int_equal(fclose(f), 0);
	}
	ndz_lab_free(m);
	m = mk(5000, 0);
	assert_int_equal(ndz_lab_load(m, path, &skipped, NULL), 0);
	assert_int_equal(skipped, 2);
	ndz_jbuf_init(&j1, b1, sizeof(b1));
	ndz_jbuf_init(&j2, b2, sizeof(b2));
	ndz_lab_json(m, 1, NDZ_LAB_HISTORY, &j2);
	assert_non_null(strstr(b2, want));
	unlink(path);
	ndz_lab_free(l);
	ndz_lab_free(m);
}

/* A copy taken before a change puts the lab back as it was (a change that could not be saved). */
static void test_copy(void **state)
{
	struct ndz_lab *l = mk(0, 0), *undo = mk(0, 0);
	struct ndz_jbuf j1, j2;
	static char b1[8192], b2[8192];

	(void)state;
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", "room", NULL), 0);
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "ubuntu", NDZ_LAB_ZERO, NULL, 0,
				      NULL), 1);
	ndz_jbuf_init(&j1, b1, sizeof(b1));
	ndz_lab_json(l, 10, 0, &j1);
	assert_int_equal(ndz_lab_changed(l), 1);
	ndz_lab_copy(undo, l);
	assert_int_equal(ndz_lab_node_add(l, M2, "pc2", "room", NULL), 0);
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_NONE, "", 0, NULL, 0, NULL), 2);
	assert_int_equal(ndz_lab_count(l), 2);
	ndz_lab_copy(l, undo);
	ndz_jbuf_init(&j2, b2, sizeof(b2));
	ndz_lab_json(l, 10, 0, &j2);
	assert_int_equal(ndz_lab_count(l), 1);
	assert_string_equal(b1, b2);
	assert_int_equal(ndz_lab_changed(l), 0);  /* as it was when copied: already told */
	assert_int_equal(ask(l, M1, 20, NULL), NDZ_LAB_RELOAD);
	ndz_lab_copy(l, l);                       /* onto itself: nothing happens */
	assert_int_equal(ndz_lab_count(l), 1);
	ndz_lab_free(l);
	ndz_lab_free(undo);
}

/* A full lab of long names and reasons: the JSON fits an admin reply, the state file reads back. */
static void test_full(void **state)
{
	struct ndz_lab *l = mk(0, 0), *m = mk(0, 0);
	static char b[NDZ_CTL_TEXT_BIG + 1], b2[NDZ_CTL_TEXT_BIG + 1];
	char name[NDZ_CTL_NAME_MAX + 1], reason[NDZ_LAB_REASON_MAX + 1];
	struct ndz_jbuf j, j2;
	uint8_t mac[6] = { 2, 0, 0, 0, 0, 0 };
	const char *long_group = "a-group-name-that-is-long-enough-to-matter-here-0123456789ab";
	const char *long_image = "an-image-name-that-is-long-enough-to-matter-here-0123456789abcd";
	size_t skipped;

	(void)state;
	/* '"' is cleaned to '\'': a reason is never longer in JSON than it is */
	memset(reason, '"', NDZ_LAB_REASON_MAX);
	reason[NDZ_LAB_REASON_MAX] = 0;
	for (int k = 0; k < NDZ_LAB_NODES; k++) {
		mac[4] = (uint8_t)(k >> 8);
		mac[5] = (uint8_t)k;
		snprintf(name, sizeof(name), "%060d", k);
		assert_int_equal(ndz_lab_node_add(l, mac, name, long_group, NULL), 0);
		/* its disk holds the image: the next reload seeds ("lineage"), fails part-way */
		assert_int_equal(ndz_lab_task(l, name, NDZ_LAB_RELOAD, long_image, 0, NULL, 0,
					      NULL), 1);
		ndz_lab_ask(l, mac, 1, 1, &(struct ndz_lab_answer){ 0 });
		assert_int_equal(report(l, mac, NDZ_LAB_OK, UINT64_MAX, NULL, 2), 0);
		if (k == 0)       /* every lineage kept, long names: captures over its disk */
			for (int c = 0; c < NDZ_LAB_LINEAGES; c++) {
				snprintf(name, sizeof(name), "%064d", c);
				assert_int_equal(ndz_lab_task(l, "000000000000000000000000000000"
							      "000000000000000000000000000000",
							      NDZ_LAB_CAPTURE, name, 0, NULL, 0, NULL), 1);
				ndz_lab_ask(l, mac, 1, 1, &(struct ndz_lab_answer){ 0 });
				assert_int_equal(report(l, mac, NDZ_LAB_OK, 1, NULL, 2), 0);
				assert_string_equal(ndz_lab_lineage(l, name), long_image);
			}
		snprintf(name, sizeof(name), "%060d", k);
		assert_int_equal(ndz_lab_task(l, name, NDZ_LAB_RELOAD, long_image, NDZ_LAB_ZERO,
					      NULL, 0, NULL), 1);
		assert_int_equal(ndz_lab_node(l, (size_t)k)->why, NDZ_LAB_WHY_LINEAGE);
		ndz_lab_ask(l, mac, 1, 1, &(struct ndz_lab_answer){ 0 });
		assert_int_equal(report(l, mac, NDZ_LAB_FAIL, UINT64_MAX, reason, 2), 0);
	}
	assert_int_equal(ndz_lab_node_add(l, M1, NULL, NULL, NULL), NDZ_ERANGE);
	ndz_jbuf_init(&j, b, sizeof(b));
	ndz_lab_json(l, 3, 0, &j);
	fprintf(stderr, "json %zu of %zu\n", j.len, sizeof(b));
	assert_false(j.over);
	ndz_jbuf_init(&j, b, sizeof(b));
	ndz_lab_table(l, 3, &j);
	assert_false(j.over);
	snprintf(path, sizeof(path), "/tmp/test_lab_full.%d", (int)getpid());
	assert_int_equal(ndz_lab_save(l, path, NULL), 0);
	assert_int_equal(ndz_lab_load(m, path, &skipped, NULL), 0);
	assert_int_equal(skipped, 0);
	assert_int_equal(ndz_lab_count(m), NDZ_LAB_NODES);
	for (int i = 0; i < NDZ_LAB_NODES; i++)
		((struct ndz_lab_node *)ndz_lab_node(l, i))->addr = 0;
	ndz_jbuf_init(&j, b, sizeof(b));
	ndz_jbuf_init(&j2, b2, sizeof(b2));
	ndz_lab_json(l, 0, 0, &j);
	ndz_lab_json(m, 0, 0, &j2);
	assert_string_equal(b, b2);
	unlink(path);
	ndz_lab_free(l);
	ndz_lab_free(m);
}

/* run node mac's task to its end: asked (the answer into a), then ok or failed */
static void run_task(struct ndz_lab *l, const uint8_t *mac, int ok, struct ndz_lab_answer *a)
{
	struct ndz_lab_answer tmp;

	assert_int_not_equal(ask(l, mac, 1, a ? a : &tmp), NDZ_LAB_LOCAL);
	assert_int_equal(report(l, mac, ok ? NDZ_LAB_OK : NDZ_LAB_FAIL, 10, ok ? NULL : "cut",
				2), 0);
}

#define SEEDED (NDZ_LAB_SEED | NDZ_LAB_VERIFY)

/*
 * A reload seeds and verifies by default when the node's disk holds an image of the
 * task's image's lineage: the next version of what it holds (same name, or captured
 * over a disk that held it), not an unrelated image; --full (NDZ_LAB_FULL) overrides.
 */
static void test_seed(void **state)
{
	struct ndz_lab *l = mk(0, 0);
	struct ndz_lab_answer a;
	struct ndz_error e = { 0 };
	const struct ndz_lab_node *n1, *n2, *n3;
	static const uint8_t u1[16] = { 1, 2, 3 };
	static char b[16384];
	struct ndz_jbuf j;

	(void)state;
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M2, "pc2", "room", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M3, "pc3", NULL, NULL), 0);
	n1 = ndz_lab_node(l, (size_t)ndz_lab_find(l, "pc1"));
	n2 = ndz_lab_node(l, (size_t)ndz_lab_find(l, "pc2"));
	n3 = ndz_lab_node(l, (size_t)ndz_lab_find(l, "pc3"));
	/* a disk not known: full */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 1);
	assert_int_equal(n1->opts, 0);
	assert_int_equal(n1->why, NDZ_LAB_WHY_NO);
	assert_false(n1->disk.set);
	run_task(l, M1, 1, &a);
	assert_int_equal(a.opts, 0);
	assert_true(n1->disk.set);
	assert_false(n1->disk.partial);
	assert_string_equal(n1->disk.image, "ubuntu");
	assert_string_equal(n1->disk.lineage, "ubuntu");
	assert_int_equal(ndz_lab_disk_uuid(l, M1, "debian", u1), 0);    /* not what it holds */
	assert_int_equal(ndz_lab_disk_uuid(l, M1, "ubuntu", u1), 1);
	assert_memory_equal(n1->disk.uuid, u1, 16);
	/* the image's next version (the same name): seeded and verified, the node told so */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 1);
	assert_int_equal(n1->opts, SEEDED);
	assert_int_equal(n1->why, NDZ_LAB_WHY_LINEAGE);
	assert_int_equal(ask(l, M1, 1, &a), NDZ_LAB_RELOAD);
	assert_int_equal(a.opts, SEEDED);
	/* an unrelated image: full */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "debian", NDZ_LAB_ZERO, NULL, 0,
				      NULL), 1);
	assert_int_equal(n1->opts, NDZ_LAB_ZERO);
	assert_int_equal(n1->why, NDZ_LAB_WHY_NO);
	/* --full overrides the lineage; never sent to the node */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "ubuntu", NDZ_LAB_FULL, NULL, 0,
				      NULL), 1);
	assert_int_equal(n1->opts, 0);
	assert_int_equal(n1->why, NDZ_LAB_WHY_FULL);
	assert_int_equal(ask(l, M1, 1, &a), NDZ_LAB_RELOAD);
	assert_int_equal(a.opts, 0);
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "ubuntu", NDZ_LAB_FULL | NDZ_LAB_SEED,
				      NULL, 0, &e), NDZ_EINVAL);
	assert_non_null(strstr(ndz_error_msg(&e), "seeds or is full"));
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_CAPTURE, "x", NDZ_LAB_FULL, NULL, 0, NULL),
			 NDZ_EINVAL);
	/* --seed asked: seeded and verified whatever the disk holds */
	assert_int_equal(ndz_lab_task(l, "pc3", NDZ_LAB_RELOAD, "debian", NDZ_LAB_SEED, NULL, 0,
				      NULL), 1);
	assert_int_equal(n3->opts, SEEDED);
	assert_int_equal(n3->why, NDZ_LAB_WHY_ASKED);
	/* a group: each node by its own disk */
	assert_int_equal(ndz_lab_task(l, "room", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 2);
	assert_int_equal(n1->opts, SEEDED);
	assert_int_equal(n2->opts, 0);
	/* a failed reload leaves part of the image: the retry seeds (and resumes) */
	run_task(l, M2, 0, NULL);
	assert_true(n2->disk.set);
	assert_true(n2->disk.partial);
	assert_string_equal(n2->disk.image, "ubuntu");
	assert_int_equal(ndz_lab_task(l, "pc2", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 1);
	assert_int_equal(n2->opts, SEEDED);
	/* a capture over a disk that held ubuntu: a new version of it, whatever its name */
	run_task(l, M1, 1, NULL);
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_CAPTURE, "golden", 0, NULL, 0, NULL), 1);
	run_task(l, M1, 1, NULL);
	assert_string_equal(ndz_lab_lineage(l, "golden"), "ubuntu");
	assert_string_equal(n1->disk.image, "golden");
	assert_string_equal(n1->disk.lineage, "ubuntu");
	assert_int_equal(ndz_lab_task(l, "pc2", NDZ_LAB_RELOAD, "golden", 0, NULL, 0, NULL), 1);
	assert_int_equal(n2->opts, SEEDED);
	assert_int_equal(n2->why, NDZ_LAB_WHY_LINEAGE);
	/* a failed capture changes nothing of the disk; a cancel neither */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_CAPTURE, "other", 0, NULL, 0, NULL), 1);
	run_task(l, M1, 0, NULL);
	assert_string_equal(n1->disk.image, "golden");
	assert_string_equal(ndz_lab_lineage(l, "other"), "other");
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_NONE, NULL, 0, NULL, 0, NULL), 1);
	assert_string_equal(n1->disk.image, "golden");
	/* a rename: the disks that held it hold the new name, of the same lineage */
	assert_int_equal(ndz_lab_image_tasks(l, "golden", "golden-old"), 1);
	assert_string_equal(n1->disk.image, "golden-old");
	assert_string_equal(ndz_lab_lineage(l, "golden-old"), "ubuntu");
	assert_string_equal(ndz_lab_lineage(l, "golden"), "golden");
	/* shown: the choice and the disk, as JSON and in the table */
	ndz_jbuf_init(&j, b, sizeof(b));
	ndz_lab_json(l, 3, 0, &j);
	assert_false(j.over);
	assert_non_null(strstr(b, "\"opts\":[\"seed\",\"verify\"],\"state\":\"pending\""));
	assert_non_null(strstr(b, "\"seed\":\"lineage\",\"disk\":{\"image\":\"ubuntu\","
			       "\"partial\":true}"));
	assert_non_null(strstr(b, "\"seed\":\"no\",\"disk\":{\"image\":\"golden-old\","
			       "\"partial\":false}"));
	assert_non_null(strstr(b, "\"seed\":\"asked\",\"disk\":null"));
	assert_non_null(strstr(b, "\"lineages\":{\"golden-old\":\"ubuntu\"}}"));
	ndz_jbuf_init(&j, b, sizeof(b));
	ndz_lab_table(l, 3, &j);
	assert_false(j.over);
	assert_non_null(strstr(b, "DISK"));
	assert_non_null(strstr(b, "reload golden-old --seed --verify (lineage)"));
	assert_non_null(strstr(b, "~ubuntu"));
	/* a node added again keeps its disk; removed and added, it is not known */
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", "room", NULL), 0);
	assert_true(n1->disk.set);
	assert_int_equal(ndz_lab_node_remove(l, "pc1", NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", "room", NULL), 0);
	n1 = ndz_lab_node(l, (size_t)ndz_lab_find(l, "pc1"));
	assert_false(n1->disk.set);
	ndz_lab_free(l);
}

/* What the disks hold, why tasks seed and the lineages survive a restart (the state file). */
static void test_seed_state(void **state)
{
	struct ndz_lab *l = mk(0, 0), *m = mk(0, 0), *o = mk(0, 0);
	static const uint8_t u1[16] = { 0xde, 0xad, 0xbe, 0xef, 9 };
	static char b1[16384], b2[16384];
	struct ndz_jbuf j1, j2;
	const struct ndz_lab_node *n;
	size_t skipped;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/test_lab_seed.%d", (int)getpid());
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", NULL, NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M2, "pc2", NULL, NULL), 0);
	assert_int_equal(ndz_lab_node_add(l, M3, "pc3", NULL, NULL), 0);
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 1);
	run_task(l, M1, 1, NULL);
	assert_int_equal(ndz_lab_disk_uuid(l, M1, "ubuntu", u1), 1);
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_CAPTURE, "ubuntu-2", 0, NULL, 0, NULL), 1);
	run_task(l, M1, 1, NULL);
	assert_int_equal(ndz_lab_disk_uuid(l, M1, "ubuntu-2", u1), 1);
	assert_int_equal(ndz_lab_task(l, "pc2", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 1);
	run_task(l, M2, 0, NULL);
	assert_int_equal(ndz_lab_task(l, "pc2", NDZ_LAB_RELOAD, "ubuntu-2", NDZ_LAB_ZERO, NULL, 0,
				      NULL), 1);
	assert_int_equal(ndz_lab_task(l, "pc3", NDZ_LAB_RELOAD, "ubuntu", NDZ_LAB_FULL, NULL, 0,
				      NULL), 1);
	assert_int_equal(ndz_lab_save(l, path, NULL), 0);
	assert_int_equal(ndz_lab_load(m, path, &skipped, NULL), 0);
	assert_int_equal(skipped, 0);
	for (int i = 0; i < NDZ_LAB_NODES; i++)       /* not kept */
		((struct ndz_lab_node *)ndz_lab_node(l, i))->addr = 0;
	ndz_jbuf_init(&j1, b1, sizeof(b1));
	ndz_jbuf_init(&j2, b2, sizeof(b2));
	ndz_lab_json(l, 0, NDZ_LAB_HISTORY, &j1);
	ndz_lab_json(m, 0, NDZ_LAB_HISTORY, &j2);
	assert_string_equal(b1, b2);
	n = ndz_lab_node(m, (size_t)ndz_lab_find(m, "pc1"));
	assert_string_equal(n->disk.image, "ubuntu-2");
	assert_string_equal(n->disk.lineage, "ubuntu");
	assert_memory_equal(n->disk.uuid, u1, 16);
	n = ndz_lab_node(m, (size_t)ndz_lab_find(m, "pc2"));
	assert_int_equal(n->why, NDZ_LAB_WHY_LINEAGE);
	assert_int_equal(n->opts, SEEDED | NDZ_LAB_ZERO);
	assert_true(n->disk.partial);
	assert_int_equal(ndz_lab_node(m, (size_t)ndz_lab_find(m, "pc3"))->why, NDZ_LAB_WHY_FULL);
	/* after the restart a reload of the lineage still seeds, another image does not */
	assert_string_equal(ndz_lab_lineage(m, "ubuntu-2"), "ubuntu");
	assert_int_equal(ndz_lab_task(m, "pc1", NDZ_LAB_RELOAD, "ubuntu", 0, NULL, 0, NULL), 1);
	assert_int_equal(ndz_lab_node(m, (size_t)ndz_lab_find(m, "pc1"))->opts, SEEDED);
	assert_int_equal(ndz_lab_task(m, "pc1", NDZ_LAB_RELOAD, "win", 0, NULL, 0, NULL), 1);
	assert_int_equal(ndz_lab_node(m, (size_t)ndz_lab_find(m, "pc1"))->opts, 0);
	/* the lines as doc/PROTOCOL.md gives them; bad ones skipped and counted */
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fread(b1, 1, sizeof(b1) - 1, f) > 0, 1);
	fclose(f);
	assert_non_null(strstr(b1, "\ndisk 52:54:00:00:00:01 no ubuntu-2 "
			       "deadbeef090000000000000000000000 ubuntu whole\n"));
	assert_non_null(strstr(b1, "\ndisk 52:54:00:00:00:02 lineage ubuntu - ubuntu partial\n"));
	assert_non_null(strstr(b1, "\ndisk 52:54:00:00:00:03 full - - - -\n"));
	assert_non_null(strstr(b1, "\nlineage ubuntu-2 ubuntu\n"));
	f = fopen(path, "a");
	assert_non_null(f);
	fputs("disk 52:54:00:00:00:09 no a - a whole\n"          /* no such node */
	      "disk 52:54:00:00:00:01 no a 12 a whole\n"         /* a bad uuid */
	      "disk 52:54:00:00:00:01 lineage a - a whole\n"     /* a seed without a reload */
	      "disk 52:54:00:00:00:01 no - - a whole\n"          /* a lineage without an image */
	      "lineage ubuntu-2 other\n"                         /* given twice */
	      "lineage x\n", f);
	fclose(f);
	assert_int_equal(ndz_lab_load(o, path, &skipped, NULL), 0);
	assert_int_equal(skipped, 6);
	assert_string_equal(ndz_lab_lineage(o, "ubuntu-2"), "ubuntu");
	/* a state file of a master before lineages (no disk lines): nothing held, full */
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("# ndz lab state 1\n52:54:00:00:00:01 pc1 - reload ubuntu seed pending 3 ok "
	      "reload ubuntu 5 6 7 8 -\n", f);
	fclose(f);
	ndz_lab_free(o);
	o = mk(0, 0);
	assert_int_equal(ndz_lab_load(o, path, &skipped, NULL), 0);
	assert_int_equal(skipped, 0);
	n = ndz_lab_node(o, 0);
	assert_false(n->disk.set);
	assert_int_equal(n->opts, NDZ_LAB_SEED);
	assert_int_equal(n->why, NDZ_LAB_WHY_NO);
	unlink(path);
	ndz_lab_free(l);
	ndz_lab_free(m);
	ndz_lab_free(o);
}

/* The reference model: what each node should be told and hold, kept the simplest way. */
#define NM 6
struct model {
	int used, task, state, failed_last, ok_last, go;
	unsigned batch;
	uint64_t asked;
	char arg[16];
};

static void test_random(void **state)
{
	struct ndz_lab *l = mk(2000, 10000);
	struct model mo[NM];
	unsigned batch = 0;
	uint64_t now = 1;
	uint8_t macs[NM][6];
	const char *groups[] = { "g0", "g1" };
	int told[5] = { 0 };

	(void)state;
	memset(mo, 0, sizeof(mo));
	srand(24);
	for (int k = 0; k < NM; k++) {
		memcpy(macs[k], M1, 6);
		macs[k][5] = (uint8_t)(0x10 + k);
	}
	for (int step = 0; step < 20000; step++) {
		int k = rand() % NM, op = rand() % 9;
		char key[18], img[16];

		ndz_labcall_format_mac(macs[k], key, sizeof(key));
		now += (uint64_t)(rand() % 700);
		switch (op) {
		case 0:          /* add */
			assert_int_equal(ndz_lab_node_add(l, macs[k], NULL, groups[k % 2], NULL), 0);
			if (!mo[k].used)
				memset(&mo[k], 0, sizeof(mo[k]));
			mo[k].used = 1;
			break;
		case 1:          /* remove */
			assert_int_equal(ndz_lab_node_remove(l, key, NULL), mo[k].used ? 0 : NDZ_ENOENT);
			mo[k].used = 0;
			break;
		case 2:          /* reload a node or a group */
		case 3: {
			int grp = op == 3, n = 0;
			const char *t = grp ? groups[k % 2] : key;

			snprintf(img, sizeof(img), "img%d", rand() % 3);
			batch++;
			for (int q = 0; q < NM; q++)
				if (mo[q].used && (grp ? q % 2 == k % 2 : q == k)) {
					mo[q].task = NDZ_LAB_RELOAD;
					mo[q].state = NDZ_LAB_PENDING;
					mo[q].batch = batch;
					mo[q].asked = 0;
					mo[q].go = 0;
					strcpy(mo[q].arg, img);
					n++;
				}
			assert_int_equal(ndz_lab_task(l, t, NDZ_LAB_RELOAD, img, 0, NULL, 0, NULL),
					 n ? n : NDZ_ENOENT);
			if (!n)
				batch--;
			break;
		}
		case 4:          /* cancel */
			assert_int_equal(ndz_lab_task(l, key, NDZ_LAB_NONE, NULL, 0, NULL, 0, NULL),
					 mo[k].used ? 1 : NDZ_ENOENT);
			if (mo[k].used) {
				batch++;
				mo[k].task = 0;
				mo[k].state = NDZ_LAB_IDLE;
				mo[k].batch = batch;
			}
			break;
		case 5: {        /* ask */
			struct ndz_lab_answer a;
			int want = NDZ_LAB_LOCAL;

			ndz_lab_ask(l, macs[k], 1, now, &a);
			if (mo[k].used && mo[k].task && mo[k].state != NDZ_LAB_FAILED) {
				int all = 1;
				uint64_t first = UINT64_MAX;

				if (!mo[k].asked)
					mo[k].asked = now;
				for (int q = 0; q < NM; q++)
					if (mo[q].used && mo[q].batch == mo[k].batch &&
					    mo[q].task && mo[q].state == NDZ_LAB_PENDING) {
						if (!mo[q].asked)
							all = 0;
						else if (mo[q].asked < first)
							first = mo[q].asked;
					}
				if (!mo[k].go && (all || now >= first + 2000))
					for (int q = 0; q < NM; q++)
						if (mo[q].used && mo[q].batch == mo[k].batch)
							mo[q].go = 1;
				want = mo[k].go ? NDZ_LAB_RELOAD : NDZ_LAB_WAIT;
				if (mo[k].go)
					mo[k].state = NDZ_LAB_RUNNING;
			}
			assert_int_equal(a.task, want);
			told[want]++;
			if (want == NDZ_LAB_RELOAD)
				assert_string_equal(a.arg, mo[k].arg);
			break;
		}
		case 6:          /* progress */
		case 7: {        /* result */
			int kind = op == 6 ? NDZ_LAB_PROGRESS : rand() % 2 ? NDZ_LAB_OK : NDZ_LAB_FAIL;
			int okay = mo[k].used && mo[k].task && mo[k].state != NDZ_LAB_FAILED;
			/* the last result sent again: the same figures, its task still ended */
			int again = mo[k].used && (kind == NDZ_LAB_OK ? !mo[k].task && mo[k].ok_last :
				    kind == NDZ_LAB_FAIL && mo[k].state == NDZ_LAB_FAILED &&
				    mo[k].failed_last);

			assert_int_equal(report(l, macs[k], (uint8_t)kind, 5, "r", now),
					 again ? 1 : okay ? 0 : NDZ_ENOENT);
			if (!okay)
				break;
			if (kind == NDZ_LAB_PROGRESS) {
				mo[k].state = NDZ_LAB_RUNNING;
			} else if (kind == NDZ_LAB_OK) {
				mo[k].task = 0;
				mo[k].state = NDZ_LAB_IDLE;
				mo[k].ok_last = 1;
				mo[k].failed_last = 0;
				mo[k].batch = 0;
			} else {
				mo[k].state = NDZ_LAB_FAILED;
				mo[k].ok_last = 0;
				mo[k].failed_last = 1;
			}
			break;
		}
		case 8:          /* time passes */
			ndz_lab_tick(l, now);
			break;
		}
		for (int q = 0; q < NM; q++) {
			struct ndz_lab_answer pa;
			char kq[18];
			int i;

			ndz_labcall_format_mac(macs[q], kq, sizeof(kq));
			i = ndz_lab_find(l, kq);
			assert_int_equal(i >= 0, mo[q].used);
			/* a peek at every node after every step: what an ask would give, but
			 * never a wait, and it changes nothing (the model would tell) */
			assert_int_equal(ndz_lab_peek(l, macs[q], &pa), i);
			assert_int_equal(pa.task, mo[q].used && mo[q].task &&
					 mo[q].state != NDZ_LAB_FAILED ? NDZ_LAB_RELOAD : NDZ_LAB_LOCAL);
			if (pa.task == NDZ_LAB_RELOAD)
				assert_string_equal(pa.arg, mo[q].arg);
			if (i < 0)
				continue;
			assert_int_equal(ndz_lab_node(l, i)->task, mo[q].task);
			if (ndz_lab_node(l, i)->state == NDZ_LAB_LOST)
				assert_int_equal(mo[q].state, NDZ_LAB_RUNNING);
			else
				assert_int_equal(ndz_lab_node(l, i)->state, mo[q].state);
		}
	}
	/* the run went through every answer */
	assert_true(told[NDZ_LAB_LOCAL] > 100 && told[NDZ_LAB_WAIT] > 20 && told[NDZ_LAB_RELOAD] > 100);
	ndz_lab_free(l);
}

static void test_conf_keys(void **state)
{
	static const char none[] = "image a /srv/a.ndz\n";
	static const char good[] = "image a /srv/a.ndz\ngroup-window 0\nnode-timeout 30\n"
				   "wake-interface eth1\n"
				   "admin-socket none\nadmin-listen 10.0.0.1:3565\n"
				   "token-file /etc/ndz/admin.token\nlab-state /var/lib/ndz/lab/state\n"
				   "lab-host-rate 200\nlab-host-burst 400\n";
	struct ndz_mconf *c;
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_mconf_parse(none, sizeof(none) - 1, "m.conf", &c, NULL), 0);
	assert_int_equal(c->group_window, 5);
	assert_int_equal(c->node_timeout, 60);
	assert_null(c->admin_socket);
	assert_int_equal(c->lab_host_rate, 20);
	assert_int_equal(c->lab_host_burst, 40);
	ndz_mconf_free(c);
	assert_int_equal(ndz_mconf_parse(good, sizeof(good) - 1, "m.conf", &c, NULL), 0);
	assert_int_equal(c->group_window, 0);
	assert_int_equal(c->node_timeout, 30);
	assert_string_equal(c->wake_iface, "eth1");
	assert_string_equal(c->admin_socket, "none");
	assert_string_equal(c->admin_listen, "10.0.0.1:3565");
	assert_string_equal(c->token_file, "/etc/ndz/admin.token");
	assert_string_equal(c->lab_state, "/var/lib/ndz/lab/state");
	assert_int_equal(c->lab_host_rate, 200);
	assert_int_equal(c->lab_host_burst, 400);
	ndz_mconf_free(c);
	assert_int_equal(ndz_mconf_parse("lab-host-rate 0\n", 16, "m.conf", &c, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "m.conf:1: bad lab-host-rate (1 to 100000 a second) '0'");
	ndz_error_clear(&e);
	assert_int_equal(ndz_mconf_parse("node-timeout 0\n", 15, "m.conf", &c, &e), NDZ_EINVAL);
	assert_null(c);
	assert_string_equal(ndz_error_msg(&e), "m.conf:1: bad node-timeout (1 to 86400 seconds) '0'");
	ndz_error_clear(&e);
	assert_int_equal(ndz_mconf_parse("token-file a\ntoken-file b\n", 26, "m.conf", &c, &e),
			 NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "m.conf:2: token-file given twice");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mac),
		cmocka_unit_test(test_nodes),
		cmocka_unit_test(test_task_cycle),
		cmocka_unit_test(test_peek),
		cmocka_unit_test(test_lost),
		cmocka_unit_test(test_group_window),
		cmocka_unit_test(test_state_file),
		cmocka_unit_test(test_history),
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_seed),
		cmocka_unit_test(test_seed_state),
		cmocka_unit_test(test_wol_packet),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_conf_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
