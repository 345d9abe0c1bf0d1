/* ndzctl node: a lab node's turn, ask, run, report (ndzctl/node.c). */
#ifndef NDZCTL_NODE_H
#define NDZCTL_NODE_H

#define NODE_MAX_EXTRA 32

/* What the boot environment says beside the master's task. */
struct node_opts {
	const char *iface;             /* frisbee -i, or NULL */
	const char *timeout;           /* seconds: frisbee -T, imagezip --wait */
	int discard;                   /* reload without zero: --discard */
	int retries;                   /* more asks, more attempts */
	const char *extra[NODE_MAX_EXTRA];  /* more options for frisbee or imagezip */
	int nextra;
	/* a task given, not asked (MAC "-": no lab, nothing reported) */
	const char *task;              /* "reload" or "capture", or NULL: ask */
	const char *image;             /* the master's image (-m HOST) */
	const char *group, *port, *server;  /* reload: a frisbeed's group and port instead */
	unsigned flags;                /* NDZ_LAB_SEED, _ZERO, _VERIFY */
};

/* Exit statuses of ndzctl node besides 0 (done, reported) and 2 (bad usage). */
enum { NODE_FAILED = 1, NODE_NO_TASK = 3, NODE_NO_MASTER = 4 };

/*
 * node_run - ask master (HOST[:PORT]) for mac's task, run it on disk, report progress
 * and the result; prints "NDZ-RESULT: ok: ..." or "NDZ-RESULT: failed: REASON" on
 * stdout. mac "-": the task is o->task, nothing is asked or reported (master may be
 * NULL for a reload from o->group). Returns the exit status.
 */
int node_run(const char *master, const char *mac, const char *disk,
	     const struct node_opts *o);

#endif
