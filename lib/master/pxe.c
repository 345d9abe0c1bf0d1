/* Network boot by the master: the iPXE scripts, the pxe-* keys' checks, the pxe-dir's files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "core/json.h"
#include "pxe.h"

static const char generic[] =
	"#!ipxe\n"
	"# mfrisbeed: every node's first script; its own follows, by MAC (doc/PXE.md)\n"
	"chain /boot/${netX/mac:hexhyp} || echo ndz: no boot script from the master for "
	"${netX/mac}\n"
	"exit\n";

const char *ndz_pxe_generic(void)
{
	return generic;
}

static int is_alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int ndz_pxe_args_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NDZ_PXE_ARGS_MAX || s[0] == ' ' || s[n - 1] == ' ')
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c > 0x7e || strchr("\"'\\|&;#", c) || (c == ' ' && s[i + 1] == ' '))
			return 0;
	}
	return 1;
}

int ndz_pxe_url_ok(const char *s)
{
	static const char *const schemes[] = { "http://", "https://", "tftp://" };
	size_t n = strlen(s), k;

	if (n > NDZ_PXE_URL_MAX)
		return 0;
	for (k = 0; k < 3 && strncmp(s, schemes[k], strlen(schemes[k])) != 0; k++)
		;
	if (k == 3 || !s[strlen(schemes[k])] || s[strlen(schemes[k])] == '/')
		return 0;
	for (const char *p = s + strlen(schemes[k]); *p; p++)
		if (!is_alnum((unsigned char)*p) && !strchr("-._~:/@%+=,!*()", *p))
			return 0;
	return 1;
}

int ndz_pxe_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > NDZ_PXE_NAME_MAX || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum((unsigned char)name[i]) && !strchr(".-_", name[i]))
			return 0;
	return 1;
}

/* ndz.master's value: an address, maybe with a port; nothing iPXE or the kernel would split. */
static int master_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum((unsigned char)s[i]) && !strchr(".-:[]", s[i]))
			return 0;
	return 1;
}

const char *ndz_pxe_why(const struct ndz_lab_answer *a, const struct ndz_lab_node *n)
{
	if (a->task == NDZ_LAB_RELOAD || a->task == NDZ_LAB_CAPTURE)
		return ndz_labcall_strtask(a->task);
	if (!n)
		return "unknown node";
	return n->task != NDZ_LAB_NONE && n->state == NDZ_LAB_FAILED ? "task failed" : "no task";
}

int ndz_pxe_script(const uint8_t mac[6], const struct ndz_lab_answer *a,
		   const struct ndz_lab_node *n, const struct ndz_pxe_where *w, char *buf,
		   size_t cap, struct ndz_error *e)
{
	int env = a->task == NDZ_LAB_RELOAD || a->task == NDZ_LAB_CAPTURE;
	const char *why = ndz_pxe_why(a, n);
	struct ndz_jbuf j;
	char m[18];

	ndz_labcall_format_mac(mac, m, sizeof(m));
	ndz_jbuf_init(&j, buf, cap);
	ndz_jbuf_printf(&j, "#!ipxe\n");
	if (env) {
		const char *sl = w->url && w->url[0] && w->url[strlen(w->url) - 1] == '/' ? "" : "/";
		int args = w->args && w->args[0];

		if (!w->url || !ndz_pxe_url_ok(w->url))
			return ndz_error_set(e, NDZ_EINVAL, 0, "boot script of %s: bad base URL '%.64s'",
					     m, w->url ? w->url : "");
		if (!w->master || !master_ok(w->master))
			return ndz_error_set(e, NDZ_EINVAL, 0, "boot script of %s: bad master address "
					     "'%.64s'", m, w->master ? w->master : "");
		if (args && !ndz_pxe_args_ok(w->args))
			return ndz_error_set(e, NDZ_EINVAL, 0, "boot script of %s: bad kernel "
					     "parameters '%.64s'", m, w->args);
		/* the image name is NDZ_CTL_NAME_RULE's: nothing iPXE would read as its own */
		ndz_jbuf_printf(&j, "# mfrisbeed: %s %s for %s (doc/PXE.md)\n", why, a->arg, m);
		ndz_jbuf_printf(&j, "echo ndz: %s %s for %s: loading the boot environment\n", why,
				a->arg, m);
		ndz_jbuf_printf(&j, "kernel %s%s" NDZ_PXE_KERNEL " initrd=" NDZ_PXE_INITRD
				" ndz.lab=1 ndz.master=%s ndz.mac=%s%s%s || goto failed\n", w->url, sl,
				w->master, m, args ? " " : "", args ? w->args : "");
		ndz_jbuf_printf(&j, "initrd %s%s" NDZ_PXE_INITRD " || goto failed\n", w->url, sl);
		ndz_jbuf_printf(&j, "boot || goto failed\n"
				":failed\n"
				"echo ndz: the boot environment did not start: trying again in 10 s\n"
				"sleep 10\n"
				"reboot\n");
	} else {
		ndz_jbuf_printf(&j, "# mfrisbeed: %s boots its local disk: %s (doc/PXE.md)\n", m,
				why);
		if (!n)
			ndz_jbuf_printf(&j, "echo ndz: %s is not a node of this lab: ", m);
		else if (strcmp(why, "task failed") == 0)
			ndz_jbuf_printf(&j, "echo ndz: %s %s failed for %s (ndzctl status says why): ",
					ndz_labcall_strtask(n->task), n->arg, m);
		else
			ndz_jbuf_printf(&j, "echo ndz: no task for %s: ", m);
		ndz_jbuf_printf(&j, "booting the local disk\n%s", w->local == NDZ_PXE_SANBOOT ?
				"sanboot --no-describe --drive 0x80 || exit\n" : "exit\n");
	}
	if (j.over)
		return ndz_error_set(e, NDZ_ERANGE, 0, "boot script of %s: longer than %zu bytes", m,
				     cap ? cap - 1 : 0);
	return (int)j.len;
}

int ndz_pxe_open(const char *dir, const char *name, uint64_t *size, struct ndz_error *e)
{
	struct stat st;
	int dfd, fd, err;

	*size = 0;
	if (!ndz_pxe_name_ok(name))
		return ndz_error_set(e, NDZ_ENOENT, 0, "pxe file '%.64s': not a name served "
				     "(letters, digits, '.', '-', '_'; no '.' first)", name);
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return ndz_error_set(e, NDZ_ENOENT, errno, "pxe-dir %s", dir);
	/* no link followed, and no wait on a FIFO: O_NONBLOCK, cleared once it is a file */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	err = errno;
	close(dfd);
	if (fd < 0)
		return ndz_error_set(e, NDZ_ENOENT, err == ELOOP ? 0 : err, "pxe file %s/%s%s", dir,
				     name, err == ELOOP ? ": a symbolic link (not followed)" : "");
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
		close(fd);
		return ndz_error_set(e, NDZ_ENOENT, 0, "pxe file %s/%s: not a plain file", dir, name);
	}
	*size = (uint64_t)st.st_size;
	return fd;
}
