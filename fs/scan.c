/* Deciding what to image: partition tables and filesystems -> allocated sectors. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/format.h"
#include "fs.h"
#include "part.h"
#include "scan.h"

#define SEC NDZ_SECTOR_SIZE

const struct ndz_fs_module *const ndz_fs_modules[] = {
	&ndz_fs_ext, &ndz_fs_ntfs, &ndz_fs_ufs, &ndz_fs_swap, &ndz_fs_exfat, &ndz_fs_xfs,
	&ndz_fs_btrfs, &ndz_fs_lvm, &ndz_fs_fat,
	NULL,
};

static const struct {
	const char *alias;
	const struct ndz_fs_module *mod;
} fs_aliases[] = {
	{ "ext", &ndz_fs_ext }, { "ext2", &ndz_fs_ext }, { "ext3", &ndz_fs_ext },
	{ "ext4", &ndz_fs_ext }, { "ntfs", &ndz_fs_ntfs }, { "ufs", &ndz_fs_ufs },
	{ "ufs1", &ndz_fs_ufs }, { "ufs2", &ndz_fs_ufs }, { "ffs", &ndz_fs_ufs },
	{ "swap", &ndz_fs_swap }, { "linux-swap", &ndz_fs_swap }, { "bsdswap", &ndz_fs_bsdswap },
	{ "freebsd-swap", &ndz_fs_bsdswap }, { "fat", &ndz_fs_fat }, { "vfat", &ndz_fs_fat },
	{ "fat12", &ndz_fs_fat }, { "fat16", &ndz_fs_fat }, { "fat32", &ndz_fs_fat },
	{ "exfat", &ndz_fs_exfat }, { "xfs", &ndz_fs_xfs },
	{ "btrfs", &ndz_fs_btrfs }, { "lvm", &ndz_fs_lvm }, { "lvm2", &ndz_fs_lvm },
};

const struct ndz_fs_module *ndz_fs_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(fs_aliases) / sizeof(fs_aliases[0]); i++)
		if (!strcmp(name, fs_aliases[i].alias))
			return fs_aliases[i].mod;
	return NULL;
}

const struct ndz_fs_module *ndz_fs_probe_all(struct ndz_io *io)
{
	for (size_t i = 0; ndz_fs_modules[i]; i++)
		if (ndz_fs_modules[i]->probe(io) > 0)
			return ndz_fs_modules[i];
	return NULL;
}

const char *ndz_scan_how_name(enum ndz_scan_how how)
{
	static const char *const names[] = {
		[NDZ_HOW_NONE] = "?", [NDZ_HOW_FS] = "fs", [NDZ_HOW_RAW] = "raw",
		[NDZ_HOW_IGNORED] = "ignored", [NDZ_HOW_EXTENDED] = "extended",
		[NDZ_HOW_BSDLABEL] = "bsdlabel",
	};

	return (unsigned)how < sizeof(names) / sizeof(names[0]) ? names[how] : "?";
}

void ndz_scan_opts_init(struct ndz_scan_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->min_free = 32 * 1024;
}

int ndz_scan_override_parse(struct ndz_scan_opts *o, enum ndz_scan_action action,
			    const char *arg)
{
	struct ndz_scan_override *ov;
	const char *type = NULL;
	char *end;
	long n;
	int sub = 0;

	if (o->noverrides >= NDZ_SCAN_MAX_OVERRIDES)
		return NDZ_ERANGE;
	n = strtol(arg, &end, 10);
	if (end == arg || n < 0 || n > 65535)
		return NDZ_EINVAL;
	if (*end >= 'a' && *end <= 'z' && n > 0)
		sub = *end++ - 'a' + 1;
	if (action == NDZ_SCAN_FORCE) {
		if (*end != '=')
			return NDZ_EINVAL;
		type = end + 1;
		if (strcmp(type, "raw") && !ndz_fs_by_name(type))
			return NDZ_EINVAL;
		if (!strcmp(type, "raw"))
			action = NDZ_SCAN_RAW;
	} else if (*end) {
		return NDZ_EINVAL;
	}
	ov = &o->overrides[o->noverrides++];
	memset(ov, 0, sizeof(*ov));
	ov->index = (int)n;
	ov->sub = sub;
	ov->action = action;
	if (type)
		snprintf(ov->fstype, sizeof(ov->fstype), "%s", type);
	return 0;
}

void ndz_scan_report_release(struct ndz_scan_report *r)
{
	if (!r)
		return;
	free(r->v);
	memset(r, 0, sizeof(*r));
}

/* ---- state of one scan ---- */

