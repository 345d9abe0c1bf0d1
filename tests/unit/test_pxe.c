/*
 * Unit tests for lib/master/pxe: the generic script, each node's script for every
 * state of a real lab (line by line), the checks of kernel parameters, base URLs
 * and file names, opening files of a pxe-dir (links, FIFOs, directories refused),
 * and the pxe-* configuration keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "master/lab.h"
#include "master/mconf.h"
#include "master/pxe.h"
#include "tmpdir.h"

static const uint8_t M1[6] = { 0x52, 0x54, 0, 0x12, 0x34, 0x56 };
static const struct ndz_pxe_where W = { "http://10.0.0.1:8080/pxe", "10.0.0.1", NULL, 0 };

/* The script of mac in lab l (peeked, as the master does) with w; asserts it is made. */
static const char *script(struct ndz_lab *l, const uint8_t *mac, const struct ndz_pxe_where *w)
{
	static char buf[NDZ_PXE_SCRIPT_MAX];
	struct ndz_lab_answer a;
	struct ndz_error e = { 0 };
	int i = ndz_lab_peek(l, mac, &a), n;

	n = ndz_pxe_script(mac, &a, i >= 0 ? ndz_lab_node(l, (size_t)i) : NULL, w, buf,
			   sizeof(buf), &e);
	if (n < 0)
		fail_msg("%s", ndz_error_msg(&e));
	assert_int_equal((size_t)n, strlen(buf));
	return buf;
}

static void test_generic(void **state)
{
	(void)state;
	assert_string_equal(ndz_pxe_generic(),
		"#!ipxe\n"
		"# mfrisbeed: every node's first script; its own follows, by MAC (doc/PXE.md)\n"
		"chain /boot/${netX/mac:hexhyp} || echo ndz: no boot script from the master for "
		"${netX/mac}\n"
		"exit\n");
}

static const char env_script[] =
	"#!ipxe\n"
	"# mfrisbeed: reload debian12 for 52:54:00:12:34:56 (doc/PXE.md)\n"
	"echo ndz: reload debian12 for 52:54:00:12:34:56: loading the boot environment\n"
	"kernel http://10.0.0.1:8080/pxe/vmlinuz initrd=initramfs.cpio.gz ndz.lab=1 "
	"ndz.master=10.0.0.1 ndz.mac=52:54:00:12:34:56 || goto failed\n"
	"initrd http://10.0.0.1:8080/pxe/initramfs.cpio.gz || goto failed\n"
	"boot || goto failed\n"
	":failed\n"
	"echo ndz: the boot environment did not start: trying again in 10 s\n"
	"sleep 10\n"
	"reboot\n";

