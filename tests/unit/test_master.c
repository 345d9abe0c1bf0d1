/*
 * Unit tests for lib/master/master: the image master's decisions without sockets or
 * processes: GET answers and the pool, the port and the starting rate, the division
 * of a total rate, the state file and adoption after a restart, the request
 * limiter, upload admission and quota, the STATUS JSON; and a long seeded random
 * run of GETs, session ends, restarts, uploads and quota against a plain model of
 * the rules written here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "core/err.h"
#include "ctl/ctl.h"
#include "master/master.h"
#include "master/mconf.h"

#define MS 1000000ull
#define SEC 1000000000ull

static char updir[] = "/tmp/test_master.XXXXXX";

static uint32_t ip(const char *s)
{
	uint32_t a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a;
}

static struct ndz_mconf *conf(const char *fmt, ...)
{
	struct ndz_mconf *c = NULL;
	struct ndz_error e = { 0 };
	char text[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (ndz_mconf_parse(text, strlen(text), "m.conf", &c, &e) != 0)
		fail_msg("%s", ndz_error_msg(&e));
	return c;
}

static struct ndz_master *make(const struct ndz_mconf *c)
{
	struct ndz_master *m = NULL;

	assert_int_equal(ndz_master_create(c, &m, NULL), 0);
	assert_non_null(m);
	return m;
}

static const uint8_t uuid_a[16] = { 0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

/* A GET that must start a session: started as pid. Returns its slot. */
static int start(struct ndz_master *m, const char *name, const char *from, int pid)
{
	struct ndz_master_plan p;

	assert_int_equal(ndz_master_get(m, name, ip(from), &p, NULL), 0);
	assert_int_equal(p.start, 1);
	ndz_master_started(m, p.slot, pid, uuid_a, 7, 1000, 0);
	return p.slot;
}

static const char *base_conf =
	"pool 239.1.0.0/30\nports 5000-5001\nmax-sessions 3\nrate 100M\ntotal-rate 150M\n"
	"image a /a.ndz allow 10.0.0.0/24 rate 30M\nimage b /b.ndz allow 10.0.0.0/24\n"
	"image c /c.ndz allow 10.0.0.0/24\nimage d /d.ndz allow 10.0.0.0/24\n"
	"image x /x.ndz allow 10.9.0.0/24\n";

/* A fake hold hook: answers what it is told, notes whom it was asked. */
struct hold_fake {
	int answer, calls, pid;
};

static int fake_hold(void *ctx, const struct ndz_master_session *s)
{
	struct hold_fake *h = ctx;

	h->calls++;
	h->pid = s->pid;
	return h->answer;
}

/* A GET for a running session asks it to hold: held, gone (freed) or ending (retired). */
/* want: "NAME VALUE ...", the counters by their names in the STATUS JSON */
static void counts_are(struct ndz_master *m, const char *want)
{
	char name[32];
	unsigned long long v;
	int used;

	while (sscanf(want, " %31s %llu%n", name, &v, &used) == 2) {
		const char *k;
		uint64_t have = 0;
		size_t i = 0;

		while ((k = ndz_master_counter(ndz_master_counters(m), i, &have)) &&
		       strcmp(k, name) != 0)
			i++;
		if (!k)
			fail_msg("no counter '%s'", name);
		if (have != v)
			fail_msg("%s: %llu, want %llu", name, (unsigned long long)have, v);
		want += used;
	}
}

static void test_hold(void **state)
{
	struct ndz_mconf *c = conf("%s", base_conf);
	struct ndz_master *m = make(c);
	struct hold_fake h = { NDZ_MASTER_HELD, 0, 0 };
	const struct ndz_master_session *s;
	struct ndz_master_plan p;
	int sa, sa2, sa3;
	uint32_t ga;

	(void)state;
	ndz_master_set_hold(m, fake_hold, &h);
	sa = start(m, "a", "10.0.0.1", 100);
	assert_int_equal(h.calls, 0);          /* nothing running to ask */
	ga = ndz_master_session(m, (size_t)sa)->group;
	/* held (or no answer in time: the program says held): answered with it */
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.start, 0);
	assert_int_equal(p.slot, sa);
	assert_int_equal(h.calls, 1);
	assert_int_equal(h.pid, 100);
	/* ending: retired with its address; a new session on another address */
	h.answer = NDZ_MASTER_ENDING;
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.start, 1);
	assert_int_not_equal(p.slot, sa);
	assert_int_equal(h.calls, 2);
	s = ndz_master_session(m, (size_t)sa);
	assert_int_equal(s->pid, 100);
	assert_int_equal(s->replaced, 1);
	assert_int_not_equal(ndz_master_session(m, (size_t)p.slot)->group, ga);
	ndz_master_started(m, p.slot, 101, uuid_a, 7, 1000, 0);
	sa2 = p.slot;
	/* the retired one is not asked again; the new one is, and has gone: freed, counted */
	h.answer = NDZ_MASTER_GONE;
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(h.calls, 3);
	assert_int_equal(h.pid, 101);
	assert_int_equal(p.start, 1);
	assert_int_equal(ndz_master_counters(m)->ended, 1);
	assert_int_equal(ndz_master_live(m), 2);   /* the retired one and the reservation */
	/* its address was free again: the new session has it */
	assert_int_equal(p.slot, sa2);
	ndz_master_started(m, p.slot, 102, uuid_a, 7, 1000, 0);
	sa3 = p.slot;
	/* max-sessions 3 all run; one that has gone makes room for the GET that asks */
	start(m, "b", "10.0.0.1", 103);
	assert_int_equal(ndz_master_live(m), 3);
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(h.pid, 102);
	assert_int_equal(p.start, 1);
	assert_int_equal(p.slot, sa3);
	ndz_master_start_failed(m, p.slot);
	/* without a hook nothing is asked */
	h.answer = NDZ_MASTER_GONE;
	ndz_master_set_hold(m, NULL, NULL);
	sa = start(m, "c", "10.0.0.1", 104);
	assert_int_equal(ndz_master_get(m, "c", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.slot, sa);
	assert_int_equal(p.start, 0);
	assert_int_equal(h.calls, 4);
	ndz_master_free(m);
	ndz_mconf_free(c);
}

