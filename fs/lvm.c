/*
 * LVM2 physical volumes: the label, the PV header, the metadata area and its
 * current text metadata. Free extents are skipped; each linear LV that lies
 * wholly on this PV is scanned for its own filesystem through a view mapping
 * LV offsets to PV offsets; every other allocated extent is kept whole.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "fs.h"
#include "fsutil.h"
#include "core/le.h"

/* bad(err, fmt, ...) - this module's inconsistent-metadata error (fsutil.h) */
#define bad(err, ...) ndz_fs_bad(err, "lvm", __VA_ARGS__)

#define SEC 512u
#define LABEL_SECTORS 4                /* the label is in one of the first four */
#define MDA_MAGIC " LVM2 x[5A%r0N*>"
#define CRC_INIT 0xf597a6cfu
#define MAX_AREAS 8                    /* data and metadata areas in a PV header */
#define MAX_TEXT (8u << 20)            /* metadata text we accept */
#define MAX_DEPTH 16                   /* nesting of sections */
#define MAX_NODES 200000u

/* LVM's CRC: reflected CRC-32 (0xedb88320), its own seed, no final inversion. */
static uint32_t lvm_crc(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
	}
	return crc;
}

/* ---- the text format: sections, key = value, arrays ---- */

enum { N_SECTION, N_INT, N_STR, N_ARRAY, N_OTHER };

struct node {
	const char *name;
	uint32_t name_len;
	uint8_t type;
	const char *str;               /* N_STR: unescaped, not NUL-terminated */
	uint32_t str_len;
	uint64_t num;                  /* N_INT (negative numbers are N_OTHER) */
	uint32_t first, last, next;    /* children (sections, arrays); siblings; 0: none */
};

struct parser {
	char *p, *end;                 /* a private copy of the text */
	struct node *n;
	uint32_t nn, cap;
	unsigned line;
	struct ndz_error *err;
};

static int perr(struct parser *ps, const char *what)
{
	return bad(ps->err, "metadata line %u: %s", ps->line, what);
}

static void skip_space(struct parser *ps)
{
	while (ps->p < ps->end) {
		char c = *ps->p;

		if (c == '\n') {
			ps->line++;
			ps->p++;
		} else if (c == ' ' || c == '\t' || c == '\r') {
			ps->p++;
		} else if (c == '#') {
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
		} else {
			break;
		}
	}
}

static int is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '+' || c == '-';
}

static int new_node(struct parser *ps, uint32_t parent, uint32_t *out)
{
	struct node *nn;

	if (ps->nn >= MAX_NODES)
		return perr(ps, "too many entries");
	if (ps->nn == ps->cap) {
		uint32_t cap = ps->cap ? ps->cap * 2 : 64;

		nn = realloc(ps->n, cap * sizeof(*nn));
		if (!nn)
			return NDZ_ENOMEM;
		ps->n = nn;
		ps->cap = cap;
	}
	memset(&ps->n[ps->nn], 0, sizeof(ps->n[0]));
	*out = ps->nn++;
	if (*out) {
		if (ps->n[parent].last)
			ps->n[ps->n[parent].last].next = *out;
		else
			ps->n[parent].first = *out;
		ps->n[parent].last = *out;
	}
	return 0;
}

/* One scalar (string or number) into node i. */
static int parse_scalar(struct parser *ps, uint32_t i)
{
	struct node *n = &ps->n[i];

	if (ps->p >= ps->end)
		return perr(ps, "value expected, end of text found");
	if (*ps->p == '"') {
		char *w = ++ps->p, *s = w;

		for (;;) {
			if (ps->p >= ps->end)
				return perr(ps, "unterminated string");
			if (*ps->p == '"')
				break;
			if (*ps->p == '\\' && ps->p + 1 < ps->end)
				ps->p++;
			if (*ps->p == '\n')
				ps->line++;
			*w++ = *ps->p++;
		}
		ps->p++;
		n->type = N_STR;
		n->str = s;
		n->str_len = (uint32_t)(w - s);
		return 0;
	}
	if ((*ps->p >= '0' && *ps->p <= '9') || *ps->p == '-') {
		const char *s = ps->p;
		uint64_t v = 0;
		int ok = *s != '-';

		while (ps->p < ps->end && is_word(*ps->p))
			ps->p++;
		for (const char *q = s; ok && q < ps->p; q++) {
			if (*q < '0' || *q > '9' || v > (UINT64_MAX - 9) / 10)
				ok = 0;
			else
				v = v * 10 + (uint64_t)(*q - '0');
		}
		n->type = ok ? N_INT : N_OTHER;  /* negative or fractional: kept unread */
		n->num = v;
		return 0;
	}
	return perr(ps, "value expected");
}

