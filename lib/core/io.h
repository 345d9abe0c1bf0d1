/*
 * Block I/O through a small function table (file or block device, memory,
 * fault-injecting), so fs/ modules and the writer are testable without disks.
 */
#ifndef NDZ_IO_H
#define NDZ_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

struct ndz_io;

/*
 * A backend. Each call that fails returns a negative NDZ_E* code and, when a system
 * call failed, stores its errno in *sys (sys may be NULL); the ndz_io_* functions
 * below turn that into a message. Nothing is kept in the io, so calls on one io
 * from several threads (reads of a source) need no lock for their errors.
 */
struct ndz_io_ops {
	/* Like pread/pwrite: bytes moved, 0 at end, or a negative NDZ_E* code. */
	ssize_t (*pread)(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys);
	ssize_t (*pwrite)(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			  int *sys);
	/* Make [off, off+len) read back as zeros (hole punch or zero writes). */
	int (*zero)(struct ndz_io *io, uint64_t off, uint64_t len, int *sys);
	/* Flush written data to stable storage. 0, NDZ_EIO or NDZ_EGONE. */
	int (*flush)(struct ndz_io *io, int *sys);
	/* Release resources. */
	void (*close)(struct ndz_io *io);
	/* Tell the device [off, off+len) is unused; NULL: it cannot be told. */
	int (*discard)(struct ndz_io *io, uint64_t off, uint64_t len, int *sys);
	/* Drop cached pages of [off, off+len), so that the next read comes from the
	   disk; advisory, NULL: nothing cached that it could drop. */
	void (*drop_cache)(struct ndz_io *io, uint64_t off, uint64_t len);
};

struct ndz_io {
	const struct ndz_io_ops *ops;
	uint64_t size;                 /* bytes (device size for block devices) */
	int is_blockdev;
	int is_regular;
	int is_stream;                 /* sequential only (a pipe, stdin, stdout) */
	const char *unsynced;          /* after a flush: why nothing was synced ("a pipe"),
					  NULL when it was */
	char *name;                    /* for messages */
	void *priv;
};

/* ndz_io_open_file flags */
#define NDZ_IO_READ    0x0
#define NDZ_IO_WRITE   0x1             /* open read-write */
#define NDZ_IO_CREATE  0x2             /* create a regular file if missing */
#define NDZ_IO_SEQUENTIAL 0x4          /* will be read from start to end (read-ahead hint) */

/*
 * ndz_io_open_file - open a regular file or block device (size via BLKGETSIZE64).
 * With NDZ_IO_CREATE a missing file is created empty (size 0).
 * Returns 0 and *out, or a negative code (NDZ_ENOENT, NDZ_ENOTSUP for anything
 * but a file or block device, NDZ_EIO, NDZ_ENOMEM) with e naming path.
 */
int ndz_io_open_file(const char *path, int flags, struct ndz_io **out, struct ndz_error *e);

/*
 * Direct writes: a file or block device's writes past the page cache (O_DIRECT), so
 * a restore does not pay for a copy into the cache and its writeback later. Reads
 * stay buffered (they see every write: the kernel writes back and drops the cached
 * pages a direct write covers), and so do the edges of a write that are not on the
 * target's direct-I/O block (its logical block size); an aligned piece from memory
 * that is not aligned goes through an aligned copy. The flush (fsync) is as before.
 */

/* How ndz_io_direct_piece says a piece goes. */
enum ndz_direct_how {
	NDZ_DIRECT_BUFFERED,           /* through the page cache: an unaligned edge */
	NDZ_DIRECT_STRAIGHT,           /* O_DIRECT from the caller's memory */
	NDZ_DIRECT_BOUNCE,             /* O_DIRECT through an aligned copy */
};

/*
 * ndz_io_direct_piece - the first piece of a write of len (> 0) bytes at off from
 * buf to a target whose direct writes need offsets and lengths in multiples of
 * off_align and memory at multiples of mem_align (both at least 1): its length,
 * and in *how how it goes. An offset off the block is written buffered up to the
 * next block boundary; less than a block left, buffered too; else the whole blocks,
 * straight from buf when it is aligned, else at most bounce bytes (a multiple of
 * off_align, at least one block) through the copy.
 */