static void test_get(void **state)
{
	struct ndz_mconf *c = conf("%s", base_conf);
	struct ndz_master *m = make(c);
	struct ndz_master_plan p;
	struct ndz_error e = { 0 };
	const struct ndz_master_session *s;
	int sa, sb;

	(void)state;
	assert_int_equal(ndz_master_get(m, "nope", ip("10.0.0.1"), &p, &e), NDZ_ENOIMAGE);
	assert_int_equal(ndz_ctl_status_of(e.code), NDZ_CTL_UNKNOWN);
	ndz_error_clear(&e);
	assert_int_equal(ndz_master_get(m, "x", ip("10.0.0.1"), &p, &e), NDZ_EDENIED);
	assert_string_equal(ndz_error_msg(&e), "no allow rule matches 10.0.0.1 for image 'x'");
	/* the first GET reserves the lowest address, its port and the image's rate */
	sa = start(m, "a", "10.0.0.1", 100);
	s = ndz_master_session(m, (size_t)sa);
	assert_int_equal(s->group, ip("239.1.0.0"));
	assert_int_equal(s->port, 5000);
	assert_int_equal(s->rate, 30000000);
	assert_int_equal(s->clients, 1);
	assert_memory_equal(s->uuid, uuid_a, 16);
	/* the same image again: the same session, one more client */
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.start, 0);
	assert_int_equal(p.slot, sa);
	ndz_master_served(m, p.slot);
	assert_int_equal(s->clients, 2);
	/* the second: the next address and port, an equal share of the total (150M / 2) */
	sb = start(m, "b", "10.0.0.1", 101);
	s = ndz_master_session(m, (size_t)sb);
	assert_int_equal(s->group, ip("239.1.0.1"));
	assert_int_equal(s->port, 5001);
	assert_int_equal(s->rate, 75000000);
	/* a failed start frees its slot and its address */
	assert_int_equal(ndz_master_get(m, "c", ip("10.0.0.1"), &p, NULL), 0);
	assert_int_equal(p.start, 1);
	ndz_master_start_failed(m, p.slot);
	assert_int_equal(ndz_master_live(m), 2);
	/* the third: address .2 wraps to the first port; max-sessions 3 then */
	start(m, "c", "10.0.0.1", 102);
	assert_int_equal(ndz_master_get(m, "d", ip("10.0.0.1"), &p, NULL), NDZ_ESESSIONS);
	/* a session ends: its address is the lowest free one again */
	assert_int_equal(ndz_master_end(m, 100), sa);
	assert_int_equal(ndz_master_end(m, 100), -1);
	start(m, "d", "10.0.0.1", 103);
	s = ndz_master_session(m, (size_t)sa);
	assert_int_equal(s->group, ip("239.1.0.0"));
	counts_are(m, "sessions_started 4 sessions_ended 1 failed 1 unknown 1 denied 1 too_many 1");
	ndz_master_free(m);
	ndz_mconf_free(c);
}

static void test_pool(void **state)
{
	struct ndz_mconf *c = conf("pool 239.1.0.0/31\nports 5000-5009\nmax-sessions 8\n"
				   "image a /a.ndz allow 10.0.0.0/24\nimage b /b.ndz allow "
				   "10.0.0.0/24\nimage c /c.ndz allow 10.0.0.0/24\n");
	struct ndz_master *m = make(c);
	struct ndz_master_plan p;
	struct ndz_error e = { 0 };

	(void)state;
	start(m, "a", "10.0.0.1", 10);
	start(m, "b", "10.0.0.1", 11);
	assert_int_equal(ndz_master_get(m, "c", ip("10.0.0.1"), &p, &e), NDZ_EPOOL);
	assert_int_equal(ndz_ctl_status_of(e.code), NDZ_CTL_POOL);
	assert_int_equal(ndz_master_counters(m)->pool, 1);
	/* no total-rate: nobody is asked to change */
	assert_int_equal(ndz_master_rates(m, (struct ndz_master_rate[4]){ 0 }, 4), 0);
	ndz_master_free(m);
	ndz_mconf_free(c);
}

static void test_rates(void **state)
{
	struct ndz_mconf *c = conf("%s", base_conf);
	struct ndz_master *m = make(c);
	struct ndz_master_rate r[8];
	int sa, sb, sc;
	size_t n;

	(void)state;
	sa = start(m, "a", "10.0.0.1", 1);     /* 30M: its own rate is under 150M */
	assert_int_equal(ndz_master_rates(m, r, 8), 0);
	sb = start(m, "b", "10.0.0.1", 2);     /* 75M */
	assert_int_equal(ndz_master_rates(m, r, 8), 0);
	sc = start(m, "c", "10.0.0.1", 3);     /* 50M: b is asked down to 50M */
	assert_int_equal(ndz_master_session(m, (size_t)sc)->rate, 50000000);
	n = ndz_master_rates(m, r, 8);
	assert_int_equal(n, 1);
	assert_int_equal(r[0].slot, sb);
	assert_int_equal(r[0].rate, 50000000);
	/* until the session took it, it is asked again */
	assert_int_equal(ndz_master_rates(m, r, 8), 1);
	ndz_master_set_rate(m, r[0].slot, r[0].rate);
	assert_int_equal(ndz_master_rates(m, r, 8), 0);
	/* a ends: b and c get 75M each */
	ndz_master_end(m, 1);
	n = ndz_master_rates(m, r, 8);
	assert_int_equal(n, 2);
	assert_int_equal(r[0].rate, 75000000);
	assert_int_equal(r[1].rate, 75000000);
	(void)sa;
	ndz_master_free(m);
	ndz_mconf_free(c);
}

