/*
 * Btrfs on one device, SINGLE and DUP profiles: the chunk tree maps logical
 * addresses to the device, the extent tree says which logical bytes are in
 * use. Kept: the first MiB (boot loaders and the primary superblock), every
 * superblock copy, every allocated extent at each of its stripes, and every
 * tree block reached from the roots (the root and chunk trees, each root
 * item's tree) whether the extent tree lists it or not, with a warning when
 * it does not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/err.h"
#include "fs.h"
#include "fsutil.h"
#include "core/le.h"

#define SB_OFF 65536u
#define SB_SIZE 4096u
#define HDR 101u                       /* tree block header */
#define ITEM 25u                       /* leaf item: key + offset + size */
#define KEYPTR 33u                     /* node pointer: key + blockptr + generation */
#define MAX_LEVEL 8u                   /* BTRFS_MAX_LEVEL */
#define MAX_CHUNKS 65536u

#define CHUNK_TREE_OBJECTID 3ull
#define EXTENT_TREE_OBJECTID 2ull
#define KEY_ROOT_ITEM 132u
#define KEY_EXTENT_ITEM 168u
#define KEY_METADATA_ITEM 169u
#define KEY_CHUNK_ITEM 228u

/* chunk type bits: the profiles this parser maps (others need more devices) */
#define BG_DATA 0x1ull
#define BG_SYSTEM 0x2ull
#define BG_METADATA 0x4ull
#define BG_DUP 0x20ull
#define BG_KINDS (BG_DATA | BG_SYSTEM | BG_METADATA)

/* mixed backrefs, default subvolume, mixed groups, lzo, zstd, big metadata,
 * extended inode refs, skinny metadata, no holes, metadata UUID */
#define INCOMPAT_OK (0x1ull | 0x2ull | 0x4ull | 0x8ull | 0x10ull | 0x20ull | 0x40ull | \
		     0x100ull | 0x200ull | 0x400ull)
#define INCOMPAT_METADATA_UUID 0x400ull
/* superblock flags: written, and a seed device (read-only, otherwise ordinary) */
#define FLAGS_OK (0x1ull | (1ull << 32))
/* free space tree (+ valid), verity, block group tree */
#define COMPAT_RO_OK (0x1ull | 0x2ull | 0x4ull | 0x8ull)

struct chunk {
	uint64_t logical, length;
	uint64_t phys[2];
	int nstripes;
};

/* a tree a root item names */
struct rootref {
	uint64_t obj, bytenr;
	uint8_t level;
};

/*
 * The tree blocks reached from the roots: an open-addressing set of logical
 * addresses (0 is no tree block's: an empty slot) with the tree each was first
 * reached from, then sorted for the pass over the extent tree.
 */
struct reach {
	uint64_t *at, *tree;
	size_t n, cap;
	uint8_t *listed;               /* after sorting: the extent tree lists block i */
	size_t cursor;                 /* the first block the extent walk has not passed */
};

struct btrfs {
	struct ndz_io *io;
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
	struct rootref *roots;
	size_t nroots;
	uint32_t nodesize, sectorsize;
	uint64_t total_bytes, bytes_used, devid;
	uint8_t fsid[16];              /* what tree blocks carry */
	uint64_t root, chunk_root;
	uint8_t root_level, chunk_level;
	struct chunk *chunks;
	size_t nchunks;
	uint8_t *blk[MAX_LEVEL];
};

/* one tree walk: keys must rise strictly across the whole tree */
struct walk {
	uint64_t last_obj, last_off;
	uint8_t last_type;
	int started;
	uint64_t blocks;
	int (*item)(struct btrfs *b, struct walk *w, const uint8_t *key, const uint8_t *data,
		    uint32_t size, struct ndz_error *err);
	ndz_extent_fn fn;
	void *ctx;
	uint64_t used, logical_used;
	uint64_t found_bytenr;
	uint8_t found_level;
	int found;
	struct reach *reach;           /* extent walk: mark the reached blocks it lists */
};

