/*
 * A site master's decisions (doc/SITES.md): which chunks of an image it still has
 * to fetch from its parent (the fetch state), and which cached images make room
 * for another (the cache: bounded, least recently used whole images go first,
 * never one in use or pinned). Pure: no I/O, no clock; the caller (lib/mserve/site)
 * feeds it and serialises.
 */
#ifndef NDZ_SITECACHE_H
#define NDZ_SITECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

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
