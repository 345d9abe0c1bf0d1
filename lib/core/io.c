/* File, block-device, memory and fault-injecting implementations of struct ndz_io. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "err.h"
#include "format.h"
#include "io.h"
#include "ranges.h"

static struct ndz_io *io_new(const struct ndz_io_ops *ops, const char *name)
{
	struct ndz_io *io = calloc(1, sizeof(*io));

	if (!io)
		return NULL;
	io->ops = ops;
	io->name = strdup(name ? name : "");
	if (!io->name) {
		free(io);
		return NULL;
	}
	return io;
}

/* A system call failed with errno err: NDZ_EIO, and *sys says why (sys may be NULL). */
static int sys_fail(int *sys, int err)
{
	if (sys)
		*sys = err;
	return NDZ_EIO;
}

/*
 * io_fail - record in e that a call on io failed with code rc doing what (printf-
 * style): "NAME: what: reason", the reason being strerror(sys) when a system call
 * failed, else the code's message. Returns rc.
 */
static int io_fail(struct ndz_io *io, int rc, int sys, struct ndz_error *e, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int io_fail(struct ndz_io *io, int rc, int sys, struct ndz_error *e, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	if (!e || e->code)
		return rc;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (sys)
		return ndz_error_set(e, rc, sys, "%s: %s", io->name, what);
	return ndz_error_set(e, rc, 0, "%s: %s: %s", io->name, what, ndz_strerror(rc));
}

/* ---- files and block devices ---- */

/* Bounds of a backend's own extent, shared by the memory and window backends. */

/* in_bounds - [off, off + len) lies within io. */
static int in_bounds(const struct ndz_io *io, uint64_t off, uint64_t len)
{
	return off <= io->size && len <= io->size - off;
}

/* clamp_read - len cut to what io holds from off on (0 at or past its end). */
static size_t clamp_read(const struct ndz_io *io, uint64_t off, size_t len)
{
	if (off >= io->size)
		return 0;
	return len > io->size - off ? (size_t)(io->size - off) : len;
}

struct file_priv {
	int fd;
	/* direct writes (ndz_io_direct): dfd is an O_DIRECT descriptor of the same file */
	int dfd;                       /* -1: none */
	int direct;                    /* writes go through dfd (atomic: EINVAL turns it off) */
	uint32_t off_align, mem_align;
	uint64_t ndirect, nbounced, nbuffered;   /* bytes, counted atomically */
	const char *off_why;
	pthread_mutex_t bounce_lock;
	uint8_t *bounce;               /* DIRECT_BOUNCE bytes, made on first need */
};

#define DIRECT_BOUNCE (1u << 20)

static ssize_t file_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	struct file_priv *p = io->priv;
	ssize_t n;

	/* A hole in a sparse file reads as zeros: skip the copy through the page cache. */
	if (io->is_regular && off < io->size) {
		off_t data = lseek(p->fd, (off_t)off, SEEK_DATA);
		struct stat st;

		if (len > io->size - off)
			len = (size_t)(io->size - off);
		/*
		 * ENXIO: no data from off to the end, or off is past the end. The size
		 * cached at open may be stale (a file cut while being read): past the
		 * real end comes a short read, not zeros.
		 */
		if (data < 0 && errno == ENXIO) {
			if (fstat(p->fd, &st) < 0)
				return sys_fail(sys, errno);
			if ((uint64_t)st.st_size <= off)
				return 0;
			if ((uint64_t)st.st_size - off < len)
				len = (size_t)((uint64_t)st.st_size - off);
			memset(buf, 0, len);
			return (ssize_t)len;
		}
		if (data >= 0 && (uint64_t)data >= off + len) {
			memset(buf, 0, len);
			return (ssize_t)len;
		}
	}

	do
		n = pread(p->fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? sys_fail(sys, errno) : n;
}

size_t ndz_io_direct_piece(uint64_t off, size_t len, const void *buf, uint32_t off_align,
			   uint32_t mem_align, size_t bounce, enum ndz_direct_how *how)
{
	uint64_t head = off % off_align;
	size_t n;

	if (head) {
		*how = NDZ_DIRECT_BUFFERED;
		return off_align - head < len ? (size_t)(off_align - head) : len;
	}
	if (len < off_align) {
		*how = NDZ_DIRECT_BUFFERED;
		return len;
	}
	n = len - len % off_align;
	if ((uintptr_t)buf % mem_align == 0) {
		*how = NDZ_DIRECT_STRAIGHT;
		return n;
	}
	*how = NDZ_DIRECT_BOUNCE;
	bounce -= bounce % off_align;
	return n < bounce ? n : bounce;
}

/* pwrite(2) retried on EINTR: bytes written, or -1 with errno. */
static ssize_t pwrite_fd(int fd, const void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	do
		n = pwrite(fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n;
}

/*
 * A direct write's first piece: bytes written, -1 with errno, or -2 when the target
 * refused it (EINVAL): direct writes are off then, and the caller writes buffered.
 */
static ssize_t direct_pwrite(struct file_priv *p, const void *buf, size_t len, uint64_t off)
{
	enum ndz_direct_how how;
	size_t n = ndz_io_direct_piece(off, len, buf, p->off_align, p->mem_align, DIRECT_BOUNCE,
				       &how);
	ssize_t w;

	if (how == NDZ_DIRECT_BUFFERED) {
		w = pwrite_fd(p->fd, buf, n, off);
		if (w > 0)
			__atomic_add_fetch(&p->nbuffered, (uint64_t)w, __ATOMIC_RELAXED);
		return w;
	}
	if (how == NDZ_DIRECT_STRAIGHT) {
		w = pwrite_fd(p->dfd, buf, n, off);
	} else {
		pthread_mutex_lock(&p->bounce_lock);
		if (!p->bounce && posix_memalign((void **)&p->bounce,
						 p->mem_align > 4096 ? p->mem_align : 4096,
						 DIRECT_BOUNCE) != 0)
			p->bounce = NULL;
		if (!p->bounce) {
			pthread_mutex_unlock(&p->bounce_lock);
			errno = ENOMEM;
			return -1;
		}
		memcpy(p->bounce, buf, n);
		w = pwrite_fd(p->dfd, p->bounce, n, off);
		pthread_mutex_unlock(&p->bounce_lock);
		if (w > 0)
			__atomic_add_fetch(&p->nbounced, (uint64_t)w, __ATOMIC_RELAXED);
	}
	if (w < 0 && errno == EINVAL) {
		__atomic_store_n(&p->direct, 0, __ATOMIC_RELAXED);
		p->off_why = "the target refused a direct write (EINVAL)";
		return -2;
	}
	if (w > 0)
		__atomic_add_fetch(&p->ndirect, (uint64_t)w, __ATOMIC_RELAXED);
	return w;
}

static ssize_t file_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			    int *sys)
{
	struct file_priv *p = io->priv;
	ssize_t n = -2;

	if (__atomic_load_n(&p->direct, __ATOMIC_RELAXED))
		n = direct_pwrite(p, buf, len, off);
	if (n == -2) {
		n = pwrite_fd(p->fd, buf, len, off);
		if (n > 0)
			__atomic_add_fetch(&p->nbuffered, (uint64_t)n, __ATOMIC_RELAXED);
	}
	return n < 0 ? sys_fail(sys, errno) : n;
}

/* write_all - write len bytes at off through the backend; 0 or a negative code. */
static int write_all(struct ndz_io *io, const void *buf, size_t len, uint64_t off, int *sys)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = io->ops->pwrite(io, (const uint8_t *)buf + done, len - done, off + done,
					    sys);

		if (n <= 0)
			return n < 0 ? (int)n : NDZ_EIO;
		done += (size_t)n;
	}
	return 0;
}

