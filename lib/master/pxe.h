/*
 * Network boot by the master (doc/PXE.md): the iPXE scripts mfrisbeed serves over
 * its HTTP endpoint (one generic script for every node, then each node's own by
 * MAC: the boot environment while the node has a task, the local disk otherwise),
 * the checks of the pxe-* configuration keys, and opening a file of the pxe-dir.
 * Text building is pure: the caller passes the node and the addresses in; no
 * sockets, no printing.
 */
#ifndef NDZ_PXE_H
#define NDZ_PXE_H

#include <stddef.h>
#include <stdint.h>

#include "lab.h"
#include "core/err.h"

#define NDZ_PXE_ARGS_MAX 1000          /* pxe-args, bytes */
#define NDZ_PXE_URL_MAX 512            /* pxe-url, bytes */
#define NDZ_PXE_SCRIPT_MAX 4096        /* a node's script is shorter than this */
#define NDZ_PXE_NAME_MAX 128           /* a file name under /pxe/ */
#define NDZ_PXE_KERNEL "vmlinuz"       /* the boot environment's files (make mfs) */
#define NDZ_PXE_INITRD "initramfs.cpio.gz"

/* How a node boots its local disk (pxe-local). */
enum ndz_pxe_local {
	NDZ_PXE_EXIT = 0,              /* "exit": the firmware tries its next boot device */
	NDZ_PXE_SANBOOT = 1,           /* "sanboot --no-describe --drive 0x80": the first disk */
};

/* Where a node's script sends it. */
struct ndz_pxe_where {
	const char *url;               /* the files' base URL ("http://ADDR:PORT/pxe"; a
					* trailing '/' is fine): ndz_pxe_url_ok */
	const char *master;            /* ndz.master: "ADDR" or "ADDR:PORT" (no blanks) */
	const char *args;              /* more kernel parameters (ndz_pxe_args_ok); NULL or
					* "": none */
	int local;                     /* enum ndz_pxe_local */
};

/*
 * ndz_pxe_generic - the script GET /boot.ipxe serves to every node (a static
 * string): it chains /boot/MAC (the MAC of the interface iPXE booted from, with
 * '-' between its bytes), a reference iPXE resolves against the script's own URL,
 * so the script is the same whatever name or address the node reached the master
 * at; when that fails it tells so and exits (the firmware's next boot device).
 */
const char *ndz_pxe_generic(void);

/*
 * ndz_pxe_script - the script of node mac into buf (cap bytes, NUL-terminated):
 * a answers as ndz_lab_peek does (NDZ_LAB_RELOAD or _CAPTURE: boot the environment
 * from w->url with "initrd=initramfs.cpio.gz ndz.lab=1 ndz.master=M ndz.mac=MAC"
 * and w->args; else boot local as w->local says, an echo line saying why); n is
 * the node (NULL: unknown), for the why. Returns the script's length, or
 * NDZ_EINVAL (a bad url, master or args) / NDZ_ERANGE (cap too small) with e set.
 */
int ndz_pxe_script(const uint8_t mac[6], const struct ndz_lab_answer *a,
		   const struct ndz_lab_node *n, const struct ndz_pxe_where *w, char *buf,
		   size_t cap, struct ndz_error *e);

/*
 * ndz_pxe_why - the script ndz_pxe_script gives, in words for a log (static):
 * "reload", "capture" (the environment), "no task", "task failed" or
 * "unknown node" (the local disk).
 */
const char *ndz_pxe_why(const struct ndz_lab_answer *a, const struct ndz_lab_node *n);

/*
 * ndz_pxe_args_ok - 1 when s may follow the kernel on an iPXE line: 1 to
 * NDZ_PXE_ARGS_MAX printable ASCII bytes, words split by single blanks, without
 * what iPXE's command line would read as its own (quotes, '\\', '|', '&', ';', '#').
 * "${...}" is left to iPXE, which expands its settings. Else 0.
 */
int ndz_pxe_args_ok(const char *s);

/*
 * ndz_pxe_url_ok - 1 when s is a base URL for the files: "http://", "https://" or
 * "tftp://" then a host and path of letters, digits and "-._~:/@%+=,!*()",
 * at most NDZ_PXE_URL_MAX bytes in all. Else 0.
 */
int ndz_pxe_url_ok(const char *s);

/*
 * ndz_pxe_name_ok - 1 when name may be served from the pxe-dir: 1 to
 * NDZ_PXE_NAME_MAX letters, digits, '.', '-' and '_', not starting with '.'.
 */
int ndz_pxe_name_ok(const char *name);

/*
 * ndz_pxe_open - open the file name directly in dir for reading: the name must
 * pass ndz_pxe_name_ok, the file be a regular file and no symbolic link (not
 * followed, wherever it points). Returns the descriptor (close-on-exec; the
 * caller closes it) with its size in *size, or NDZ_ENOENT with e saying why
 * (bad name, no such file, a link, not a plain file, the directory unreadable).
 */
int ndz_pxe_open(const char *dir, const char *name, uint64_t *size, struct ndz_error *e);

#endif
