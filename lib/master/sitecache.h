/*
 * A site master's decisions (doc/SITES.md): which chunks of an image it still has
 * to fetch from its parent (the fetch state), which it may rebuild from a chunk of
 * an image it holds already (reuse: a newer version), and which cached images make
 * room for another (the cache: bounded, least recently used whole images go first,
 * never one in use or pinned). Pure: no I/O, no clock; the caller (lib/mserve/site)
 * feeds it and serialises.
 */
#ifndef NDZ_SITECACHE_H
#define NDZ_SITECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "trust/index.h"

/* Which chunks of one image are here and verified. */
struct ndz_sitefetch {
	uint32_t chunks;
	uint32_t have;                 /* chunks marked */
	uint8_t *bits;                 /* chunks bits, one per chunk */
};

/*
 * ndz_sitefetch_init - no chunk of chunks (1 to NDZ_INDEX_MAX_CHUNKS) here yet.
 * 0, or NDZ_EINVAL / NDZ_ENOMEM with e. ndz_sitefetch_release frees; a zeroed or
 * released state is fine.
 */
int ndz_sitefetch_init(struct ndz_sitefetch *f, uint32_t chunks, struct ndz_error *e);
void ndz_sitefetch_release(struct ndz_sitefetch *f);

/* ndz_sitefetch_mark - chunk i is here and verified (again is fine; past the end ignored). */
void ndz_sitefetch_mark(struct ndz_sitefetch *f, uint32_t i);
/* ndz_sitefetch_has - 1 when chunk i is marked. */
int ndz_sitefetch_has(const struct ndz_sitefetch *f, uint32_t i);
/* ndz_sitefetch_done - 1 when every chunk is marked. */
int ndz_sitefetch_done(const struct ndz_sitefetch *f);

/*
 * ndz_sitefetch_next - the first run of missing chunks at or after from (wrapping
 * to 0), at most max long: *first and the run's length returned; 0 when none is
 * missing.
 */
uint32_t ndz_sitefetch_next(const struct ndz_sitefetch *f, uint32_t from, uint32_t max,
			    uint32_t *first);

/*
 * Reuse (doc/SITES.md, "A newer version"): the chunks of the images a site holds, by
 * what they write. A chunk of a new image whose index entry writes the same (first,
 * last, regions, digest, and pieces when both have them) as a held chunk may be
 * rebuilt from it, its header made the new image's (ndz_sitereuse_rebuild); the
 * caller then checks the rebuilt chunk exactly as a fetched one, and fetches it when
 * it fails.
 */
struct ndz_sitereuse;

/* ndz_sitereuse_create - none held yet. 0, or NDZ_ENOMEM with e. _free: NULL is fine. */
int ndz_sitereuse_create(struct ndz_sitereuse **out, struct ndz_error *e);
void ndz_sitereuse_free(struct ndz_sitereuse *r);

/*
 * ndz_sitereuse_add - the chunks of the image ix indexes (borrowed: ix outlives r) are
 * held, as chunks of source src (the caller's number for that image). 0, or
 * NDZ_ENOMEM with e.
 */
int ndz_sitereuse_add(struct ndz_sitereuse *r, const struct ndz_index *ix, uint32_t src,
		      struct ndz_error *e);

/*
 * ndz_sitereuse_find - a held chunk that writes what entry x writes: 1 with its
 * source in *src and its number in *chunk (the first added, when several do), else 0.
 */
int ndz_sitereuse_find(const struct ndz_sitereuse *r, const struct ndz_index_entry *x,
		       uint32_t *src, uint32_t *chunk);

/* ndz_sitereuse_count - the chunks held (added). */
size_t ndz_sitereuse_count(const struct ndz_sitereuse *r);

/*
 * ndz_sitereuse_rebuild - chunk c (NDZ_CHUNK_SIZE bytes, changed in place) of another
 * image made chunk i of the image uuid/source_bytes: its header's number, UUID and
 * source size set, its last-chunk flag set as last says, and its header checksum made
 * again; its data, regions and other fields as they were. 0, or with e: the header's code when c's header does not decode,
 * NDZ_ENOTSUP for an encrypted chunk (its header is authenticated with its data),
 * NDZ_EINVAL when the data do not fit the new source size.
 */
int ndz_sitereuse_rebuild(uint8_t *c, uint32_t i, int last, const uint8_t uuid[16],
			  uint64_t source_bytes, struct ndz_error *e);

/* One image in a site's cache, as the caller sees it now. */
struct ndz_sitecache_entry {
	const char *name;              /* borrowed */
	uint64_t bytes;                /* its files' */
	uint64_t used;                 /* when last asked for (any clock; larger is later) */
	int pinned;                    /* a "pin" line names it: never evicted */
	int in_use;                    /* a session serves it, or it is being fetched */
};

/*
 * ndz_sitecache_evict - room for need more bytes in a cache bounded to limit bytes
 * (0: unbounded) holding the n entries: the entries to remove, least recently used
 * first, as indices into out (n room), their count in *nout. 0 (nothing to remove
 * when it fits), or NDZ_ENOSPC with e saying why when the pinned and in-use images
 * leave no room however many others go (then *nout is 0).
 */
int ndz_sitecache_evict(const struct ndz_sitecache_entry *ents, size_t n, uint64_t need,
			uint64_t limit, size_t *out, size_t *nout, struct ndz_error *e);

#endif