/* bad(err, fmt, ...) - this module's inconsistent-metadata error (fsutil.h) */
#define bad(err, ...) ndz_fs_bad(err, "btrfs", __VA_ARGS__)

/* CRC32C of p[32..len) against the little-endian value at p[0] */
static int csum_ok(const uint8_t *p, size_t len)
{
	return ndz_crc32c(p + 32, len - 32) == get_le32(p);
}

static int btrfs_probe(struct ndz_io *io)
{
	uint8_t s[512];

	if (io->size < SB_OFF + SB_SIZE || ndz_io_read_full(io, s, sizeof(s), SB_OFF, NULL, NULL) < 0)
		return 0;
	return !memcmp(s + 0x40, "_BHRfS_M", 8);
}

static void btrfs_close(void *h)
{
	struct btrfs *b = h;

	if (!b)
		return;
	for (unsigned i = 0; i < MAX_LEVEL; i++)
		free(b->blk[i]);
	free(b->chunks);
	free(b->roots);
	free(b);
}

/* The index of the first chunk starting above logical (b->chunks is sorted). */
static size_t upper(const struct btrfs *b, uint64_t logical)
{
	size_t lo = 0, hi = b->nchunks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->chunks[mid].logical <= logical)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Add one chunk item (data: its 48-byte head and stripes, size bytes) at logical. */
static int add_chunk(struct btrfs *b, uint64_t logical, const uint8_t *d, uint32_t size,
		     struct ndz_error *err)
{
	uint64_t length, type, phys[2] = { 0, 0 };
	uint16_t n;
	size_t pos;
	struct chunk *c;

	if (size < 48)
		return bad(err, "chunk item too short");
	length = get_le64(d);
	type = get_le64(d + 24);
	n = get_le16(d + 44);
	if (n == 0 || size < 48 + 32u * n)
		return bad(err, "chunk item's stripes cut short");
	if ((type & ~(BG_KINDS | BG_DUP)) != 0)
		return bad(err, "chunk at %llu: profile 0x%llx needs more than one device",
			   (unsigned long long)logical, (unsigned long long)type);
	if (!(type & BG_KINDS) || n != ((type & BG_DUP) ? 2 : 1))
		return bad(err, "chunk at %llu: bad type or stripe count",
			   (unsigned long long)logical);
	if (length == 0 || length > b->total_bytes || logical + length < logical)
		return bad(err, "chunk at %llu: bad length", (unsigned long long)logical);
	for (int i = 0; i < n; i++) {
		const uint8_t *st = d + 48 + 32 * i;

		phys[i] = get_le64(st + 8);
		if (get_le64(st) != b->devid)
			return bad(err, "chunk at %llu lives on another device",
				   (unsigned long long)logical);
		if (phys[i] > b->total_bytes || length > b->total_bytes - phys[i])
			return bad(err, "chunk at %llu: stripe beyond the device",
				   (unsigned long long)logical);
	}
	/* kept sorted by logical address: the neighbours are all that can overlap */
	pos = upper(b, logical);
	if (pos > 0) {
		const struct chunk *o = &b->chunks[pos - 1];

		if (o->logical == logical && o->length == length)
			return 0;      /* a system chunk seen in the superblock and the tree */
		if (logical - o->logical < o->length)
			return bad(err, "chunks overlap at %llu", (unsigned long long)logical);
	}
	if (pos < b->nchunks && b->chunks[pos].logical - logical < length)
		return bad(err, "chunks overlap at %llu", (unsigned long long)logical);
	if (b->nchunks >= MAX_CHUNKS)
		return bad(err, "too many chunks");
	if (b->nchunks % 64 == 0) {
		struct chunk *nc = realloc(b->chunks, (b->nchunks + 64) * sizeof(*nc));

		if (!nc)
			return NDZ_ENOMEM;
		b->chunks = nc;
	}
	memmove(&b->chunks[pos + 1], &b->chunks[pos], (b->nchunks - pos) * sizeof(*c));
	c = &b->chunks[pos];
	c->logical = logical;
	c->length = length;
	c->nstripes = n;
	c->phys[0] = phys[0];
	c->phys[1] = phys[1];
	b->nchunks++;
	return 0;
}