static int all_alive(void *ctx, const struct ndz_master_session *s)
{
	(void)ctx;
	return s->pid != 666;
}

static int uuid_now(void *ctx, const char *image, uint8_t uuid[16])
{
	(void)ctx;
	memcpy(uuid, uuid_a, 16);
	if (strcmp(image, "b") == 0)
		uuid[0] = 0xbb;        /* b was uploaded anew */
	return 0;
}

static void test_state(void **state)
{
	struct ndz_mconf *c = conf("%s", base_conf);
	struct ndz_master *m = make(c), *m2;
	struct ndz_master_session s;
	struct ndz_error e = { 0 };
	char text[4096], again[4096], small[16];
	int n;

	(void)state;
	start(m, "a", "10.0.0.1", 4242);
	start(m, "b", "10.0.0.1", 4343);
	n = ndz_master_state(m, text, sizeof(text), NULL);
	assert_true(n > 0);
	assert_string_equal(text, "4242 a 239.1.0.0 5000 30000000 7 1000 "
			    "aa0102030405060708090a0b0c0d0e0f\n"
			    "4343 b 239.1.0.1 5001 75000000 7 1000 "
			    "aa0102030405060708090a0b0c0d0e0f\n");
	assert_int_equal(ndz_master_state(m, small, sizeof(small), &e), NDZ_ERANGE);
	/* a restarted master adopts what lives, notices b was replaced */
	m2 = make(c);
	strcat(text, "666 c 239.1.0.2 5000 1 1 1 aa0102030405060708090a0b0c0d0e0f\n"
		     "garbage\n4444 d 239.1.0.0 5000 1 1 1 aa0102030405060708090a0b0c0d0e0f\n");
	assert_int_equal(ndz_master_adopt(m2, text, strlen(text), all_alive, uuid_now, NULL,
					  5 * SEC), 2);
	assert_int_equal(ndz_master_live(m2), 2);
	assert_true(ndz_master_session(m2, 0)->adopted);
	assert_false(ndz_master_session(m2, 0)->replaced);
	assert_true(ndz_master_session(m2, 1)->replaced);
	assert_int_equal(ndz_master_session(m2, 1)->started_ns, 5 * SEC);
	assert_int_equal(ndz_master_state(m2, again, sizeof(again), NULL), n);
	assert_memory_equal(again, text, (size_t)n);
	/* a replaced session gets no new clients: b starts anew on a free address */
	start(m2, "b", "10.0.0.1", 5000);
	assert_int_equal(ndz_master_session(m2, 2)->group, ip("239.1.0.2"));
	/* lines that are not exactly eight good fields */
	{
		static const char *const bad[] = {
			"", "1 a 239.1.0.0 5000 1 1 1", "0 a 239.1.0.0 5000 1 1 1 "
			"aa0102030405060708090a0b0c0d0e0f", "1 a 239.1.0.0 5000 1 1 1 "
			"aa0102030405060708090a0b0c0d0e0", "1 a/b 239.1.0.0 5000 1 1 1 "
			"aa0102030405060708090a0b0c0d0e0f", "1 a 239.1.0 5000 1 1 1 "
			"aa0102030405060708090a0b0c0d0e0f", "1 a 239.1.0.0 65536 1 1 1 "
			"aa0102030405060708090a0b0c0d0e0f", "1 a 239.1.0.0 5000 -1 1 1 "
			"aa0102030405060708090a0b0c0d0e0f", "1  a 239.1.0.0 5000 1 1 1 "
			"aa0102030405060708090a0b0c0d0e0f", "1 a 239.1.0.0 5000 1 1 1 "
			"aa0102030405060708090a0b0c0d0e0f ", "1 a 239.1.0.0 5000 1 99999999999 1 "
			"aa0102030405060708090a0b0c0d0e0f", "01 a 239.1.0.0 5000 1 1 1 "
			"aa0102030405060708090a0b0c0d0e0f",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			ndz_error_clear(&e);
			assert_int_equal(ndz_master_state_parse_line(bad[i], strlen(bad[i]), &s, &e),
					 NDZ_EINVAL);
			assert_int_equal(strncmp(ndz_error_msg(&e), "state line: ", 12), 0);
		}
		/* the one hex decoder reads either case (the file is written in lower case) */
		{
			static const char up[] = "1 a 239.1.0.0 5000 1 1 1 "
						 "AA0102030405060708090a0b0c0d0eFF";

			assert_int_equal(ndz_master_state_parse_line(up, strlen(up), &s, &e), 0);
			assert_int_equal(s.uuid[0], 0xaa);
			assert_int_equal(s.uuid[15], 0xff);
		}
	}
	ndz_master_free(m);
	ndz_master_free(m2);
	ndz_mconf_free(c);
}

