/*
 * Unit tests for lib/master/images (ndzctl images info, remove, rename): the
 * ADMIN messages of the image operations, the files moved and removed with their
 * companions, and the refusals (an image line, a session, a task, a name taken).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "ctl/ctl.h"
#include "master/images.h"
#include "tmpdir.h"

static void put(const char *name, const char *text)
{
	FILE *f;

	assert_non_null(f = fopen(at(name), "w"));
	fputs(text, f);
	fclose(f);
}

static int there(const char *name)
{
	struct stat st;

	return stat(at(name), &st) == 0;
}

static void test_messages(void **state)
{
	struct ndz_ctl_labreq r = { .type = NDZ_CTL_ADMIN, .id = 5 }, d;
	static uint8_t b[NDZ_CTL_LAB_MAX];
	int n;

	(void)state;
	r.op = NDZ_CTL_OP_IMAGE_RENAME;
	r.flags = NDZ_CTL_FLAG_FORCE | NDZ_CTL_FLAG_TABLE;
	strcpy(r.args[0], "win11");
	strcpy(r.args[1], "win11-old");
	n = ndz_ctl_lab_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, 12 + 4 + 64 + 6 + 10 + 1);
	assert_int_equal(b[12], NDZ_CTL_OP_IMAGE_RENAME);
	assert_int_equal(b[13], 0x60);
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.op, NDZ_CTL_OP_IMAGE_RENAME);
	assert_int_equal(d.flags, NDZ_CTL_FLAG_FORCE | NDZ_CTL_FLAG_TABLE);
	assert_string_equal(d.args[0], "win11");
	assert_string_equal(d.args[1], "win11-old");
	/* decode refuses what encode would not write: WAKE on an image operation */
	b[13] |= NDZ_CTL_FLAG_WAKE;
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), NDZ_EPROTO);
	/* ... and a remove with a second name */
	b[13] = 0;
	b[12] = NDZ_CTL_OP_IMAGE_REMOVE;
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), NDZ_EPROTO);

	memset(&r, 0, sizeof(r));
	r.type = NDZ_CTL_ADMIN;
	r.op = NDZ_CTL_OP_IMAGE_INFO;
	strcpy(r.args[0], "a");
	n = ndz_ctl_lab_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, 12 + 4 + 64 + 2 + 1 + 1);
	assert_int_equal(ndz_ctl_lab_decode(b, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.op, NDZ_CTL_OP_IMAGE_INFO);
	assert_string_equal(d.args[0], "a");
	r.op = NDZ_CTL_OP_IMAGE_RENAME;          /* no new name */
	assert_int_equal(ndz_ctl_lab_encode(&r, b, sizeof(b), NULL), NDZ_EINVAL);
	r.op = NDZ_CTL_OP_IMAGE_REMOVE;
	strcpy(r.args[0], "a b");                /* not an image name */
	assert_int_equal(ndz_ctl_lab_encode(&r, b, sizeof(b), NULL), NDZ_EINVAL);
	strcpy(r.args[0], "a");
	r.flags = NDZ_CTL_FLAG_WAKE;
	assert_int_equal(ndz_ctl_lab_encode(&r, b, sizeof(b), NULL), NDZ_EINVAL);
	r.flags = NDZ_CTL_FLAG_FORCE;
	assert_true(ndz_ctl_lab_encode(&r, b, sizeof(b), NULL) > 0);
}

static void test_files(void **state)
{
	char from[256], to[256];
	struct ndz_error e = { 0 };

	(void)state;
	put("a.ndz", "image");
	put("a.ndz.manifest", "sig");
	put("a.ndz.index", "idx");
	put("c.ndz", "image c");
	snprintf(from, sizeof(from), "%s", at("a.ndz"));
	snprintf(to, sizeof(to), "%s", at("b.ndz"));
	assert_int_equal(ndz_images_move(from, to, &e), 0);
	assert_true(there("b.ndz") && there("b.ndz.manifest") && there("b.ndz.index"));
	assert_false(there("a.ndz") || there("a.ndz.manifest") || there("a.ndz.index"));
	/* never over a file, not even a companion: nothing moves */
	put("c.ndz.manifest", "other");
	snprintf(from, sizeof(from), "%s", at("b.ndz"));
	snprintf(to, sizeof(to), "%s", at("c.ndz"));
	assert_int_equal(ndz_images_move(from, to, &e), NDZ_EEXIST);
	assert_non_null(strstr(ndz_error_msg(&e), "c.ndz: already there"));
	assert_true(there("b.ndz") && there("b.ndz.manifest") && there("b.ndz.index"));
	ndz_error_clear(&e);
	snprintf(from, sizeof(from), "%s", at("nope.ndz"));
	assert_int_equal(ndz_images_move(from, to, &e), NDZ_ENOENT);
	/* a missing companion is no error; the image is */
	snprintf(from, sizeof(from), "%s", at("c.ndz"));
	assert_int_equal(ndz_images_unlink(from, NULL), 0);
	assert_false(there("c.ndz") || there("c.ndz.manifest"));
	assert_int_equal(ndz_images_unlink(from, NULL), NDZ_ENOENT);
	snprintf(from, sizeof(from), "%s", at("b.ndz"));
	assert_int_equal(ndz_images_unlink(from, NULL), 0);
	assert_false(there("b.ndz") || there("b.ndz.manifest") || there("b.ndz.index"));
}

static int reloads;

/* The configuration reread, as mfrisbeed's hook does: here only counted. */
static int reload(void *ctx, struct ndz_error *e)
{
	(void)ctx;
	(void)e;
	reloads++;
	return 0;
}

