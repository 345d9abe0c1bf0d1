/*
 * frisbee --seed and --verify (issue 23): the image's content index fetched from the
 * server (lib/mcast/client) after the join, a scan thread that checks the target's
 * chunks in order (lib/codec/seed), those the server is sending first, beside the
 * network, and marks those it holds as done, so they are never asked for or written (the session asks only for chunks
 * the scan has passed while it runs); after the flush, every chunk checked again
 * past the page cache.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/seed.h"
#include "core/bits.h"
#include "core/clock.h"
#include "frisbee.h"

/*
 * After the join (and the manifest): fetch and decode the index. With a public key
 * it must be signed by it: an unsigned, forged or mismatched index is never used to
 * skip anything (a full reload, with a warning).
 */
void seed_index(struct client *c)
{
	const struct ndz_key *pub = c->pub.type != NDZ_KEY_NONE ? &c->pub : NULL;
	uint64_t max = 128 + (uint64_t)c->info.chunks * (56 + 12 * 330);
	struct ndz_error e = { 0 };
	const uint8_t *b;
	size_t len;

	if (!c->seed && !c->verify_after)
		return;
	if (ndz_client_fetch_index(c->cl, ndz_index_size_from_header, max, ndz_now_ns(),
				   &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (ndz_cdrive_run(c->drv, NDZ_CLIENT_INDEX, &c->err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c->err));
	if (ndz_client_state(c->cl) == NDZ_CLIENT_FAILED)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(ndz_client_error(c->cl)));
	b = ndz_client_index(c->cl, &len);
	if (!b) {
		cli_warn("%s serves no content index of the image (an older frisbeed, or none "
			 "beside the image): %s", c->source, c->seed ? "reloading every chunk" :
			 "nothing to verify against");
		return;
	}
	if (ndz_index_decode(b, len, pub, &c->ix, &e) < 0 ||
	    ndz_index_match(&c->ix, c->info.uuid, c->info.source_bytes, c->info.chunks,
			    &e) < 0) {
		cli_warn("the content index from %s: %s: %s", c->source, ndz_error_msg(&e),
			 c->seed ? "reloading every chunk" : "nothing to verify against");
		ndz_index_release(&c->ix);
		memset(&c->ix, 0, sizeof(c->ix));
	} else {
		c->have_index = 1;
		if (cli_verbose)
			cli_info("content index of %u chunks from %s%s", c->ix.chunks, c->source,
				 c->ix.signed_ ? ": signature good" : "");
	}
	ndz_client_index_done(c->cl, NULL);
}

/* The blocks [a, b) bytes of a chunk fall in, set in bm. */
static void set_blocks(uint8_t *bm, uint64_t a, uint64_t b)
{
	for (uint64_t k = a / NDZ_BLOCK_SIZE; k * NDZ_BLOCK_SIZE < b && k < NDZ_BLOCKS_PER_CHUNK;
	     k++)
		ndz_bit_set(bm, (unsigned)k);
}

/* Do the blocks in bm hold all of [a, b) of a chunk? */
static int has_blocks(const uint8_t *bm, uint64_t a, uint64_t b)
{
	for (uint64_t k = a / NDZ_BLOCK_SIZE; k * NDZ_BLOCK_SIZE < b; k++)
		if (k >= NDZ_BLOCKS_PER_CHUNK || !ndz_bit_test(bm, (unsigned)k))
			return 0;
	return 1;
}

/*
 * Chunk i by its pieces (one pass over its bytes, hashed on the checker's pool): 1
 * when the target holds every piece (so the chunk); else 0, and when it lacks only
 * some, the blocks of those pieces' frames and of the chunk's header (what
 * ndz_seed_patch reads) are asked for, not the whole chunk. A chunk without pieces
 * is checked whole. Or a negative code with e (a read error).
 */
static int scan_chunk(struct client *c, uint32_t i, uint8_t **lack, uint32_t *cap,
		      struct ndz_error *e)
{
	const struct ndz_index_entry *x = &c->ix.e[i];
	uint8_t bm[NDZ_BITMAP_BYTES];
	int n;

	if (x->npieces < 2)
		return ndz_seed_check(c->sd, i, e);
	if ((x->npieces + 7) / 8 > *cap) {
		uint8_t *l = realloc(*lack, (x->npieces + 7) / 8);

		if (!l)
			return ndz_seed_check(c->sd, i, e);
		*lack = l;
		*cap = (x->npieces + 7) / 8;
	}
	if ((n = ndz_seed_lacking(c->sd, i, *lack, e)) <= 0)
		return n < 0 ? n : 1;
	if ((uint32_t)n >= x->npieces)
		return 0;                      /* whole: nothing to gain by pieces */
	memset(bm, 0, sizeof(bm));
	set_blocks(bm, 0, NDZ_HDR_SIZE);
	for (uint32_t j = 0; j < x->npieces; j++)
		if (ndz_bit_test(*lack, j))
			set_blocks(bm, NDZ_HDR_SIZE + (uint64_t)x->pieces[j].coff,
				   NDZ_HDR_SIZE + (uint64_t)x->pieces[j].coff + x->pieces[j].clen);
	if (ndz_bit_count(bm) < NDZ_BLOCKS_PER_CHUNK && ndz_cdrive_want(c->drv, i, bm)) {
		c->partial++;
		c->partial_blocks += ndz_bit_count(bm);
	}
	return 0;
}

int seed_patch(struct client *c, uint32_t chunk, const uint8_t *buf, const uint8_t *blocks,
	       int *why)
{
	const struct ndz_index_entry *x = &c->ix.e[chunk];
	struct ndz_error e = { 0 };
	struct ndz_io *img = NULL;
	uint8_t *avail;
	int r;

	if (chunk >= c->ix.chunks || !c->psd || !has_blocks(blocks, 0, NDZ_HDR_SIZE))
		return NDZ_CDRIVE_PATCH_WHOLE;
	if (!(avail = calloc(x->npieces / 8 + 1, 1)))
		return NDZ_CDRIVE_PATCH_WHOLE;
	for (uint32_t j = 0; j < x->npieces; j++)
		if (has_blocks(blocks, NDZ_HDR_SIZE + (uint64_t)x->pieces[j].coff,
			       NDZ_HDR_SIZE + (uint64_t)x->pieces[j].coff + x->pieces[j].clen))
			ndz_bit_set(avail, j);
	/* (the io only reads buf) */
	r = ndz_io_open_mem((void *)(uintptr_t)buf, NDZ_CHUNK_SIZE, 0, &img, &e);
	if (r == 0)
		r = ndz_seed_patch_some(c->psd, img, 0, chunk, avail, &c->pst, &e);
	ndz_io_close(img);
	free(avail);
	if (r == 1) {
		/* written: the pipeline counts it as it counts a held one */
		if (ndz_unzip_held(c->unzip, chunk, x->first, x->last, &e) < 0) {
			ndz_error_copy(&c->serr, &e);
			return -1;
		}
		return NDZ_CDRIVE_PATCHED;
	}
	if (r >= 0)
		return NDZ_CDRIVE_PATCH_WHOLE;         /* the target is not as the scan saw */
	if (r == NDZ_ECORRUPT || r == NDZ_EMISMATCH) {
		if (cli_verbose)
			cli_warn("%s", ndz_error_msg(&e));
		*why = r;
		return NDZ_CDRIVE_PATCH_BAD;
	}
	ndz_error_copy(&c->serr, &e);
	return -1;
}

/*
 * Chunk i decided, if it is still to come: held (written as it is), lacking some
 * pieces (their blocks wanted) or lacking all. 0, or -1: the scan stops (the load is
 * stopping or failed, or a read error: the rest is fetched).
 */
static int decide(struct client *c, uint32_t i, uint8_t **lack, uint32_t *cap)
{
	struct ndz_error e = { 0 };
	int needs, r;

	if ((needs = ndz_cdrive_needs(c->drv, i)) < 0)
		return -1;     /* stopping, or failed */
	if (!needs)
		return 0;      /* come from the server already (or coming whole) */
	r = scan_chunk(c, i, lack, cap, &e);
	if (r < 0) {
		cli_warn("seed scan of %s: %s; fetching the rest", c->target_path,
			 ndz_error_msg(&e));
		return -1;
	}
	/* not taken when it came meanwhile: the network's copy is written */
	if (r && ndz_cdrive_have(c->drv, i) &&
	    ndz_unzip_held(c->unzip, i, c->ix.e[i].first, c->ix.e[i].last, &e) < 0) {
		ndz_error_copy(&c->serr, &e);
		ndz_cdrive_fail(c->drv);
		return -1;
	}
	return 0;
}

/*
 * The scan: each chunk still to come, in order, checked on the target; but a chunk
 * past the front that others' blocks came for first is decided at once, out of
 * order (ndz_cdrive_scan_next), so that those blocks are kept when the target lacks
 * them rather than dropped and sent again (issue 32). Memory: a bit per chunk here
 * and in the session.
 */
static void *scan(void *arg)
{
	struct client *c = arg;
	uint8_t *lack = NULL, *early = calloc(c->info.chunks / 8 + 1, 1);
	uint32_t cap = 0, h;

	for (uint32_t i = 0; i < c->info.chunks; i++) {
		/* those before i are decided: the session may ask for them */
		ndz_cdrive_scan(c->drv, i);
		/* (without the bitmap, none out of order: each only once) */
		while (early && (h = ndz_cdrive_scan_next(c->drv)) != UINT32_MAX &&
		       h > i && !ndz_bit_test(early, h)) {
			ndz_bit_set(early, h);
			if (decide(c, h, &lack, &cap) < 0)
				goto out;
			ndz_cdrive_scanned(c->drv, h);
		}
		if (early && ndz_bit_test(early, i))
			continue;
		if (decide(c, i, &lack, &cap) < 0)
			break;
	}
out:
	ndz_cdrive_scan(c->drv, UINT32_MAX);   /* every chunk may come now */
	free(lack);
	free(early);
	return NULL;
}

/* After the target is opened, before the session starts: the scan begins. */
void seed_start(struct client *c)
{
	struct ndz_seed_opts so = { .zero_fill = c->zero_fill };
	struct ndz_error e = { 0 };

	if (!c->seed || !c->have_index || c->created)
		return;                /* (a file just made holds nothing of the image) */
	if (ndz_seed_create(c->target, &c->ix, &so, &c->sd, &e) < 0 ||
	    ndz_seed_create(c->target, &c->ix, &so, &c->psd, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	ndz_cdrive_scan(c->drv, 0);   /* no request runs ahead of the scan */
	if (pthread_create(&c->scan_thread, NULL, scan, c))
		cli_die(EXIT_FAIL, "cannot start a thread");
	c->scanning = 1;
}

/* The scan ends (the driver stopped: at once) before the pipeline is finished. */
void seed_stop(struct client *c)
{
	if (c->scanning)
		pthread_join(c->scan_thread, NULL);
	c->scanning = 0;
	ndz_seed_free(c->sd);
	c->sd = NULL;
	ndz_seed_free(c->psd);     /* (the checking thread has stopped) */
	c->psd = NULL;
}

/*
 * --verify, after the flush: every chunk read back past the page cache and checked
 * against the index. 0, or -1 with c->err saying how many differ.
 */
int seed_verify(struct client *c)
{
	struct ndz_seed_opts so = { .zero_fill = c->zero_fill, .direct = 1 };

	if (!c->verify_after)
		return 0;
	if (!c->have_index) {
		ndz_error_set(&c->err, NDZ_EVERIFY, 0, "--verify: no content index of the "
			      "image from %s", c->source);
		return -1;
	}
	/* every chunk read back past the page cache: the one verdict (codec/seed.h) */
	if (ndz_seed_holds(c->target, &c->ix, &so, NULL, &c->err) < 0)
		return -1;
	if (cli_verbose)
		cli_info("verified: %s holds every chunk of the image", c->target_path);
	return 0;
}

void seed_free(struct client *c)
{
	ndz_index_release(&c->ix);
}