static void test_host_limit(void **state)
{
	struct ndz_mconf *c = conf("host-rate 2\nhost-burst 3\nimage a /a.ndz\n");
	struct ndz_master *m = make(c);
	uint64_t t = 100 * SEC;

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_true(ndz_master_host_ok(m, ip("10.0.0.1"), t));
	assert_false(ndz_master_host_ok(m, ip("10.0.0.1"), t));
	/* another host has its own bucket */
	assert_true(ndz_master_host_ok(m, ip("10.0.0.2"), t));
	/* half a second earns one request at 2 per second, not two */
	assert_true(ndz_master_host_ok(m, ip("10.0.0.1"), t + 500 * MS));
	assert_false(ndz_master_host_ok(m, ip("10.0.0.1"), t + 500 * MS));
	/* a long pause fills the bucket up to the burst only */
	for (int i = 0; i < 3; i++)
		assert_true(ndz_master_host_ok(m, ip("10.0.0.1"), t + 60 * SEC));
	assert_false(ndz_master_host_ok(m, ip("10.0.0.1"), t + 60 * SEC));
	ndz_master_free(m);
	ndz_mconf_free(c);
}

/*
 * Two hosts whose addresses are 1024 apart shared one slot of the old hashed table
 * (address * 2654435761 mod 1024) and, taking turns, each found it another's and
 * started with a full bucket: no limit at all. Each keeps its own bucket now.
 */
static void test_host_limit_colliders(void **state)
{
	struct ndz_mconf *c = conf("host-rate 1\nhost-burst 2\nimage a /a.ndz\n");
	struct ndz_master *m = make(c);
	uint32_t a = ip("10.0.0.1"), b = ip("10.0.4.1");
	uint64_t t = 100 * SEC;
	unsigned ok_a = 0, ok_b = 0;

	(void)state;
	assert_int_equal((ntohl(a) * 2654435761u) % 1024, (ntohl(b) * 2654435761u) % 1024);
	for (int i = 0; i < 100; i++) {          /* 100 turns in 1 ms */
		ok_a += (unsigned)ndz_master_host_ok(m, a, t + (uint64_t)i * 10000);
		ok_b += (unsigned)ndz_master_host_ok(m, b, t + (uint64_t)i * 10000);
	}
	assert_int_equal(ok_a, 2);
	assert_int_equal(ok_b, 2);
	/* a new host-rate and host-burst (SIGHUP) reach the hosts tracked */
	{
		struct ndz_mconf *c2 = conf("host-rate 1\nhost-burst 5\nimage a /a.ndz\n");

		ndz_master_set_conf(m, c2);
		ok_a = 0;          /* what was earned under the old burst is kept: 2 */
		for (int i = 0; i < 10; i++)
			ok_a += (unsigned)ndz_master_host_ok(m, a, t + 60 * SEC);
		assert_int_equal(ok_a, 2);
		ok_a = 0;          /* then the bucket fills up to the new one */
		for (int i = 0; i < 10; i++)
			ok_a += (unsigned)ndz_master_host_ok(m, a, t + 120 * SEC);
		assert_int_equal(ok_a, 5);
		ndz_master_free(m);
		ndz_mconf_free(c2);
	}
	ndz_mconf_free(c);
}

static uint64_t usage_of(void *ctx, const char *final)
{
	(void)final;
	return *(uint64_t *)ctx;
}

static void test_upload(void **state)
{
	struct ndz_mconf *c = conf("upload-dir %s allow 10.0.0.0/24 upload 10.0.9.0/24\n"
				   "image a /a.ndz allow 10.0.0.0/24 upload 10.0.0.7\n"
				   "quota 10M\nmax-uploads 2\n", updir);
	struct ndz_master *m = make(c);
	struct ndz_error e = { 0 };
	char final[256];
	uint64_t used = 4000000, limit;
	int slot, s2, s3, sa;
	struct ndz_master_plan p;

	(void)state;
	assert_int_equal(ndz_master_upload_begin(m, "a", ip("10.0.0.8"), 0, usage_of, &used, final,
						 sizeof(final), &slot, &limit, &e), NDZ_EDENIED);
	assert_string_equal(ndz_error_msg(&e), "no upload rule matches 10.0.0.8 for image 'a'");
	assert_int_equal(ndz_master_upload_begin(m, ".x", ip("10.0.9.1"), 0, usage_of, &used,
						 final, sizeof(final), &slot, &limit, NULL),
			 NDZ_ENOIMAGE);
	/* declared more than the quota leaves */
	ndz_error_clear(&e);
	assert_int_equal(ndz_master_upload_begin(m, "a", ip("10.0.0.7"), 6000001, usage_of, &used,
						 final, sizeof(final), &slot, &limit, &e),
			 NDZ_EQUOTA);
	assert_int_equal(ndz_ctl_status_of(e.code), NDZ_CTL_QUOTA);
	sa = start(m, "a", "10.0.0.1", 77);
	assert_int_equal(sa, 0);
	assert_int_equal(ndz_master_upload_begin(m, "a", ip("10.0.0.7"), 6000000, usage_of, &used,
						 final, sizeof(final), &slot, &limit, NULL), 0);
	assert_string_equal(final, "/a.ndz");
	assert_int_equal(limit, 6000000);
	assert_int_equal(ndz_master_uploads(m), 1);
	assert_int_equal(ndz_master_upload_begin(m, "a", ip("10.0.0.7"), 0, usage_of, &used, final,
						 sizeof(final), &s2, &limit, NULL), NDZ_EBUSY);
	assert_int_equal(ndz_master_upload_begin(m, "new", ip("10.0.9.1"), 0, usage_of, &used,
						 final, sizeof(final), &s2, &limit, NULL), 0);
	assert_int_equal(ndz_master_upload_begin(m, "new2", ip("10.0.9.1"), 0, usage_of, &used,
						 final, sizeof(final), &s3, &limit, NULL),
			 NDZ_EUPLOADS);
	/* stored: the session of a keeps its clients, a new GET starts another */
	ndz_master_upload_stored(m, slot);
	ndz_master_upload_end(m, slot, 1);
	ndz_master_upload_end(m, s2, 0);
	assert_int_equal(ndz_master_uploads(m), 0);
	assert_true(ndz_master_session(m, 0)->replaced);
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.1"), &p, NULL), 0);
	assert_int_equal(p.start, 1);
	counts_are(m, "uploads 7 uploads_refused 5 uploads_stored 1 uploads_rejected 1");
	ndz_master_free(m);
	ndz_mconf_free(c);
}

