/*
 * A whole image: the rules its chunks obey together, whatever order they arrive in,
 * and the reading of a stored image (a file, or a stream such as stdin) chunk by
 * chunk. The restorer, the server and anything that receives images stand on it.
 */
#ifndef NDZ_IMAGE_H
#define NDZ_IMAGE_H

#include <stdint.h>

#include "err.h"
#include "format.h"
#include "io.h"

struct ndz_image;

/*
 * ndz_image_create - an empty image: nothing expected, nothing added. 0 with *out
 * (free with ndz_image_free), or NDZ_ENOMEM with e set.
 */
int ndz_image_create(struct ndz_image **out, struct ndz_error *e);
/* ndz_image_free - accepts NULL. */
void ndz_image_free(struct ndz_image *im);

/*
 * ndz_image_expect - what is known before any chunk: the image has chunks chunks
 * (0: not known) and, when uuid is not NULL, that UUID (16 bytes, copied).
 */
void ndz_image_expect(struct ndz_image *im, uint32_t chunks, const uint8_t *uuid);

/*
 * ndz_image_add - chunk h takes its place in the image. It must belong to the same
 * image as every chunk before it (UUID, source size, kind, partition) and to the
 * expected UUID; its index must be new, below the expected count and not past the
 * chunk flagged LAST (of which there is one, the highest); and it must chain with
 * the neighbours added so far: chunk 0 starts at sector 0, every other chunk where
 * the one before it ends (a neighbour that comes later is checked then). Returns 0,
 * or NDZ_EMISMATCH, NDZ_EDUP, NDZ_EREGION, NDZ_ERANGE (an index past the image)
 * or NDZ_ENOMEM, with e naming the chunk; the image is unchanged then.
 */
int ndz_image_add(struct ndz_image *im, const struct ndz_chunk_hdr *h, struct ndz_error *e);

/*
 * ndz_image_complete - every chunk from 0 to the LAST one was added, and it is
 * the expected count. 0, or NDZ_EMISSING naming the first chunk missing.
 */
int ndz_image_complete(const struct ndz_image *im, struct ndz_error *e);

/*
 * ndz_image_held - chunk i, of [first, last) sectors, is not added but already held
 * by the target (a seeded restore, issue 23): it counts for ndz_image_complete, not
 * for ndz_image_added. The expected count must be set and i below it. 0, or
 * NDZ_ERANGE, NDZ_EDUP or NDZ_ENOMEM with e naming the chunk.
 */
int ndz_image_held(struct ndz_image *im, uint32_t i, uint64_t first, uint64_t last,
		   struct ndz_error *e);

/* ndz_image_added - how many chunks were added. */
uint32_t ndz_image_added(const struct ndz_image *im);

/*
 * ndz_image_fits - 0 when a target of target_bytes can hold the image h belongs
 * to, else NDZ_ETOOSMALL with e naming target_name and both sizes.
 */
int ndz_image_fits(const struct ndz_chunk_hdr *h, const char *target_name,
		   uint64_t target_bytes, struct ndz_error *e);

/*
 * Reading a stored image: its chunks one after another from a file or a stream.
 * A file is looked at whole before anything is read: a whole number of chunks, the
 * first and last headers sound and of one image, the last flagged LAST with the
 * index its place says. A stream can only be judged as it goes: a short chunk is
 * truncated, input after the LAST chunk is an error, and so is an end before it.
 */
struct ndz_image_reader;

/*
 * ndz_image_reader_open - start reading in (not owned; it must outlive the reader),
 * a regular file or block device read by offset, or a stream (io->is_stream).
 * Reads chunk 0's header (for a stream: the whole of chunk 0, handed out by the
 * first ndz_image_reader_next). Returns 0 and *out, or a negative code with e
 * naming in and the chunk.
 */
int ndz_image_reader_open(struct ndz_io *in, struct ndz_image_reader **out,
			  struct ndz_error *e);
/* ndz_image_reader_free - accepts NULL; does not close the io. */
void ndz_image_reader_free(struct ndz_image_reader *r);

/* ndz_image_reader_first - chunk 0's header: the image's identity and sizes. */
const struct ndz_chunk_hdr *ndz_image_reader_first(const struct ndz_image_reader *r);

/* ndz_image_reader_chunks - the image's chunk count for a file; 0 for a stream. */
uint32_t ndz_image_reader_chunks(const struct ndz_image_reader *r);

/*
 * ndz_image_reader_next - the next chunk into buf (NDZ_CHUNK_SIZE bytes) with its
 * header decoded into h (data checksum not checked). Returns 1 with a chunk, 0 at
 * the end of a sound image (the chunk before was flagged LAST and nothing follows),
 * or a negative code with e naming the input and the chunk: NDZ_ETRUNC, a header's
 * own code, NDZ_EMISSING (the input ends before the LAST chunk), NDZ_EHEADER (data
 * after it), NDZ_EIO.
 */
int ndz_image_reader_next(struct ndz_image_reader *r, uint8_t *buf, struct ndz_chunk_hdr *h,
			  struct ndz_error *e);

/*
 * ndz_image_probe_file - whether the file path starts with a chunk header: ours
 * (decoded and checked) or the original Frisbee format's. The rest is not read.
 * 0, or a negative code with e saying "PATH: ..." (cannot be opened or read, or
 * "not an image" and why).
 */
int ndz_image_probe_file(const char *path, struct ndz_error *e);

/*
 * The stored-image walk: a stored image read chunk by chunk in order, the one loop
 * of every reader of a whole image (the signer, the checker, the restorer, the
 * master's upload). Flags add what a reader needs beyond ndz_image_reader:
 */
struct ndz_image_walk;

#define NDZ_WALK_ORDER 0x1u            /* each chunk's index must be its place */
#define NDZ_WALK_RULES 0x2u            /* the image's rules: ndz_image_add on each chunk,
					  ndz_image_complete at the end */

/*
 * ndz_image_walk_open - ndz_image_reader_open on in (not owned; it must outlive the
 * walk) with flags (NDZ_WALK_*). 0 and *out (free it), or a negative code with e
 * naming in.
 */
int ndz_image_walk_open(struct ndz_io *in, unsigned flags, struct ndz_image_walk **out,
			struct ndz_error *e);
/* ndz_image_walk_free - accepts NULL; does not close the io. */
void ndz_image_walk_free(struct ndz_image_walk *w);
/* ndz_image_walk_first - chunk 0's header (ndz_image_reader_first). */
const struct ndz_chunk_hdr *ndz_image_walk_first(const struct ndz_image_walk *w);
/* ndz_image_walk_chunks - the chunk count of a file; 0 for a stream. */
uint32_t ndz_image_walk_chunks(const struct ndz_image_walk *w);
/* ndz_image_walk_count - how many chunks ndz_image_walk_next handed out. */
uint32_t ndz_image_walk_count(const struct ndz_image_walk *w);

/*
 * ndz_image_walk_next - the next chunk into buf (NDZ_CHUNK_SIZE bytes), its header
 * decoded into h (the data checksum is the caller's to check). Returns 1 with a
 * chunk; 0 at the end of a sound image (with NDZ_WALK_RULES: a complete one); or
 * a negative code with e naming in and the chunk: a code of ndz_image_reader_next,
 * NDZ_EREGION (NDZ_WALK_ORDER: "found at place P: chunks out of order"), or one of
 * ndz_image_add or ndz_image_complete.
 */
int ndz_image_walk_next(struct ndz_image_walk *w, uint8_t *buf, struct ndz_chunk_hdr *h,
			struct ndz_error *e);

#endif