static int parse_items(struct parser *ps, uint32_t parent, int depth)
{
	int rc;

	for (;;) {
		const char *name;
		uint32_t i;

		skip_space(ps);
		if (ps->p >= ps->end)
			return depth ? perr(ps, "section not closed") : 0;
		if (*ps->p == '}') {
			if (!depth)
				return perr(ps, "'}' without a section");
			ps->p++;
			return 0;
		}
		name = ps->p;
		while (ps->p < ps->end && is_word(*ps->p))
			ps->p++;
		if (ps->p == name)
			return perr(ps, "name expected");
		if ((rc = new_node(ps, parent, &i)) < 0)
			return rc;
		ps->n[i].name = name;
		ps->n[i].name_len = (uint32_t)(ps->p - name);
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == '{') {
			if (depth + 1 >= MAX_DEPTH)
				return perr(ps, "sections nested too deep");
			ps->p++;
			ps->n[i].type = N_SECTION;
			if ((rc = parse_items(ps, i, depth + 1)) < 0)
				return rc;
			continue;
		}
		if (ps->p >= ps->end || *ps->p != '=')
			return perr(ps, "'=' or '{' expected after a name");
		ps->p++;
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == '[') {
			ps->p++;
			ps->n[i].type = N_ARRAY;
			skip_space(ps);
			if (ps->p < ps->end && *ps->p == ']') {
				ps->p++;
				continue;
			}
			for (;;) {
				uint32_t v;

				skip_space(ps);
				if ((rc = new_node(ps, i, &v)) < 0 || (rc = parse_scalar(ps, v)) < 0)
					return rc;
				skip_space(ps);
				if (ps->p < ps->end && *ps->p == ',') {
					ps->p++;
					continue;
				}
				if (ps->p < ps->end && *ps->p == ']') {
					ps->p++;
					break;
				}
				return perr(ps, "',' or ']' expected in an array");
			}
			continue;
		}
		if ((rc = parse_scalar(ps, i)) < 0)
			return rc;
	}
}

/* The child of section s called name, of type type, or 0. */
static uint32_t child(const struct parser *ps, uint32_t s, const char *name, int type)
{
	size_t l = strlen(name);

	for (uint32_t i = ps->n[s].first; i; i = ps->n[i].next)
		if (ps->n[i].name_len == l && !memcmp(ps->n[i].name, name, l) &&
		    ps->n[i].type == type)
			return i;
	return 0;
}

static int get_int(const struct parser *ps, uint32_t s, const char *name, uint64_t *v)
{
	uint32_t i = child(ps, s, name, N_INT);

	if (!i)
		return 0;
	*v = ps->n[i].num;
	return 1;
}

/* A string field of section s into buf (cut to fit), or 0 when absent. */
static int get_str(const struct parser *ps, uint32_t s, const char *name, char *buf,
		   size_t size)
{
	uint32_t i = child(ps, s, name, N_STR);

	if (!i)
		return 0;
	snprintf(buf, size, "%.*s", (int)ps->n[i].str_len, ps->n[i].str);
	return 1;
}

static void copy_name(char *buf, size_t size, const struct node *n)
{
	snprintf(buf, size, "%.*s", (int)n->name_len, n->name);
}

/* Two UUIDs the same once the dashes LVM prints are left out. */
static int same_uuid(const char *a, size_t al, const char *b, size_t bl)
{
	size_t i = 0, j = 0;

	for (;;) {
		while (i < al && a[i] == '-')
			i++;
		while (j < bl && b[j] == '-')
			j++;
		if (i == al || j == bl)
			return i == al && j == bl;
		if (a[i++] != b[j++])
			return 0;
	}
}

static int add_seg(struct ndz_lvm_vg *vg, const struct ndz_lvm_seg *sg)
{
	struct ndz_lvm_seg *ns;

	if (vg->nseg >= NDZ_LVM_MAX_SEGS)
		return NDZ_EFS;
	ns = realloc(vg->seg, (vg->nseg + 1) * sizeof(*ns));
	if (!ns)
		return NDZ_ENOMEM;
	vg->seg = ns;
	vg->seg[vg->nseg++] = *sg;
	return 0;
}

/* A string equal to name anywhere under node i, leaving out node skip's subtree. */
static int names_lv(const struct parser *ps, uint32_t i, uint32_t skip, const char *name)
{
	size_t len = strlen(name);

	if (i == skip)
		return 0;
	if (ps->n[i].type == N_STR)
		return ps->n[i].str_len == len && !memcmp(ps->n[i].str, name, len);
	for (uint32_t c = ps->n[i].first; c; c = ps->n[c].next)
		if (names_lv(ps, c, skip, name))
			return 1;
	return 0;
}

/* The segments of LV l (a child of section lvs) on this PV (pv_name) into vg. */
static int read_lv(struct parser *ps, uint32_t lvs, uint32_t l, const char *pv_name,
		   struct ndz_lvm_vg *vg, struct ndz_error *err)
{
	struct ndz_lvm_lv *lv, *nl;
	uint64_t lv_ext = 0, here = 0;
	int linear = 1, rc;

