/*
 * FAT12/16/32 (and so the EFI system partition): the file allocation table
 * decides; a cluster counts as used when any copy of the table says so, when
 * any copy's chain points at it, or when the directory tree reaches it (see
 * dir_walk): the union, with a warning when the table alone left some out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "fs.h"
#include "fsutil.h"
#include "core/le.h"

struct fat {
	struct ndz_io *io;
	uint32_t bps, spc, nfats, bits;
	uint64_t fatsz;                /* sectors per FAT copy */
	uint64_t data_start;           /* sector of cluster 2 */
	uint64_t clusters;
	uint64_t totsec;
	uint32_t root_cluster;         /* FAT32 */
	uint8_t media;
	uint8_t *used;                 /* one bit per cluster number, union of the copies */
	uint8_t *ref;                  /* clusters a chain or a directory entry reaches */
	uint8_t *tab;                  /* the table in use (the first, unless FAT32 says), for chains */
	uint32_t root_entries;
	uint64_t root_sec;             /* FAT12/16: the root directory's first sector */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

struct bpb {
	uint32_t bps, spc, reserved, nfats, root_entries, media;
	uint64_t totsec, fatsz;
	uint32_t root_cluster;
	uint32_t ext_flags;            /* FAT32: bit 7 set, bits 0-3 name the one table in use */
	int dirty;                     /* the boot sector's "not cleanly unmounted" bit */
};

static int read_bpb(struct ndz_io *io, struct bpb *b)
{
	uint8_t s[512];

	if (io->size < 64 * 512 || ndz_io_read_full(io, s, sizeof(s), 0, NULL, NULL) < 0)
		return 0;
	if (s[510] != 0x55 || s[511] != 0xaa || (s[0] != 0xeb && s[0] != 0xe9))
		return 0;
	b->bps = get_le16(s + 11);
	b->spc = s[13];
	b->reserved = get_le16(s + 14);
	b->nfats = s[16];
	b->root_entries = get_le16(s + 17);
	b->totsec = get_le16(s + 19) ? get_le16(s + 19) : get_le32(s + 32);
	b->media = s[21];
	b->fatsz = get_le16(s + 22) ? get_le16(s + 22) : get_le32(s + 36);
	b->root_cluster = get_le32(s + 44);
	/* the extended boot record (signature 0x29) holds the state byte; FAT32's sits later */
	if (get_le16(s + 22) == 0)
		b->dirty = s[66] == 0x29 && (s[65] & 1);
	else
		b->dirty = s[38] == 0x29 && (s[37] & 1);
	b->ext_flags = get_le16(s + 40);
	if (!is_pow2(b->bps) || b->bps < 512 || b->bps > 4096 || !is_pow2(b->spc) ||
	    b->reserved == 0 || b->nfats == 0 || b->nfats > 4 || b->fatsz == 0 ||
	    b->totsec == 0 || (b->media != 0xf0 && b->media < 0xf8))
		return 0;
	return 1;
}

static int fat_probe(struct ndz_io *io)
{
	struct bpb b;

	return read_bpb(io, &b);
}

/* bad(err, fmt, ...) - this module's inconsistent-metadata error (fsutil.h) */
#define bad(err, ...) ndz_fs_bad(err, "fat", __VA_ARGS__)

static uint32_t entry(const struct fat *f, const uint8_t *t, uint64_t c)
{
	if (f->bits == 12) {
		uint32_t v = get_le16(t + c + c / 2);

		return c & 1 ? v >> 4 : v & 0xfff;
	}
	if (f->bits == 16)
		return get_le16(t + 2 * c);
	return get_le32(t + 4 * c) & 0x0fffffff;
}

static void fat_close(void *h)
{
	struct fat *f = h;

	if (!f)
		return;
	free(f->used);
	free(f->ref);
	free(f->tab);
	free(f);
}