struct scan {
	struct ndz_io *src;
	const struct ndz_scan_opts *o;
	struct ndz_ranges *out;        /* result ranges, relative to the image base */
	struct ndz_ranges *zero;       /* of those, the ones to image as zeros */
	struct ndz_scan_report *rep;
	uint8_t matched[NDZ_SCAN_MAX_OVERRIDES];  /* the override named a partition found */
};

static void warnf(struct scan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(struct scan *s, const char *fmt, ...)
{
	char small[512], *msg = small;
	va_list ap;
	int n;

	if (!s->o->warn)
		return;
	/* no fixed cut: a source's path may be long, and the line names it first */
	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(small) && (msg = malloc((size_t)n + 1)) != NULL) {
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	s->o->warn(s->o->warn_ctx, msg ? msg : small);
	if (msg != small)
		free(msg);
}

static struct ndz_scan_entry *new_entry(struct scan *s)
{
	struct ndz_scan_entry *nv;

	if (!s->rep)
		return NULL;
	nv = realloc(s->rep->v, (s->rep->n + 1) * sizeof(*nv));
	if (!nv)
		return NULL;
	s->rep->v = nv;
	memset(&nv[s->rep->n], 0, sizeof(*nv));
	return &nv[s->rep->n++];
}

/* The last override naming partition index (sub: its BSD partition, or 0), if any. */
static const struct ndz_scan_override *find_override(struct scan *s, int index, int sub)
{
	const struct ndz_scan_override *found = NULL;

	for (int i = 0; i < s->o->noverrides; i++)
		if (s->o->overrides[i].index == index && s->o->overrides[i].sub == sub) {
			found = &s->o->overrides[i];
			s->matched[i] = 1;
		}
	return found;
}

/* An override that named no partition of the source did nothing: say so. */
static void warn_unmatched(struct scan *s)
{
	static const char opt[] = { [NDZ_SCAN_FORCE] = 'S', [NDZ_SCAN_RAW] = 'R',
				    [NDZ_SCAN_IGNORE] = 'I' };

	for (int i = 0; i < s->o->noverrides; i++) {
		const struct ndz_scan_override *ov = &s->o->overrides[i];
		char sub[2] = { ov->sub ? (char)('a' + ov->sub - 1) : 0, 0 };

		if (!s->matched[i])
			warnf(s, "%s: -%c %d%s: no such partition here; ignored", s->src->name,
			      opt[ov->action], ov->index, sub);
	}
}

/*
 * Apply an ignore or raw override to a volume: returns 1 with *rc set when it
 * did, 0 when the volume is to be read (probed, or forced to a type).
 */
static int apply_override(struct scan *s, const struct ndz_scan_override *ov,
			  struct ndz_io *io, uint64_t at, struct ndz_scan_entry *e, int *rc)
{
	if (ov && ov->action == NDZ_SCAN_IGNORE) {
		if (e) {
			e->how = NDZ_HOW_IGNORED;
			e->free_bytes = io->size;
		}
		*rc = 0;
		return 1;
	}
	if (s->o->raw || (ov && ov->action == NDZ_SCAN_RAW)) {
		if (e) {
			e->how = NDZ_HOW_RAW;
			e->used_bytes = io->size;
			snprintf(e->note, sizeof(e->note), "raw as asked");
		}
		*rc = ndz_ranges_add(s->out, at, ndz_sectors_of(io->size), NULL);
		return 1;
	}
	return 0;
}

struct collect {
	struct ndz_ranges *r;
	uint64_t base;                 /* sectors added to every extent */
	uint64_t limit;                /* bytes of the volume */
	int inward;                    /* only the sectors wholly inside (zeros must not spill) */
};

/* An extent as sectors: every sector it touches, or with inward those it covers. */
static int collect_extent(void *ctx, uint64_t off, uint64_t len)
{
	struct collect *c = ctx;
	uint64_t a, b;

	if (off >= c->limit || len == 0)
		return 0;
	if (len > c->limit - off)
		len = c->limit - off;
	a = c->inward ? ndz_sectors_of(off) : off / SEC;
	b = c->inward ? (off + len) / SEC : ndz_sectors_of(off + len);
	return b > a ? ndz_ranges_add(c->r, c->base + a, b - a, NULL) : 0;
}

/*
 * What a module found wrong with the volume it reads, gathered into one line per
 * filesystem with what was done about it: modules hand each finding to warn
 * ("ext: group 3: free count disagrees with the bitmap"), scan_volume says it
 * once at the end ("disk: partition 1: ext: not cleanly unmounted; group 3: free
 * count disagrees with the bitmap; taking the union"). A finding is filed under
 * its subject: the text up to and including the first module name it carries
 * ("ext: ", or "LV root: ext: " from a module reading an LVM volume).
 */
#define FINDING_SUBJECTS 8

struct finding {
	char subject[96];
	char text[NDZ_ERRMSG_MAX];     /* findings of the subject, "; " between them */
	int cut;                       /* more than text holds */
};

struct volume_warn {
	struct scan *s;
	const char *what;
	struct finding f[FINDING_SUBJECTS];
	int n;
	unsigned dropped;              /* findings of subjects past the last slot */
};

/* The module whose name is p[0..len) (bsdswap too, which is never probed), or NULL. */
static const struct ndz_fs_module *module_named(const char *p, size_t len)
{
	for (size_t i = 0; ndz_fs_modules[i]; i++)
		if (strlen(ndz_fs_modules[i]->name) == len &&
		    !memcmp(ndz_fs_modules[i]->name, p, len))
			return ndz_fs_modules[i];
	return len == 7 && !memcmp(p, "bsdswap", 7) ? &ndz_fs_bsdswap : NULL;
}

/* Length of msg's subject: through the first "NAME: " naming a module, else 0. */
static size_t subject_len(const char *msg)
{
	const char *seg = msg, *colon;

	while ((colon = strstr(seg, ": ")) != NULL) {
		if (module_named(seg, (size_t)(colon - seg)))
			return (size_t)(colon + 2 - msg);
		seg = colon + 2;
	}
	return 0;
}

static void volume_warn(void *ctx, const char *msg)
{
	struct volume_warn *w = ctx;
	size_t sl = subject_len(msg), have;
	struct finding *f = NULL;

	if (sl >= sizeof(f->subject))
		sl = 0;
	for (int i = 0; i < w->n && !f; i++)
		if (strlen(w->f[i].subject) == sl && !memcmp(w->f[i].subject, msg, sl))
			f = &w->f[i];
	if (!f) {
		if (w->n == FINDING_SUBJECTS) {
			w->dropped++;
			return;
		}
		f = &w->f[w->n++];
		memcpy(f->subject, msg, sl);
		f->subject[sl] = 0;
	}
	have = strlen(f->text);
	if (have + 2 + strlen(msg + sl) >= sizeof(f->text)) {
		f->cut = 1;
		return;
	}
	snprintf(f->text + have, sizeof(f->text) - have, "%s%s", have ? "; " : "", msg + sl);
}

/* The last finding is a decision of its own ("taking it raw", "taking the whole area"). */
static int has_decision(const char *text)
{
	const char *last = strrchr(text, ';');

	last = last ? last + 2 : text;
	return !strncmp(last, "taking ", 7);
}

/* The module a subject names last ("LV root: ext: " -> ext), or dflt. */
static const struct ndz_fs_module *subject_module(const char *subject,
						  const struct ndz_fs_module *dflt)
{
	const struct ndz_fs_module *m = dflt, *named;
	const char *seg = subject, *colon;

	for (; (colon = strstr(seg, ": ")) != NULL; seg = colon + 2)
		if ((named = module_named(seg, (size_t)(colon - seg))) != NULL)
			m = named;
	return m;
}

/*
 * Say what the findings were, one line per subject, each with what was done:
 * raw (the volume's every sector), the union (fs-aware: what the allocation maps
 * and what the metadata reach call in use) or, for a module that reads its maps
 * alone, what they mark; a finding that ends in a decision of its own ("taking
 * it raw" for an LV its module could not read) keeps it. The same lines go to the -i
 * report's note, without the volume's name. Clears w.
 */
static void volume_findings(struct volume_warn *w, int raw, const struct ndz_fs_module *mod,
			    struct ndz_scan_entry *e)
{
	size_t nl = 0;

	if (e)
		e->note[0] = 0;
	for (int i = 0; i < w->n; i++) {
		const struct finding *f = &w->f[i];
		const struct ndz_fs_module *m = subject_module(f->subject, mod);
		const char *decision = has_decision(f->text) ? NULL :
				       raw ? "taking it raw" :
				       m && m->union_walk ? "taking the union" :
				       "taking what its maps mark in use";
		char more[48] = "";

		if (i == w->n - 1 && w->dropped)
			snprintf(more, sizeof(more), "; %u more", w->dropped);
		warnf(w->s, "%s: %s%s%s%s%s%s", w->what, f->subject, f->text, f->cut ? "; ..." : "",
		      more, decision ? "; " : "", decision ? decision : "");
		if (e && nl < sizeof(e->note))
			nl += (size_t)snprintf(e->note + nl, sizeof(e->note) - nl, "%s%s%s%s%s%s",
					       nl ? " / " : "", f->subject, f->text,
					       f->cut ? "; ..." : "", decision ? "; " : "",
					       decision ? decision : "");
	}
	w->n = 0;
	w->dropped = 0;
}

/* How a volume is to be read before any override: by probing, or a fixed module. */
static const struct ndz_fs_module *module_for_type(enum ndz_scheme scheme, uint32_t type)
{
	if (scheme == NDZ_SCHEME_BSD)
		return type == NDZ_BSD_SWAP ? &ndz_fs_bsdswap : NULL;
	if (scheme == NDZ_SCHEME_GPT && type == NDZ_GPT_FREEBSD_SWAP)
		return &ndz_fs_bsdswap;
	return NULL;
}

/*
 * Scan one volume: io (a view of the source) whose sector 0 is sector `at` of
 * the image. Adds its ranges to s->out; never fails for filesystem reasons
 * (the volume is then taken raw with a warning). Returns 0 or NDZ_ENOMEM/NDZ_EIO.
 */
static int scan_volume(struct scan *s, struct ndz_io *io, uint64_t at, const char *what,
		       const char *type_name, const struct ndz_fs_module *mod, int forced,
		       struct ndz_scan_entry *e)
{
	uint64_t sectors = ndz_sectors_of(io->size);
	struct volume_warn vw = { .s = s, .what = what };
	struct ndz_fs_opts fo = { s->o->keep_pagefile, s->o->keep_journal, volume_warn, &vw };
	struct ndz_ranges tmp = NDZ_RANGES_INIT, ztmp = NDZ_RANGES_INIT;
	struct ndz_fs_stats st;
	struct collect c = { &tmp, at, io->size, 0 }, zc = { &ztmp, at, io->size, 1 };
	struct ndz_error err = { 0 };
	void *fs = NULL;
	int rc;

	memset(&st, 0, sizeof(st));
	if (!mod && !forced)
		mod = ndz_fs_probe_all(io);
	if (!mod) {
		ndz_error_set(&err, NDZ_EFS, 0, "no filesystem recognized");
		goto raw;
	}
	rc = mod->open(io, &fo, &fs, &err);
	if (rc == NDZ_ENOMEM || rc == NDZ_EIO)
		return rc;
	if (rc < 0)
		goto raw;
	rc = mod->walk(fs, collect_extent, &c, &st, &err);
	if (rc == 0 && mod->zeros) {
		int zr = mod->zeros(fs, collect_extent, &zc);

		if (zr == NDZ_ENOMEM)
			rc = zr;
		else if (zr < 0)       /* then the blocks are imaged as they are: never wrong */
			ndz_ranges_release(&ztmp);
	}
	mod->close(fs);
	if (rc == NDZ_ENOMEM || rc == NDZ_EIO) {
		ndz_ranges_release(&tmp);
		ndz_ranges_release(&ztmp);
		return rc;
	}
	if (rc < 0) {
		ndz_ranges_release(&tmp);
		ndz_ranges_release(&ztmp);
		goto raw;
	}
	/* whatever follows the filesystem in its volume is kept: nobody vouched for it */
	if (st.fs_bytes < io->size) {
		rc = collect_extent(&c, st.fs_bytes, io->size - st.fs_bytes);
		if (rc < 0) {
			ndz_ranges_release(&tmp);
			return rc;
		}
	}
	ndz_ranges_normalize(&tmp);
	if (e) {
		e->how = NDZ_HOW_FS;
		snprintf(e->fs, sizeof(e->fs), "%s", mod->name);
		snprintf(e->detail, sizeof(e->detail), "%s", st.detail);
		e->used_bytes = ndz_ranges_total(&tmp) * SEC;
		if (e->used_bytes > io->size)
			e->used_bytes = io->size;
		e->free_bytes = io->size - e->used_bytes;
		e->zero_bytes = ndz_ranges_total(&ztmp) * SEC;
	}
	volume_findings(&vw, 0, mod, e);
	rc = ndz_ranges_union(s->out, &tmp, NULL);
	if (rc == 0)
		rc = ndz_ranges_union(s->zero, &ztmp, NULL);
	ndz_ranges_release(&tmp);
	ndz_ranges_release(&ztmp);
	return rc;
raw:
	/* a partition type that is plainly not a filesystem is no cause for alarm */
	volume_warn(&vw, err.code ? ndz_error_msg(&err) : "unreadable");
	if (mod || (strcmp(type_name, "bios-boot") && strcmp(type_name, "freebsd-boot")))
		volume_findings(&vw, 1, mod, e);
	if (e) {
		e->how = NDZ_HOW_RAW;
		if (!e->note[0])
			snprintf(e->note, sizeof(e->note), "%s", err.code ? ndz_error_msg(&err) : "");
		e->used_bytes = io->size;
		e->free_bytes = 0;
	}
	return ndz_ranges_add(s->out, at, sectors, NULL);
}

/*
 * The name warnings give a volume, allocated (a source's path has no length
 * limit): "base: partition N" (index >= 0), base followed by letter (a BSD
 * partition of a slice, index < 0), or base itself. NULL when out of memory.
 */
static char *volume_name(const char *base, int index, char letter)
{
	size_t n = strlen(base) + 32;
	char *v = malloc(n);

	if (!v)
		return NULL;
	if (index >= 0)
		snprintf(v, n, "%s: partition %d", base, index);
	else if (letter)
		snprintf(v, n, "%s%c", base, letter);
	else
		snprintf(v, n, "%s", base);
	return v;
}

/* A FreeBSD slice: its disklabel, its boot area and each BSD partition. */
static int scan_bsd(struct scan *s, struct ndz_io *slice, uint64_t at, uint64_t disk_start,
		    int index, const char *what, struct ndz_scan_entry *e, int *handled)
{
	struct ndz_ptable t;
	struct ndz_error err = { 0 };
	int rc;

	*handled = 0;
	ndz_ptable_init(&t);
	rc = ndz_bsd_read(slice, &t, &err);
	if (rc == NDZ_ENOMEM || rc == NDZ_EIO)
		return rc;
	if (rc < 0) {
		/* a label is there but broken: nothing in the slice can be trusted */
		warnf(s, "%s: %s; taking it raw", what, ndz_error_msg(&err));
		if (e) {
			e->how = NDZ_HOW_RAW;
			snprintf(e->note, sizeof(e->note), "%s", ndz_error_msg(&err));
			e->used_bytes = slice->size;
		}
		*handled = 1;
		return ndz_ranges_add(s->out, at, ndz_sectors_of(slice->size), NULL);
	}
	if (t.scheme != NDZ_SCHEME_BSD)
		return 0;
	*handled = 1;
	if (e) {
		e->how = NDZ_HOW_BSDLABEL;
		e->used_bytes = t.first_start * SEC;
	}
	/* boot blocks (8 KiB at least) and the label itself */
	rc = ndz_ranges_add(s->out, at, t.first_start > 16 ? t.first_start : 16, NULL);
	for (size_t i = 0; rc == 0 && i < t.n; i++) {
		const struct ndz_part *p = &t.v[i];
		const struct ndz_scan_override *ov;
		struct ndz_scan_entry *se = new_entry(s);
		struct ndz_io *sub;
		char *name = volume_name(what, -1, (char)('a' + p->index - 1));

		if (!name) {
			rc = NDZ_ENOMEM;
			break;
		}
		if (se) {
			se->index = index;
			se->sub = p->index;
			se->start = disk_start + p->start;
			se->count = p->count;
			se->type = p->type;
			se->type_name = ndz_part_type_name(NDZ_SCHEME_BSD, p->type);
		}
		rc = ndz_io_open_sub(slice, p->start * SEC, p->count * SEC, &sub, NULL);
		if (rc < 0) {
			free(name);
			break;
		}
		/* an override left over after apply_override forces a filesystem type */
		ov = find_override(s, index, p->index);
		if (!apply_override(s, ov, sub, at + p->start, se, &rc))
			rc = scan_volume(s, sub, at + p->start, name,
					 ndz_part_type_name(NDZ_SCHEME_BSD, p->type),
					 ov ? ndz_fs_by_name(ov->fstype) :
					      module_for_type(NDZ_SCHEME_BSD, p->type), ov != NULL, se);
		ndz_io_close(sub);
		free(name);
	}
	ndz_ptable_release(&t);
	return rc;
}

/* One partition of the table (or the whole table-less source: p NULL), named what. */
static int scan_part_as(struct scan *s, enum ndz_scheme scheme, const struct ndz_part *p,
			struct ndz_io *io, uint64_t at, const char *what)
{
	int index = p ? p->index : 0;
	const struct ndz_scan_override *ov = find_override(s, index, 0);
	struct ndz_scan_entry *e = new_entry(s);
	const struct ndz_fs_module *mod = NULL;
	const char *type_name = p ? ndz_part_type_name(scheme, p->type) : "none";
	int handled = 0, rc;

	if (e) {
		e->index = index;
		e->start = p ? p->start : 0;
		e->count = p ? p->count : ndz_sectors_of(io->size);
		e->type = p ? p->type : 0;
		e->type_name = type_name;
	}
	if (apply_override(s, ov, io, at, e, &rc))
		return rc;
	if (ov && ov->action == NDZ_SCAN_FORCE)
		return scan_volume(s, io, at, what, type_name, ndz_fs_by_name(ov->fstype), 1, e);
	if (p && ndz_part_holds_bsd(scheme, p->type)) {
		rc = scan_bsd(s, io, at, p->start, index, what, e, &handled);
		if (rc < 0 || handled)
			return rc;
	}
	if (p)
		mod = module_for_type(scheme, p->type);
	return scan_volume(s, io, at, what, type_name, mod, 0, e);
}

static int scan_part(struct scan *s, enum ndz_scheme scheme, const struct ndz_part *p,
		     struct ndz_io *io, uint64_t at)
{
	char *what = volume_name(s->src->name, p ? p->index : -1, 0);
	int rc;

	if (!what)
		return NDZ_ENOMEM;
	rc = scan_part_as(s, scheme, p, io, at, what);
	free(what);
	return rc;
}

static int whole_raw(struct scan *s)
{
	struct ndz_scan_entry *e = new_entry(s);
	uint64_t sectors = ndz_sectors_of(s->src->size);

	if (e) {
		e->count = sectors;
		e->type_name = "none";
		e->how = NDZ_HOW_RAW;
		e->used_bytes = s->src->size;
	}
	return ndz_ranges_add(s->out, 0, sectors, NULL);
}

static const char *scheme_name(enum ndz_scheme sc)
{
	return sc == NDZ_SCHEME_MBR ? "mbr" : sc == NDZ_SCHEME_GPT ? "gpt" : "none";
}

static int scan_disk(struct scan *s, struct ndz_ptable *t)
{
	int rc;

	/* the table, boot code and whatever else sits before the first partition */
	rc = ndz_ranges_add(s->out, 0, t->n ? t->first_start : 2048, NULL);
	if (rc == 0)
		rc = ndz_ranges_union(s->out, &t->meta, NULL);
	for (size_t i = 0; rc == 0 && i < t->n; i++) {
		const struct ndz_part *p = &t->v[i];
		struct ndz_io *sub;

		if (p->container) {
			struct ndz_scan_entry *e = new_entry(s);

			if (e) {
				e->index = p->index;
				e->start = p->start;
				e->count = p->count;
				e->type = p->type;
				e->type_name = ndz_part_type_name(t->scheme, p->type);
				e->how = NDZ_HOW_EXTENDED;
			}
			continue;
		}
		rc = ndz_io_open_sub(s->src, p->start * SEC, p->count * SEC, &sub, NULL);
		if (rc < 0)
			break;
		rc = scan_part(s, t->scheme, p, sub, p->start);
		ndz_io_close(sub);
	}
	return rc;
}

int ndz_scan(struct ndz_io *src, const struct ndz_scan_opts *o, struct ndz_scan_result *res,
	     struct ndz_error *err)
{
	uint64_t sectors = ndz_sectors_of(src->size);
	struct scan s = { .src = src, .o = o, .out = &res->alloc, .zero = &res->zero,
			  .rep = o->report };
	struct ndz_ptable t;
	struct ndz_error perr = { 0 };
	int rc;

	memset(res, 0, sizeof(*res));
	ndz_ranges_init(&res->alloc);
	ndz_ranges_init(&res->zero);
	if (o->report) {
		memset(o->report, 0, sizeof(*o->report));
		o->report->source_bytes = src->size;
		o->report->scheme = "none";
	}
	ndz_ptable_init(&t);
	res->bytes = src->size;
	res->image_kind = NDZ_KIND_WHOLE;
	rc = ndz_part_read(src, &t, &perr);
	ndz_error_prefix(&perr, "%s", src->name);
	if (rc == NDZ_ENOMEM || rc == NDZ_EIO)
		return ndz_error_copy(err, &perr);
	if (o->report) {
		o->report->scheme = scheme_name(t.scheme);
		snprintf(o->report->note, sizeof(o->report->note), "%s",
			 rc < 0 ? ndz_error_msg(&perr) : t.note);
	}
	if (t.note[0])
		warnf(&s, "%s: %s", src->name, t.note);
	if (o->partition) {
		const struct ndz_part *p = rc < 0 ? NULL : ndz_part_find(&t, o->partition);
		struct ndz_io *sub;

		if (rc < 0) {
			ndz_error_copy(err, &perr);
			goto out;
		}
		if (!p || p->container) {
			rc = NDZ_ENOENT;
			ndz_error_set(err, rc, 0, "%s: partition %d: %s", src->name, o->partition,
				      p ? "is an extended partition" : ndz_strerror(NDZ_ENOENT));
			goto out;
		}
		res->base = p->start * SEC;
		res->bytes = p->count * SEC;
		res->image_kind = NDZ_KIND_PARTITION;
		res->part_index = (uint16_t)p->index;
		res->part_type = p->type;
		res->part_start = p->start;
		rc = ndz_io_open_sub(src, res->base, res->bytes, &sub, err);
		if (rc == 0) {
			rc = scan_part(&s, t.scheme, p, sub, 0);
			ndz_io_close(sub);
		}
		sectors = p->count;
	} else if (rc < 0) {
		warnf(&s, "%s; taking the whole disk raw", ndz_error_msg(&perr));
		rc = whole_raw(&s);
	} else if (t.scheme == NDZ_SCHEME_NONE) {
		rc = scan_part(&s, t.scheme, NULL, src, 0);
	} else {
		rc = scan_disk(&s, &t);
	}
	if (rc < 0) {
		ndz_error_set(err, rc, 0, "%s: %s", src->name, ndz_strerror(rc));
		goto out;
	}
	warn_unmatched(&s);
	ndz_ranges_normalize(&res->alloc);
	ndz_ranges_clip(&res->alloc, sectors);
	ndz_ranges_fill_gaps(&res->alloc, o->min_free / SEC);
	ndz_ranges_normalize(&res->zero);
	ndz_ranges_clip(&res->zero, sectors);
	if (o->report)
		o->report->image_bytes = ndz_ranges_total(&res->alloc) * SEC;
out:
	ndz_ptable_release(&t);
	if (rc < 0) {
		ndz_ranges_release(&res->alloc);
		ndz_ranges_release(&res->zero);
		ndz_scan_report_release(o->report);
	}
	return rc;
}

void ndz_scan_result_release(struct ndz_scan_result *res)
{
	ndz_ranges_release(&res->alloc);
	ndz_ranges_release(&res->zero);
}