static int zero_by_writing(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	/* aligned, so that a direct write takes them as they are */
	static const uint8_t zeros[65536] __attribute__((aligned(4096)));

	while (len) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		int rc = write_all(io, zeros, n, off, sys);

		if (rc < 0)
			return rc;
		off += n;
		len -= n;
	}
	return 0;
}

static int file_zero(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	struct file_priv *p = io->priv;

	if (len == 0)
		return 0;
	if (io->is_regular) {
		struct stat st;

		/*
		 * A punched hole reads back as zeros and costs no writes. It does not
		 * grow the file, so extend it as writing zeros would.
		 */
		if (fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			      (off_t)len) == 0) {
			if (fstat(p->fd, &st) == 0 &&
			    ((uint64_t)st.st_size >= off + len ||
			     ftruncate(p->fd, (off_t)(off + len)) == 0))
				return 0;
			return sys_fail(sys, errno);
		}
	} else if (io->is_blockdev) {
		uint64_t range[2] = { off, len };

		/* BLKZEROOUT lets the device zero without a data transfer. */
		if ((off | len) % 512 == 0 && ioctl(p->fd, BLKZEROOUT, range) == 0)
			return 0;
	}
	return zero_by_writing(io, off, len, sys);
}

static int file_discard(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	struct file_priv *p = io->priv;
	uint64_t range[2] = { off, len };

	if (io->is_regular)
		return file_zero(io, off, len, sys);
	/* a device that cannot discard (EOPNOTSUPP) is left as it is */
	if (len && io->is_blockdev && (off | len) % 512 == 0 &&
	    ioctl(p->fd, BLKDISCARD, range) != 0 && errno != EOPNOTSUPP && errno != ENOTTY)
		return sys_fail(sys, errno);
	return 0;
}

