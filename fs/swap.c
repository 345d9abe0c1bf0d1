/* Swap areas: Linux swap keeps its header page only (a hibernation image is
 * kept whole); FreeBSD swap, known only from its partition type, is skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fs.h"

static const unsigned page_sizes[] = { 4096, 8192, 16384, 65536 };

struct swap {
	struct ndz_io *io;
	unsigned page;
	int hibernated;
};

/* Returns 1 normal swap, 2 swap holding a hibernation image, 0 neither. */
static int swap_sig(struct ndz_io *io, unsigned *page)
{
	static const char *const hib[] = { "S1SUSPEND", "S2SUSPEND", "ULSUSPEND",
					   "LINHIB0001" };
	char sig[10];

	for (size_t i = 0; i < sizeof(page_sizes) / sizeof(page_sizes[0]); i++) {
		unsigned ps = page_sizes[i];

		if (io->size < 2ull * ps)
			break;
		if (ndz_io_read_full(io, sig, sizeof(sig), ps - sizeof(sig), NULL) < 0)
			return 0;
		*page = ps;
		if (!memcmp(sig, "SWAPSPACE2", 10) || !memcmp(sig, "SWAP-SPACE", 10))
			return 1;
		for (size_t j = 0; j < sizeof(hib) / sizeof(hib[0]); j++)
			if (!memcmp(sig, hib[j], strlen(hib[j])))
				return 2;
	}
	return 0;
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

	(void)o;
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
	s->hibernated = kind == 2;
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
	snprintf(st->detail, sizeof(st->detail), "linux swap%s",
		 s->hibernated ? " holding a hibernation image (kept whole)" : "");
	return fn(ctx, 0, keep);
}

static void swap_close(void *h)
{
	free(h);
}

const struct ndz_fs_module ndz_fs_swap = {
	"swap", swap_probe, swap_open, swap_walk, swap_close, NULL,
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
	"bsdswap", bsdswap_probe, bsdswap_open, bsdswap_walk, bsdswap_close, NULL,
};