/* Every state a node can be in, through a real lab: the environment or the local disk. */
static void test_states(void **state)
{
	struct ndz_lab *l;
	struct ndz_lab_answer a;
	struct ndz_lab_report ok = { .kind = NDZ_LAB_OK, .bytes = 5 };
	struct ndz_lab_report bad = { .kind = NDZ_LAB_FAIL, .reason = "disk too small" };

	(void)state;
	assert_int_equal(ndz_lab_create(0, 1000, &l, NULL), 0);
	assert_string_equal(script(l, M1, &W),
		"#!ipxe\n"
		"# mfrisbeed: 52:54:00:12:34:56 boots its local disk: unknown node (doc/PXE.md)\n"
		"echo ndz: 52:54:00:12:34:56 is not a node of this lab: booting the local disk\n"
		"exit\n");
	assert_int_equal(ndz_lab_node_add(l, M1, "pc1", NULL, NULL), 0);
	assert_string_equal(script(l, M1, &W),
		"#!ipxe\n"
		"# mfrisbeed: 52:54:00:12:34:56 boots its local disk: no task (doc/PXE.md)\n"
		"echo ndz: no task for 52:54:00:12:34:56: booting the local disk\n"
		"exit\n");
	/* pending, asked for again and again: the same script, and still pending */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "debian12", NDZ_LAB_SEED, NULL,
				      0, NULL), 1);
	assert_string_equal(script(l, M1, &W), env_script);
	assert_string_equal(script(l, M1, &W), env_script);
	assert_int_equal(ndz_lab_node(l, (size_t)ndz_lab_find(l, "pc1"))->state, NDZ_LAB_PENDING);
	/* running, then lost: the environment again (a node that reboots mid-reload) */
	ndz_lab_ask(l, M1, 1, 10, &a);
	assert_int_equal(a.task, NDZ_LAB_RELOAD);
	assert_string_equal(script(l, M1, &W), env_script);
	assert_int_equal(ndz_lab_tick(l, 5000), 1);
	assert_string_equal(script(l, M1, &W), env_script);
	/* done: local; no task left */
	assert_int_equal(ndz_lab_report(l, M1, &ok, 5001, 1, NULL), 0);
	assert_non_null(strstr(script(l, M1, &W), "\necho ndz: no task for 52:54:00:12:34:56: "));
	/* failed: local, saying so */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_RELOAD, "debian12", 0, NULL, 0, NULL), 1);
	ndz_lab_ask(l, M1, 1, 6000, &a);
	assert_int_equal(ndz_lab_report(l, M1, &bad, 6001, 1, NULL), 0);
	assert_string_equal(script(l, M1, &W),
		"#!ipxe\n"
		"# mfrisbeed: 52:54:00:12:34:56 boots its local disk: task failed (doc/PXE.md)\n"
		"echo ndz: reload debian12 failed for 52:54:00:12:34:56 (ndzctl status says why): "
		"booting the local disk\n"
		"exit\n");
	/* a capture boots the environment too (it asks and learns the task) */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_CAPTURE, "golden", 0, NULL, 0, NULL), 1);
	assert_non_null(strstr(script(l, M1, &W),
			       "\necho ndz: capture golden for 52:54:00:12:34:56: loading"));
	/* cancelled: local */
	assert_int_equal(ndz_lab_task(l, "pc1", NDZ_LAB_NONE, NULL, 0, NULL, 0, NULL), 1);
	assert_non_null(strstr(script(l, M1, &W), "\nexit\n"));
	ndz_lab_free(l);
}

/* The where: a master with its port, parameters, another base URL, sanboot. */
static void test_where(void **state)
{
	struct ndz_lab_answer env = { .task = NDZ_LAB_RELOAD, .arg = "win11" };
	struct ndz_lab_answer local = { .task = NDZ_LAB_LOCAL };
	struct ndz_pxe_where w = { "https://boot.example.org/ndz/", "10.0.0.1:3600",
				   "console=tty0 console=ttyS0,115200 ndz.after=reboot ${hostname}",
				   NDZ_PXE_SANBOOT };
	char buf[NDZ_PXE_SCRIPT_MAX], small[64];
	struct ndz_error e = { 0 };
	int n;

	(void)state;
	n = ndz_pxe_script(M1, &env, NULL, &w, buf, sizeof(buf), &e);
	assert_true(n > 0);
	assert_non_null(strstr(buf, "\nkernel https://boot.example.org/ndz/vmlinuz "
			       "initrd=initramfs.cpio.gz ndz.lab=1 ndz.master=10.0.0.1:3600 "
			       "ndz.mac=52:54:00:12:34:56 console=tty0 console=ttyS0,115200 "
			       "ndz.after=reboot ${hostname} || goto failed\n"));
	assert_non_null(strstr(buf, "\ninitrd https://boot.example.org/ndz/initramfs.cpio.gz "
			       "|| goto failed\n"));
	/* an empty parameter list adds nothing, not even a blank */
	w.args = "";
	assert_true(ndz_pxe_script(M1, &env, NULL, &w, buf, sizeof(buf), NULL) > 0);
	assert_non_null(strstr(buf, " ndz.mac=52:54:00:12:34:56 || goto failed\n"));
	n = ndz_pxe_script(M1, &local, NULL, &w, buf, sizeof(buf), NULL);
	assert_true(n > 0);
	assert_non_null(strstr(buf, "booting the local disk\n"
			       "sanboot --no-describe --drive 0x80 || exit\n"));
	assert_int_equal(buf[n - 1], '\n');
	/* what would not be a script is refused, naming the node */
	w.args = "a \"b\"";
	assert_int_equal(ndz_pxe_script(M1, &env, NULL, &w, buf, sizeof(buf), &e), NDZ_EINVAL);
	assert_non_null(strstr(ndz_error_msg(&e), "boot script of 52:54:00:12:34:56: bad kernel "
				"parameters"));
	w.args = NULL;
	w.url = "http://x/pxe vmlinuz";
	assert_int_equal(ndz_pxe_script(M1, &env, NULL, &w, buf, sizeof(buf), NULL), NDZ_EINVAL);
	w.url = NULL;
	assert_int_equal(ndz_pxe_script(M1, &env, NULL, &w, buf, sizeof(buf), NULL), NDZ_EINVAL);
	w.url = "http://x/pxe";
	w.master = "10.0.0.1 evil=1";
	assert_int_equal(ndz_pxe_script(M1, &env, NULL, &w, buf, sizeof(buf), NULL), NDZ_EINVAL);
	w.master = "";
	assert_int_equal(ndz_pxe_script(M1, &env, NULL, &w, buf, sizeof(buf), NULL), NDZ_EINVAL);
	/* the local script needs no URL or master */
	assert_true(ndz_pxe_script(M1, &local, NULL, &w, buf, sizeof(buf), NULL) > 0);
	w.master = "10.0.0.1";
	ndz_error_clear(&e);
	assert_int_equal(ndz_pxe_script(M1, &env, NULL, &w, small, sizeof(small), &e), NDZ_ERANGE);
	assert_non_null(strstr(ndz_error_msg(&e), "longer than 63 bytes"));
	/* the longest: parameters and URL at their bounds fit a script */
	{
		static char args[NDZ_PXE_ARGS_MAX + 1], url[NDZ_PXE_URL_MAX + 1];

		memset(args, 'a', NDZ_PXE_ARGS_MAX);
		memcpy(url, "http://", 7);
		memset(url + 7, 'u', NDZ_PXE_URL_MAX - 7);
		w.args = args;
		w.url = url;
		w.master = "255.255.255.255:65535";
		assert_true(ndz_pxe_script(M1, &env, NULL, &w, buf, sizeof(buf), NULL) > 0);
	}
}