size_t ndz_io_direct_piece(uint64_t off, size_t len, const void *buf, uint32_t off_align,
			   uint32_t mem_align, size_t bounce, enum ndz_direct_how *how);

/* What a target's direct writes did (ndz_io_direct_stats). */
struct ndz_io_direct_stats {
	int on;                        /* writes go O_DIRECT now */
	uint32_t off_align, mem_align; /* their alignment, when on (or was) */
	uint64_t direct;               /* bytes written O_DIRECT */
	uint64_t bounced;              /* of direct, bytes copied to aligned memory first */
	uint64_t buffered;             /* bytes written through the page cache */
	const char *off_why;           /* when off: why ("the file system refuses O_DIRECT") */
};

/*
 * ndz_io_direct - from now on, write io (a file or block device, or a window or fault
 * wrapper onto one) past the page cache where it allows. Returns 1 when on; 0 when
 * the target cannot (not a file or device, its file system refuses O_DIRECT: EINVAL,
 * as ramfs does), and the writes stay buffered (ndz_io_direct_stats says why); or
 * NDZ_EIO or NDZ_ENOMEM with e set. A direct write that the target refuses with
 * EINVAL later turns direct writes off and is written buffered instead.
 */
int ndz_io_direct(struct ndz_io *io, struct ndz_error *e);

/* ndz_io_is_direct - 1 when io's writes go O_DIRECT now (through views too), else 0. */
int ndz_io_is_direct(const struct ndz_io *io);

/* ndz_io_direct_stats - io's direct-write counts (all 0 for an io without them). */
void ndz_io_direct_stats(const struct ndz_io *io, struct ndz_io_direct_stats *st);

/*
 * ndz_io_direct_describe - the counts as a phrase for a summary line, in buf (len
 * bytes): "writes: N bytes direct (B-byte blocks; C of them copied to align), M
 * through the page cache", or "writes through the page cache (WHY)". Returns buf.
 */
char *ndz_io_direct_describe(const struct ndz_io *io, char *buf, size_t len);

/*
 * ndz_io_open_target - open a restore target read-write; when the path does not
 * exist, create a regular file of size bytes (sparse: it reads as zeros, and
 * *created is set to 1, else 0). The null device (/dev/null, 1:3) is taken too, as
 * a sink of unbounded size that reads as empty (a benchmark's target). Returns 0 and *out, or a negative code with e
 * set; *out is NULL then and nothing is left behind.
 */
int ndz_io_open_target(const char *path, uint64_t size, int *created, struct ndz_io **out,
		       struct ndz_error *e);

/*
 * ndz_io_open_stream - an io over a file descriptor read or written in order from
 * its current position (a pipe, stdin, stdout): reads and writes must start where
 * the last one ended (else NDZ_ENOTSUP); size is 0. The descriptor stays the
 * caller's (not closed). name is for messages. 0, or NDZ_ENOMEM with e set.
 */
int ndz_io_open_stream(int fd, const char *name, struct ndz_io **out, struct ndz_error *e);

/*
 * ndz_io_open_mem - an io over buf[0..len). Writes beyond len fail with NDZ_EIO.
 * buf stays owned by the caller and must outlive the io. 0, or NDZ_ENOMEM with e set.
 */
int ndz_io_open_mem(void *buf, size_t len, int writable, struct ndz_io **out,
		    struct ndz_error *e);

/*
 * ndz_io_open_fault - wrap inner: the nth read or write call (1-based; 0 never)
 * fails with NDZ_EIO, and writes outside [wlo, whi) fail too (a guard for
 * tests that nothing is written outside the target's regions). Takes ownership
 * of inner (on success only). 0, or NDZ_ENOMEM with e set.
 */
