/*
 * The lab: nodes (by MAC, with a name, a group, an address), the pending task of
 * each (reload an image, capture one, boot local), the node's ask and report, the
 * group start window, lost nodes, and the lab's state file (doc/PROTOCOL.md, "The
 * lab's state file"). A pure object over a clock: the time (monotonic ms) is
 * passed in; no sockets, no printing, no files but the state file. Not locked:
 * the caller serialises.
 */
#ifndef NDZ_LAB_H
#define NDZ_LAB_H

#include <stddef.h>
#include <stdint.h>

#include "ctl/labcall.h"
#include "core/json.h"
#include "core/err.h"

#define NDZ_LAB_NODES 1024             /* table size */
#define NDZ_LAB_REASON_MAX NDZ_CTL_TEXT_MAX  /* a failure's reason, bytes */
#define NDZ_LAB_HISTORY 8              /* results kept per node, the last among them */
#define NDZ_LAB_BY_MAX 47              /* who set a task ("admin socket", "http 10.0.0.5") */
#define NDZ_LAB_TIMEOUT_MS 60000       /* a running node silent this long is lost */
/*
 * A node told to wait asks again after at most this: it learns that its group
 * started by asking, so this is how far apart the group's nodes start (about 25 us
 * of the master's time per ask).
 */
#define NDZ_LAB_ASK_AGAIN_MS 200

/*
 * The tasks, reload options (and NDZ_LAB_FULL, an admin's "never seed") and report
 * kinds are the wire's: lib/ctl/labcall.h.
 */

/*
 * Why a reload task seeds or not (ndz_lab_task chooses; doc/ndzctl.8, "Seeding"):
 * a reload seeds (and verifies) by default when the node's disk holds an image of
 * the task's image's lineage (ndz_lab_lineage).
 */
enum ndz_lab_seedwhy {
	NDZ_LAB_WHY_NO = 0,            /* a full reload: the disk holds no image of its lineage */
	NDZ_LAB_WHY_ASKED = 1,         /* the admin asked for seed */
	NDZ_LAB_WHY_LINEAGE = 2,       /* the disk holds an image of its lineage: seed + verify */
	NDZ_LAB_WHY_FULL = 3,          /* the admin asked for full: no seed */
};

#define NDZ_LAB_LINEAGES 256           /* images whose lineage is not their name, at most */

/*
 * What a node's disk holds: the image its last ok reload wrote or its last ok
 * capture read (or a failed reload wrote part of: partial), that image's uuid
 * when the master could read it, and its lineage.
 */
struct ndz_lab_disk {
	int set;                       /* 0: not known */
	int partial;                   /* a reload of it failed part-way */
	char image[NDZ_CTL_NAME_MAX + 1];
	uint8_t uuid[16];              /* all zero: not known */
	char lineage[NDZ_CTL_NAME_MAX + 1];
};

enum ndz_lab_state {
	NDZ_LAB_IDLE = 0,              /* no task */
	NDZ_LAB_PENDING = 1,           /* a task set, the node not yet started it */
	NDZ_LAB_RUNNING = 2,           /* told to start; heard within the timeout */
	NDZ_LAB_LOST = 3,              /* running, silent past the timeout: task still pending */
	NDZ_LAB_FAILED = 4,            /* the node reported failure; told to boot local */
};

/* The last result a node reported. */
struct ndz_lab_result {
	int set;                       /* 0: none yet */
	int ok;
	uint8_t task;                  /* NDZ_LAB_RELOAD or NDZ_LAB_CAPTURE */
	char arg[NDZ_CTL_NAME_MAX + 1];
	uint64_t bytes, ms, skipped;   /* written (or read), taken, chunks skipped */
	uint64_t wall_s;               /* when, Unix seconds (the caller's wall clock) */
	char reason[NDZ_LAB_REASON_MAX + 1];
};

