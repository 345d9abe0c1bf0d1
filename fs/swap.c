/* Swap areas: Linux swap keeps its header page only (a hibernation image, the
 * kernel's or TuxOnIce's, is kept whole with a warning); FreeBSD swap, known
 * only from its partition type, is skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "fs.h"
#include "fsutil.h"

static const unsigned page_sizes[] = { 4096, 8192, 16384, 65536 };

/* TuxOnIce marks the first bytes of a swap area it wrote an image to, and
 * leaves the swap signature at the page's end as it was. */
static const char toi_magic[8] = { '\xed', '\xc3', '\x02', '\xe9', '\x98', '\x56', '\xe5',
				   '\x0c' };

struct swap {
	struct ndz_io *io;
	unsigned page;
	int hibernated;
	const char *by;                /* whose image: "the kernel's", "TuxOnIce's" */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

/*
 * Returns 1 normal swap, 2 swap holding the kernel's hibernation image, 3
 * TuxOnIce's, 0 neither.
 */
static int swap_sig(struct ndz_io *io, unsigned *page)
{
	static const char *const hib[] = { "S1SUSPEND", "S2SUSPEND", "ULSUSPEND",
					   "LINHIB0001" };
	char sig[10], head[sizeof(toi_magic)];
	int toi;

	if (io->size < 2ull * page_sizes[0] ||
	    ndz_io_read_full(io, head, sizeof(head), 0, NULL, NULL) < 0)
		return 0;
	toi = !memcmp(head, toi_magic, sizeof(toi_magic));
	*page = page_sizes[0];

	for (size_t i = 0; i < sizeof(page_sizes) / sizeof(page_sizes[0]); i++) {
		unsigned ps = page_sizes[i];

		if (io->size < 2ull * ps)
			break;
		if (ndz_io_read_full(io, sig, sizeof(sig), ps - sizeof(sig), NULL, NULL) < 0)
			return 0;
		*page = ps;
		if (!memcmp(sig, "SWAPSPACE2", 10) || !memcmp(sig, "SWAP-SPACE", 10))
			return toi ? 3 : 1;
		for (size_t j = 0; j < sizeof(hib) / sizeof(hib[0]); j++)
			if (!memcmp(sig, hib[j], strlen(hib[j])))
				return 2;
	}
	*page = page_sizes[0];
	return toi ? 3 : 0;
}

static int swap_probe(struct ndz_io *io)
{
	unsigned ps;

	return swap_sig(io, &ps) > 0;
}

static int swap_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
		     struct ndz_error *err)
{
	struct swap *s;
	int kind;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NDZ_ENOMEM;
	s->io = io;
	kind = swap_sig(io, &s->page);
	if (!kind) {
		free(s);
		ndz_error_set(err, NDZ_EFS, 0, "no swap signature");
		return NDZ_EFS;
	}
	s->hibernated = kind >= 2;
	s->by = kind == 3 ? "TuxOnIce's" : "the kernel's";
	s->warn = o ? o->warn : NULL;
	s->warn_ctx = o ? o->warn_ctx : NULL;
	*out = s;
	return 0;
}

static int swap_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
		     struct ndz_error *err)
{
	struct swap *s = h;
	uint64_t keep = s->hibernated ? s->io->size : s->page;

	(void)err;
	st->fs_bytes = s->io->size;
	st->used_bytes = keep;
	st->block_size = s->page;
	snprintf(st->detail, sizeof(st->detail), "linux swap%s%s%s",
		 s->hibernated ? " holding " : "", s->hibernated ? s->by : "",
		 s->hibernated ? " hibernation image (kept whole)" : "");
	/* its pages are a system's memory waiting to be resumed: all of it is in use */
	if (s->hibernated)
		ndz_fs_warn(s->warn, s->warn_ctx, "swap",
			    "holds %s hibernation image; taking the whole area", s->by);
	return fn(ctx, 0, keep);
}

static void swap_close(void *h)
{
	free(h);
}

const struct ndz_fs_module ndz_fs_swap = {
	"swap", swap_probe, swap_open, swap_walk, swap_close, NULL, 0,
};

/* FreeBSD swap has no signature: never probed, only chosen by partition type. */
static int bsdswap_probe(struct ndz_io *io)
{
	(void)io;
	return 0;
}

static int bsdswap_open(struct ndz_io *io, const struct ndz_fs_opts *o, void **out,
			struct ndz_error *err)
{
	(void)o;
	(void)err;
	*out = io;
	return 0;
}

static int bsdswap_walk(void *h, ndz_extent_fn fn, void *ctx, struct ndz_fs_stats *st,
			struct ndz_error *err)
{
	struct ndz_io *io = h;

	(void)fn;
	(void)ctx;
	(void)err;
	st->fs_bytes = io->size;
	st->used_bytes = 0;
	snprintf(st->detail, sizeof(st->detail), "freebsd swap (skipped)");
	return 0;
}

static void bsdswap_close(void *h)
{
	(void)h;
}

const struct ndz_fs_module ndz_fs_bsdswap = {
	"bsdswap", bsdswap_probe, bsdswap_open, bsdswap_walk, bsdswap_close, NULL, 0,
};