	if (vg->nlv >= NDZ_LVM_MAX_LVS)
		return bad(err, "more than %d logical volumes", NDZ_LVM_MAX_LVS);
	nl = realloc(vg->lv, (vg->nlv + 1) * sizeof(*nl));
	if (!nl)
		return NDZ_ENOMEM;
	vg->lv = nl;
	lv = &vg->lv[vg->nlv];
	memset(lv, 0, sizeof(*lv));
	copy_name(lv->name, sizeof(lv->name), &ps->n[l]);
	for (uint32_t s = ps->n[l].first; s; s = ps->n[s].next) {
		uint64_t start, count, stripes = 0;
		char type[32] = "";
		uint32_t arr;

		if (ps->n[s].type != N_SECTION)
			continue;
		if (!get_int(ps, s, "start_extent", &start) ||
		    !get_int(ps, s, "extent_count", &count) ||
		    !get_str(ps, s, "type", type, sizeof(type)))
			return bad(err, "LV %s: segment %.*s lacks start_extent, "
				   "extent_count or type", lv->name,
				   (int)ps->n[s].name_len, ps->n[s].name);
		if (count > UINT64_MAX / 2 || start > UINT64_MAX / 2)
			return bad(err, "LV %s: segment too large", lv->name);
		if (start + count > lv_ext)
			lv_ext = start + count;
		get_int(ps, s, "stripe_count", &stripes);
		if (strcmp(type, "striped") || stripes != 1)
			linear = 0;
		/* areas: stripes = [ "pv0", first, ... ] (each count / stripe_count long),
		   mirrors = [ "pv0", first, ... ] (pvmove; each count long); any other
		   array naming this PV is not understood, so nothing here is trusted */
		for (arr = ps->n[s].first; arr; arr = ps->n[arr].next) {
			int is_stripes, is_mirrors;

			if (ps->n[arr].type != N_ARRAY)
				continue;
			is_stripes = ps->n[arr].name_len == 7 && !memcmp(ps->n[arr].name, "stripes", 7);
			is_mirrors = ps->n[arr].name_len == 7 && !memcmp(ps->n[arr].name, "mirrors", 7);
			for (uint32_t a = ps->n[arr].first; a; a = ps->n[a].next) {
				uint32_t b = ps->n[a].next, pvn = a;
				struct ndz_lvm_seg sg;

				if (is_stripes && (!b || ps->n[a].type != N_STR || ps->n[b].type != N_INT))
					return bad(err, "LV %s: bad stripes list", lv->name);
				if (ps->n[a].type != N_STR || !b || ps->n[b].type != N_INT)
					continue;
				a = b;
				if (ps->n[pvn].str_len != strlen(pv_name) ||
				    memcmp(ps->n[pvn].str, pv_name, strlen(pv_name))) {
					linear = 0;  /* a piece lies on another PV (or LV) */
					continue;
				}
				if (!is_stripes && !is_mirrors)
					return bad(err, "LV %s: segment of type %s places "
						   "extents in '%.*s', not understood",
						   lv->name, type, (int)ps->n[arr].name_len,
						   ps->n[arr].name);
				if (is_stripes && (!stripes || count % stripes))
					return bad(err, "LV %s: %" PRIu64 " extents in %"
						   PRIu64 " stripes", lv->name, count, stripes);
				memset(&sg, 0, sizeof(sg));
				sg.lv = (int)vg->nlv;
				sg.lv_extent = start;
				sg.pv_extent = ps->n[b].num;
				sg.count = is_stripes ? count / stripes : count;
				sg.linear = is_stripes && stripes == 1 && !strcmp(type, "striped");
				if (!sg.linear)
					linear = 0;
				if ((rc = add_seg(vg, &sg)) == NDZ_ENOMEM)
					return rc;
				if (rc < 0)
					return bad(err, "more than %d segments on this PV",
						   NDZ_LVM_MAX_SEGS);
				here += sg.count;
			}
		}
	}
	/* read an LV only when a user sees it and no other LV builds on it (thin pool
	   data, snapshot origins and COW, raid and mirror images, cache pools...) */
	if (linear) {
		uint32_t st = child(ps, l, "status", N_ARRAY);
		int visible = 0;

		for (uint32_t a = st ? ps->n[st].first : 0; a; a = ps->n[a].next)
			if (ps->n[a].type == N_STR && ps->n[a].str_len == 7 &&
			    !memcmp(ps->n[a].str, "VISIBLE", 7))
				visible = 1;
		if (!visible || names_lv(ps, lvs, l, lv->name))
			linear = 0;
	}
	lv->extents = lv_ext;
	/* linear and wholly here: its segments then cover 0..extents once (checked
	   by ndz_lvm_parse once every segment is known) */
	lv->linear = linear && here == lv_ext && lv_ext > 0;
	vg->nlv++;
	return 0;
}