struct ndz_lab_node {
	int used;                      /* 0: slot free */
	uint8_t mac[6];
	char name[NDZ_CTL_NAME_MAX + 1];  /* "" when none */
	char group[NDZ_CTL_NAME_MAX + 1]; /* "" when none */
	uint32_t addr;                 /* IPv4, network order; 0: not known (last heard from) */
	uint8_t task;                  /* NDZ_LAB_NONE, _RELOAD or _CAPTURE */
	uint8_t opts;                  /* NDZ_LAB_SEED | ... */
	char arg[NDZ_CTL_NAME_MAX + 1];   /* the image */
	uint8_t state;                 /* enum ndz_lab_state */
	uint32_t batch;                /* tasks set by one call share it: they start together */
	int go;                        /* its batch has started: start when asked */
	uint64_t asked_ms;             /* its first ask since the task was set; 0: none */
	uint64_t heard_ms;             /* its last ask or report */
	uint64_t bytes, total, skipped;   /* progress of the running task */
	uint64_t set_s;                /* when the task was set, Unix seconds (ndz_lab_origin); 0 */
	char by[NDZ_LAB_BY_MAX + 1];   /* by whom (ndz_lab_origin); "" */
	uint64_t started_ms;           /* when it was told to start; 0: not yet */
	uint8_t why;                   /* a reload task: enum ndz_lab_seedwhy */
	struct ndz_lab_disk disk;      /* what its disk holds (in the state file too) */
};

/* A report from a node (doc/PROTOCOL.md, "Lab messages"). */
struct ndz_lab_report {
	uint8_t kind;                  /* enum ndz_lab_report_kind */
	uint64_t bytes, total, ms, skipped;
	char reason[NDZ_LAB_REASON_MAX + 1];  /* NDZ_LAB_FAIL: why, for people */
};

/* The answer to an ask. */
struct ndz_lab_answer {
	uint8_t task;                  /* NDZ_LAB_RELOAD, _CAPTURE, _LOCAL or _WAIT */
	uint8_t opts;
	char arg[NDZ_CTL_NAME_MAX + 1];
	uint32_t wait_ms;              /* NDZ_LAB_WAIT: ask again after this */
};

/*
 * What the lab's nodes reported since it was made (not kept in the state file):
 * results by task (0 reload, 1 capture) and outcome (0 failed, 1 ok), and the
 * durations (the node's own MS) of the reloads that succeeded as a histogram: of
 * reload_count, reload_le[b] took at most ndz_lab_bucket_s[b] seconds.
 */
#define NDZ_LAB_BUCKETS 8
extern const uint64_t ndz_lab_bucket_s[NDZ_LAB_BUCKETS];   /* 10 s ... 1 h */
struct ndz_lab_stats {
	uint64_t results[2][2];
	uint64_t reload_le[NDZ_LAB_BUCKETS];
	uint64_t reload_count, reload_ms_sum;
};

struct ndz_lab;

/* ndz_lab_stats - the lab's figures so far; valid as long as l. */
const struct ndz_lab_stats *ndz_lab_stats(const struct ndz_lab *l);

/*
 * ndz_lab_create - an empty lab: a group waits at most window_ms for all its nodes
 * to ask (0: each starts when it asks); a running node silent timeout_ms is lost
 * (0: NDZ_LAB_TIMEOUT_MS).
 * 0 and *out (free with ndz_lab_free), or NDZ_ENOMEM with e set.
 */
int ndz_lab_create(uint64_t window_ms, uint64_t timeout_ms, struct ndz_lab **out,
		   struct ndz_error *e);

/* ndz_lab_free - accepts NULL. */
void ndz_lab_free(struct ndz_lab *l);

/* ndz_lab_set_times - a new window and timeout, as ndz_lab_create takes them. */
void ndz_lab_set_times(struct ndz_lab *l, uint64_t window_ms, uint64_t timeout_ms);

/*
 * ndz_lab_node_add - a node with mac, name and group ("" or NULL: none; else
 * NDZ_CTL_NAME_RULE, and not "-"); a node with that MAC is updated (its task
 * kept). A name another node has is NDZ_EEXIST; a full table NDZ_ERANGE; a bad
 * name NDZ_EINVAL; e says which.
 */
int ndz_lab_node_add(struct ndz_lab *l, const uint8_t mac[6], const char *name,
		     const char *group, struct ndz_error *e);

/*
 * ndz_lab_node_remove - forget the node key names (its MAC or its name). 0 or
 * NDZ_ENOENT with e set.
 */
int ndz_lab_node_remove(struct ndz_lab *l, const char *key, struct ndz_error *e);