/*
 * fsync fd. Only what cannot hold data (a pipe, a socket, a character device such
 * as a terminal) is not synced, and io->unsynced says so; on a file or a block
 * device every failure is one (EROFS: the file system turned read-only under us,
 * and what was written may be lost). A regular file unlinked meanwhile holds
 * nothing anyone can read again: that fails too.
 */
static int sync_fd(struct ndz_io *io, int fd, int *sys)
{
	struct stat st;

	io->unsynced = NULL;
	if (fstat(fd, &st) < 0)
		return sys_fail(sys, errno);
	if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode)) {
		io->unsynced = S_ISFIFO(st.st_mode) ? "a pipe" :
			       S_ISSOCK(st.st_mode) ? "a socket" : "a character device";
		return 0;
	}
	if (fsync(fd) < 0)
		return sys_fail(sys, errno);
	if (S_ISREG(st.st_mode) && (fstat(fd, &st) < 0 || st.st_nlink == 0)) {
		return NDZ_EGONE;
	}
	return 0;
}

static int file_flush(struct ndz_io *io, int *sys)
{
	struct file_priv *p = io->priv;

	return sync_fd(io, p->fd, sys);
}

static void file_close(struct ndz_io *io)
{
	struct file_priv *p = io->priv;

	if (p->fd > 2)
		close(p->fd);
	if (p->dfd >= 0)
		close(p->dfd);
	pthread_mutex_destroy(&p->bounce_lock);
	free(p->bounce);
	free(p);
}

static void file_drop_cache(struct ndz_io *io, uint64_t off, uint64_t len)
{
	struct file_priv *p = io->priv;

	(void)posix_fadvise(p->fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
}

static const struct ndz_io_ops file_ops = {
	file_pread, file_pwrite, file_zero, file_flush, file_close, file_discard,
	file_drop_cache,
};

/* The null device (1:3): a restore target that keeps nothing, for benchmarks. */
#define NDZ_IO_NULL 0x100
static int is_null_dev(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

int ndz_io_open_file(const char *path, int flags, struct ndz_io **out, struct ndz_error *e)
{
	struct file_priv *p;
	struct ndz_io *io;
	struct stat st;
	int oflags = (flags & NDZ_IO_WRITE) ? O_RDWR : O_RDONLY;
	int fd, saved;

	*out = NULL;
	if (flags & NDZ_IO_CREATE)
		oflags |= O_CREAT;
	/* Refuse fifos and the like before open() could block on them. */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode) &&
	    !((flags & NDZ_IO_NULL) && is_null_dev(&st)))
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "%s: not a regular file or block device",
				     path);
	fd = open(path, oflags | O_CLOEXEC, 0644);
	if (fd < 0)
		return ndz_error_set(e, errno == ENOENT ? NDZ_ENOENT : NDZ_EIO, errno, "%s", path);
	if (fstat(fd, &st) < 0) {
		saved = errno;
		close(fd);
		return ndz_error_set(e, NDZ_EIO, saved, "%s", path);
	}
	p = calloc(1, sizeof(*p));
	io = p ? io_new(&file_ops, path) : NULL;
	if (!io) {
		free(p);
		close(fd);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", path, ndz_strerror(NDZ_ENOMEM));
	}
	p->fd = fd;
	p->dfd = -1;
	pthread_mutex_init(&p->bounce_lock, NULL);
	io->priv = p;
	if (S_ISBLK(st.st_mode)) {
		uint64_t size;

		if (ioctl(fd, BLKGETSIZE64, &size) < 0) {
			saved = errno;
			ndz_io_close(io);
			return ndz_error_set(e, NDZ_EIO, saved, "%s: cannot get the device size",
					     path);
		}
		io->size = size;
		io->is_blockdev = 1;
	} else if (S_ISREG(st.st_mode)) {
		io->size = (uint64_t)st.st_size;
		io->is_regular = 1;
		if (flags & NDZ_IO_SEQUENTIAL)
			posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	} else if ((flags & NDZ_IO_NULL) && is_null_dev(&st)) {
		io->size = INT64_MAX;  /* a sink: anything fits, nothing can be read back */
	} else {
		ndz_io_close(io);
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "%s: not a regular file or block device",
				     path);
	}
	*out = io;
	return 0;
}