static int cmp_pv(const void *a, const void *b)
{
	const struct ndz_lvm_seg *x = a, *y = b;

	return x->pv_extent < y->pv_extent ? -1 : x->pv_extent > y->pv_extent;
}

int ndz_lvm_parse(const char *text, size_t len, const char *pv_uuid, struct ndz_lvm_vg *vg,
		  struct ndz_error *err)
{
	struct parser ps = { 0 };
	char pv_name[NDZ_LVM_NAME] = "";
	uint32_t vgs = 0, pvs, lvs;
	int rc;

	memset(vg, 0, sizeof(*vg));
	if (len > MAX_TEXT)
		return bad(err, "metadata of %zu bytes is too large", len);
	if (memchr(text, 0, len))
		len = (size_t)((const char *)memchr(text, 0, len) - text);
	ps.p = malloc(len + 1);
	if (!ps.p)
		return NDZ_ENOMEM;
	memcpy(ps.p, text, len);
	ps.end = ps.p + len;
	ps.line = 1;
	ps.err = err;
	char *copy = ps.p;
	uint32_t root;

	if ((rc = new_node(&ps, 0, &root)) < 0 || (rc = parse_items(&ps, 0, 0)) < 0)
		goto out;
	/* the VG is the one section at the top */
	for (uint32_t i = ps.n[0].first; i; i = ps.n[i].next)
		if (ps.n[i].type == N_SECTION) {
			if (vgs) {
				rc = bad(err, "more than one VG section");
				goto out;
			}
			vgs = i;
		}
	rc = NDZ_EFS;
	if (!vgs) {
		bad(err, "no VG section in the metadata");
		goto out;
	}
	copy_name(vg->name, sizeof(vg->name), &ps.n[vgs]);
	if (!get_int(&ps, vgs, "extent_size", &vg->extent_bytes) || !vg->extent_bytes ||
	    vg->extent_bytes > (UINT64_MAX >> 20)) {
		bad(err, "VG %s: no valid extent_size", vg->name);
		goto out;
	}
	vg->extent_bytes *= SEC;
	pvs = child(&ps, vgs, "physical_volumes", N_SECTION);
	for (uint32_t p = pvs ? ps.n[pvs].first : 0; p; p = ps.n[p].next) {
		uint32_t id = child(&ps, p, "id", N_STR);

		if (ps.n[p].type != N_SECTION || !id ||
		    !same_uuid(ps.n[id].str, ps.n[id].str_len, pv_uuid, strlen(pv_uuid)))
			continue;
		copy_name(pv_name, sizeof(pv_name), &ps.n[p]);
		if (!get_int(&ps, p, "pe_start", &vg->pe_start) ||
		    !get_int(&ps, p, "pe_count", &vg->pe_count) ||
		    vg->pe_start > (UINT64_MAX >> 10) ||
		    vg->pe_count > UINT64_MAX / 2 / vg->extent_bytes) {
			bad(err, "PV %s: no valid pe_start or pe_count", pv_name);
			goto out;
		}
		vg->pe_start *= SEC;
		break;
	}
	if (!pv_name[0]) {
		bad(err, "VG %s does not list this PV", vg->name);
		goto out;
	}
	lvs = child(&ps, vgs, "logical_volumes", N_SECTION);
	for (uint32_t l = lvs ? ps.n[lvs].first : 0; l; l = ps.n[l].next)
		if (ps.n[l].type == N_SECTION && (rc = read_lv(&ps, lvs, l, pv_name, vg, err)) < 0)
			goto out;
	/* segments on this PV: inside it and apart from each other */
	if (vg->nseg)
		qsort(vg->seg, vg->nseg, sizeof(vg->seg[0]), cmp_pv);
	rc = NDZ_EFS;
	for (size_t i = 0; i < vg->nseg; i++) {
		const struct ndz_lvm_seg *sg = &vg->seg[i];

		if (sg->pv_extent > vg->pe_count || sg->count > vg->pe_count - sg->pv_extent) {
			bad(err, "LV %s: extents %" PRIu64 "+%" PRIu64
			    " beyond the PV's %" PRIu64, vg->lv[sg->lv].name,
			    sg->pv_extent, sg->count, vg->pe_count);
			goto out;
		}
		if (i && vg->seg[i - 1].pv_extent + vg->seg[i - 1].count > sg->pv_extent) {
			bad(err, "LVs %s and %s share extent %" PRIu64,
			    vg->lv[vg->seg[i - 1].lv].name, vg->lv[sg->lv].name,
			    sg->pv_extent);
			goto out;
		}
	}
	/* a linear LV's pieces must tile its extents exactly, else it is not read */
	for (size_t l = 0; l < vg->nlv; l++) {
		uint64_t at = 0;
		int moved = 1;

		while (vg->lv[l].linear && moved && at < vg->lv[l].extents) {
			moved = 0;
			for (size_t i = 0; i < vg->nseg; i++)
				if (vg->seg[i].lv == (int)l && vg->seg[i].lv_extent == at) {
					at += vg->seg[i].count;
					moved = vg->seg[i].count > 0;
					break;
				}
		}
		if (at != vg->lv[l].extents)
			vg->lv[l].linear = 0;
	}
	rc = 0;
out:
	free(copy);
	free(ps.n);
	if (rc < 0)
		ndz_lvm_vg_release(vg);
	return rc;
}