static void fake_live(void *ctx, const struct ndz_master_session *s, struct ndz_master_live *out)
{
	(void)ctx;
	out->receivers = 3;
	out->bytes_sent = (uint64_t)s->pid * 10;
}

static void test_status_json(void **state)
{
	struct ndz_mconf *c = conf("image a /a\"b.ndz allow 10.0.0.0/24\n");
	struct ndz_master *m = make(c);
	char buf[4096], tiny[64];
	size_t n;

	(void)state;
	start(m, "a", "10.0.0.1", 12);
	n = ndz_master_status_json(m, 3 * SEC, fake_live, NULL, buf, sizeof(buf));
	assert_int_equal(n, strlen(buf));
	assert_non_null(strstr(buf, "{\"sessions\": [{\"image\": \"a\", \"pid\": 12, \"group\": "
			       "\"239.192.1.0\", \"port\": 3564, \"rate_bps\": 100000000, "
			       "\"clients\": 1, \"age_s\": 3, \"adopted\": false, \"replaced\": "
			       "false, \"receivers\": 3, \"bytes_sent\": 120}]"));
	assert_non_null(strstr(buf, "\"sessions_started\": 1,"));
	assert_non_null(strstr(buf, "\"path\": \"/a\\\"b.ndz\""));
	assert_string_equal(buf + n - 2, "]}");
	n = ndz_master_status_json(m, 0, NULL, NULL, tiny, sizeof(tiny));
	assert_string_equal(tiny, "{\"error\": \"status longer than 63 bytes\"}");
	ndz_master_free(m);
	ndz_mconf_free(c);
}

/* A request datagram for name (NULL: STATUS) of type. */
static int datagram(uint8_t *buf, uint8_t type, const char *name)
{
	struct ndz_ctl_req r = { .type = type, .id = 77 };

	snprintf(r.name, sizeof(r.name), "%s", name ? name : "");
	return ndz_ctl_req_encode(&r, buf, NDZ_CTL_REQ_MAX, NULL);
}

/*
 * Ask mode (the program asks the session itself, without its lock): the GET returns
 * the session to ask and counts nothing; told held, the GET is answered with it
 * (once: the next GET asks again); ending retires it and gone frees it, and the GET
 * goes on to a new session; a verdict about a session gone meanwhile changes nothing.
 * Through ndz_master_request: NDZ_MASTER_HOLD, then ndz_master_resume.
 */
static void test_hold_ask(void **state)
{
	struct ndz_mconf *c = conf("%s", base_conf);
	struct ndz_master *m = make(c);
	struct ndz_master_counters *n = ndz_master_counters(m);
	struct ndz_master_plan p, q;
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep;
	uint8_t b[NDZ_CTL_REQ_MAX];
	uint64_t gets;
	int sa, sb, len;

	(void)state;
	ndz_master_set_hold_ask(m, 1);
	sa = start(m, "a", "10.0.0.1", 100);   /* nothing running to ask */
	gets = n->get;
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.hold, 1);
	assert_int_equal(p.start, 0);
	assert_int_equal(p.slot, sa);
	assert_int_equal(p.pid, 100);
	assert_int_equal(n->get, gets);        /* not counted until decided */
	/* denied or unknown: decided at once, nobody asked */
	assert_int_equal(ndz_master_get(m, "a", ip("10.9.0.1"), &q, NULL), NDZ_EDENIED);
	assert_int_equal(q.hold, 0);
	ndz_master_held(m, &p, NDZ_MASTER_HELD);
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.hold, 0);
	assert_int_equal(p.start, 0);
	assert_int_equal(p.slot, sa);
	assert_int_equal(n->get, gets + 2);
	/* held once only: the next GET asks again; ending retires it, a new session */
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.hold, 1);
	ndz_master_held(m, &p, NDZ_MASTER_ENDING);
	assert_int_equal(ndz_master_session(m, (size_t)sa)->replaced, 1);
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.hold, 0);
	assert_int_equal(p.start, 1);
	assert_int_not_equal(p.slot, sa);
	ndz_master_started(m, p.slot, 101, uuid_a, 7, 1000, 0);
	sb = p.slot;
	/* gone: freed, counted, and its address taken by the new session */
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.hold, 1);
	assert_int_equal(p.pid, 101);
	ndz_master_held(m, &p, NDZ_MASTER_GONE);
	assert_int_equal(ndz_master_session(m, (size_t)sb)->pid, 0);
	assert_int_equal(n->ended, 1);
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.start, 1);
	assert_int_equal(p.slot, sb);
	ndz_master_started(m, p.slot, 102, uuid_a, 7, 1000, 0);
	/* a verdict about a session that has gone meanwhile (another pid there) is not its */
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &p, NULL), 0);
	assert_int_equal(p.pid, 102);
	assert_int_equal(ndz_master_end(m, 102), sb);
	assert_int_equal(ndz_master_get(m, "a", ip("10.0.0.2"), &q, NULL), 0);
	assert_int_equal(q.start, 1);
	ndz_master_started(m, q.slot, 103, uuid_a, 7, 1000, 0);
	ndz_master_held(m, &p, NDZ_MASTER_GONE);
	assert_int_equal(ndz_master_session(m, (size_t)q.slot)->pid, 103);
	/* the datagram's path: HOLD, the verdict, then the GET decided and answered */
	len = datagram(b, NDZ_CTL_GET, "a");
	gets = n->get;
	assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.0.0.3"), 0, &req, &p, &rep,
					    NULL), NDZ_MASTER_HOLD);
	assert_int_equal(p.pid, 103);
	assert_int_equal(n->get, gets);
	ndz_master_held(m, &p, NDZ_MASTER_HELD);
	assert_int_equal(ndz_master_resume(m, &req, ip("10.0.0.3"), &p, &rep, NULL),
			 NDZ_MASTER_REPLY);
	assert_int_equal(rep.status, NDZ_CTL_OK);
	assert_int_equal(rep.type, NDZ_CTL_GET);
	assert_int_equal(n->get, gets + 1);
	ndz_master_free(m);
	ndz_mconf_free(c);
}

