/*
 * sitefetch: one image from a master by unicast TCP, the way a site master fetches it
 * (doc/PROTOCOL.md, "Site fetch": its index, then its chunks, 16 a request), into a
 * file: bench/sites.sh's stand-in for a client served by unicast (frisbee has no
 * unicast mode). Prints the bytes fetched.
 *   sitefetch MASTER[:PORT] NAME OUT
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/format.h"
#include "ctl/sitecall.h"
#include "trust/index.h"

struct out {
	int fd;
	uint32_t first;
	uint64_t bytes;
};

static int each(void *arg, uint32_t k, const uint8_t *chunk)
{
	struct out *o = arg;

	if (pwrite(o->fd, chunk, NDZ_CHUNK_SIZE, (off_t)(o->first + k) * NDZ_CHUNK_SIZE) !=
	    NDZ_CHUNK_SIZE)
		return NDZ_EIO;
	o->bytes += NDZ_CHUNK_SIZE;
	return 0;
}

int main(int argc, char **argv)
{
	struct ndz_site_link l;
	struct ndz_site_req r = { .id = 1, .what = NDZ_SITE_INDEX };
	struct ndz_index ix = { 0 };
	struct ndz_error e = { 0 };
	struct out o = { -1, 0, 0 };
	uint8_t *b = NULL;
	size_t bl = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: sitefetch MASTER[:PORT] NAME OUT\n");
		return 2;
	}
	ndz_site_link_init(&l, argv[1], 30);
	snprintf(r.name, sizeof(r.name), "%s", argv[2]);
	if (ndz_site_fetch(&l, &r, &b, &bl, &e) != 0 || ndz_index_decode(b, bl, NULL, &ix, &e) != 0)
		goto fail;
	o.bytes = bl;
	if ((o.fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
		perror(argv[3]);
		return 1;
	}
	r.what = NDZ_SITE_CHUNKS_OF;
	for (uint32_t i = 0; i < ix.chunks; i += NDZ_SITE_CHUNKS) {
		r.id++;
		r.first = o.first = i;
		r.count = ix.chunks - i < NDZ_SITE_CHUNKS ? ix.chunks - i : NDZ_SITE_CHUNKS;
		if (ndz_site_fetch_chunks(&l, &r, each, &o, &e) != 0)
			goto fail;
	}
	if (close(o.fd) != 0) {
		perror(argv[3]);
		return 1;
	}
	printf("%llu\n", (unsigned long long)o.bytes);
	ndz_site_link_close(&l);
	ndz_index_release(&ix);
	free(b);
	return 0;
fail:
	fprintf(stderr, "sitefetch: %s\n", ndz_error_msg(&e));
	return 1;
}