void ndz_lvm_vg_release(struct ndz_lvm_vg *vg)
{
	if (!vg)
		return;
	free(vg->seg);
	free(vg->lv);
	memset(vg, 0, sizeof(*vg));
}

/* ---- a linear LV as a volume of its own ---- */

struct lv_view {
	struct ndz_io *pv;
	const struct ndz_lvm_vg *vg;
	int lv;
};

/* The PV byte of LV byte off, and how many bytes from there are contiguous. */
static int lv_map(const struct ndz_lvm_vg *vg, int lv, uint64_t off, uint64_t *pv_off,
		  uint64_t *run)
{
	uint64_t ext = off / vg->extent_bytes;

	for (size_t i = 0; i < vg->nseg; i++) {
		const struct ndz_lvm_seg *sg = &vg->seg[i];

		if (sg->lv != lv || ext < sg->lv_extent || ext - sg->lv_extent >= sg->count)
			continue;
		*pv_off = vg->pe_start + sg->pv_extent * vg->extent_bytes +
			  (off - sg->lv_extent * vg->extent_bytes);
		*run = (sg->lv_extent + sg->count) * vg->extent_bytes - off;
		return 1;
	}
	return 0;
}

static ssize_t view_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	struct lv_view *v = io->priv;
	uint64_t pv_off, run;
	ssize_t n;

	if (off >= io->size)
		return 0;
	if (len > io->size - off)
		len = (size_t)(io->size - off);
	if (!lv_map(v->vg, v->lv, off, &pv_off, &run))
		return NDZ_EIO;
	if (len > run)
		len = (size_t)run;
	n = v->pv->ops->pread(v->pv, buf, len, pv_off, sys);
	return n;
}

static ssize_t view_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			   int *sys)
{
	(void)io;
	(void)sys;
	(void)buf;
	(void)len;
	(void)off;
	return NDZ_EIO;
}

static int view_zero(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	(void)io;
	(void)sys;
	(void)off;
	(void)len;
	return NDZ_EIO;
}

static int view_flush(struct ndz_io *io, int *sys)
{
	(void)io;
	(void)sys;
	return 0;
}

static void view_close(struct ndz_io *io)
{
	free(io->priv);
}

static const struct ndz_io_ops view_ops = {
	view_pread, view_pwrite, view_zero, view_flush, view_close, NULL, NULL,
};

int ndz_lvm_open_lv(struct ndz_io *pv, const struct ndz_lvm_vg *vg, int lv,
		    struct ndz_io **out, struct ndz_error *e)
{
	struct lv_view *v;
	struct ndz_io *io;
	char name[300];

	if (lv < 0 || (size_t)lv >= vg->nlv)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: VG %s has no LV %d", pv->name,
				     vg->name, lv);
	if (!vg->lv[lv].linear)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: LV %s/%s is not linear", pv->name,
				     vg->name, vg->lv[lv].name);
	snprintf(name, sizeof(name), "%s: LV %s/%s", pv->name, vg->name, vg->lv[lv].name);
	v = calloc(1, sizeof(*v));
	io = calloc(1, sizeof(*io));
	if (io)
		io->name = strdup(name);
	if (!v || !io || !io->name) {
		free(v);
		if (io)
			free(io->name);
		free(io);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", name, ndz_strerror(NDZ_ENOMEM));
	}
	v->pv = pv;
	v->vg = vg;
	v->lv = lv;
	io->ops = &view_ops;
	io->priv = v;
	io->size = vg->lv[lv].extents * vg->extent_bytes;
	*out = io;
	return 0;
}

struct map_back {
	const struct ndz_lvm_vg *vg;
	int lv;
	uint64_t lv_bytes;
	ndz_extent_fn fn;
	void *ctx;
	uint64_t used;
	int fn_rc;                     /* fn's own failure, to tell from the module's */
};