static void test_request(void **state)
{
	struct ndz_mconf *c = conf("host-rate 1\nhost-burst 5\nmax-pending-host 2\n"
				   "image a /a.ndz allow 10.0.0.0/24\n");
	struct ndz_master *m = make(c);
	struct ndz_master_counters *n = ndz_master_counters(m);
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep;
	struct ndz_master_plan p;
	struct ndz_error e = { 0 };
	uint8_t b[NDZ_CTL_REQ_MAX];
	int len;

	(void)state;
	ndz_master_set_server(m, ip("10.0.0.254"));
	len = datagram(b, NDZ_CTL_GET, "a");
	assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.0.0.1"), 0, &req, &p, &rep,
					    NULL), NDZ_MASTER_START);
	ndz_master_started(m, p.slot, 50, uuid_a, 3, 4, 0);
	ndz_master_answer(m, &p, 0, &rep);
	assert_int_equal(rep.type, NDZ_CTL_GET);
	assert_int_equal(rep.id, 77);
	assert_int_equal(rep.status, NDZ_CTL_OK);
	assert_int_equal(rep.group, ip("239.192.1.0"));
	assert_int_equal(rep.server, ip("10.0.0.254"));
	assert_int_equal(rep.chunks, 3);
	/* the running session, one more client */
	assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.0.0.2"), 0, &req, &p, &rep,
					    NULL), NDZ_MASTER_REPLY);
	assert_int_equal(rep.status, NDZ_CTL_OK);
	assert_int_equal(ndz_master_session(m, (size_t)p.slot)->clients, 2);
	/* a failed start answers FAILED */
	ndz_master_end(m, 50);
	assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.0.0.3"), 0, &req, &p, &rep,
					    NULL), NDZ_MASTER_START);
	ndz_master_start_failed(m, p.slot);
	ndz_master_answer(m, &p, -1, &rep);
	assert_int_equal(rep.status, NDZ_CTL_FAILED);
	/* not ours: dropped, counted */
	assert_int_equal(ndz_master_request(m, (const uint8_t *)"junk", 4, ip("10.0.0.1"), 0, &req,
					    &p, &rep, NULL), NDZ_MASTER_DROP);
	assert_int_equal(n->dropped, 1);
	/* STATUS by UDP: TCP only; a host nothing allows: denied, said why */
	len = datagram(b, NDZ_CTL_STATUS, NULL);
	assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.0.0.4"), 0, &req, &p, &rep,
					    NULL), NDZ_MASTER_REPLY);
	assert_int_equal(rep.status, NDZ_CTL_USE_TCP);
	len = datagram(b, NDZ_CTL_GET, "a");
	assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.9.0.1"), 0, &req, &p, &rep,
					    &e), NDZ_MASTER_REPLY);
	assert_int_equal(rep.status, NDZ_CTL_DENIED);
	assert_string_equal(ndz_error_msg(&e), "no allow rule matches 10.9.0.1 for image 'a' "
			    "(nor for any image)");
	/* an upload by UDP is malformed */
	len = datagram(b, NDZ_CTL_UPLOAD, "a");
	assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.0.0.5"), 0, &req, &p, &rep,
					    NULL), NDZ_MASTER_REPLY);
	assert_int_equal(rep.status, NDZ_CTL_MALFORMED);
	/* a flood from one host: its burst of 5 is answered, the rest dropped */
	len = datagram(b, NDZ_CTL_GET, "nope");
	for (int i = 0; i < 5; i++)
		assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.0.0.6"), SEC, &req, &p,
						    &rep, NULL), NDZ_MASTER_REPLY);
	assert_int_equal(rep.status, NDZ_CTL_UNKNOWN);
	assert_int_equal(ndz_master_request(m, b, (size_t)len, ip("10.0.0.6"), SEC, &req, &p, &rep,
					    NULL), NDZ_MASTER_DROP);
	assert_int_equal(n->rate_limited, 1);
	/* TCP admission: the host's places, a host nothing allows, the threads */
	assert_int_equal(ndz_master_accept(m, ip("10.0.0.7"), 0, 0, NULL), 0);
	assert_int_equal(ndz_master_accept(m, ip("10.0.0.7"), 0, 0, NULL), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_master_accept(m, ip("10.0.0.7"), 0, 0, &e), NDZ_ECONNS);
	assert_string_equal(ndz_error_msg(&e), "10.0.0.7: connection refused: max-pending-host "
			    "of its connections wait");
	ndz_master_release(m, ip("10.0.0.7"));
	assert_int_equal(ndz_master_accept(m, ip("10.0.0.7"), 0, 0, NULL), 0);
	assert_int_equal(ndz_master_accept(m, ip("10.9.0.1"), 0, 0, NULL), NDZ_EDENIED);
	assert_int_equal(ndz_master_accept(m, ip("127.0.0.1"), 0, 0, NULL), 0);
	assert_int_equal(ndz_master_accept(m, ip("10.0.0.8"), 1000, 0, NULL), NDZ_ECONNS);
	assert_int_equal(n->tcp_denied, 1);
	assert_int_equal(n->tcp_busy, 2);
	ndz_master_free(m);
	ndz_mconf_free(c);
}