int ndz_io_open_target(const char *path, uint64_t size, int *created, struct ndz_io **out,
		       struct ndz_error *e)
{
	struct ndz_error mine = { 0 };
	int rc;

	*created = 0;
	rc = ndz_io_open_file(path, NDZ_IO_WRITE | NDZ_IO_NULL, out, &mine);
	if (rc != NDZ_ENOENT)
		return rc < 0 ? ndz_error_copy(e, &mine) : 0;
	ndz_error_clear(&mine);
	rc = ndz_io_open_file(path, NDZ_IO_WRITE | NDZ_IO_CREATE, out, e);
	if (rc < 0)
		return rc;
	rc = ndz_io_set_size(*out, size, &mine);
	if (rc < 0) {
		ndz_error_set(e, rc, mine.sys, "%s: cannot create it at the image's size%s%s",
			      path, mine.sys ? "" : ": ", mine.sys ? "" : ndz_strerror(rc));
		ndz_io_close(*out);
		*out = NULL;
		unlink(path);
		return rc;
	}
	*created = 1;
	return 0;
}

int ndz_io_set_size(struct ndz_io *io, uint64_t size, struct ndz_error *e)
{
	struct file_priv *p = io->priv;

	if (io->ops != &file_ops || !io->is_regular)
		return io_fail(io, NDZ_ENOTSUP, 0, e, "cannot set its size to %llu bytes",
			       (unsigned long long)size);
	if (ftruncate(p->fd, (off_t)size) < 0)
		return io_fail(io, NDZ_EIO, errno, e, "cannot set its size to %llu bytes",
			       (unsigned long long)size);
	io->size = size;
	return 0;
}

/* ---- memory ---- */

struct mem_priv {
	uint8_t *buf;
	int writable;
};

static ssize_t mem_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	struct mem_priv *p = io->priv;

	(void)sys;
	len = clamp_read(io, off, len);
	if (len)
		memcpy(buf, p->buf + off, len);
	return (ssize_t)len;
}

static ssize_t mem_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			    int *sys)
{
	struct mem_priv *p = io->priv;

	(void)sys;
	if (!p->writable || !in_bounds(io, off, len))
		return NDZ_EIO;
	memcpy(p->buf + off, buf, len);
	return (ssize_t)len;
}

static int mem_zero(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	struct mem_priv *p = io->priv;

	(void)sys;
	if (!p->writable || !in_bounds(io, off, len))
		return NDZ_EIO;
	memset(p->buf + off, 0, (size_t)len);
	return 0;
}

static int mem_flush(struct ndz_io *io, int *sys)
{
	(void)io, (void)sys;
	return 0;
}

static void mem_close(struct ndz_io *io)
{
	free(io->priv);
}

static const struct ndz_io_ops mem_ops = {
	mem_pread, mem_pwrite, mem_zero, mem_flush, mem_close, NULL, NULL,
};

int ndz_io_open_mem(void *buf, size_t len, int writable, struct ndz_io **out,
		    struct ndz_error *e)
{
	struct mem_priv *p = malloc(sizeof(*p));
	struct ndz_io *io = p ? io_new(&mem_ops, "memory") : NULL;

	if (!io) {
		free(p);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", "memory", ndz_strerror(NDZ_ENOMEM));
	}
	p->buf = buf;
	p->writable = writable;
	io->priv = p;
	io->size = len;
	*out = io;
	return 0;
}