/* An LV range, split where it crosses segments, handed on in PV bytes. */
static int map_back_fn(void *ctx, uint64_t off, uint64_t len)
{
	struct map_back *m = ctx;

	if (off >= m->lv_bytes)
		return 0;
	if (len > m->lv_bytes - off)
		len = m->lv_bytes - off;
	while (len) {
		uint64_t pv_off, run;
		int rc;

		if (!lv_map(m->vg, m->lv, off, &pv_off, &run))
			return NDZ_EFS;  /* cannot be: the LV is tiled */
		if (run > len)
			run = len;
		if ((rc = m->fn(m->ctx, pv_off, run)) != 0) {
			m->fn_rc = rc;
			return rc;
		}
		m->used += run;
		off += run;
		len -= run;
	}
	return 0;
}

int ndz_lvm_map_back(const struct ndz_lvm_vg *vg, int lv, uint64_t off, uint64_t len,
		     ndz_extent_fn fn, void *ctx)
{
	struct map_back m;

	if (lv < 0 || (size_t)lv >= vg->nlv || !vg->lv[lv].linear)
		return NDZ_EINVAL;
	m = (struct map_back){ vg, lv, vg->lv[lv].extents * vg->extent_bytes, fn, ctx, 0, 0 };
	return map_back_fn(&m, off, len);
}

/* ---- the module ---- */

struct lvm {
	struct ndz_io *io;
	struct ndz_lvm_vg vg;
	uint64_t label_off;
	uint64_t mda[MAX_AREAS][2];    /* offset, size */
	int nmda;
	void (*warn)(void *ctx, const char *msg);   /* from ndz_fs_opts, for the LVs' modules */
	void *warn_ctx;
};

/* The sector holding LABELONE (0..3), or -1. */
static int find_label(struct ndz_io *io, uint8_t *sec)
{
	for (int i = 0; i < LABEL_SECTORS; i++) {
		if ((uint64_t)(i + 1) * SEC > io->size)
			return -1;
		if (ndz_io_read_full(io, sec, SEC, (uint64_t)i * SEC, NULL, NULL) < 0)
			return -1;
		if (!memcmp(sec, "LABELONE", 8) && !memcmp(sec + 24, "LVM2 001", 8) &&
		    get_le64(sec + 8) == (uint64_t)i)
			return i;
	}
	return -1;
}

static int lvm_probe(struct ndz_io *io)
{
	uint8_t sec[SEC];

	return find_label(io, sec) >= 0;
}

/* The current metadata text of the metadata area at off (size bytes), in *text. */
static int read_mda(struct lvm *l, uint64_t off, uint64_t size, char **text, size_t *len,
		    struct ndz_error *err)
{
	uint8_t h[SEC];
	uint64_t roff, rsize, first;
	uint32_t rcrc;
	char *t;
	int rc;

	*text = NULL;
	if (size < 2 * SEC || off > l->io->size || size > l->io->size - off)
		return bad(err, "metadata area at %" PRIu64 " outside the PV", off);
	if ((rc = ndz_io_read_full(l->io, h, SEC, off, NULL, NULL)) < 0)
		return rc == NDZ_ESHORTREAD ? NDZ_EFS : rc;
	if (memcmp(h + 4, MDA_MAGIC, 16) || get_le32(h + 20) != 1)
		return bad(err, "no metadata area header at byte %" PRIu64, off);
	if (get_le32(h) != lvm_crc(CRC_INIT, h + 4, SEC - 4))
		return bad(err, "metadata area header at byte %" PRIu64
			   ": checksum mismatch", off);
	if (get_le64(h + 24) != off || get_le64(h + 32) != size)
		return bad(err, "metadata area header at byte %" PRIu64
			   " names another place", off);
	/* the first raw_locn is the committed metadata */
	roff = get_le64(h + 40);
	rsize = get_le64(h + 48);
	rcrc = get_le32(h + 56);
	if (!roff && !rsize)
		return 0;  /* an empty area */
	if (roff < SEC || roff >= size || !rsize || rsize > size - SEC || rsize > MAX_TEXT)
		return bad(err, "metadata at byte %" PRIu64 ": bad location", off);
	t = malloc((size_t)rsize);
	if (!t)
		return NDZ_ENOMEM;
	/* the area is a ring after its header: the text may wrap */
	first = rsize < size - roff ? rsize : size - roff;
	rc = ndz_io_read_full(l->io, t, (size_t)first, off + roff, NULL, NULL);
	if (rc == 0 && first < rsize)
		rc = ndz_io_read_full(l->io, t + first, (size_t)(rsize - first), off + SEC, NULL, NULL);
	if (rc < 0) {
		free(t);
		return rc == NDZ_ESHORTREAD ? NDZ_EFS : rc;
	}
	if (lvm_crc(CRC_INIT, (uint8_t *)t, (size_t)rsize) != rcrc) {
		free(t);
		return bad(err, "metadata at byte %" PRIu64 ": checksum mismatch", off + roff);
	}
	*text = t;
	*len = (size_t)rsize;
	return 0;
}