/* ---- a random run against a model ---- */

#define NIMG 5
#define MAXS 16

struct msess {
	int pid, group, gen;
	char image;
};

struct model {
	struct msess s[MAXS];
	int ns;
	int gen[NIMG];                 /* uploads stored per image */
	uint64_t stored[NIMG];         /* bytes in the upload directory per image */
	int up[NIMG];                  /* an upload of it runs */
	int upslot[NIMG];
	uint64_t upsize[NIMG];
};

/* outcomes the random runs reached: each must have come up */
enum { SEEN_POOL, SEEN_SESSIONS, SEEN_QUOTA, SEEN_BUSY, SEEN_UPLOADS, SEEN_ADOPTED,
       SEEN_REPLACED, SEEN_N };
static unsigned seen[SEEN_N];

static const char *const names[NIMG] = { "a", "b", "c", "d", "e" };
static unsigned pool_n, max_s;
static uint64_t quota_b;

static void uuid_of(int img, int gen, uint8_t u[16])
{
	memset(u, 0, 16);
	u[0] = (uint8_t)img;
	u[1] = (uint8_t)gen;
}

static uint64_t model_usage(void *ctx, const char *final)
{
	struct model *md = ctx;
	uint64_t sum = 0;

	int img = final[strlen(final) - 5] - 'a';  /* ".../X.ndz" */

	for (int i = 0; i < NIMG; i++)
		if (i != img)
			sum += md->stored[i];
	return sum;
}

static int rand_alive(void *ctx, const struct ndz_master_session *s)
{
	(void)ctx;
	return s->pid % 7 != 0;        /* the pids the model let die while no master ran */
}

static int rand_current(void *ctx, const char *image, uint8_t uuid[16])
{
	struct model *md = ctx;
	int i = image[0] - 'a';

	uuid_of(i, md->gen[i], uuid);
	return 0;
}

/* The master agrees with the model: its sessions, their groups, replaced flags, rates. */
static void check(struct ndz_master *m, struct model *md)
{
	const struct ndz_mconf *c = ndz_master_conf(m);
	struct ndz_master_rate r[NDZ_MASTER_SESSIONS];
	size_t n;

	assert_int_equal(ndz_master_live(m), md->ns);
	for (int k = 0; k < md->ns; k++) {
		const struct ndz_master_session *s = NULL;
		uint8_t u[16];

		for (size_t i = 0; i < NDZ_MASTER_SESSIONS && !s; i++)
			if (ndz_master_session(m, i)->pid == md->s[k].pid)
				s = ndz_master_session(m, i);
		assert_non_null(s);
		assert_int_equal(s->image[0], md->s[k].image);
		assert_int_equal(ntohl(s->group), c->pool_base + (uint32_t)md->s[k].group);
		assert_int_equal(s->port, c->port_lo + md->s[k].group % (c->port_hi - c->port_lo + 1));
		assert_int_equal(s->replaced, md->s[k].gen != md->gen[md->s[k].image - 'a']);
		uuid_of(md->s[k].image - 'a', md->s[k].gen, u);
		assert_memory_equal(s->uuid, u, 16);
	}
	/* the division: every session at min(its rate, total / live), once told */
	n = ndz_master_rates(m, r, NDZ_MASTER_SESSIONS);
	for (size_t i = 0; i < n; i++)
		ndz_master_set_rate(m, r[i].slot, r[i].rate);
	assert_int_equal(ndz_master_rates(m, r, NDZ_MASTER_SESSIONS), 0);
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS && md->ns; i++) {
		const struct ndz_master_session *s = ndz_master_session(m, i);
		uint64_t want;

		if (s->pid <= 0)
			continue;
		want = s->image[0] == 'a' ? 30000000 : 100000000;
		if (want > c->total_rate / (uint64_t)md->ns)
			want = c->total_rate / (uint64_t)md->ns / 1000 * 1000;
		assert_int_equal(s->rate, want);
	}
}

