/* Does a target hold a chunk: its region bytes hashed against the content index. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/format.h"
#include "seed.h"

#define SEED_BUF (1u << 20)

struct ndz_seed {
	struct ndz_io *target;
	const struct ndz_index *ix;
	struct ndz_seed_opts o;
	struct ndz_digest *d;
	uint8_t *buf;
	int cache_fd;                    /* direct: the target opened to drop its cache */
	uint64_t bytes_read;
};

int ndz_seed_create(struct ndz_io *target, const struct ndz_index *ix,
		    const struct ndz_seed_opts *o, struct ndz_seed **out, struct ndz_error *e)
{
	struct ndz_seed *s;

	*out = NULL;
	if (!target || !ix)
		return ndz_error_set(e, NDZ_EINVAL, 0, "a seed checker needs a target and an index");
	s = calloc(1, sizeof(*s));
	if (!s)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: seed checker: %s", target->name,
				     ndz_strerror(NDZ_ENOMEM));
	s->target = target;
	s->ix = ix;
	if (o)
		s->o = *o;
	s->cache_fd = -1;
	s->buf = malloc(SEED_BUF);
	s->d = s->buf ? ndz_digest_create(e) : NULL;
	if (!s->d) {
		ndz_seed_free(s);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: seed checker: %s", target->name,
				     ndz_strerror(NDZ_ENOMEM));
	}
	/*
	 * Reading past the page cache: the target's cached pages of a range are
	 * dropped (POSIX_FADV_DONTNEED, through a descriptor of our own: the cache is
	 * the file's, not the descriptor's) before it is read, so the read comes from
	 * the disk. Flushed pages are clean and go; a target we cannot open by name
	 * (a view of a partition) is read as it is.
	 */
	if (s->o.direct && (target->is_regular || target->is_blockdev) && target->name)
		s->cache_fd = open(target->name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	*out = s;
	return 0;
}

void ndz_seed_free(struct ndz_seed *s)
{
	if (!s)
		return;
	if (s->cache_fd >= 0)
		close(s->cache_fd);
	ndz_digest_free(s->d);
	free(s->buf);
	free(s);
}

uint64_t ndz_seed_bytes_read(const struct ndz_seed *s)
{
	return s->bytes_read;
}

/*
 * Read [off, off + len) of the image's bytes from the target into the digest
 * (zero_only: check they are all zero instead). 1: read (and zero when asked), 0:
 * the target ends first or a byte is not zero, or a negative code with e.
 */
static int scan(struct ndz_seed *s, uint64_t off, uint64_t len, int zero_only,
		struct ndz_error *e)
{
	uint64_t at = s->o.target_offset + off;
	struct ndz_error re = { 0 };
	int rc;

	if (!len)
		return 1;
	if ((s->target->is_regular || s->target->is_blockdev) &&
	    (at > s->target->size || len > s->target->size - at))
		return 0;
	if (s->cache_fd >= 0)
		(void)posix_fadvise(s->cache_fd, (off_t)at, (off_t)len, POSIX_FADV_DONTNEED);
	while (len) {
		size_t n = len > SEED_BUF ? SEED_BUF : (size_t)len;
		size_t i;

		rc = ndz_io_read_full(s->target, s->buf, n, at, NULL, &re);
		if (rc == NDZ_ESHORTREAD)
			return 0;
		if (rc < 0) {
			ndz_error_copy(e, &re);
			return rc;
		}
		s->bytes_read += n;
		if (zero_only) {
			uint8_t acc = 0;

			for (i = 0; i < n; i++)
				acc |= s->buf[i];
			if (acc)
				return 0;
		} else if ((rc = ndz_digest_update(s->d, s->buf, n, e)) < 0) {
			return rc;
		}
		at += n;
		len -= n;
	}
	return 1;
}

/* [a, b) in sectors as bytes clipped to the image's source_bytes: *off, *len. */
static void clip(const struct ndz_seed *s, uint64_t a, uint64_t b, uint64_t *off, uint64_t *len)
{
	uint64_t end = s->ix->source_bytes;

	*off = a * NDZ_SECTOR_SIZE;
	*len = 0;
	if (*off >= end || b <= a)
		return;
	*len = (b - a) * NDZ_SECTOR_SIZE;
	if (*len > end - *off)
		*len = end - *off;
}

int ndz_seed_check(struct ndz_seed *s, uint32_t i, struct ndz_error *e)
{
	const struct ndz_index_entry *x;
	uint8_t got[NDZ_INDEX_DIGEST_LEN];
	uint64_t gap = 0, off, len;
	uint32_t j;
	int rc;

	if (i >= s->ix->chunks)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: past the index's %u chunks", i,
				     s->ix->chunks);
	x = &s->ix->e[i];
	gap = x->first;
	/* Start clean: a digest left half-way by an earlier "not held" is reset. */
	if ((rc = ndz_digest_final(s->d, got, e)) < 0)
		return rc;
	for (j = 0; j <= x->nregions; j++) {
		uint64_t rs = j < x->nregions ? x->regions[j].start : x->last;

		if (s->o.zero_fill) {
			clip(s, gap, rs, &off, &len);
			rc = scan(s, off, len, 1, e);
			if (rc <= 0)
				return rc;
		}
		if (j == x->nregions)
			break;
		clip(s, rs, rs + x->regions[j].count, &off, &len);
		rc = scan(s, off, len, 0, e);
		if (rc <= 0)
			return rc;
		gap = rs + x->regions[j].count;
	}
	if ((rc = ndz_digest_final(s->d, got, e)) < 0)
		return rc;
	return memcmp(got, x->digest, NDZ_INDEX_DIGEST_LEN) == 0;
}