/* ---- streams: pipes, stdin, stdout ---- */

struct stream_priv {
	int fd;
	uint64_t pos;                  /* bytes read or written so far */
};

static ssize_t stream_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	struct stream_priv *p = io->priv;
	ssize_t n;

	if (off != p->pos)
		return NDZ_ENOTSUP;
	do
		n = read(p->fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return sys_fail(sys, errno);
	p->pos += (uint64_t)n;
	return n;
}

static ssize_t stream_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			    int *sys)
{
	struct stream_priv *p = io->priv;
	ssize_t n;

	if (off != p->pos)
		return NDZ_ENOTSUP;
	do
		n = write(p->fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return sys_fail(sys, errno);
	p->pos += (uint64_t)n;
	return n;
}

static int stream_zero(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	return zero_by_writing(io, off, len, sys);
}

static int stream_flush(struct ndz_io *io, int *sys)
{
	struct stream_priv *p = io->priv;

	return sync_fd(io, p->fd, sys);
}

static void stream_close(struct ndz_io *io)
{
	free(io->priv);
}

static const struct ndz_io_ops stream_ops = {
	stream_pread, stream_pwrite, stream_zero, stream_flush, stream_close, NULL, NULL,
};

int ndz_io_open_stream(int fd, const char *name, struct ndz_io **out, struct ndz_error *e)
{
	struct stream_priv *p = calloc(1, sizeof(*p));
	struct ndz_io *io = p ? io_new(&stream_ops, name) : NULL;

	if (!io) {
		free(p);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", name, ndz_strerror(NDZ_ENOMEM));
	}
	p->fd = fd;
	io->priv = p;
	io->is_stream = 1;
	*out = io;
	return 0;
}

/* ---- fault injection ---- */

struct fault_priv {
	struct ndz_io *inner;
	unsigned reads, writes;        /* calls so far, counted atomically: threads may read */
	unsigned fail_read, fail_write;
	uint64_t wlo, whi;
};

static ssize_t fault_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	struct fault_priv *p = io->priv;

	ssize_t n;

	if (__atomic_add_fetch(&p->reads, 1, __ATOMIC_RELAXED) == p->fail_read)
		return NDZ_EIO;
	n = p->inner->ops->pread(p->inner, buf, len, off, sys);
	return n;
}

static ssize_t fault_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			    int *sys)
{
	struct fault_priv *p = io->priv;

	ssize_t n;

	if (__atomic_add_fetch(&p->writes, 1, __ATOMIC_RELAXED) == p->fail_write ||
	    off < p->wlo || off + len > p->whi)
		return NDZ_EIO;
	n = p->inner->ops->pwrite(p->inner, buf, len, off, sys);
	return n;
}

static int fault_zero(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	struct fault_priv *p = io->priv;

	if (__atomic_add_fetch(&p->writes, 1, __ATOMIC_RELAXED) == p->fail_write ||
	    off < p->wlo || off + len > p->whi)
		return NDZ_EIO;
	return p->inner->ops->zero(p->inner, off, len, sys);
}

static int fault_flush(struct ndz_io *io, int *sys)
{
	struct fault_priv *p = io->priv;

	return p->inner->ops->flush(p->inner, sys);
}

static void fault_close(struct ndz_io *io)
{
	struct fault_priv *p = io->priv;

	ndz_io_close(p->inner);
	free(p);
}

static const struct ndz_io_ops fault_ops = {
	fault_pread, fault_pwrite, fault_zero, fault_flush, fault_close, NULL, NULL,
};

int ndz_io_open_fault(struct ndz_io *inner, unsigned fail_read_nth, unsigned fail_write_nth,
		      uint64_t wlo, uint64_t whi, struct ndz_io **out, struct ndz_error *e)
{
	struct fault_priv *p = calloc(1, sizeof(*p));
	struct ndz_io *io = p ? io_new(&fault_ops, inner->name) : NULL;

	if (!io) {
		free(p);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", inner->name, ndz_strerror(NDZ_ENOMEM));
	}
	p->inner = inner;
	p->fail_read = fail_read_nth;
	p->fail_write = fail_write_nth;
	p->wlo = wlo;
	p->whi = whi;
	io->priv = p;
	io->size = inner->size;
	io->is_regular = inner->is_regular;
	io->is_blockdev = inner->is_blockdev;
	*out = io;
	return 0;
}