static void random_run(unsigned seed, const char *pool, unsigned npool, unsigned maxs)
{
	struct ndz_mconf *c = conf("pool %s\nports 6000-6002\nmax-sessions %u\nrate 100M\n"
				   "total-rate 170M\nquota 20M\nmax-uploads 2\n"
				   "upload-dir %s allow 10.0.0.0/24 upload 10.0.0.0/24\n"
				   "image a %s/a.ndz allow 10.0.0.0/25 upload 10.0.0.0/25 rate 30M\n"
				   "image b %s/b.ndz allow 10.0.0.0/25 upload 10.0.0.0/25\n"
				   "image c %s/c.ndz allow 10.0.0.0/24 upload 10.0.0.0/24\n"
				   "image d %s/d.ndz allow 10.0.0.0/24 upload 10.0.0.0/24\n"
				   "image e %s/e.ndz allow 10.0.0.128/25 upload 10.0.0.128/25\n",
				   pool, maxs, updir, updir, updir, updir, updir, updir);
	struct ndz_master *m = make(c);
	static struct model md;
	static char text[NDZ_MASTER_SESSIONS * 160];
	int next_pid = 100;

	pool_n = npool;
	max_s = maxs;
	quota_b = 20000000;
	memset(&md, 0, sizeof(md));
	srand(seed);
	for (int step = 0; step < 4000; step++) {
		int op = rand() % 100, img = rand() % NIMG;
		uint32_t addr = htonl(0x0a000000u | (uint32_t)(rand() % 256));
		int allowed = (img == 4) == ((ntohl(addr) & 0xff) >= 128) ||
			      ((img == 2 || img == 3));
		struct ndz_master_plan p;
		struct ndz_error e = { 0 };

		if (op < 45) {                 /* GET */
			int k, rc = ndz_master_get(m, names[img], addr, &p, &e);
			int want_group = -1;

			if (!allowed) {
				assert_int_equal(rc, NDZ_EDENIED);
				continue;
			}
			for (k = 0; k < md.ns; k++)
				if (md.s[k].image == names[img][0] && md.s[k].gen == md.gen[img])
					break;
			if (k < md.ns) {
				assert_int_equal(rc, 0);
				assert_int_equal(p.start, 0);
				assert_int_equal(ndz_master_session(m, (size_t)p.slot)->pid, md.s[k].pid);
				ndz_master_served(m, p.slot);
				continue;
			}
			if ((unsigned)md.ns >= max_s) {
				assert_int_equal(rc, NDZ_ESESSIONS);
				seen[SEEN_SESSIONS]++;
				continue;
			}
			for (int g = 0; g < (int)pool_n && want_group < 0; g++) {
				int used = 0;

				for (k = 0; k < md.ns; k++)
					used |= md.s[k].group == g;
				if (!used)
					want_group = g;
			}
			if (want_group < 0) {
				assert_int_equal(rc, NDZ_EPOOL);
				seen[SEEN_POOL]++;
				continue;
			}
			assert_int_equal(rc, 0);
			assert_int_equal(p.start, 1);
			assert_int_equal(ntohl(ndz_master_session(m, (size_t)p.slot)->group),
					 c->pool_base + (uint32_t)want_group);
			if (rand() % 10 == 0) {        /* frisbeed would not start */
				ndz_master_start_failed(m, p.slot);
			} else {
				uint8_t u[16];

				uuid_of(img, md.gen[img], u);
				ndz_master_started(m, p.slot, next_pid, u, 1, 1, (uint64_t)step * SEC);
				md.s[md.ns++] = (struct msess){ next_pid, want_group, md.gen[img],
								names[img][0] };
				next_pid++;
			}
		} else if (op < 65) {          /* a session ends */
			if (!md.ns)
				continue;
			int k = rand() % md.ns;

			assert_true(ndz_master_end(m, md.s[k].pid) >= 0);
			md.s[k] = md.s[--md.ns];
		} else if (op < 70) {          /* the master restarts and adopts */
			int n = ndz_master_state(m, text, sizeof(text), NULL);

			assert_true(n >= 0);
			ndz_master_free(m);
			m = make(c);
			for (int k = 0; k < md.ns; k++)
				if (md.s[k].pid % 7 == 0)
					md.s[k--] = md.s[--md.ns];
			assert_int_equal(ndz_master_adopt(m, text, (size_t)n, rand_alive,
							  rand_current, &md, 0), md.ns);
			seen[SEEN_ADOPTED] += md.ns;
			for (int k = 0; k < md.ns; k++)
				seen[SEEN_REPLACED] += md.s[k].gen != md.gen[md.s[k].image - 'a'];
			memset(md.up, 0, sizeof(md.up));
		} else if (op < 88) {          /* an upload begins */
			uint64_t size = (uint64_t)(rand() % 8) * 1000000, limit, used = 0;
			char final[512];
			int slot, rc, running = 0;

			rc = ndz_master_upload_begin(m, names[img], addr, size, model_usage, &md,
						     final, sizeof(final), &slot, &limit, &e);
			for (int i = 0; i < NIMG; i++) {
				running += md.up[i];
				if (i != img)
					used += md.stored[i];
			}
			if (!allowed || (img < 2 && (ntohl(addr) & 0xff) >= 128))
				assert_int_equal(rc, NDZ_EDENIED);
			else if (md.up[img] && ++seen[SEEN_BUSY])
				assert_int_equal(rc, NDZ_EBUSY);
			else if (running >= 2 && ++seen[SEEN_UPLOADS])
				assert_int_equal(rc, NDZ_EUPLOADS);
			else if ((used >= quota_b || (size && size > quota_b - used)) &&
				 ++seen[SEEN_QUOTA])
				assert_int_equal(rc, NDZ_EQUOTA);
			else {
				assert_int_equal(rc, 0);
				assert_int_equal(limit, quota_b - used);
				md.up[img] = 1;
				md.upslot[img] = slot;
				md.upsize[img] = size;
			}
			if (rc)
				assert_int_equal(e.code, rc);
		} else {                       /* an upload ends: stored or failed */
			if (!md.up[img])
				continue;
			if (rand() % 2) {
				ndz_master_upload_stored(m, md.upslot[img]);
				ndz_master_upload_end(m, md.upslot[img], 1);
				md.gen[img]++;
				md.stored[img] = md.upsize[img];
			} else {
				ndz_master_upload_end(m, md.upslot[img], 0);
			}
			md.up[img] = 0;
		}
		check(m, &md);
	}
	ndz_master_free(m);
	ndz_mconf_free(c);
}

static void test_random(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 4; seed++) {
		random_run(seed, "239.5.0.0/30", 4, 6);        /* the pool runs out first */
		random_run(seed + 100, "239.5.0.0/29", 8, 3);  /* max-sessions first */
	}
	for (int i = 0; i < SEEN_N; i++)
		assert_true(seen[i] > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get),
		cmocka_unit_test(test_hold),
		cmocka_unit_test(test_hold_ask),
		cmocka_unit_test(test_pool),
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_state),
		cmocka_unit_test(test_host_limit),
		cmocka_unit_test(test_host_limit_colliders),
		cmocka_unit_test(test_upload),
		cmocka_unit_test(test_status_json),
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_random),
	};
	int rc;

	if (!mkdtemp(updir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(updir);
	return rc;
}