static void test_operations(void **state)
{
	static const uint8_t mac[6] = { 0x52, 0x54, 0, 0, 0, 1 };
	static char out[4096];
	char text[512];
	struct ndz_mconf *c;
	struct ndz_master *ms;
	struct ndz_lab *lab;
	struct ndz_master_plan p;
	struct ndz_error e = { 0 };
	struct ndz_jbuf j;
	uint8_t uuid[16] = { 1 };

	(void)state;
	put("d.ndz", "not really an image");
	put("d.ndz.index", "idx");
	put("e.ndz", "e");
	put("line.img", "l");
	snprintf(text, sizeof(text), "# lab\nimage line %s/line.img allow 10.0.0.0/8\n"
		 "imagedir %s allow 10.0.0.0/8\n", tmpdir, tmpdir);
	assert_int_equal(ndz_mconf_parse(text, strlen(text), "m.conf", &c, NULL), 0);
	assert_int_equal(ndz_master_create(c, &ms, NULL), 0);
	assert_int_equal(ndz_lab_create(0, 0, &lab, NULL), 0);
	struct ndz_images_ctx x = { c, ms, lab, reload, NULL };

	/* info: where it comes from, its files, no session */
	ndz_jbuf_init(&j, out, sizeof(out));
	assert_int_equal(ndz_images_info(&x, "d", 0, &j, &e), 0);
	assert_non_null(strstr(out, "\"from\":\"imagedir\",\"line\":3,\"bytes\":19,\"chunks\":-1"));
	assert_non_null(strstr(out, "\"signed\":false,\"index\":true"));
	assert_non_null(strstr(out, "\"sessions\":[],\"tasks\":0}"));
	assert_int_equal(ndz_images_info(&x, "zz", 0, &j, &e), NDZ_ENOIMAGE);

	/* an image line: the configuration's to change */
	ndz_error_clear(&e);
	ndz_jbuf_init(&j, out, sizeof(out));
	assert_int_equal(ndz_images_remove(&x, "line", 1, &j, &e), NDZ_ENOTSUP);
	assert_string_equal(ndz_error_msg(&e), "image 'line' is defined by m.conf line 2: edit the "
			    "configuration to remove it (then reload: SIGHUP)");
	assert_true(there("line.img"));

	/* a session of d: refused without force */
	assert_int_equal(ndz_master_get(ms, "d", htonl(0x0a000005), &p, &e), 0);
	ndz_master_started(ms, p.slot, 4242, uuid, 3, 1000, 1);
	ndz_jbuf_init(&j, out, sizeof(out));
	assert_int_equal(ndz_images_info(&x, "d", 1, &j, &e), 0);
	assert_non_null(strstr(out, "session:    frisbeed 4242 on 239.192.1.0 port 3564, 1 clients"));
	ndz_error_clear(&e);
	assert_int_equal(ndz_images_rename(&x, "d", "d2", 0, &j, &e), NDZ_EBUSY);
	assert_non_null(strstr(ndz_error_msg(&e), "image 'd': 1 session serves it now"));
	assert_true(there("d.ndz") && !there("d2.ndz"));
	/* a name taken */
	ndz_error_clear(&e);
	assert_int_equal(ndz_images_rename(&x, "d", "e", 1, &j, &e), NDZ_EEXIST);
	assert_string_equal(ndz_error_msg(&e), "image 'e' already exists");
	/* forced: the files move, the session takes no new clients, the task follows */
	assert_int_equal(ndz_lab_node_add(lab, mac, "pc1", "", NULL), 0);
	assert_int_equal(ndz_lab_task(lab, "pc1", NDZ_LAB_RELOAD, "d", 0, NULL, 0, NULL), 1);
	ndz_jbuf_init(&j, out, sizeof(out));
	assert_int_equal(ndz_images_rename(&x, "d", "d2", 1, &j, &e), 0);
	assert_true(there("d2.ndz") && there("d2.ndz.index") && !there("d.ndz") &&
		    !there("d.ndz.index"));
	assert_non_null(strstr(out, "1 session of 'd' finishes with its clients, no new ones; "
			       "1 reload task now name it"));
	assert_int_equal(reloads, 1);
	assert_int_equal(ndz_master_get(ms, "d", htonl(0x0a000005), &p, NULL), 0);
	assert_int_equal(p.start, 1);            /* the renamed-away session is not handed out */
	ndz_master_start_failed(ms, p.slot);
	assert_string_equal(ndz_lab_node(lab, (size_t)ndz_lab_find(lab, "pc1"))->arg, "d2");

	/* remove: a task names e; refused, then forced (the task cancelled) */
	assert_int_equal(ndz_lab_task(lab, "pc1", NDZ_LAB_RELOAD, "e", 0, NULL, 0, NULL), 1);
	ndz_error_clear(&e);
	assert_int_equal(ndz_images_remove(&x, "e", 0, &j, &e), NDZ_EBUSY);
	assert_non_null(strstr(ndz_error_msg(&e), "1 node has a task to reload it"));
	assert_true(there("e.ndz"));
	ndz_jbuf_init(&j, out, sizeof(out));
	assert_int_equal(ndz_images_remove(&x, "e", 1, &j, &e), 0);
	assert_false(there("e.ndz"));
	assert_non_null(strstr(out, "1 reload task cancelled"));
	assert_int_equal(ndz_lab_node(lab, (size_t)ndz_lab_find(lab, "pc1"))->task, NDZ_LAB_NONE);
	assert_int_equal(ndz_lab_image_tasks(lab, "e", NULL), 0);
	assert_int_equal(reloads, 2);

	ndz_lab_free(lab);
	ndz_master_free(ms);
	ndz_mconf_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_messages),
		cmocka_unit_test_setup_teardown(test_files, tmpdir_setup, tmpdir_teardown),
		cmocka_unit_test_setup_teardown(test_operations, tmpdir_setup, tmpdir_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