/* ---- a window onto another io ---- */

struct sub_priv {
	struct ndz_io *inner;
	uint64_t off;
};

static ssize_t sub_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	struct sub_priv *p = io->priv;

	ssize_t n;

	len = clamp_read(io, off, len);
	if (!len)
		return 0;
	n = p->inner->ops->pread(p->inner, buf, len, p->off + off, sys);
	return n;
}

static ssize_t sub_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			    int *sys)
{
	struct sub_priv *p = io->priv;

	ssize_t n;

	if (!in_bounds(io, off, len))
		return NDZ_EIO;
	n = p->inner->ops->pwrite(p->inner, buf, len, p->off + off, sys);
	return n;
}

static int sub_zero(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	struct sub_priv *p = io->priv;

	if (!in_bounds(io, off, len))
		return NDZ_EIO;
	return p->inner->ops->zero(p->inner, p->off + off, len, sys);
}

static int sub_flush(struct ndz_io *io, int *sys)
{
	struct sub_priv *p = io->priv;

	return p->inner->ops->flush(p->inner, sys);
}

static void sub_close(struct ndz_io *io)
{
	free(io->priv);
}

static int sub_discard(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	struct sub_priv *p = io->priv;

	if (!in_bounds(io, off, len))
		return NDZ_EIO;
	if (!p->inner->ops->discard)
		return 0;
	return p->inner->ops->discard(p->inner, p->off + off, len, sys);
}

static void sub_drop_cache(struct ndz_io *io, uint64_t off, uint64_t len)
{
	struct sub_priv *p = io->priv;

	if (in_bounds(io, off, len))
		ndz_io_drop_cache(p->inner, p->off + off, len);
}

static const struct ndz_io_ops sub_ops = {
	sub_pread, sub_pwrite, sub_zero, sub_flush, sub_close, sub_discard, sub_drop_cache,
};

int ndz_io_open_sub(struct ndz_io *inner, uint64_t offset, uint64_t len, struct ndz_io **out,
		    struct ndz_error *e)
{
	struct sub_priv *p;
	struct ndz_io *io;

	if (offset > inner->size || len > inner->size - offset)
		return ndz_error_set(e, NDZ_ERANGE, 0, "%s: bytes %llu+%llu are past its end",
				     inner->name, (unsigned long long)offset,
				     (unsigned long long)len);
	p = malloc(sizeof(*p));
	io = p ? io_new(&sub_ops, inner->name) : NULL;
	if (!io) {
		free(p);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", inner->name, ndz_strerror(NDZ_ENOMEM));
	}
	p->inner = inner;
	p->off = offset;
	io->priv = p;
	io->size = len;
	io->is_blockdev = inner->is_blockdev;
	*out = io;
	return 0;
}

/* ---- a read-only view that reads given sectors as zeros ---- */

struct zeroed_priv {
	struct ndz_io *inner;
	const struct ndz_ranges *zero;
};

static ssize_t zeroed_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	struct zeroed_priv *p = io->priv;
	const struct ndz_ranges *z = p->zero;
	uint64_t end;
	size_t lo = 0, hi = z->n;
	ssize_t n;

	n = p->inner->ops->pread(p->inner, buf, len, off, sys);
	if (n <= 0)
		return n;
	end = off + (uint64_t)n;
	/* the first range that ends after off (ranges are sorted and disjoint) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if ((z->v[mid].start + z->v[mid].count) * NDZ_SECTOR_SIZE <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < z->n && z->v[lo].start * NDZ_SECTOR_SIZE < end; lo++) {
		uint64_t a = z->v[lo].start * NDZ_SECTOR_SIZE;
		uint64_t b = (z->v[lo].start + z->v[lo].count) * NDZ_SECTOR_SIZE;

		a = a > off ? a : off;
		b = b < end ? b : end;
		memset((uint8_t *)buf + (a - off), 0, (size_t)(b - a));
	}
	return n;
}

static ssize_t zeroed_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			    int *sys)
{
	(void)io, (void)buf, (void)len, (void)off, (void)sys;
	return NDZ_EIO;                            /* a read-only view */
}

static int zeroed_zero(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	return (int)zeroed_pwrite(io, NULL, (size_t)len, off, sys);
}