static int fat_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
		    struct ndz_error *err)
{
	struct fat *f;
	struct bpb b;
	uint64_t rootsec, fatbytes, need;
	uint32_t active = 0;           /* the table chains are followed in */
	int differ = 0;
	uint8_t *t = NULL;
	int rc = NDZ_EFS;

	if (!read_bpb(io, &b))
		return bad(err, "no boot sector");
	f = calloc(1, sizeof(*f));
	if (!f)
		return NDZ_ENOMEM;
	f->io = io;
	f->warn = o ? o->warn : NULL;
	f->warn_ctx = o ? o->warn_ctx : NULL;
	if (b.dirty)
		ndz_fs_warn(f->warn, f->warn_ctx, "fat", "not cleanly unmounted (dirty bit set)");
	f->root_entries = b.root_entries;
	f->root_sec = b.reserved + (uint64_t)b.nfats * b.fatsz;
	f->bps = b.bps;
	f->spc = b.spc;
	f->nfats = b.nfats;
	f->fatsz = b.fatsz;
	f->totsec = b.totsec;
	f->media = (uint8_t)b.media;
	f->root_cluster = b.root_cluster;
	rootsec = ((uint64_t)b.root_entries * 32 + b.bps - 1) / b.bps;
	f->data_start = b.reserved + (uint64_t)b.nfats * b.fatsz + rootsec;
	if (f->data_start >= f->totsec || f->totsec > io->size / f->bps) {
		bad(err, "filesystem larger than its partition");
		goto fail;
	}
	f->clusters = (f->totsec - f->data_start) / f->spc;
	f->bits = f->clusters < 4085 ? 12 : f->clusters < 65525 ? 16 : 32;
	if ((f->bits == 32) != (b.root_entries == 0)) {
		bad(err, "root directory does not match the FAT type");
		goto fail;
	}
	fatbytes = f->fatsz * f->bps;
	need = f->bits == 12 ? (f->clusters + 2) * 3 / 2 + 1 : (f->clusters + 2) * (f->bits / 8);
	if (need > fatbytes) {
		bad(err, "allocation table too small for the clusters");
		goto fail;
	}
	if (f->bits == 32 && (f->root_cluster < 2 || f->root_cluster >= f->clusters + 2)) {
		bad(err, "root cluster out of range");
		goto fail;
	}
	if (f->bits == 32 && (b.ext_flags & 0x80) && (b.ext_flags & 0xf) < f->nfats)
		active = b.ext_flags & 0xf;    /* mirroring off: the others may be stale */
	t = malloc(need);
	f->tab = malloc(need);
	f->used = calloc(1, (f->clusters + 2 + 7) / 8);
	f->ref = calloc(1, (f->clusters + 2 + 7) / 8);
	if (!t || !f->tab || !f->used || !f->ref) {
		rc = NDZ_ENOMEM;
		goto fail;
	}
	for (uint32_t k = 0; k < f->nfats; k++) {
		uint64_t off = ((uint64_t)b.reserved + k * f->fatsz) * f->bps;

		rc = ndz_io_read_full(io, t, need, off, NULL, NULL);
		if (rc < 0)
			goto fail;
		/* mirrored copies that differ: every copy's clusters count (the union) */
		if (k > 0 && !active && !differ && memcmp(t, f->tab, need)) {
			differ = 1;
			ndz_fs_warn(f->warn, f->warn_ctx, "fat",
				    "allocation table copy %u differs from copy 0; imaging what "
				    "either calls in use", k);
		}
		rc = NDZ_EFS;
		if ((entry(f, t, 0) & 0xff) != f->media) {
			bad(err, "allocation table does not start with the media byte");
			goto fail;
		}
		for (uint64_t c = 2; c < f->clusters + 2; c++) {
			uint32_t v = entry(f, t, c);

			if (v)
				f->used[c / 8] |= (uint8_t)(1u << (c % 8));
			/* a chain's next cluster is in use, whatever its own entry says */
			if (v >= 2 && v < f->clusters + 2)
				f->ref[v / 8] |= (uint8_t)(1u << (v % 8));
		}
		if (k == active)
			memcpy(f->tab, t, need);
	}
	if (f->bits == 32 && !ndz_fs_bit(f->used, f->root_cluster)) {
		bad(err, "root directory cluster is free");
		goto fail;
	}
	free(t);
	*out = f;
	return 0;
fail:
	free(t);
	fat_close(f);
	return rc;
}