/*
 * ndz_lab_task - set a task (NDZ_LAB_RELOAD or NDZ_LAB_CAPTURE with image arg and
 * opts, or NDZ_LAB_NONE: cancel) for target: a node's MAC or name, or a group (all
 * its nodes). A reload is set on every node; a capture names one node only. Every
 * node of one call shares a batch (they start together). A reload seeds: with
 * NDZ_LAB_SEED (asked), or without NDZ_LAB_FULL when the node's disk holds an image
 * of arg's lineage (ndz_lab_lineage); it is then verified too (NDZ_LAB_VERIFY
 * added), each node by its own disk (its why says which). Returns the number of
 * nodes set (>= 1), or NDZ_ENOENT (no such node or group), NDZ_EINVAL (a bad task,
 * arg or opts; SEED with FULL; a capture for a group) with e set. The nodes' MACs
 * go to macs (at most cap of them; may be NULL): for Wake-on-LAN.
 */
int ndz_lab_task(struct ndz_lab *l, const char *target, uint8_t task, const char *arg,
		 uint8_t opts, uint8_t (*macs)[6], size_t cap, struct ndz_error *e);

/*
 * ndz_lab_image_tasks - the nodes whose reload task (pending, running, lost or
 * failed) names image: returns how many. to NULL: they are only counted; "": those
 * tasks are cancelled; else (an image name) they reload to instead, their state
 * kept, and to takes image's lineage (the disks that held image hold to). Capture
 * tasks are left alone (they make an image, they do not read one).
 */
size_t ndz_lab_image_tasks(struct ndz_lab *l, const char *image, const char *to);

/*
 * ndz_lab_ask - the node mac (at addr, network order) asks what to do at now_ms.
 * An unknown node, one without a task, and one whose task failed are told
 * NDZ_LAB_LOCAL. A node with a task is told it (and is running from then on), unless
 * it is a reload whose batch has not started: it starts once every node of the
 * batch still pending has asked, or window_ms after the first of them asked; until
 * then NDZ_LAB_WAIT. Latecomers of a started batch start at once. Never fails.
 */
void ndz_lab_ask(struct ndz_lab *l, const uint8_t mac[6], uint32_t addr, uint64_t now_ms,
		 struct ndz_lab_answer *a);

/*
 * ndz_lab_peek - what the node mac would be told to do were it to ask now, without
 * asking: nothing of the lab changes (a boot script served over HTTP is no ask).
 * a->task is the node's task (NDZ_LAB_RELOAD or _CAPTURE, with opts and arg) while
 * it is pending, running or lost; NDZ_LAB_LOCAL for an unknown node, one without a
 * task, and one whose task failed; never NDZ_LAB_WAIT (the group window is the
 * ask's). Returns the node's slot (ndz_lab_node, ndz_lab_last), or -1: unknown.
 */
int ndz_lab_peek(const struct ndz_lab *l, const uint8_t mac[6], struct ndz_lab_answer *a);

/*
 * ndz_lab_report - the node mac reports r at now_ms (wall_s: the wall clock, kept
 * with a result). PROGRESS updates a running (or lost: running again) task; OK
 * clears the task and records the result; FAIL records the result with its reason
 * and marks the task failed. An ok reload or capture makes the node's disk hold
 * its image (whole; its uuid not known until ndz_lab_disk_uuid); a failed reload,
 * part of it; an ok capture gives the image the lineage of what the disk held (a
 * new version of it). 0; 1 when r is the node's last result sent again
 * (the same outcome, figures and reason, the task still ended: its answer was
 * lost), which changes nothing; NDZ_ENOENT for an unknown node or one without a
 * task (a report nobody asked for), NDZ_EINVAL for a bad kind, e set.
 */
int ndz_lab_report(struct ndz_lab *l, const uint8_t mac[6], const struct ndz_lab_report *r,
		   uint64_t now_ms, uint64_t wall_s, struct ndz_error *e);

/*
 * ndz_lab_lineage - the lineage of image name: the one an ok capture (or a rename)
 * gave it, else its own name. Two images are of one lineage when these are equal.
 * A static or l's string, valid until l changes.
 */
const char *ndz_lab_lineage(const struct ndz_lab *l, const char *image);

/*
 * ndz_lab_disk_uuid - the node mac's disk holds image whose uuid is uuid (the
 * master read it from the image's file after the result): kept when its disk holds
 * that image, else nothing changes. Returns 1 when it was kept, else 0.
 */
int ndz_lab_disk_uuid(struct ndz_lab *l, const uint8_t mac[6], const char *image,
		      const uint8_t uuid[16]);

/* ndz_lab_strwhy - "no", "asked", "lineage", "full" (a static string). */
const char *ndz_lab_strwhy(unsigned why);