/* The chunk holding logical [l, l+len) whole, or NULL. */
static const struct chunk *find_chunk(const struct btrfs *b, uint64_t l, uint64_t len)
{
	size_t i = upper(b, l);
	const struct chunk *c;

	if (i == 0)
		return NULL;
	c = &b->chunks[i - 1];
	if (l - c->logical < c->length && len <= c->length - (l - c->logical))
		return c;
	return NULL;
}

/* Read the tree block at logical into b->blk[level], checked. */
static int read_block(struct btrfs *b, uint64_t logical, uint32_t level, struct ndz_error *err)
{
	const struct chunk *c = find_chunk(b, logical, b->nodesize);
	uint8_t *p = b->blk[level];
	int rc;

	if (!c)
		return bad(err, "tree block %llu outside every chunk", (unsigned long long)logical);
	rc = ndz_io_read_full(b->io, p, b->nodesize, c->phys[0] + (logical - c->logical), NULL, NULL);
	if (rc < 0)
		return rc;
	if (!csum_ok(p, b->nodesize))
		return bad(err, "tree block %llu: checksum mismatch", (unsigned long long)logical);
	if (get_le64(p + 0x30) != logical || memcmp(p + 0x20, b->fsid, 16) || p[0x64] != level)
		return bad(err, "tree block %llu: bad header", (unsigned long long)logical);
	return 0;
}

static int key_rises(struct walk *w, const uint8_t *k)
{
	uint64_t obj = get_le64(k), off = get_le64(k + 9);
	uint8_t type = k[8];
	int up = !w->started || obj > w->last_obj ||
		 (obj == w->last_obj && (type > w->last_type ||
					 (type == w->last_type && off > w->last_off)));

	w->started = 1;
	w->last_obj = obj;
	w->last_type = type;
	w->last_off = off;
	return up;
}

/*
 * Walk the tree block at logical, expected at level: levels fall by one per
 * step so the descent ends; keys must rise across the whole walk, so a block
 * reached twice is refused.
 */
static int walk_tree(struct btrfs *b, struct walk *w, uint64_t logical, uint32_t level,
		     struct ndz_error *err)
{
	uint8_t *p;
	uint32_t n;
	int rc;