static void set_ref(struct fat *f, uint64_t c)
{
	f->ref[c / 8] |= (uint8_t)(1u << (c % 8));
}

/* The cluster after c in the table's chain, or 0 at its end or a break. */
static uint32_t next_cluster(const struct fat *f, uint32_t c)
{
	uint32_t v = entry(f, f->tab, c);

	return v >= 2 && v < f->clusters + 2 ? v : 0;
}

/*
 * A file's clusters: ceil(size / cluster) of them from first along the chain.
 * Where the chain breaks before the size is covered (an entry marked free, or
 * pointing outside the clusters), the rest is taken to follow contiguously,
 * as FAT writers lay files out, whatever the entries there say (they are
 * another file's, or garbage); an end-of-chain mark is the table's word and is
 * believed. Bounded by the size, so a chain in a loop ends too.
 */
static void file_refs(struct fat *f, uint32_t first, uint32_t size, uint64_t csize)
{
	uint64_t need = (size + csize - 1) / csize, c = first;
	uint32_t badmark = f->bits == 12 ? 0xff7 : f->bits == 16 ? 0xfff7 : 0x0ffffff7;
	int broken = 0;

	for (uint64_t k = 0; k < (need ? need : 1) && c < f->clusters + 2; k++) {
		uint32_t v;

		set_ref(f, c);
		if (k + 1 >= need)
			break;
		v = entry(f, f->tab, (uint32_t)c);
		if (!broken && v >= 2 && v < f->clusters + 2) {
			c = v;
		} else if (broken || v < badmark) {
			broken = 1;    /* free, reserved or out of range: the rest contiguous */
			c++;
		} else {
			break;         /* end of chain, a bad cluster: the table says so */
		}
	}
}

/* Directory entries in buf[0..len): files' clusters marked, subdirectories not yet
 * seen queued. */
static int dir_entries(struct fat *f, const uint8_t *buf, size_t len, uint64_t csize,
		       const uint8_t *seen, uint32_t **queue, size_t *nq, size_t *cap, int *end)
{
	for (size_t o = 0; o + 32 <= len; o += 32) {
		const uint8_t *d = buf + o;
		uint32_t first = get_le16(d + 26);

		if (d[0] == 0) {
			*end = 1;
			return 0;
		}
		if (d[0] == 0xe5 || (d[11] & 0x0f) == 0x0f || (d[11] & 0x08) || d[0] == '.')
			continue;
		if (f->bits == 32)
			first |= (uint32_t)get_le16(d + 20) << 16;
		if (first < 2 || first >= f->clusters + 2)
			continue;
		if (!(d[11] & 0x10)) {
			file_refs(f, first, get_le32(d + 28), csize);
			continue;
		}
		if (ndz_fs_bit(seen, first))
			continue;
		if (*nq == *cap) {
			size_t nc = *cap ? 2 * *cap : 64;
			uint32_t *q = realloc(*queue, nc * sizeof(*q));

			if (!q)
				return NDZ_ENOMEM;
			*queue = q;
			*cap = nc;
		}
		(*queue)[(*nq)++] = first;
	}
	return 0;
}

/*
 * Walk the directory tree from the root: every cluster a directory's chain or
 * a file's (first cluster, size) reaches is marked in f->ref. Each directory
 * cluster is read once (a loop ends there); what cannot be read right is an
 * I/O error, what makes no sense is passed over.
 */