/* ndz_lab_tick - running nodes silent past the timeout become lost; returns how many. */
size_t ndz_lab_tick(struct ndz_lab *l, uint64_t now_ms);

/*
 * ndz_lab_changed - 1 when something the state file keeps changed since the last
 * call (then saving is due), else 0; clears the mark.
 */
int ndz_lab_changed(struct ndz_lab *l);

/*
 * ndz_lab_copy - dst becomes what src is (nodes, results, times, the change mark):
 * a copy taken before a change that may have to be undone.
 */
void ndz_lab_copy(struct ndz_lab *dst, const struct ndz_lab *src);

/* ndz_lab_node - slot i (< NDZ_LAB_NODES); used is 0 when free. Valid as long as l. */
const struct ndz_lab_node *ndz_lab_node(const struct ndz_lab *l, size_t i);
/* ndz_lab_last - the last result of slot i. */
const struct ndz_lab_result *ndz_lab_last(const struct ndz_lab *l, size_t i);
/*
 * ndz_lab_history - the k-th result of slot i, newest first (k 0 is ndz_lab_last's),
 * or NULL past the last kept: a node keeps its NDZ_LAB_HISTORY newest results (in
 * the state file too); the oldest goes when a new one comes.
 */
const struct ndz_lab_result *ndz_lab_history(const struct ndz_lab *l, size_t i, size_t k);
/*
 * ndz_lab_origin - the tasks ndz_lab_task sets from now on were set at wall_s (Unix
 * seconds) by by (NDZ_LAB_BY_MAX bytes kept; "" or NULL: not told). Not saved.
 */
void ndz_lab_origin(struct ndz_lab *l, uint64_t wall_s, const char *by);
/* ndz_lab_find - the slot of the node key names (MAC or name), or -1. */
int ndz_lab_find(const struct ndz_lab *l, const char *key);
/* ndz_lab_count - nodes known. */
size_t ndz_lab_count(const struct ndz_lab *l);

/* ndz_lab_strstate - "idle", "pending", ... (a static string; the task names are
   ndz_labcall_strtask's). */
const char *ndz_lab_strstate(unsigned state);

/*
 * ndz_lab_json - the lab as JSON into j: {"nodes":[{"mac":..,"name":..,"group":..,
 * "addr":..,"task":..,"image":..,"opts":[..],"state":..,"bytes":..,"total":..,
 * "skipped":..,"silent_ms":..,"last":{"ok":..,"task":..,"image":..,"bytes":..,
 * "ms":..,"skipped":..,"time":..,"reason":..},"set_time":..,"by":..,"running_ms":..,
 * "waiting":{"asked":K,"of":N} or null,"seed":"no"|"asked"|"lineage"|"full" (a
 * reload task's choice, ndz_lab_strwhy; "no" without one),"disk":{"image":..,
 * "partial":..} or null (not known),"history":[results as "last", newest first, at
 * most hist of them]}],"lineages":{IMAGE:LINEAGE, for the images whose lineage is
 * not their name}}.
 * now_ms gives silent_ms and running_ms; waiting is set on a reload's node that asked
 * and waits for its batch: K of the batch's N pending nodes asked.
 */
void ndz_lab_json(const struct ndz_lab *l, uint64_t now_ms, size_t hist, struct ndz_jbuf *j);

/*
 * ndz_lab_table - the nodes as a table for people into j, one line each under a
 * header: MAC, name, group, task and image (with its options; "(lineage)" when it
 * seeds because the disk holds that lineage), state, progress, what the disk holds
 * (its image, "~" before it when partial), last result.
 */
void ndz_lab_table(const struct ndz_lab *l, uint64_t now_ms, struct ndz_jbuf *j);

/*
 * ndz_lab_save - the state file at path, replaced whole (ndz_file_replace, mode
 * 0640). 0 or a negative code with e set.
 * ndz_lab_load - read path into an empty lab: a missing file is an empty lab (0);
 * a line that is not one of ours is skipped and counted in *skipped (may be NULL).
 * Running and lost tasks come back pending. 0, or NDZ_EIO with e set.
 */
int ndz_lab_save(const struct ndz_lab *l, const char *path, struct ndz_error *e);
int ndz_lab_load(struct ndz_lab *l, const char *path, size_t *skipped, struct ndz_error *e);

#endif