static int zeroed_flush(struct ndz_io *io, int *sys)
{
	(void)io, (void)sys;
	return 0;
}

static void zeroed_close(struct ndz_io *io)
{
	free(io->priv);
}

static const struct ndz_io_ops zeroed_ops = {
	zeroed_pread, zeroed_pwrite, zeroed_zero, zeroed_flush, zeroed_close, NULL, NULL,
};

int ndz_io_open_zeroed(struct ndz_io *inner, const struct ndz_ranges *zero, struct ndz_io **out,
		       struct ndz_error *e)
{
	struct zeroed_priv *p = malloc(sizeof(*p));
	struct ndz_io *io = p ? io_new(&zeroed_ops, inner->name) : NULL;

	if (!io) {
		free(p);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", inner->name, ndz_strerror(NDZ_ENOMEM));
	}
	p->inner = inner;
	p->zero = zero;
	io->priv = p;
	io->size = inner->size;
	io->is_regular = inner->is_regular;
	io->is_blockdev = inner->is_blockdev;
	*out = io;
	return 0;
}

void ndz_io_close(struct ndz_io *io)
{
	if (!io)
		return;
	io->ops->close(io);
	free(io->name);
	free(io);
}

int ndz_io_read_full(struct ndz_io *io, void *buf, size_t len, uint64_t off, size_t *got,
		     struct ndz_error *e)
{
	size_t done = 0;
	int sys = 0;

	while (done < len) {
		ssize_t n = io->ops->pread(io, (uint8_t *)buf + done, len - done, off + done, &sys);

		if (n < 0)
			return io_fail(io, (int)n, sys, e, "read error at byte %llu",
				       (unsigned long long)(off + done));
		if (n == 0) {
			if (got)
				*got = done;
			return io_fail(io, NDZ_ESHORTREAD, 0, e, "ends at byte %llu",
				       (unsigned long long)(off + done));
		}
		done += (size_t)n;
	}
	if (got)
		*got = done;
	return 0;
}

int ndz_io_write_full(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
		      struct ndz_error *e)
{
	int sys = 0, rc = write_all(io, buf, len, off, &sys);

	return rc < 0 ? io_fail(io, rc, sys, e, "write error at byte %llu",
				(unsigned long long)off) : 0;
}

int ndz_io_zero(struct ndz_io *io, uint64_t off, uint64_t len, struct ndz_error *e)
{
	int sys = 0, rc = io->ops->zero(io, off, len, &sys);

	return rc < 0 ? io_fail(io, rc, sys, e, "cannot zero %llu bytes at byte %llu",
				(unsigned long long)len, (unsigned long long)off) : 0;
}

int ndz_io_discard(struct ndz_io *io, uint64_t off, uint64_t len, struct ndz_error *e)
{
	int sys = 0, rc = io->ops->discard ? io->ops->discard(io, off, len, &sys) : 0;

	return rc < 0 ? io_fail(io, rc, sys, e, "cannot discard %llu bytes at byte %llu",
				(unsigned long long)len, (unsigned long long)off) : 0;
}

int ndz_io_flush(struct ndz_io *io, struct ndz_error *e)
{
	int sys = 0, rc = io->ops->flush(io, &sys);

	return rc < 0 ? io_fail(io, rc, sys, e, "flush failed") : 0;
}

void ndz_io_drop_cache(struct ndz_io *io, uint64_t off, uint64_t len)
{
	if (io->ops->drop_cache && len)
		io->ops->drop_cache(io, off, len);
}

/* ---- direct writes ---- */

/* The file or block device under io (through windows and fault wrappers), or NULL. */
static struct ndz_io *file_under(const struct ndz_io *io)
{
	while (io) {
		if (io->ops == &file_ops)
			return (struct ndz_io *)io;
		if (io->ops == &sub_ops)
			io = ((const struct sub_priv *)io->priv)->inner;
		else if (io->ops == &fault_ops)
			io = ((const struct fault_priv *)io->priv)->inner;
		else
			return NULL;
	}
	return NULL;
}

/* A second descriptor of f's file or device, O_DIRECT, write-only: fd, or -1 with errno. */
static int open_direct(struct ndz_io *f, struct file_priv *p)
{
	struct stat a, b;
	char proc[40];
	int fd;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p->fd);
	fd = open(proc, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	/* no /proc: the path again, and only when it still names what we have open */
	fd = open(f->name, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &a) == 0 && fstat(p->fd, &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino && a.st_rdev == b.st_rdev)
		return fd;
	close(fd);
	errno = ESTALE;
	return -1;
}