	if (level >= MAX_LEVEL)
		return bad(err, "tree too deep");
	if (++w->blocks > b->total_bytes / b->nodesize)
		return bad(err, "tree has more blocks than the device");
	rc = read_block(b, logical, level, err);
	if (rc)
		return rc;
	p = b->blk[level];
	n = get_le32(p + 0x60);
	if (level == 0) {
		if (n > (b->nodesize - HDR) / ITEM)
			return bad(err, "leaf %llu: bad item count", (unsigned long long)logical);
		for (uint32_t i = 0; i < n; i++) {
			const uint8_t *it = p + HDR + ITEM * i;
			uint32_t off = get_le32(it + 17), size = get_le32(it + 21);

			if (off > b->nodesize - HDR || size > b->nodesize - HDR - off)
				return bad(err, "leaf %llu: item %u out of the block",
					   (unsigned long long)logical, i);
			if (!key_rises(w, it))
				return bad(err, "leaf %llu: keys out of order",
					   (unsigned long long)logical);
			rc = w->item(b, w, it, p + HDR + off, size, err);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (n == 0 || n > (b->nodesize - HDR) / KEYPTR)
		return bad(err, "node %llu: bad pointer count", (unsigned long long)logical);
	for (uint32_t i = 0; i < n; i++) {
		rc = walk_tree(b, w, get_le64(p + HDR + KEYPTR * i + 17), level - 1, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int chunk_item(struct btrfs *b, struct walk *w, const uint8_t *key, const uint8_t *d,
		      uint32_t size, struct ndz_error *err)
{
	(void)w;
	if (key[8] != KEY_CHUNK_ITEM)
		return 0;
	return add_chunk(b, get_le64(key + 9), d, size, err);
}

/*
 * Root items: the extent tree's found, and every tree still referenced kept in
 * b->roots (a deleted subvolume's, refs 0, may be half freed: its blocks are
 * the extent tree's business alone).
 */
static int root_item(struct btrfs *b, struct walk *w, const uint8_t *key, const uint8_t *d,
		     uint32_t size, struct ndz_error *err)
{
	uint64_t obj = get_le64(key);
	struct rootref *r;

	if (key[8] != KEY_ROOT_ITEM)
		return 0;
	if (size < 239)
		return bad(err, "root item of tree %llu too short", (unsigned long long)obj);
	if (obj == EXTENT_TREE_OBJECTID) {
		w->found_bytenr = get_le64(d + 176);
		w->found_level = d[238];
		w->found = 1;
	}
	if (get_le32(d + 216) == 0)
		return 0;
	if (d[238] >= MAX_LEVEL)
		return bad(err, "root item of tree %llu: level out of range",
			   (unsigned long long)obj);
	if (b->nroots % 64 == 0) {
		struct rootref *nr = realloc(b->roots, (b->nroots + 64) * sizeof(*nr));

		if (!nr)
			return NDZ_ENOMEM;
		b->roots = nr;
	}
	r = &b->roots[b->nroots++];
	r->obj = obj;
	r->bytenr = get_le64(d + 176);
	r->level = d[238];
	return 0;
}

static void reach_release(struct reach *r)
{
	free(r->at);
	free(r->tree);
	free(r->listed);
	memset(r, 0, sizeof(*r));
}

static size_t slot_of(uint64_t logical, size_t cap)
{
	return (size_t)((logical * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

/* Add logical (reached from tree) to the set: 1 when new, 0 when seen, NDZ_ENOMEM. */
static int reach_add(struct reach *r, uint64_t logical, uint64_t tree)
{
	size_t i;

	if (2 * (r->n + 1) > r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 1024;
		uint64_t *at = calloc(cap, sizeof(*at)), *tr = calloc(cap, sizeof(*tr));

		if (!at || !tr) {
			free(at);
			free(tr);
			return NDZ_ENOMEM;
		}
		for (size_t k = 0; k < r->cap; k++) {
			if (!r->at[k])
				continue;
			for (i = slot_of(r->at[k], cap); at[i]; i = (i + 1) & (cap - 1))
				;
			at[i] = r->at[k];
			tr[i] = r->tree[k];
		}
		free(r->at);
		free(r->tree);
		r->at = at;
		r->tree = tr;
		r->cap = cap;
	}
	for (i = slot_of(logical, r->cap); r->at[i]; i = (i + 1) & (r->cap - 1))
		if (r->at[i] == logical)
			return 0;
	r->at[i] = logical;
	r->tree[i] = tree;
	r->n++;
	return 1;
}

/*
 * Add the tree block at logical (expected at level) and every block below it
 * to the set. Only nodes are read: a leaf's address is all its parent needs
 * to give, so the cost is the trees' interior, a small share of their blocks.
 * A block reached before is not descended again (snapshots share subtrees).
 */
static int reach_tree(struct btrfs *b, struct reach *r, uint64_t logical, uint32_t level,
		      uint64_t tree, struct ndz_error *err)
{
	uint8_t *p;
	uint32_t n;
	int rc;

	if (level >= MAX_LEVEL)
		return bad(err, "tree too deep");
	if (logical == 0 || logical % b->sectorsize)
		return bad(err, "tree %llu: bad block pointer %llu", (unsigned long long)tree,
			   (unsigned long long)logical);
	rc = reach_add(r, logical, tree);
	if (rc <= 0)
		return rc;
	if (r->n > b->total_bytes / b->nodesize)
		return bad(err, "trees have more blocks than the device");
	if (level == 0)
		return 0;
	rc = read_block(b, logical, level, err);
	if (rc)
		return rc;
	p = b->blk[level];
	n = get_le32(p + 0x60);
	if (n == 0 || n > (b->nodesize - HDR) / KEYPTR)
		return bad(err, "node %llu: bad pointer count", (unsigned long long)logical);
	for (uint32_t i = 0; i < n; i++) {
		rc = reach_tree(b, r, get_le64(p + HDR + KEYPTR * i + 17), level - 1, tree, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *c)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)c;

	return x < y ? -1 : x > y;
}

/* Squeeze the set into r->at[0..n) sorted by address, r->tree alongside. */
static int reach_sort(struct reach *r)
{
	uint64_t *pairs = malloc(2 * (r->n ? r->n : 1) * sizeof(*pairs));
	size_t k = 0;

	r->listed = calloc(r->n ? r->n : 1, 1);
	if (!pairs || !r->listed) {
		free(pairs);
		return NDZ_ENOMEM;
	}
	for (size_t i = 0; i < r->cap; i++)
		if (r->at[i]) {
			pairs[2 * k] = r->at[i];
			pairs[2 * k + 1] = r->tree[i];
			k++;
		}
	qsort(pairs, r->n, 2 * sizeof(*pairs), cmp_u64);
	for (size_t i = 0; i < r->n; i++) {
		r->at[i] = pairs[2 * i];
		r->tree[i] = pairs[2 * i + 1];
	}
	free(pairs);
	return 0;
}

/* The extent walk passes logical [l, e) (extents rise): mark the reached blocks inside it. */
static void reach_mark(struct reach *r, uint32_t nodesize, uint64_t l, uint64_t e)
{
	while (r->cursor < r->n && r->at[r->cursor] < l)
		r->cursor++;
	while (r->cursor < r->n && r->at[r->cursor] <= e && nodesize <= e - r->at[r->cursor])
		r->listed[r->cursor++] = 1;
}

/* Report logical [l, l+len) at every stripe of its chunk. */
static int emit(struct btrfs *b, struct walk *w, uint64_t l, uint64_t len, struct ndz_error *err)
{
	const struct chunk *c = find_chunk(b, l, len);
	int rc;

	if (!c)
		return bad(err, "extent %llu+%llu outside every chunk", (unsigned long long)l,
			   (unsigned long long)len);
	w->logical_used += len;
	for (int i = 0; i < c->nstripes; i++) {
		w->used += len;
		rc = w->fn(w->ctx, c->phys[i] + (l - c->logical), len);
		if (rc)
			return rc;
	}
	return 0;
}

static int extent_item(struct btrfs *b, struct walk *w, const uint8_t *key, const uint8_t *d,
		       uint32_t size, struct ndz_error *err)
{
	uint64_t l = get_le64(key), off = get_le64(key + 9);

	(void)d;
	(void)size;
	if (key[8] == KEY_EXTENT_ITEM) {
		if (off == 0)
			return bad(err, "empty extent at %llu", (unsigned long long)l);
		if (w->reach && off <= UINT64_MAX - l)
			reach_mark(w->reach, b->nodesize, l, l + off);
		return emit(b, w, l, off, err);
	}
	if (key[8] == KEY_METADATA_ITEM) {
		if (w->reach && b->nodesize <= UINT64_MAX - l)
			reach_mark(w->reach, b->nodesize, l, l + b->nodesize);
		return emit(b, w, l, b->nodesize, err);
	}
	return 0;
}

static int check_sb(struct btrfs *b, const uint8_t *s, struct ndz_error *err)
{
	uint64_t incompat = get_le64(s + 0xbc), ro = get_le64(s + 0xb4);
	uint32_t sys = get_le32(s + 0xa0);

	if (get_le16(s + 0xc4) != 0)
		return bad(err, "checksum type %u not supported (only crc32c)", get_le16(s + 0xc4));
	if (!csum_ok(s, SB_SIZE))
		return bad(err, "superblock checksum mismatch");
	if (get_le64(s + 0x30) != SB_OFF)
		return bad(err, "superblock names another location");
	if (get_le64(s + 0x38) & ~FLAGS_OK)
		return bad(err, "superblock flags 0x%llx (errors, a metadata dump or a change "
			   "in progress)", (unsigned long long)get_le64(s + 0x38));
	if (incompat & ~INCOMPAT_OK)
		return bad(err, "unknown incompatible features 0x%llx",
			   (unsigned long long)(incompat & ~INCOMPAT_OK));
	if (ro & ~COMPAT_RO_OK)
		return bad(err, "unknown read-only-compatible features 0x%llx",
			   (unsigned long long)(ro & ~COMPAT_RO_OK));
	if (get_le64(s + 0x88) != 1)
		return bad(err, "filesystem spans %llu devices", (unsigned long long)get_le64(s + 0x88));
	if (get_le64(s + 0x60) != 0)
		return bad(err, "log tree present (fsync'd data not replayed; mount it once)");
	b->sectorsize = get_le32(s + 0x90);
	b->nodesize = get_le32(s + 0x94);
	if (b->sectorsize < 4096 || b->sectorsize > 65536 || (b->sectorsize & (b->sectorsize - 1)))
		return bad(err, "sector size out of range");
	if (b->nodesize < b->sectorsize || b->nodesize > 65536 || (b->nodesize & (b->nodesize - 1)))
		return bad(err, "node size out of range");
	b->total_bytes = get_le64(s + 0x70);
	b->bytes_used = get_le64(s + 0x78);
	b->devid = get_le64(s + 0xc9);
	if (b->total_bytes > b->io->size)
		return bad(err, "filesystem larger than its partition");
	if (get_le64(s + 0xc9 + 8) != b->total_bytes)
		return bad(err, "device size differs from the filesystem's");
	memcpy(b->fsid, (incompat & INCOMPAT_METADATA_UUID) ? s + 0x23b : s + 0x20, 16);
	b->root = get_le64(s + 0x50);
	b->chunk_root = get_le64(s + 0x58);
	b->root_level = s[0xc6];
	b->chunk_level = s[0xc7];
	if (b->root_level >= MAX_LEVEL || b->chunk_level >= MAX_LEVEL)
		return bad(err, "tree levels out of range");
	if (sys > 2048)
		return bad(err, "system chunk array too long");
	for (uint32_t o = 0; o < sys;) {
		const uint8_t *k = s + 0x32b + o;
		uint32_t n, len;
		int rc;

		if (sys - o < 17 + 48 || k[8] != KEY_CHUNK_ITEM)
			return bad(err, "system chunk array malformed");
		n = get_le16(k + 17 + 44);
		len = 48 + 32 * n;
		if (sys - o - 17 < len)
			return bad(err, "system chunk array malformed");
		rc = add_chunk(b, get_le64(k + 9), k + 17, len, err);
		if (rc)
			return rc;
		o += 17 + len;
	}
	return 0;
}

static int btrfs_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
		      struct ndz_error *err)
{
	struct btrfs *b;
	uint8_t *s;
	struct walk w;
	int rc;

	if (!btrfs_probe(io))
		return bad(err, "no superblock");
	b = calloc(1, sizeof(*b));
	s = malloc(SB_SIZE);
	if (!b || !s) {
		free(s);
		free(b);
		return NDZ_ENOMEM;
	}
	b->io = io;
	b->warn = o ? o->warn : NULL;
	b->warn_ctx = o ? o->warn_ctx : NULL;
	rc = ndz_io_read_full(io, s, SB_SIZE, SB_OFF, NULL, NULL);
	if (rc == 0)
		rc = check_sb(b, s, err);
	free(s);
	for (unsigned i = 0; rc == 0 && i < MAX_LEVEL; i++)
		if (!(b->blk[i] = malloc(b->nodesize)))
			rc = NDZ_ENOMEM;
	if (rc == 0) {
		memset(&w, 0, sizeof(w));
		w.item = chunk_item;
		rc = walk_tree(b, &w, b->chunk_root, b->chunk_level, err);
	}
	if (rc < 0) {
		btrfs_close(b);
		return rc == NDZ_ESHORTREAD ? bad(err, "metadata beyond the end of the volume") : rc;
	}
	*out = b;
	return 0;
}

/*
 * Image the reached blocks the extent tree did not list, at every stripe, and
 * say so: a root item or a node points at them, so they are in use whatever
 * the extent tree says.
 */
static int image_unlisted(struct btrfs *b, struct walk *w, struct reach *r,
			  struct ndz_error *err)
{
	uint64_t count = 0, first = 0, tree = 0, logical_used = w->logical_used;
	int rc;

	for (size_t i = 0; i < r->n; i++) {
		if (r->listed[i])
			continue;
		if (!count++) {
			first = r->at[i];
			tree = r->tree[i];
		}
		rc = emit(b, w, r->at[i], b->nodesize, err);
		if (rc)
			return rc;
	}
	w->logical_used = logical_used;
	if (count)
		ndz_fs_warn(b->warn, b->warn_ctx, "btrfs",
			    "%llu tree block%s reached from the roots %s missing from the extent "
			    "tree (the first at logical %llu, of tree %lld); imaging %s too",
			    (unsigned long long)count, count == 1 ? "" : "s",
			    count == 1 ? "is" : "are", (unsigned long long)first, (long long)tree,
			    count == 1 ? "it" : "them");
	return 0;
}

static int btrfs_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		      struct ndz_error *err)
{
	struct btrfs *b = h;
	struct walk w;
	struct reach r;
	uint64_t head = 1024 * 1024, used, extent_root;
	uint8_t extent_level;
	int rc;

	memset(&r, 0, sizeof(r));
	st->fs_bytes = b->total_bytes;
	st->block_size = b->sectorsize;
	snprintf(st->detail, sizeof(st->detail), "btrfs, %u-byte sectors, %u-byte nodes",
		 b->sectorsize, b->nodesize);
	memset(&w, 0, sizeof(w));
	w.item = root_item;
	b->nroots = 0;
	rc = walk_tree(b, &w, b->root, b->root_level, err);
	if (rc)
		goto out;
	if (!w.found)
		return bad(err, "no extent tree");
	extent_root = w.found_bytenr;
	extent_level = w.found_level;
	/* every tree block the roots reach: the root tree, the chunk tree, each root item's */
	rc = reach_tree(b, &r, b->root, b->root_level, 1, err);
	if (rc == 0)
		rc = reach_tree(b, &r, b->chunk_root, b->chunk_level, CHUNK_TREE_OBJECTID, err);
	for (size_t i = 0; rc == 0 && i < b->nroots; i++)
		rc = reach_tree(b, &r, b->roots[i].bytenr, b->roots[i].level, b->roots[i].obj, err);
	if (rc == 0)
		rc = reach_sort(&r);
	if (rc)
		goto out;
	memset(&w, 0, sizeof(w));
	w.item = extent_item;
	w.fn = fn;
	w.ctx = ctx;
	w.reach = &r;
	rc = walk_tree(b, &w, extent_root, extent_level, err);
	if (rc)
		goto out;
	if (w.logical_used != b->bytes_used) {
		rc = bad(err, "extent tree holds %llu bytes, the superblock says %llu",
			 (unsigned long long)w.logical_used, (unsigned long long)b->bytes_used);
		goto out;
	}
	rc = image_unlisted(b, &w, &r, err);
	if (rc)
		goto out;
	/* the first MiB (boot loaders, the primary superblock) and the copies */
	used = w.used;
	if (head > b->total_bytes)
		head = b->total_bytes;
	rc = fn(ctx, 0, head);
	used += head;
	for (int i = 1; !rc && i < 3; i++) {
		uint64_t at = (uint64_t)16384 << (12 * i);      /* 64 MiB, 256 GiB */

		if (at + SB_SIZE <= b->total_bytes) {
			rc = fn(ctx, at, SB_SIZE);
			used += SB_SIZE;
		}
	}
	st->used_bytes = used;
out:
	reach_release(&r);
	return rc == NDZ_ESHORTREAD ? bad(err, "metadata beyond the end of the volume") : rc;
}

const struct ndz_fs_module ndz_fs_btrfs = {
	"btrfs", btrfs_probe, btrfs_open, btrfs_walk, btrfs_close, NULL, 1,
};