static int lvm_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
		    struct ndz_error *err)
{
	uint8_t sec[SEC];
	char uuid[33];
	char *text = NULL;
	size_t text_len = 0;
	uint64_t data_off = 0;
	const uint8_t *p, *end;
	struct lvm *l;
	int lab, rc = NDZ_EFS, ndata = 0;
	uint32_t hoff;

	lab = find_label(io, sec);
	if (lab < 0)
		return bad(err, "no LABELONE in the first sectors");
	hoff = get_le32(sec + 20);
	if (get_le32(sec + 16) != lvm_crc(CRC_INIT, sec + 20, SEC - 20))
		return bad(err, "label checksum mismatch");
	if (hoff < 32 || hoff > SEC - 32 - 8 - 16)
		return bad(err, "bad PV header offset %u", hoff);
	l = calloc(1, sizeof(*l));
	if (!l)
		return NDZ_ENOMEM;
	l->io = io;
	l->warn = o ? o->warn : NULL;
	l->warn_ctx = o ? o->warn_ctx : NULL;
	l->label_off = (uint64_t)lab * SEC;
	p = sec + hoff;
	memcpy(uuid, p, 32);
	uuid[32] = 0;
	p += 32 + 8;
	end = sec + SEC;
	/* data areas, then metadata areas, each list ended by a zero entry */
	for (int list = 0; list < 2; list++) {
		for (;;) {
			uint64_t off, size;

			if (p + 16 > end) {
				bad(err, "PV header runs off its sector");
				goto fail;
			}
			off = get_le64(p);
			size = get_le64(p + 8);
			p += 16;
			if (!off)
				break;
			if (list == 0) {
				if (ndata++ == 0)
					data_off = off;
				continue;
			}
			if (l->nmda == MAX_AREAS) {
				bad(err, "too many metadata areas");
				goto fail;
			}
			l->mda[l->nmda][0] = off;
			l->mda[l->nmda][1] = size;
			l->nmda++;
		}
	}
	if (ndata != 1) {
		bad(err, "%d data areas (1 expected)", ndata);
		goto fail;
	}
	/* every copy of the metadata must be readable, and all must agree */
	for (int i = 0; i < l->nmda; i++) {
		char *t;
		size_t tl = 0;

		if ((rc = read_mda(l, l->mda[i][0], l->mda[i][1], &t, &tl, err)) < 0)
			goto fail;
		if (!t)
			continue;
		if (text && (tl != text_len || memcmp(t, text, tl))) {
			free(t);
			rc = bad(err, "the metadata areas hold different metadata");
			goto fail;
		}
		free(text);
		text = t;
		text_len = tl;
	}
	if (!text) {
		rc = bad(err, "no VG metadata on this PV (not in a VG, or "
			 "its metadata is kept elsewhere)");
		goto fail;
	}
	if ((rc = ndz_lvm_parse(text, text_len, uuid, &l->vg, err)) < 0)
		goto fail;
	if (l->vg.pe_start != data_off) {
		rc = bad(err, "pe_start %" PRIu64 " differs from the PV header's %" PRIu64,
			 l->vg.pe_start, data_off);
		goto fail;
	}
	if (l->vg.pe_start > io->size ||
	    l->vg.pe_count > (io->size - l->vg.pe_start) / l->vg.extent_bytes) {
		rc = bad(err, "%" PRIu64 " extents do not fit the PV", l->vg.pe_count);
		goto fail;
	}
	free(text);
	*out = l;
	return 0;
fail:
	free(text);
	ndz_lvm_vg_release(&l->vg);
	free(l);
	return rc;
}

/* A warning from the module reading an LV, with the LV named. */
struct lv_warn {
	struct lvm *l;
	int lv;
};

static void lv_warn(void *ctx, const char *msg)
{
	struct lv_warn *w = ctx;
	char buf[NDZ_ERRMSG_MAX + NDZ_LVM_NAME + 8];

	snprintf(buf, sizeof(buf), "LV %s: %s", w->l->vg.lv[w->lv].name, msg);
	w->l->warn(w->l->warn_ctx, buf);
}

/* Scan LV lv for a filesystem; 0 with its ranges handed to fn in PV bytes, or
   NDZ_EFS (the caller then keeps its extents whole), NDZ_ENOMEM, NDZ_EIO. */