int ndz_io_open_fault(struct ndz_io *inner, unsigned fail_read_nth, unsigned fail_write_nth,
		      uint64_t wlo, uint64_t whi, struct ndz_io **out, struct ndz_error *e);

/*
 * ndz_io_open_sub - a view of inner's [offset, offset+len): a partition of a disk.
 * Does not own inner, which must outlive the view. 0, NDZ_ERANGE (the window is
 * not inside inner) or NDZ_ENOMEM, with e set.
 */
int ndz_io_open_sub(struct ndz_io *inner, uint64_t offset, uint64_t len, struct ndz_io **out,
		    struct ndz_error *e);

struct ndz_ranges;

/*
 * ndz_io_open_zeroed - a read-only view of inner in which the sectors of zero
 * (sorted and disjoint, lib/ranges.h) read as zeros: an image holds blocks the
 * filesystem never reads as they are (a clean journal's body) as zeros. Does not
 * own inner or zero, which must outlive the view. 0, or NDZ_ENOMEM with e set.
 */
int ndz_io_open_zeroed(struct ndz_io *inner, const struct ndz_ranges *zero, struct ndz_io **out,
		       struct ndz_error *e);

/* ndz_io_close - close and free; accepts NULL. */
void ndz_io_close(struct ndz_io *io);

/*
 * The operations below fill e (may be NULL; first error wins) when they fail, as
 * "NAME: what: reason": the system's reason when a system call failed, else the
 * code's message. They keep nothing in the io: any number of threads may read one
 * io at once (a file, a device, a memory or window view), each with its own e.
 */

/*
 * ndz_io_read_full - read exactly len bytes at off. Returns 0, NDZ_ESHORTREAD when
 * the end comes first (*got says how many were read if got is not NULL; e says
 * "NAME: ends at byte N"), or NDZ_EIO ("NAME: read error at byte N: reason").
 */
int ndz_io_read_full(struct ndz_io *io, void *buf, size_t len, uint64_t off, size_t *got,
		     struct ndz_error *e);

/*
 * ndz_io_write_full - write exactly len bytes at off. Returns 0 or NDZ_EIO ("NAME:
 * write error at byte N: reason").
 */
int ndz_io_write_full(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
		      struct ndz_error *e);

/* ndz_io_zero - make [off, off+len) read back as zeros. 0 or NDZ_EIO. */
int ndz_io_zero(struct ndz_io *io, uint64_t off, uint64_t len, struct ndz_error *e);

/*
 * ndz_io_discard - tell the target [off, off+len) holds nothing of value (a solid
 * state disk can then erase it in the background): BLKDISCARD on a block device,
 * a punched hole in a regular file. What it reads back afterwards is not promised
 * (a file's hole reads as zeros, a device's discarded blocks may not). A target
 * that cannot discard is left as it is. 0 or NDZ_EIO.
 */
int ndz_io_discard(struct ndz_io *io, uint64_t off, uint64_t len, struct ndz_error *e);

/*
 * ndz_io_drop_cache - drop the page cache's clean pages of [off, off+len) (a file or
 * block device, and views of one), so that a read after it comes from the disk:
 * what verify-after-write needs. Advisory: an io without a cache is left alone;
 * dirty pages stay until flushed.
 */
void ndz_io_drop_cache(struct ndz_io *io, uint64_t off, uint64_t len);

/*
 * ndz_io_flush - written data to stable storage. 0, NDZ_EIO ("NAME: flush failed:
 * reason": any failure of a file or block device, a read-only file system
 * included) or NDZ_EGONE (a regular file removed while being written). A pipe,
 * socket or character device cannot be synced: 0, and io->unsynced says what it is.
 */
int ndz_io_flush(struct ndz_io *io, struct ndz_error *e);

/*
 * ndz_io_set_size - grow or shrink a regular file: 0, NDZ_EIO or NDZ_ENOTSUP
 * (not a regular file).
 */
int ndz_io_set_size(struct ndz_io *io, uint64_t size, struct ndz_error *e);

#endif