static int dir_walk(struct fat *f)
{
	uint64_t csize = (uint64_t)f->spc * f->bps;
	uint8_t *seen = calloc(1, (f->clusters + 2 + 7) / 8), *buf = malloc(csize);
	uint32_t *queue = NULL;
	size_t nq = 0, cap = 0;
	int rc = NDZ_ENOMEM, end = 0;

	if (!seen || !buf)
		goto out;
	if (f->bits == 32) {
		queue = malloc(64 * sizeof(*queue));
		if (!queue)
			goto out;
		cap = 64;
		queue[nq++] = f->root_cluster;
	} else {
		size_t len = (size_t)f->root_entries * 32;
		uint8_t *root = malloc(len ? len : 1);

		if (!root)
			goto out;
		rc = ndz_io_read_full(f->io, root, len, f->root_sec * f->bps, NULL, NULL);
		if (rc == 0)
			rc = dir_entries(f, root, len, csize, seen, &queue, &nq, &cap, &end);
		free(root);
		if (rc)
			goto out;
	}
	rc = 0;
	while (rc == 0 && nq) {
		uint32_t c = queue[--nq];

		end = 0;
		while (c && !end && !ndz_fs_bit(seen, c)) {
			seen[c / 8] |= (uint8_t)(1u << (c % 8));
			set_ref(f, c);
			rc = ndz_io_read_full(f->io, buf, csize,
					      (f->data_start * f->bps) + (uint64_t)(c - 2) * csize,
					      NULL, NULL);
			if (rc == 0)
				rc = dir_entries(f, buf, csize, csize, seen, &queue, &nq, &cap, &end);
			if (rc)
				break;
			c = next_cluster(f, c);
		}
	}
out:
	free(queue);
	free(buf);
	free(seen);
	return rc == NDZ_ESHORTREAD ? NDZ_EIO : rc;
}

static int fat_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		    struct ndz_error *err)
{
	struct fat *f = h;
	uint64_t csize = (uint64_t)f->spc * f->bps, base = f->data_start * f->bps;
	uint64_t pos = 2, a, b, used = 0, tail, extra = 0, first = 0;
	size_t mapbytes = (size_t)((f->clusters + 2 + 7) / 8);
	int rc;

	(void)err;
	st->fs_bytes = f->totsec * f->bps;
	st->block_size = (uint32_t)csize;
	snprintf(st->detail, sizeof(st->detail), "FAT%u, %llu-byte clusters", f->bits,
		 (unsigned long long)csize);
	rc = dir_walk(f);
	if (rc)
		return rc;
	/* the union: what the tables mark and what chains and directories reach */
	for (uint64_t c = 2; c < f->clusters + 2; c++)
		if (ndz_fs_bit(f->ref, c) && !ndz_fs_bit(f->used, c) && !extra++)
			first = c;
	for (size_t i = 0; i < mapbytes; i++)
		f->used[i] |= f->ref[i];
	if (extra)
		ndz_fs_warn(f->warn, f->warn_ctx, "fat",
			    "%llu cluster%s the allocation table calls free %s reached by a chain "
			    "or a directory entry (the first: cluster %llu); imaging %s too",
			    (unsigned long long)extra, extra == 1 ? "" : "s",
			    extra == 1 ? "is" : "are", (unsigned long long)first,
			    extra == 1 ? "it" : "them");
	/* boot sector, reserved sectors, the tables, FAT12/16's root directory */
	rc = fn(ctx, 0, base);
	if (rc)
		return rc;
	while (ndz_fs_next_run(f->used, &pos, f->clusters + 2, 1, &a, &b)) {
		used += (b - a) * csize;
		rc = fn(ctx, base + (a - 2) * csize, (b - a) * csize);
		if (rc)
			return rc;
	}
	st->used_bytes = used + base;
	/* sectors after the last whole cluster (the caller keeps what follows fs_bytes) */
	tail = base + f->clusters * csize;
	if (st->fs_bytes > tail)
		return fn(ctx, tail, st->fs_bytes - tail);
	return 0;
}

const struct ndz_fs_module ndz_fs_fat = {
	"fat", fat_probe, fat_open, fat_walk, fat_close, NULL, 1,
};
