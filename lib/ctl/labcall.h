/*
 * The lab's wire from the other end (doc/PROTOCOL.md, "Lab"): an admin's call over the
 * master's admin socket, a node's ask or report over UDP, and the spellings both ends
 * share (a MAC address, a task's name).
 */
#ifndef NDZ_LABCALL_H
#define NDZ_LABCALL_H

#include <stddef.h>
#include <stdint.h>

#include "ctl.h"
#include "core/err.h"

/* A node's task (the lab's answers and the admin's requests carry these). */
enum ndz_lab_task {
	NDZ_LAB_NONE = 0,              /* no task: the node boots its local disk */
	NDZ_LAB_RELOAD = 1,            /* write image arg to the disk */
	NDZ_LAB_CAPTURE = 2,           /* read the disk into image arg */
	NDZ_LAB_LOCAL = 3,             /* answer only: boot the local disk */
	NDZ_LAB_WAIT = 4,              /* answer only: ask again in wait_ms (group window) */
};

/* Reload options (a bit set). */
#define NDZ_LAB_SEED   1u              /* keep what the disk already holds */
#define NDZ_LAB_ZERO   2u              /* zero what the image does not hold */
#define NDZ_LAB_VERIFY 4u              /* read every chunk back */
#define NDZ_LAB_OPTS   7u
#define NDZ_LAB_FULL   0x10u           /* an admin's reload flag, never a node's option: no seed */

/* A node's report (doc/PROTOCOL.md, "Lab messages"). */
enum ndz_lab_report_kind { NDZ_LAB_PROGRESS = 0, NDZ_LAB_OK = 1, NDZ_LAB_FAIL = 2 };

/*
 * ndz_labcall_parse_mac / ndz_labcall_format_mac - "aa:bb:cc:dd:ee:ff" (or '-' between,
 * any case) to 6 bytes: 0 or NDZ_EINVAL (e may be NULL); 6 bytes to the lower-case
 * text in buf (cap >= 18).
 */
int ndz_labcall_parse_mac(const char *s, uint8_t mac[6], struct ndz_error *e);
void ndz_labcall_format_mac(const uint8_t mac[6], char *buf, size_t cap);

/* ndz_labcall_strtask - "none", "reload", "capture", ... (a static string; "?" past them). */
const char *ndz_labcall_strtask(unsigned task);

/*
 * ndz_labcall_read_by / ndz_labcall_write_by - exactly n bytes from / onto the stream
 * fd by the deadline end (ndz_now_ms); 0 or -1.
 */
int ndz_labcall_read_by(int fd, uint8_t *b, size_t n, uint64_t end);
int ndz_labcall_write_by(int fd, const uint8_t *b, size_t n, uint64_t end);

/*
 * ndz_labcall - one admin exchange with the master at where: a unix socket's
 * path (it holds a '/'), or "tcp:HOST[:PORT]" (the token file's token is sent).
 * The reply is decoded into rep, its bytes in buf (cap >= NDZ_CTL_LABREP_MAX).
 * Returns 0 (whatever its status), or NDZ_ENET / NDZ_ETIMEDOUT / NDZ_EPROTO /
 * NDZ_EINVAL with e naming the master.
 */
int ndz_labcall(const char *where, const struct ndz_ctl_labreq *req, uint8_t *buf,
		    size_t cap, struct ndz_ctl_labrep *rep, struct ndz_error *e);

/*
 * ndz_labcall_node - a node's ask or report to the master at spec
 * ("HOST[:PORT]") over UDP: four tries 700 ms apart. Returns 0 with rep (any
 * status), or what ndz_ctl_query would (NDZ_ETIMEDOUT, NDZ_EINVAL, NDZ_ENET).
 */
int ndz_labcall_node(const char *spec, const struct ndz_ctl_labreq *req, uint8_t *buf,
			 size_t cap, struct ndz_ctl_labrep *rep, struct ndz_error *e);

#endif