static void test_why(void **state)
{
	struct ndz_lab_node n = { .used = 1, .task = NDZ_LAB_RELOAD, .state = NDZ_LAB_FAILED };
	struct ndz_lab_answer a = { .task = NDZ_LAB_LOCAL };

	(void)state;
	assert_string_equal(ndz_pxe_why(&a, NULL), "unknown node");
	assert_string_equal(ndz_pxe_why(&a, &n), "task failed");
	n.task = NDZ_LAB_NONE;
	n.state = NDZ_LAB_IDLE;
	assert_string_equal(ndz_pxe_why(&a, &n), "no task");
	a.task = NDZ_LAB_CAPTURE;
	assert_string_equal(ndz_pxe_why(&a, &n), "capture");
	a.task = NDZ_LAB_RELOAD;
	assert_string_equal(ndz_pxe_why(&a, NULL), "reload");
}

static void test_checks(void **state)
{
	static char longest[NDZ_PXE_ARGS_MAX + 2];
	const char *args_good[] = { "console=ttyS0", "a b c", "ndz.after=reboot quiet",
				    "x=${net0/ip}", "console=ttyS0,115200n8 a.b-c_d=/e:f" };
	const char *args_bad[] = { "", " a", "a ", "a  b", "a\tb", "a\nb", "a\"b", "a'b",
				   "a\\b", "a || b", "a|b", "a&&b", "a;b", "a#b", "caf\xc3\xa9",
				   "a\x7f" };
	const char *url_good[] = { "http://10.0.0.1/pxe", "https://boot.example.org",
				   "tftp://10.0.0.1/ndz/", "http://h:8080/a-b_c.d~e/%41+=,!*()@x" };
	const char *url_bad[] = { "", "http://", "ftp://h/x", "http:///x", "10.0.0.1/pxe",
				  "http://h/a b", "http://h/${x}", "http://h/a\"b", "http://h/a'b",
				  "http://h/a?b", "http://h/a#b", "http://h/a|b", "http://h/a;b",
				  "HTTP://h/x" };
	const char *name_good[] = { "vmlinuz", "initramfs.cpio.gz", "a-b_c.D9", "x.." };
	const char *name_bad[] = { "", ".", "..", ".hidden", "a/b", "../etc", "a b", "a%2e",
				   "a\\b", "caf\xc3\xa9" };
	char name[NDZ_PXE_NAME_MAX + 2];

	(void)state;
	for (size_t i = 0; i < sizeof(args_good) / sizeof(*args_good); i++)
		if (!ndz_pxe_args_ok(args_good[i]))
			fail_msg("args refused: %s", args_good[i]);
	for (size_t i = 0; i < sizeof(args_bad) / sizeof(*args_bad); i++)
		if (ndz_pxe_args_ok(args_bad[i]))
			fail_msg("args taken: %s", args_bad[i]);
	memset(longest, 'a', NDZ_PXE_ARGS_MAX);
	assert_int_equal(ndz_pxe_args_ok(longest), 1);
	longest[NDZ_PXE_ARGS_MAX] = 'a';
	assert_int_equal(ndz_pxe_args_ok(longest), 0);
	for (size_t i = 0; i < sizeof(url_good) / sizeof(*url_good); i++)
		if (!ndz_pxe_url_ok(url_good[i]))
			fail_msg("url refused: %s", url_good[i]);
	for (size_t i = 0; i < sizeof(url_bad) / sizeof(*url_bad); i++)
		if (ndz_pxe_url_ok(url_bad[i]))
			fail_msg("url taken: %s", url_bad[i]);
	for (size_t i = 0; i < sizeof(name_good) / sizeof(*name_good); i++)
		if (!ndz_pxe_name_ok(name_good[i]))
			fail_msg("name refused: %s", name_good[i]);
	for (size_t i = 0; i < sizeof(name_bad) / sizeof(*name_bad); i++)
		if (ndz_pxe_name_ok(name_bad[i]))
			fail_msg("name taken: %s", name_bad[i]);
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	assert_int_equal(ndz_pxe_name_ok(name), 0);
	name[NDZ_PXE_NAME_MAX] = 0;
	assert_int_equal(ndz_pxe_name_ok(name), 1);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Opening files of a pxe-dir: plain files only, no link followed, nothing outside. */
static void test_open(void **state)
{
	const char *p = at("pxe");
	struct ndz_error e = { 0 };
	uint64_t size = 7;
	char buf[64];
	ssize_t n;
	int fd;

	(void)state;
	assert_int_equal(mkdir(p, 0755), 0);
	put(at("pxe/vmlinuz"), "kernel bytes");
	put(at("secret"), "outside");
	assert_int_equal(symlink("../secret", at("pxe/out")), 0);
	assert_int_equal(symlink("/etc/passwd", at("pxe/passwd")), 0);
	assert_int_equal(symlink("vmlinuz", at("pxe/in")), 0);
	assert_int_equal(mkdir(at("pxe/sub"), 0755), 0);
	assert_int_equal(mkfifo(at("pxe/fifo"), 0644), 0);
	p = at("pxe");

	fd = ndz_pxe_open(p, "vmlinuz", &size, &e);
	assert_true(fd >= 0);
	assert_int_equal(size, 12);
	n = read(fd, buf, sizeof(buf));
	assert_int_equal(n, 12);
	assert_memory_equal(buf, "kernel bytes", 12);
	close(fd);
	/* links are refused wherever they point; so are a directory and a FIFO (at once) */
	assert_int_equal(ndz_pxe_open(p, "out", &size, &e), NDZ_ENOENT);
	assert_non_null(strstr(ndz_error_msg(&e), "/pxe/out: a symbolic link (not followed)"));
	assert_int_equal(size, 0);
	assert_int_equal(ndz_pxe_open(p, "passwd", &size, NULL), NDZ_ENOENT);
	assert_int_equal(ndz_pxe_open(p, "in", &size, NULL), NDZ_ENOENT);
	ndz_error_clear(&e);
	assert_int_equal(ndz_pxe_open(p, "sub", &size, &e), NDZ_ENOENT);
	assert_non_null(strstr(ndz_error_msg(&e), "/pxe/sub: not a plain file"));
	assert_int_equal(ndz_pxe_open(p, "fifo", &size, NULL), NDZ_ENOENT);
	/* names that leave the directory never reach the filesystem */
	ndz_error_clear(&e);
	assert_int_equal(ndz_pxe_open(p, "../secret", &size, &e), NDZ_ENOENT);
	assert_non_null(strstr(ndz_error_msg(&e), "not a name served"));
	assert_int_equal(ndz_pxe_open(p, "..", &size, NULL), NDZ_ENOENT);
	assert_int_equal(ndz_pxe_open(p, "", &size, NULL), NDZ_ENOENT);
	assert_int_equal(ndz_pxe_open(p, "sub/", &size, NULL), NDZ_ENOENT);
	ndz_error_clear(&e);
	assert_int_equal(ndz_pxe_open(p, "nothere", &size, &e), NDZ_ENOENT);
	assert_non_null(strstr(ndz_error_msg(&e), "/pxe/nothere: No such file"));
	ndz_error_clear(&e);
	assert_int_equal(ndz_pxe_open(at("nodir"), "vmlinuz", &size, &e), NDZ_ENOENT);
	assert_non_null(strstr(ndz_error_msg(&e), "pxe-dir "));
}

static struct ndz_mconf *conf(const char *lines, struct ndz_error *e)
{
	char text[4096];
	struct ndz_mconf *c = NULL;

	snprintf(text, sizeof(text), "image a /x allow 10.0.0.0/8\n%s", lines);
	ndz_error_clear(e);
	if (ndz_mconf_parse(text, strlen(text), "m.conf", &c, e) != 0)
		return NULL;
	return c;
}

static void test_conf(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_mconf *c;
	const char *bad[][2] = {
		{ "pxe-dir rel/dir\n", "m.conf:2: bad pxe-dir (an absolute path) 'rel/dir'" },
		{ "pxe-dir /a\npxe-dir /b\n", "m.conf:3: pxe-dir given twice" },
		{ "pxe-dir\n", "m.conf:2: missing value after 'pxe-dir'" },
		{ "pxe-dir /a /b\n", "m.conf:2: too many values after 'pxe-dir'" },
		{ "pxe-url ftp://x/y\n", "m.conf:2: bad pxe-url" },
		{ "pxe-local disk\n", "m.conf:2: bad pxe-local (exit or sanboot) 'disk'" },
		{ "pxe-args\n", "m.conf:2: missing value after 'pxe-args'" },
		{ "pxe-args   # only a comment\n", "m.conf:2: missing value after 'pxe-args'" },
		{ "pxe-args a\"b\n", "m.conf:2: bad pxe-args" },
		{ "pxe-args a || reboot\n", "m.conf:2: bad pxe-args" },
		{ "pxe-args a\npxe-args b\n", "m.conf:3: pxe-args given twice" },
		{ "pxe-argsx a\n", "m.conf:2: unknown keyword 'pxe-argsx'" },
	};

	(void)state;
	c = conf("", &e);
	assert_non_null(c);
	assert_null(c->pxe_dir);
	assert_null(c->pxe_url);
	assert_null(c->pxe_args);
	assert_int_equal(c->pxe_local, NDZ_PXE_EXIT);
	ndz_mconf_free(c);
	/* pxe-args keeps its words whole (commas, '=', more than a line's 16 words), blanks
	 * made single; a comment ends it */
	c = conf("pxe-dir /srv/ndz/pxe\npxe-url http://10.0.0.2/ndz\npxe-local sanboot\n"
		 "  pxe-args\tconsole=tty0   console=ttyS0,115200 , a b c d e f g h i j k l m n o p q"
		 "  # the serial line\n", &e);
	if (!c)
		fail_msg("%s", ndz_error_msg(&e));
	assert_string_equal(c->pxe_dir, "/srv/ndz/pxe");
	assert_string_equal(c->pxe_url, "http://10.0.0.2/ndz");
	assert_int_equal(c->pxe_local, NDZ_PXE_SANBOOT);
	assert_string_equal(c->pxe_args, "console=tty0 console=ttyS0,115200 , a b c d e f g h i j "
			    "k l m n o p q");
	ndz_mconf_free(c);
	c = conf("pxe-local exit\n", &e);
	assert_non_null(c);
	assert_int_equal(c->pxe_local, NDZ_PXE_EXIT);
	ndz_mconf_free(c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_null(conf(bad[i][0], &e));
		if (!strstr(ndz_error_msg(&e), bad[i][1]))
			fail_msg("%s: got '%s'", bad[i][0], ndz_error_msg(&e));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_generic),
		cmocka_unit_test(test_states),
		cmocka_unit_test(test_where),
		cmocka_unit_test(test_why),
		cmocka_unit_test(test_checks),
		cmocka_unit_test(test_open),
		cmocka_unit_test(test_conf),
	};

	return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