static int scan_lv(struct lvm *l, int lv, ndz_extent_fn fn, void *ctx, char *what,
		   size_t what_size)
{
	struct lv_warn w = { l, lv };
	struct ndz_fs_opts fo = { 0, 0, l->warn ? lv_warn : NULL, &w };
	struct ndz_fs_stats st;
	struct ndz_error e = { 0 };
	const struct ndz_fs_module *mod = NULL;
	struct map_back m;
	struct ndz_io *io;
	void *fs = NULL;
	int rc;

	if ((rc = ndz_lvm_open_lv(l->io, &l->vg, lv, &io, NULL)) < 0)
		return rc;
	/* an LV holding a PV of its own is kept whole: no recursion */
	for (size_t i = 0; ndz_fs_modules[i]; i++)
		if (ndz_fs_modules[i] != &ndz_fs_lvm && ndz_fs_modules[i]->probe(io) > 0) {
			mod = ndz_fs_modules[i];
			break;
		}
	if (!mod) {
		snprintf(what, what_size, "no filesystem");
		rc = NDZ_EFS;
		goto out;
	}
	memset(&st, 0, sizeof(st));
	if ((rc = mod->open(io, &fo, &fs, &e)) < 0) {
		snprintf(what, what_size, "%s", e.code ? ndz_error_msg(&e) : mod->name);
		goto out;
	}
	m = (struct map_back){ &l->vg, lv, io->size, fn, ctx, 0, 0 };
	rc = mod->walk(fs, map_back_fn, &m, &st, &e);
	mod->close(fs);
	if (m.fn_rc) {
		rc = m.fn_rc;  /* the caller's failure, not the filesystem's */
		goto out;
	}
	if (rc < 0) {
		snprintf(what, what_size, "%s", e.code ? ndz_error_msg(&e) : mod->name);
		goto out;
	}
	if (st.fs_bytes < io->size)
		rc = map_back_fn(&m, st.fs_bytes, io->size - st.fs_bytes);
	snprintf(what, what_size, "%s", st.detail[0] ? st.detail : mod->name);
out:
	ndz_io_close(io);
	return rc;
}

static int lvm_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		    struct ndz_error *err)
{
	struct lvm *l = h;
	const struct ndz_lvm_vg *vg = &l->vg;
	uint64_t used = 0;
	size_t dl;
	int rc;

	(void)err;
	st->fs_bytes = vg->pe_start + vg->pe_count * vg->extent_bytes;
	st->block_size = (uint32_t)(vg->extent_bytes > UINT32_MAX ? 0 : vg->extent_bytes);
	dl = (size_t)snprintf(st->detail, sizeof(st->detail), "LVM2 PV of VG %s, %" PRIu64
			      " KiB extents, %" PRIu64 " of them", vg->name,
			      vg->extent_bytes / 1024, vg->pe_count);
	/* labels and the first metadata area lie before pe_start; others are kept too */
	if ((rc = fn(ctx, 0, vg->pe_start)) != 0)
		return rc;
	for (int i = 0; i < l->nmda; i++)
		if ((rc = fn(ctx, l->mda[i][0], l->mda[i][1])) != 0)
			return rc;
	used = vg->pe_start;
	for (size_t v = 0; v < vg->nlv; v++) {
		char what[256] = "";
		int scanned = 0;

		if (vg->lv[v].linear) {
			rc = scan_lv(l, (int)v, fn, ctx, what, sizeof(what));
			if (rc != 0 && rc != NDZ_EFS)
				return rc;  /* out of memory, a read error, fn's own */
			scanned = rc == 0;
			/* a filesystem there that could not be read: its extents go in whole */
			if (!scanned && strcmp(what, "no filesystem") && l->warn) {
				char msg[sizeof(what) + NDZ_LVM_NAME + 32];

				/* filed with the LV's other findings ("LV root: ext: ") */
				snprintf(msg, sizeof(msg), "LV %s: %s; taking it raw",
					 vg->lv[v].name, what);
				l->warn(l->warn_ctx, msg);
			}
		} else {
			snprintf(what, sizeof(what), "not linear or not wholly here");
		}
		if (dl < sizeof(st->detail))
			dl += (size_t)snprintf(st->detail + dl, sizeof(st->detail) - dl,
					       "; LV %s: %s%s", vg->lv[v].name,
					       scanned ? "" : "kept whole: ", what);
		if (scanned)
			continue;
		for (size_t i = 0; i < vg->nseg; i++) {
			const struct ndz_lvm_seg *sg = &vg->seg[i];

			if (sg->lv == (int)v &&
			    (rc = fn(ctx, vg->pe_start + sg->pv_extent * vg->extent_bytes,
				     sg->count * vg->extent_bytes)) != 0)
				return rc;
		}
	}
	for (size_t i = 0; i < vg->nseg; i++)
		used += vg->seg[i].count * vg->extent_bytes;
	st->used_bytes = used;  /* allocated extents (before the LVs' own free space) */
	return 0;
}

static void lvm_close(void *h)
{
	struct lvm *l = h;

	if (!l)
		return;
	ndz_lvm_vg_release(&l->vg);
	free(l);
}

const struct ndz_fs_module ndz_fs_lvm = {
	"lvm", lvm_probe, lvm_open, lvm_walk, lvm_close, NULL, 0,
};