int ndz_io_direct(struct ndz_io *io, struct ndz_error *e)
{
	struct ndz_io *f = file_under(io);
	struct file_priv *p = f ? f->priv : NULL;
	struct statx sx;
	struct stat st;
	unsigned pbsz;
	int ssz;

	if (!p)
		return 0;
	if (!f->is_regular && !f->is_blockdev) {
		p->off_why = "not a file or block device";
		return 0;
	}
	if (p->dfd < 0) {
		p->dfd = open_direct(f, p);
		if (p->dfd < 0 && errno == EINVAL) {
			p->off_why = "its file system refuses O_DIRECT";
			return 0;
		}
		if (p->dfd < 0)
			return io_fail(f, NDZ_EIO, errno, e, "cannot open it for direct writes");
		memset(&sx, 0, sizeof(sx));
		if (statx(p->dfd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
		    (sx.stx_mask & STATX_DIOALIGN)) {
			p->off_align = sx.stx_dio_offset_align;
			p->mem_align = sx.stx_dio_mem_align;
		} else if (f->is_blockdev && ioctl(p->fd, BLKSSZGET, &ssz) == 0 && ssz > 0) {
			p->off_align = p->mem_align = (uint32_t)ssz;
		} else {
			p->off_align = p->mem_align = 4096;    /* what any file system takes */
		}
		/*
		 * Edges within the file system's block, or the device's physical one, go
		 * buffered too: a direct write that covers part of one makes ext4 zero the
		 * rest and serialise the writes, a disk read-modify-write.
		 */
		if (p->off_align && f->is_regular && fstat(p->fd, &st) == 0 &&
		    st.st_blksize > (blksize_t)p->off_align && st.st_blksize <= 65536)
			p->off_align = (uint32_t)st.st_blksize;
		if (p->off_align && f->is_blockdev && ioctl(p->fd, BLKPBSZGET, &pbsz) == 0 &&
		    pbsz > p->off_align && pbsz <= 65536)
			p->off_align = pbsz;
		if (!p->off_align || !p->mem_align) {
			close(p->dfd);
			p->dfd = -1;
			p->off_why = "its file system offers no direct I/O";
			return 0;
		}
	}
	p->off_why = NULL;
	__atomic_store_n(&p->direct, 1, __ATOMIC_RELAXED);
	return 1;
}

int ndz_io_is_direct(const struct ndz_io *io)
{
	struct ndz_io *f = file_under(io);

	return f && __atomic_load_n(&((struct file_priv *)f->priv)->direct, __ATOMIC_RELAXED);
}

void ndz_io_direct_stats(const struct ndz_io *io, struct ndz_io_direct_stats *st)
{
	struct ndz_io *f = file_under(io);
	struct file_priv *p = f ? f->priv : NULL;

	memset(st, 0, sizeof(*st));
	if (!p)
		return;
	st->on = __atomic_load_n(&p->direct, __ATOMIC_RELAXED);
	st->off_align = p->off_align;
	st->mem_align = p->mem_align;
	st->direct = __atomic_load_n(&p->ndirect, __ATOMIC_RELAXED);
	st->bounced = __atomic_load_n(&p->nbounced, __ATOMIC_RELAXED);
	st->buffered = __atomic_load_n(&p->nbuffered, __ATOMIC_RELAXED);
	st->off_why = p->off_why;
}

char *ndz_io_direct_describe(const struct ndz_io *io, char *buf, size_t len)
{
	struct ndz_io_direct_stats st;

	ndz_io_direct_stats(io, &st);
	if (st.direct)
		snprintf(buf, len, "writes: %llu bytes direct (%u-byte blocks; %llu of them "
			 "copied to align), %llu through the page cache%s%s",
			 (unsigned long long)st.direct, st.off_align,
			 (unsigned long long)st.bounced, (unsigned long long)st.buffered,
			 st.off_why ? ": " : "", st.off_why ? st.off_why : "");
	else
		snprintf(buf, len, "writes through the page cache (%s)",
			 st.off_why ? st.off_why : st.on ? "none direct" : "direct writes off");
	return buf;
}
