/* Unit tests for lib/io.c: memory, sub-range, fault-injecting and file implementations. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/io.h"
#include "core/ranges.h"

#include "bytes.h"

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* ---- memory ---- */

static void test_mem_read(void **state)
{
	uint8_t buf[100], out[200];
	struct ndz_io *io;
	size_t got = 12345;

	(void)state;
	fill(buf, sizeof(buf), 1);
	assert_int_equal(ndz_io_open_mem(buf, sizeof(buf), 0, &io, NULL), 0);
	assert_int_equal(io->size, 100);
	assert_non_null(io->name);
	assert_int_equal(io->is_regular, 0);
	assert_int_equal(io->is_blockdev, 0);
	assert_int_equal(io->ops->pread(io, out, 10, 5, NULL), 10);
	assert_memory_equal(out, buf + 5, 10);
	assert_int_equal(io->ops->pread(io, out, 50, 90, NULL), 10);   /* clipped at the end */
	assert_memory_equal(out, buf + 90, 10);
	assert_int_equal(io->ops->pread(io, out, 10, 100, NULL), 0);   /* at the end */
	assert_int_equal(io->ops->pread(io, out, 10, 1000, NULL), 0);  /* beyond */
	assert_int_equal(io->ops->pread(io, out, 10, UINT64_MAX, NULL), 0);
	assert_int_equal(io->ops->pread(io, out, 0, 0, NULL), 0);
	/* read_full: exact, short with the count, nothing */
	assert_int_equal(ndz_io_read_full(io, out, 100, 0, &got, NULL), 0);
	assert_int_equal(got, 100);
	assert_memory_equal(out, buf, 100);
	assert_int_equal(ndz_io_read_full(io, out, 100, 0, NULL, NULL), 0);
	assert_int_equal(ndz_io_read_full(io, out, 60, 50, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 50);
	assert_memory_equal(out, buf + 50, 50);
	assert_int_equal(ndz_io_read_full(io, out, 1, 100, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 0);
	assert_int_equal(ndz_io_read_full(io, out, 1, 100, NULL, NULL), NDZ_ESHORTREAD);
	assert_int_equal(ndz_io_read_full(io, out, 0, 100, &got, NULL), 0);
	assert_int_equal(got, 0);
	assert_int_equal(io->ops->flush(io, NULL), 0);
	ndz_io_close(io);
	ndz_io_close(NULL);
}

static void test_mem_write(void **state)
{
	uint8_t buf[100], src[100], copy[100];
	struct ndz_io *ro, *rw;

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	fill(src, sizeof(src), 3);
	assert_int_equal(ndz_io_open_mem(buf, sizeof(buf), 0, &ro, NULL), 0);
	assert_int_equal(ndz_io_open_mem(buf, sizeof(buf), 1, &rw, NULL), 0);
	/* read-only: every write and zero refused, nothing changes */
	assert_int_equal(ro->ops->pwrite(ro, src, 10, 0, NULL), NDZ_EIO);
	assert_int_equal(ro->ops->zero(ro, 0, 10, NULL), NDZ_EIO);
	assert_int_equal(ndz_io_write_full(ro, src, 10, 0, NULL), NDZ_EIO);
	assert_true(all_equal(buf, sizeof(buf), 0xee));
	/* writable: inside ok, touching the end ok, crossing it refused whole */
	assert_int_equal(rw->ops->pwrite(rw, src, 10, 0, NULL), 10);
	assert_int_equal(ndz_io_write_full(rw, src + 10, 10, 90, NULL), 0);
	memcpy(copy, buf, sizeof(buf));
	assert_int_equal(rw->ops->pwrite(rw, src, 11, 90, NULL), NDZ_EIO);
	assert_int_equal(ndz_io_write_full(rw, src, 2, 99, NULL), NDZ_EIO);
	assert_int_equal(rw->ops->pwrite(rw, src, 1, 100, NULL), NDZ_EIO);
	assert_int_equal(rw->ops->pwrite(rw, src, 1, UINT64_MAX, NULL), NDZ_EIO);
	assert_int_equal(rw->ops->pwrite(rw, src, 0, 100, NULL), 0);
	assert_memory_equal(buf, copy, sizeof(buf));
	assert_memory_equal(buf, src, 10);
	assert_memory_equal(buf + 90, src + 10, 10);
	assert_true(all_equal(buf + 10, 80, 0xee));
	/* zero: inside, and refused past the end */
	assert_int_equal(rw->ops->zero(rw, 20, 30, NULL), 0);
	assert_true(all_equal(buf + 20, 30, 0));
	assert_int_equal(buf[19], 0xee);
	assert_int_equal(buf[50], 0xee);
	assert_int_equal(rw->ops->zero(rw, 95, 6, NULL), NDZ_EIO);
	assert_int_equal(rw->ops->zero(rw, 101, 0, NULL), NDZ_EIO);
	assert_int_equal(rw->ops->zero(rw, 50, UINT64_MAX, NULL), NDZ_EIO);
	assert_int_equal(buf[95], src[15]);
	assert_int_equal(rw->ops->zero(rw, 100, 0, NULL), 0);
	ndz_io_close(ro);
	ndz_io_close(rw);
}

static void test_mem_empty(void **state)
{
	struct ndz_io *io;
	uint8_t b[4];
	size_t got = 99;

	(void)state;
	assert_int_equal(ndz_io_open_mem(b, 0, 1, &io, NULL), 0);
	assert_int_equal(io->size, 0);
	assert_int_equal(ndz_io_read_full(io, b, 1, 0, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 0);
	assert_int_equal(ndz_io_write_full(io, b, 1, 0, NULL), NDZ_EIO);
	ndz_io_close(io);
}

/* ---- sub-range view ---- */

static void test_sub(void **state)
{
	uint8_t buf[1000], src[100], out[100];
	struct ndz_io *mem, *sub, *sub2;
	size_t got;

	(void)state;
	fill(buf, sizeof(buf), 9);
	fill(src, sizeof(src), 200);
	assert_int_equal(ndz_io_open_mem(buf, sizeof(buf), 1, &mem, NULL), 0);
	/* the window must lie inside the inner io */
	assert_int_equal(ndz_io_open_sub(mem, 1001, 0, &sub, NULL), NDZ_ERANGE);
	assert_int_equal(ndz_io_open_sub(mem, 900, 101, &sub, NULL), NDZ_ERANGE);
	assert_int_equal(ndz_io_open_sub(mem, 1, UINT64_MAX, &sub, NULL), NDZ_ERANGE);
	assert_int_equal(ndz_io_open_sub(mem, UINT64_MAX, 2, &sub, NULL), NDZ_ERANGE);
	assert_int_equal(ndz_io_open_sub(mem, 1000, 0, &sub, NULL), 0);
	assert_int_equal(sub->size, 0);
	assert_int_equal(ndz_io_read_full(sub, out, 1, 0, &got, NULL), NDZ_ESHORTREAD);
	ndz_io_close(sub);
	assert_int_equal(ndz_io_open_sub(mem, 0, 1000, &sub, NULL), 0);
	ndz_io_close(sub);

	assert_int_equal(ndz_io_open_sub(mem, 300, 200, &sub, NULL), 0);
	assert_int_equal(sub->size, 200);
	assert_int_equal(ndz_io_read_full(sub, out, 50, 0, NULL, NULL), 0);
	assert_memory_equal(out, buf + 300, 50);
	/* reads stop at the view's end, not the inner io's */
	assert_int_equal(ndz_io_read_full(sub, out, 100, 150, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 50);
	assert_memory_equal(out, buf + 450, 50);
	assert_int_equal(sub->ops->pread(sub, out, 10, 200, NULL), 0);
	assert_int_equal(sub->ops->pread(sub, out, 10, UINT64_MAX, NULL), 0);
	/* writes land at the offset; crossing the view's end is refused */
	assert_int_equal(ndz_io_write_full(sub, src, 100, 100, NULL), 0);
	assert_memory_equal(buf + 400, src, 100);
	assert_int_equal(sub->ops->pwrite(sub, src, 2, 199, NULL), NDZ_EIO);
	assert_int_equal(sub->ops->pwrite(sub, src, 1, 200, NULL), NDZ_EIO);
	assert_int_equal(sub->ops->pwrite(sub, src, 1, UINT64_MAX, NULL), NDZ_EIO);
	assert_int_equal(buf[500], (uint8_t)(9 + 500 * 7));
	assert_int_equal(sub->ops->zero(sub, 0, 10, NULL), 0);
	assert_true(all_equal(buf + 300, 10, 0));
	assert_int_equal(buf[299], (uint8_t)(9 + 299 * 7));
	assert_int_equal(buf[310], (uint8_t)(9 + 310 * 7));
	assert_int_equal(sub->ops->zero(sub, 190, 11, NULL), NDZ_EIO);
	assert_int_equal(buf[500], (uint8_t)(9 + 500 * 7));
	assert_int_equal(sub->ops->flush(sub, NULL), 0);

	/* a view of a view adds the offsets */
	assert_int_equal(ndz_io_open_sub(sub, 190, 11, &sub2, NULL), NDZ_ERANGE);
	assert_int_equal(ndz_io_open_sub(sub, 10, 20, &sub2, NULL), 0);
	assert_int_equal(ndz_io_write_full(sub2, src, 20, 0, NULL), 0);
	assert_memory_equal(buf + 310, src, 20);
	assert_int_equal(ndz_io_write_full(sub2, src, 1, 20, NULL), NDZ_EIO);
	ndz_io_close(sub2);
	/* closing the view leaves the inner io usable */
	ndz_io_close(sub);
	assert_int_equal(ndz_io_read_full(mem, out, 10, 990, NULL, NULL), 0);
	ndz_io_close(mem);
}

/* Reads through the zeroing view: the given sectors as zeros, the rest as inner's. */
static void test_zeroed(void **state)
{
	static uint8_t buf[16 * 512], out[16 * 512], want[16 * 512];
	struct ndz_ranges z = NDZ_RANGES_INIT;
	struct ndz_io *mem, *zv;
	static const struct { uint64_t off, len; } reads[] = {
		{ 0, sizeof(buf) }, { 100, 1000 }, { 512, 512 }, { 1023, 2 }, { 2000, 3000 },
		{ 5 * 512 - 1, 2 }, { 6 * 512, 4 * 512 }, { 15 * 512 + 7, 505 },
	};

	(void)state;
	fill(buf, sizeof(buf), 3);
	memcpy(want, buf, sizeof(buf));
	/* sectors 1-2, 5, 9-11 read as zeros */
	assert_int_equal(ndz_ranges_add(&z, 1, 2, NULL), 0);
	assert_int_equal(ndz_ranges_add(&z, 5, 1, NULL), 0);
	assert_int_equal(ndz_ranges_add(&z, 9, 3, NULL), 0);
	memset(want + 512, 0, 2 * 512);
	memset(want + 5 * 512, 0, 512);
	memset(want + 9 * 512, 0, 3 * 512);
	assert_int_equal(ndz_io_open_mem(buf, sizeof(buf), 1, &mem, NULL), 0);
	assert_int_equal(ndz_io_open_zeroed(mem, &z, &zv, NULL), 0);
	assert_int_equal(zv->size, sizeof(buf));
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		memset(out, 0x5a, sizeof(out));
		assert_int_equal(ndz_io_read_full(zv, out, reads[i].len, reads[i].off, NULL, NULL), 0);
		assert_memory_equal(out, want + reads[i].off, reads[i].len);
	}
	/* the inner io is untouched, the view writes nothing */
	fill(want, sizeof(want), 3);
	assert_memory_equal(buf, want, sizeof(buf));
	assert_int_equal(zv->ops->pwrite(zv, out, 10, 0, NULL), NDZ_EIO);
	assert_int_equal(zv->ops->zero(zv, 0, 10, NULL), NDZ_EIO);
	assert_memory_equal(buf, want, sizeof(buf));
	assert_int_equal(zv->ops->pread(zv, out, 10, sizeof(buf), NULL), 0);
	ndz_io_close(zv);
	/* no ranges: inner as it is */
	ndz_ranges_clear(&z);
	assert_int_equal(ndz_io_open_zeroed(mem, &z, &zv, NULL), 0);
	assert_int_equal(ndz_io_read_full(zv, out, sizeof(buf), 0, NULL, NULL), 0);
	assert_memory_equal(out, want, sizeof(buf));
	ndz_io_close(zv);
	ndz_io_close(mem);
	ndz_ranges_release(&z);
}

/* ---- fault injection ---- */

static struct ndz_io *fault_over(uint8_t *buf, size_t len, unsigned rn, unsigned wn,
				 uint64_t wlo, uint64_t whi)
{
	struct ndz_io *mem, *f;

	assert_int_equal(ndz_io_open_mem(buf, len, 1, &mem, NULL), 0);
	assert_int_equal(ndz_io_open_fault(mem, rn, wn, wlo, whi, &f, NULL), 0);
	assert_int_equal(f->size, len);
	return f;
}

static void test_fault_nth_read(void **state)
{
	uint8_t buf[64], out[64];
	struct ndz_io *f;
	unsigned i;

	(void)state;
	fill(buf, sizeof(buf), 5);
	f = fault_over(buf, sizeof(buf), 3, 0, 0, UINT64_MAX);
	for (i = 1; i <= 6; i++) {
		ssize_t n = f->ops->pread(f, out, 8, 8 * i, NULL);

		if (i == 3)
			assert_int_equal(n, NDZ_EIO);
		else
			assert_int_equal(n, 8);
	}
	/* writes are counted separately and never fail here */
	for (i = 0; i < 5; i++)
		assert_int_equal(f->ops->pwrite(f, out, 8, 0, NULL), 8);
	ndz_io_close(f);

	/* read_full passes the error on instead of a short read */
	f = fault_over(buf, sizeof(buf), 1, 0, 0, UINT64_MAX);
	assert_int_equal(ndz_io_read_full(f, out, 10, 0, NULL, NULL), NDZ_EIO);
	assert_int_equal(ndz_io_read_full(f, out, 10, 0, NULL, NULL), 0);
	assert_memory_equal(out, buf, 10);
	ndz_io_close(f);

	/* 0: never */
	f = fault_over(buf, sizeof(buf), 0, 0, 0, UINT64_MAX);
	for (i = 0; i < 100; i++)
		assert_int_equal(f->ops->pread(f, out, 1, i % 64, NULL), 1);
	assert_int_equal(f->ops->flush(f, NULL), 0);
	ndz_io_close(f);
}

static void test_fault_nth_write(void **state)
{
	uint8_t buf[64], src[64], out[8];
	struct ndz_io *f;
	unsigned i;

	(void)state;
	memset(buf, 0, sizeof(buf));
	fill(src, sizeof(src), 11);
	f = fault_over(buf, sizeof(buf), 0, 2, 0, UINT64_MAX);
	assert_int_equal(f->ops->pwrite(f, src, 8, 0, NULL), 8);
	assert_int_equal(ndz_io_write_full(f, src + 8, 8, 8, NULL), NDZ_EIO);    /* 2nd */
	assert_true(all_equal(buf + 8, 8, 0));
	assert_int_equal(ndz_io_write_full(f, src + 8, 8, 8, NULL), 0);          /* 3rd */
	assert_memory_equal(buf, src, 16);
	for (i = 0; i < 5; i++)
		assert_int_equal(f->ops->pread(f, out, 8, 0, NULL), 8);
	ndz_io_close(f);

	/* zero counts as a write */
	memset(buf, 0xff, sizeof(buf));
	f = fault_over(buf, sizeof(buf), 0, 2, 0, UINT64_MAX);
	assert_int_equal(f->ops->zero(f, 0, 8, NULL), 0);
	assert_int_equal(f->ops->zero(f, 8, 8, NULL), NDZ_EIO);
	assert_true(all_equal(buf, 8, 0));
	assert_true(all_equal(buf + 8, 8, 0xff));
	assert_int_equal(f->ops->pwrite(f, src, 8, 8, NULL), 8);
	ndz_io_close(f);
}

static void test_fault_guard(void **state)
{
	uint8_t buf[100], src[100];
	struct ndz_io *f;

	(void)state;
	memset(buf, 0xaa, sizeof(buf));
	fill(src, sizeof(src), 1);
	f = fault_over(buf, sizeof(buf), 0, 0, 20, 50);
	/* inside the window */
	assert_int_equal(f->ops->pwrite(f, src, 30, 20, NULL), 30);
	assert_int_equal(f->ops->pwrite(f, src, 1, 49, NULL), 1);
	assert_int_equal(f->ops->zero(f, 20, 30, NULL), 0);
	assert_int_equal(f->ops->pwrite(f, src, 0, 50, NULL), 0);
	/* outside or straddling: refused, and nothing reaches the buffer */
	assert_int_equal(f->ops->pwrite(f, src, 1, 19, NULL), NDZ_EIO);
	assert_int_equal(f->ops->pwrite(f, src, 2, 19, NULL), NDZ_EIO);
	assert_int_equal(f->ops->pwrite(f, src, 1, 50, NULL), NDZ_EIO);
	assert_int_equal(f->ops->pwrite(f, src, 31, 20, NULL), NDZ_EIO);
	assert_int_equal(f->ops->pwrite(f, src, 100, 0, NULL), NDZ_EIO);
	assert_int_equal(f->ops->zero(f, 0, 21, NULL), NDZ_EIO);
	assert_int_equal(f->ops->zero(f, 49, 2, NULL), NDZ_EIO);
	assert_int_equal(f->ops->zero(f, 60, 10, NULL), NDZ_EIO);
	assert_true(all_equal(buf, 20, 0xaa));
	assert_true(all_equal(buf + 20, 30, 0));
	assert_true(all_equal(buf + 50, 50, 0xaa));
	/* reads are not guarded */
	assert_int_equal(ndz_io_read_full(f, src, 100, 0, NULL, NULL), 0);
	ndz_io_close(f);

	/* an empty window refuses every write */
	f = fault_over(buf, sizeof(buf), 0, 0, 0, 0);
	assert_int_equal(f->ops->pwrite(f, src, 1, 0, NULL), NDZ_EIO);
	assert_int_equal(f->ops->zero(f, 0, 1, NULL), NDZ_EIO);
	ndz_io_close(f);
}

/* The fault io forwards to the inner io's own checks. */
static void test_fault_inner_errors(void **state)
{
	uint8_t buf[10], src[20] = { 0 };
	struct ndz_io *f;

	(void)state;
	f = fault_over(buf, sizeof(buf), 0, 0, 0, UINT64_MAX);
	assert_int_equal(f->ops->pwrite(f, src, 20, 0, NULL), NDZ_EIO);
	assert_int_equal(f->ops->zero(f, 5, 6, NULL), NDZ_EIO);
	assert_int_equal(f->ops->pread(f, src, 20, 0, NULL), 10);
	ndz_io_close(f);
}

/* ---- files ---- */

static char *temp_path(void)
{
	const char *dir = getenv("TMPDIR");
	char *p;
	int fd;

	if (!dir || !*dir)
		dir = "/tmp";
	assert_true(asprintf(&p, "%s/ndz-test-io.XXXXXX", dir) > 0);
	fd = mkstemp(p);
	assert_true(fd >= 0);
	close(fd);
	return p;
}

/* A temporary file's path, and two buffers of n bytes: src filled from seed, out. */
struct filebufs {
	uint8_t *src, *out;
	char *path;
};

static void filebufs_init(struct filebufs *fb, size_t n, uint8_t seed)
{
	fb->src = malloc(n);
	fb->out = malloc(n);
	assert_non_null(fb->src);
	assert_non_null(fb->out);
	fill(fb->src, n, seed);
	fb->path = temp_path();
}

/* Removes the file, frees the rest. */
static void filebufs_release(struct filebufs *fb)
{
	unlink(fb->path);
	free(fb->path);
	free(fb->src);
	free(fb->out);
}

static void test_file_missing(void **state)
{
	struct ndz_io *io = NULL;
	char *p = temp_path();

	(void)state;
	assert_int_equal(unlink(p), 0);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_READ, &io, NULL), NDZ_ENOENT);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE, &io, NULL), NDZ_ENOENT);
	assert_null(io);
	/* created empty on request */
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE | NDZ_IO_CREATE, &io, NULL), 0);
	assert_int_equal(io->size, 0);
	assert_int_equal(io->is_regular, 1);
	assert_int_equal(io->is_blockdev, 0);
	assert_string_equal(io->name, p);
	ndz_io_close(io);
	assert_int_equal(access(p, F_OK), 0);
	unlink(p);
	free(p);
}

static void test_file_not_regular(void **state)
{
	struct ndz_io *io = NULL;
	const char *dir = getenv("TMPDIR");

	(void)state;
	if (!dir || !*dir)
		dir = "/tmp";
	assert_int_equal(ndz_io_open_file(dir, NDZ_IO_READ, &io, NULL), NDZ_ENOTSUP);
	assert_int_equal(ndz_io_open_file("/dev/null", NDZ_IO_READ, &io, NULL), NDZ_ENOTSUP);
	assert_null(io);
}

static void test_file_rw(void **state)
{
	enum { N = 3 * 65536 + 123 };
	struct filebufs fb;
	struct ndz_io *io, *ro;
	struct stat st;
	size_t got;

	(void)state;
	filebufs_init(&fb, N, 77);
	assert_int_equal(ndz_io_open_file(fb.path, NDZ_IO_WRITE, &io, NULL), 0);
	assert_int_equal(io->size, 0);
	assert_int_equal(ndz_io_write_full(io, fb.src, N, 0, NULL), 0);
	assert_int_equal(io->ops->flush(io, NULL), 0);
	assert_int_equal(ndz_io_read_full(io, fb.out, N, 0, &got, NULL), 0);
	assert_int_equal(got, N);
	assert_memory_equal(fb.out, fb.src, N);
	assert_int_equal(ndz_io_read_full(io, fb.out, 200, N - 100, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 100);
	assert_memory_equal(fb.out, fb.src + N - 100, 100);
	ndz_io_close(io);

	/* reopened read-only: size from the file, writes fail with errno kept */
	assert_int_equal(ndz_io_open_file(fb.path, NDZ_IO_READ, &ro, NULL), 0);
	assert_int_equal(ro->size, N);
	{
		struct ndz_error e = { 0 };

		assert_int_equal(ndz_io_write_full(ro, fb.src, 10, 0, &e), NDZ_EIO);
		assert_int_equal(e.code, NDZ_EIO);
		assert_int_equal(e.sys, EBADF);
	}
	assert_int_equal(ndz_io_set_size(ro, 10, NULL), NDZ_EIO);
	assert_int_equal(ndz_io_read_full(ro, fb.out, N, 0, NULL, NULL), 0);
	assert_memory_equal(fb.out, fb.src, N);
	ndz_io_close(ro);
	assert_int_equal(stat(fb.path, &st), 0);
	assert_int_equal(st.st_size, N);
	filebufs_release(&fb);
}

static void test_file_zero(void **state)
{
	enum { N = 1 << 20 };
	struct filebufs fb;
	struct ndz_io *io;
	struct stat st;
	size_t got;

	(void)state;
	filebufs_init(&fb, N, 1);
	memset(fb.src, 0xff, 4096);        /* no zero bytes where we zero */
	assert_int_equal(ndz_io_open_file(fb.path, NDZ_IO_WRITE, &io, NULL), 0);
	assert_int_equal(ndz_io_write_full(io, fb.src, N, 0, NULL), 0);
	/* aligned, unaligned, one byte, zero bytes */
	assert_int_equal(io->ops->zero(io, 65536, 131072, NULL), 0);
	assert_int_equal(io->ops->zero(io, 1000, 3000, NULL), 0);
	assert_int_equal(io->ops->zero(io, 4095, 1, NULL), 0);
	assert_int_equal(io->ops->zero(io, 500000, 0, NULL), 0);
	assert_int_equal(ndz_io_read_full(io, fb.out, N, 0, NULL, NULL), 0);
	assert_memory_equal(fb.out, fb.src, 1000);
	assert_true(all_equal(fb.out + 1000, 3000, 0));
	assert_memory_equal(fb.out + 4000, fb.src + 4000, 95);
	assert_int_equal(fb.out[4095], 0);
	assert_memory_equal(fb.out + 4096, fb.src + 4096, 65536 - 4096);
	assert_true(all_equal(fb.out + 65536, 131072, 0));
	assert_memory_equal(fb.out + 196608, fb.src + 196608, N - 196608);
	/* zeroing keeps the size */
	assert_int_equal(stat(fb.path, &st), 0);
	assert_int_equal(st.st_size, N);
	/* zeroing up to and past the end reads back as zeros too */
	assert_int_equal(io->ops->zero(io, N - 10, 10, NULL), 0);
	assert_int_equal(io->ops->zero(io, N - 5, 105, NULL), 0);
	assert_int_equal(ndz_io_read_full(io, fb.out, 110, N - 10, &got, NULL), 0);
	assert_true(all_equal(fb.out, 110, 0));
	assert_int_equal(io->ops->flush(io, NULL), 0);
	ndz_io_close(io);
	filebufs_release(&fb);
}

static void test_file_set_size(void **state)
{
	uint8_t buf[8192], out[8192];
	struct ndz_io *io, *mem;
	char *p = temp_path();
	struct stat st;
	size_t got;

	(void)state;
	fill(buf, sizeof(buf), 4);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE, &io, NULL), 0);
	assert_int_equal(ndz_io_write_full(io, buf, 100, 0, NULL), 0);
	/* grow: the new part reads as zeros */
	assert_int_equal(ndz_io_set_size(io, 8192, NULL), 0);
	assert_int_equal(io->size, 8192);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 8192);
	assert_int_equal(ndz_io_read_full(io, out, 8192, 0, NULL, NULL), 0);
	assert_memory_equal(out, buf, 100);
	assert_true(all_equal(out + 100, 8092, 0));
	/* shrink: reads stop at the new end */
	assert_int_equal(ndz_io_set_size(io, 50, NULL), 0);
	assert_int_equal(io->size, 50);
	assert_int_equal(ndz_io_read_full(io, out, 100, 0, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 50);
	assert_memory_equal(out, buf, 50);
	assert_int_equal(ndz_io_set_size(io, 0, NULL), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 0);
	ndz_io_close(io);
	/* only files can change size */
	assert_int_equal(ndz_io_open_mem(buf, sizeof(buf), 1, &mem, NULL), 0);
	assert_int_equal(ndz_io_set_size(mem, 10, NULL), NDZ_ENOTSUP);
	assert_int_equal(mem->size, sizeof(buf));
	ndz_io_close(mem);
	unlink(p);
	free(p);
}

/* A fault io and a sub view over a file behave as over memory. */
static void test_file_wrapped(void **state)
{
	uint8_t buf[4096], out[4096];
	struct ndz_io *file, *f, *sub;
	char *p = temp_path();

	(void)state;
	fill(buf, sizeof(buf), 8);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE, &file, NULL), 0);
	assert_int_equal(ndz_io_write_full(file, buf, sizeof(buf), 0, NULL), 0);
	assert_int_equal(ndz_io_set_size(file, sizeof(buf), NULL), 0);
	assert_int_equal(ndz_io_open_fault(file, 0, 0, 1024, 2048, &f, NULL), 0);
	assert_int_equal(f->size, 4096);
	assert_int_equal(f->is_regular, 1);
	assert_int_equal(ndz_io_open_sub(f, 1024, 1024, &sub, NULL), 0);
	assert_int_equal(sub->ops->zero(sub, 0, 1024, NULL), 0);
	assert_int_equal(sub->ops->flush(sub, NULL), 0);
	ndz_io_close(sub);
	assert_int_equal(f->ops->zero(f, 0, 1024, NULL), NDZ_EIO);
	assert_int_equal(ndz_io_read_full(f, out, sizeof(out), 0, NULL, NULL), 0);
	assert_memory_equal(out, buf, 1024);
	assert_true(all_equal(out + 1024, 1024, 0));
	assert_memory_equal(out + 2048, buf + 2048, 2048);
	ndz_io_close(f);                /* closes the file too */
	unlink(p);
	free(p);
}

/* ---- partial transfers: an io that moves at most 7 bytes per call ---- */

struct trickle {
	uint8_t *buf;
	size_t len;
	unsigned calls;
};

static ssize_t trickle_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	struct trickle *t = io->priv;

	(void)sys;
	t->calls++;
	if (off >= t->len)
		return 0;
	if (len > 7)
		len = 7;
	if (len > t->len - off)
		len = (size_t)(t->len - off);
	memcpy(buf, t->buf + off, len);
	return (ssize_t)len;
}

static ssize_t trickle_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off,
			      int *sys)
{
	(void)sys;
	struct trickle *t = io->priv;

	t->calls++;
	if (off >= t->len)
		return 0;              /* no room: write_full must not loop forever */
	if (len > 7)
		len = 7;
	if (len > t->len - off)
		len = (size_t)(t->len - off);
	memcpy(t->buf + off, buf, len);
	return (ssize_t)len;
}

static void test_partial_transfers(void **state)
{
	static const struct ndz_io_ops ops = { trickle_pread, trickle_pwrite, NULL, NULL, NULL, NULL, NULL };
	uint8_t buf[100], src[100], out[100];
	struct trickle t = { buf, sizeof(buf), 0 };
	struct ndz_io io;
	size_t got;

	(void)state;
	memset(&io, 0, sizeof(io));
	io.ops = &ops;
	io.priv = &t;
	io.size = sizeof(buf);
	fill(src, sizeof(src), 42);
	/* a write in many pieces lands whole */
	assert_int_equal(ndz_io_write_full(&io, src, 100, 0, NULL), 0);
	assert_memory_equal(buf, src, 100);
	assert_int_equal(t.calls, 15);
	/* a read in many pieces, and a short one counted exactly */
	t.calls = 0;
	assert_int_equal(ndz_io_read_full(&io, out, 100, 0, &got, NULL), 0);
	assert_int_equal(got, 100);
	assert_memory_equal(out, src, 100);
	assert_int_equal(t.calls, 15);
	assert_int_equal(ndz_io_read_full(&io, out, 50, 60, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 40);
	assert_memory_equal(out, src + 60, 40);
	/* a write that stops moving is an error, not a hang */
	assert_int_equal(ndz_io_write_full(&io, src, 10, 95, NULL), NDZ_EIO);
	assert_memory_equal(buf + 95, src, 5);
}

/* A missing target is created sparse at the size asked; an existing one is kept. */
static void test_open_target(void **state)
{
	char dir[] = "/tmp/ndz-io-target.XXXXXX", path[64];
	struct ndz_io *io;
	struct stat st;
	int created = -1;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t", dir);
	assert_int_equal(ndz_io_open_target(path, 5000000, &created, &io, NULL), 0);
	assert_int_equal(created, 1);
	assert_int_equal(io->size, 5000000);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 5000000);
	assert_true(st.st_blocks * 512 < 5000000);          /* sparse */
	ndz_io_close(io);
	assert_int_equal(ndz_io_open_target(path, 9000000, &created, &io, NULL), 0);
	assert_int_equal(created, 0);
	assert_int_equal(io->size, 5000000);                /* an existing file is not resized */
	ndz_io_close(io);
	unlink(path);
	snprintf(path, sizeof(path), "%s/no/such/dir", dir);
	assert_true(ndz_io_open_target(path, 1, &created, &io, NULL) < 0);
	assert_null(io);
	assert_int_equal(created, 0);
	rmdir(dir);
}

/* A pipe read and written in order; anything else is refused, not guessed at. */
static void test_stream(void **state)
{
	struct ndz_io *w, *r;
	uint8_t buf[8];
	size_t got;
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(ndz_io_open_stream(fds[1], "pipe-in", &w, NULL), 0);
	assert_int_equal(ndz_io_open_stream(fds[0], "pipe-out", &r, NULL), 0);
	assert_int_equal(w->is_stream, 1);
	assert_int_equal(w->size, 0);
	assert_int_equal(ndz_io_write_full(w, "abc", 3, 0, NULL), 0);
	assert_int_equal(ndz_io_write_full(w, "def", 3, 3, NULL), 0);
	assert_int_equal(w->ops->pwrite(w, "x", 1, 0, NULL), NDZ_ENOTSUP);
	assert_int_equal(ndz_io_zero(w, 6, 2, NULL), 0);
	assert_int_equal(ndz_io_flush(w, NULL), 0);         /* nothing to sync on a pipe */
	assert_non_null(w->unsynced);                 /* and it says so */
	assert_string_equal(w->unsynced, "a pipe");
	ndz_io_close(w);                              /* the descriptor stays open */
	assert_int_equal(close(fds[1]), 0);
	assert_int_equal(ndz_io_read_full(r, buf, 8, 0, NULL, NULL), 0);
	assert_memory_equal(buf, "abcdef\0\0", 8);
	assert_int_equal(r->ops->pread(r, buf, 1, 3, NULL), NDZ_ENOTSUP);
	assert_int_equal(ndz_io_read_full(r, buf, 4, 8, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 0);
	ndz_io_close(r);
	close(fds[0]);
}

/* A file cut after open reads short past its new end, never zeros up to the old one. */
static void test_file_shrinks(void **state)
{
	enum { N = 4 * 65536 };
	uint8_t *src = malloc(N), *out = malloc(N);
	struct ndz_io *io;
	char *p = temp_path();
	size_t got;
	int fd;

	(void)state;
	assert_non_null(src);
	assert_non_null(out);
	fill(src, N, 5);
	fd = open(p, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, src, N), N);
	assert_int_equal(close(fd), 0);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_READ, &io, NULL), 0);
	assert_int_equal(io->size, N);
	assert_int_equal(truncate(p, N / 2 + 100), 0);
	/* in the part left: data */
	assert_int_equal(ndz_io_read_full(io, out, 1000, 0, NULL, NULL), 0);
	assert_memory_equal(out, src, 1000);
	/* across the cut: what is left, then the end */
	memset(out, 0xee, N);
	assert_int_equal(ndz_io_read_full(io, out, N / 2, N / 2, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 100);
	assert_memory_equal(out, src + N / 2, 100);
	/* wholly past it: nothing */
	assert_int_equal(ndz_io_read_full(io, out, 4096, N - 4096, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 0);
	/* cut to a hole at its end: the hole reads as zeros up to the new end only */
	assert_int_equal(truncate(p, N / 2 + 200), 0);
	assert_int_equal(ndz_io_read_full(io, out, 300, N / 2 + 100, &got, NULL), NDZ_ESHORTREAD);
	assert_int_equal(got, 100);
	ndz_io_close(io);
	unlink(p);
	free(p);
	free(src);
	free(out);
}

/* A flush of a file unlinked while written fails: what it holds is gone. */
static void test_file_unlinked(void **state)
{
	struct ndz_io *io;
	char *p = temp_path();

	(void)state;
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE, &io, NULL), 0);
	assert_int_equal(ndz_io_write_full(io, "abc", 3, 0, NULL), 0);
	assert_int_equal(ndz_io_flush(io, NULL), 0);
	assert_null(io->unsynced);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(ndz_io_write_full(io, "def", 3, 3, NULL), 0);
	assert_int_equal(ndz_io_flush(io, NULL), NDZ_EGONE);
	ndz_io_close(io);
	free(p);
}

/* A failed call is named: the io, what was done, and the system's reason. */
static void test_fail_messages(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_io *io, *sub;
	char *p = temp_path();
	uint8_t buf[4] = { 0 };
	int rc;

	(void)state;
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_READ, &io, NULL), 0);
	assert_int_equal(ndz_io_set_size(io, 0, &e), NDZ_EIO);
	{
		char want[300];

		snprintf(want, sizeof(want), "%s: cannot set its size to 0 bytes: %s", p,
			 strerror(e.sys));
		assert_int_not_equal(e.sys, 0);
		assert_string_equal(ndz_error_msg(&e), want);
		/* the first error wins */
		assert_int_equal(ndz_io_write_full(io, buf, 4, 0, &e), NDZ_EIO);
		assert_string_equal(ndz_error_msg(&e), want);
		ndz_error_clear(&e);
		rc = ndz_io_write_full(io, buf, 4, 2, &e);
		assert_int_equal(rc, NDZ_EIO);
		assert_int_equal(e.code, NDZ_EIO);
		assert_int_equal(e.sys, EBADF);
		snprintf(want, sizeof(want), "%s: write error at byte 2: %s", p, strerror(EBADF));
		assert_string_equal(ndz_error_msg(&e), want);
		ndz_error_clear(&e);
		assert_int_equal(ndz_io_read_full(io, buf, 4, 0, NULL, &e), NDZ_ESHORTREAD);
		snprintf(want, sizeof(want), "%s: ends at byte 0: %s", p,
			 ndz_strerror(NDZ_ESHORTREAD));
		assert_string_equal(ndz_error_msg(&e), want);
	}
	ndz_io_close(io);
	/* through a window, the file's reason comes along */
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE, &io, NULL), 0);
	assert_int_equal(ndz_io_write_full(io, "abcd", 4, 0, NULL), 0);
	ndz_io_close(io);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_READ, &io, NULL), 0);
	assert_int_equal(ndz_io_open_sub(io, 1, 3, &sub, NULL), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_io_write_full(sub, buf, 2, 0, &e), NDZ_EIO);
	assert_int_equal(e.sys, EBADF);
	ndz_io_close(sub);
	ndz_io_close(io);
	/* no system reason: the code's message */
	assert_int_equal(ndz_io_open_mem(buf, 4, 0, &io, NULL), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_io_write_full(io, buf, 4, 0, &e), NDZ_EIO);
	assert_string_equal(ndz_error_msg(&e), "memory: write error at byte 0: input/output error");
	ndz_error_clear(&e);
	assert_int_equal(ndz_io_open_sub(io, 2, 3, &sub, &e), NDZ_ERANGE);
	assert_string_equal(ndz_error_msg(&e), "memory: bytes 2+3 are past its end");
	ndz_io_close(io);
	/* opening: the path and the reason */
	ndz_error_clear(&e);
	unlink(p);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_READ, &io, &e), NDZ_ENOENT);
	assert_non_null(strstr(ndz_error_msg(&e), "No such file or directory"));
	assert_non_null(strstr(ndz_error_msg(&e), p));
	ndz_error_clear(&e);
	assert_int_equal(ndz_io_open_file("/dev/null", NDZ_IO_READ, &io, &e), NDZ_ENOTSUP);
	assert_string_equal(ndz_error_msg(&e), "/dev/null: not a regular file or block device");
	free(p);
}

/*
 * Reads of one io from several threads at once, some of them failing: each
 * call's error is its own (nothing is kept in the io), so no lock is needed.
 */
struct reader_arg {
	struct ndz_io *io;
	int past_end;                  /* read across the end: a short read */
	int ok;
};

static void *reader_thread(void *arg)
{
	struct reader_arg *a = arg;
	uint8_t buf[512];
	int i;

	a->ok = 1;
	for (i = 0; i < 200; i++) {
		struct ndz_error e = { 0 };
		uint64_t off = a->past_end ? a->io->size - 100 : (uint64_t)(i % 8) * 512;
		int rc = ndz_io_read_full(a->io, buf, sizeof(buf), off, NULL, &e);

		if (a->past_end ? rc != NDZ_ESHORTREAD || e.code != NDZ_ESHORTREAD ||
				  !strstr(ndz_error_msg(&e), "ends at byte") :
				  rc != 0 || e.code != 0 || buf[0] != (uint8_t)(off / 512))
			a->ok = 0;
	}
	return NULL;
}

static void test_threads_have_own_errors(void **state)
{
	struct reader_arg args[4];
	pthread_t t[4];
	struct ndz_io *io;
	uint8_t data[4096];
	char *p = temp_path();
	int i;

	(void)state;
	for (i = 0; i < 4096; i++)
		data[i] = (uint8_t)(i / 512);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE, &io, NULL), 0);
	assert_int_equal(ndz_io_write_full(io, data, sizeof(data), 0, NULL), 0);
	ndz_io_close(io);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_READ, &io, NULL), 0);
	for (i = 0; i < 4; i++) {
		args[i] = (struct reader_arg){ io, i % 2, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, reader_thread, &args[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].ok, 1);
	}
	ndz_io_close(io);
	unlink(p);
	free(p);
}

/*
 * ndz_io_drop_cache: advisory, so what is asserted is that it reaches a file through
 * a view (inside it only) and that the bytes read after it are the bytes written.
 */
static void test_drop_cache(void **state)
{
	char *p = temp_path();
	uint8_t buf[8192], back[4096];
	struct ndz_io *io, *sub, *mem;

	(void)state;
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE, &io, NULL), 0);
	assert_int_equal(ndz_io_write_full(io, buf, sizeof(buf), 0, NULL), 0);
	assert_int_equal(ndz_io_flush(io, NULL), 0);
	ndz_io_close(io);
	assert_int_equal(ndz_io_open_file(p, 0, &io, NULL), 0);  /* its size now */
	assert_int_equal(ndz_io_open_sub(io, 4096, 4096, &sub, NULL), 0);
	ndz_io_drop_cache(io, 0, sizeof(buf));
	ndz_io_drop_cache(sub, 0, 4096);
	ndz_io_drop_cache(sub, 4096, 4096);        /* outside the view: nothing */
	ndz_io_drop_cache(sub, 0, 0);
	assert_int_equal(ndz_io_read_full(sub, back, sizeof(back), 0, NULL, NULL), 0);
	assert_memory_equal(back, buf, sizeof(back));
	ndz_io_close(sub);
	ndz_io_close(io);
	/* an io without a cache is left alone */
	assert_int_equal(ndz_io_open_mem(buf, sizeof(buf), 0, &mem, NULL), 0);
	ndz_io_drop_cache(mem, 0, sizeof(buf));
	assert_int_equal(ndz_io_read_full(mem, back, sizeof(back), 0, NULL, NULL), 0);
	assert_memory_equal(back, buf, sizeof(back));
	ndz_io_close(mem);
	unlink(p);
	free(p);
}


/* ---- direct writes ---- */

/* The pieces of a direct write: unaligned edges buffered, blocks straight or copied. */
static void test_direct_piece(void **state)
{
	static uint8_t mem[65536] __attribute__((aligned(4096)));
	enum ndz_direct_how how;

	(void)state;
	/* aligned offset, length and memory: all of it straight */
	assert_int_equal(ndz_io_direct_piece(8192, 65536, mem, 4096, 512, 1 << 20, &how), 65536);
	assert_int_equal(how, NDZ_DIRECT_STRAIGHT);
	/* an offset off the block: buffered up to the next boundary */
	assert_int_equal(ndz_io_direct_piece(4096 + 1536, 65536, mem, 4096, 512, 1 << 20, &how),
			 2560);
	assert_int_equal(how, NDZ_DIRECT_BUFFERED);
	/* ... or less, when the write ends first */
	assert_int_equal(ndz_io_direct_piece(100, 50, mem, 512, 512, 1 << 20, &how), 50);
	assert_int_equal(how, NDZ_DIRECT_BUFFERED);
	/* aligned, but less than a block: buffered */
	assert_int_equal(ndz_io_direct_piece(4096, 4095, mem, 4096, 512, 1 << 20, &how), 4095);
	assert_int_equal(how, NDZ_DIRECT_BUFFERED);
	/* a tail after whole blocks: the blocks now, the tail on the next call */
	assert_int_equal(ndz_io_direct_piece(0, 3 * 4096 + 700, mem, 4096, 512, 1 << 20, &how),
			 3 * 4096);
	assert_int_equal(how, NDZ_DIRECT_STRAIGHT);
	assert_int_equal(ndz_io_direct_piece(3 * 4096, 700, mem + 3 * 4096, 4096, 512, 1 << 20,
					     &how), 700);
	assert_int_equal(how, NDZ_DIRECT_BUFFERED);
	/* memory off its alignment: through the copy, at most the copy's size */
	assert_int_equal(ndz_io_direct_piece(0, 65536, mem + 8, 512, 512, 1 << 20, &how), 65536);
	assert_int_equal(how, NDZ_DIRECT_BOUNCE);
	assert_int_equal(ndz_io_direct_piece(0, 65536, mem + 8, 512, 512, 16384, &how), 16384);
	assert_int_equal(how, NDZ_DIRECT_BOUNCE);
	/* a copy size not a multiple of the block is cut to one */
	assert_int_equal(ndz_io_direct_piece(0, 65536, mem + 8, 4096, 512, 10000, &how), 8192);
	assert_int_equal(how, NDZ_DIRECT_BOUNCE);
	/* memory aligned to what the target needs, not more: straight */
	assert_int_equal(ndz_io_direct_piece(512, 1024, mem + 512, 512, 512, 1 << 20, &how), 1024);
	assert_int_equal(how, NDZ_DIRECT_STRAIGHT);
	assert_int_equal(ndz_io_direct_piece(512, 1024, mem + 4, 512, 4, 1 << 20, &how), 1024);
	assert_int_equal(how, NDZ_DIRECT_STRAIGHT);
}

/*
 * Writes to a file with direct writes on, at every kind of offset and from aligned and
 * unaligned memory, through a window at an offset off the block too: what is read
 * back (buffered, as the seeding and verifying reads are) is what was written, and
 * the counts say which way each byte went.
 */
static void test_direct_file(void **state)
{
	enum { N = 8 << 20 };
	uint8_t *model = calloc(1, N), *out = malloc(N), *src = NULL;
	struct ndz_io_direct_stats st;
	struct ndz_io *io, *win;
	char *p = temp_path();
	uint64_t total = 0;
	int on;

	(void)state;
	assert_int_equal(posix_memalign((void **)&src, 4096, N), 0);
	assert_non_null(model);
	assert_non_null(out);
	fill(src, N, 9);
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_WRITE, &io, NULL), 0);
	assert_int_equal(ndz_io_set_size(io, N, NULL), 0);
	/* read first, so that the page cache holds what a direct write must replace */
	assert_int_equal(ndz_io_read_full(io, out, N, 0, NULL, NULL), 0);
	on = ndz_io_direct(io, NULL);
	assert_true(on == 0 || on == 1);
	ndz_io_direct_stats(io, &st);
	if (!on) {
		/* a file system that refuses O_DIRECT (the test's TMPDIR): said why */
		assert_non_null(st.off_why);
		print_message("direct writes refused here: %s\n", st.off_why);
	} else {
		assert_int_equal(st.on, 1);
		assert_int_equal(ndz_io_is_direct(io), 1);
		assert_true(st.off_align >= 512 && st.mem_align >= 1);
	}
#define W(off, len, from) do { \
		assert_int_equal(ndz_io_write_full(io, src + (from), (len), (off), NULL), 0); \
		memcpy(model + (off), src + (from), (len)); total += (len); \
	} while (0)
	W(0, 1 << 20, 0);                          /* aligned: straight */
	W(1 << 20, 65536, 8);                      /* memory off: through the copy */
	W(3 << 20, (1 << 20) + 4096, 3);           /* more than the copy holds */
	W((1 << 20) + 65536 + 100, 20000, 5);      /* both edges off the block */
	W(2 << 20, 512, 0);                        /* less than a block */
	W((2 << 20) + 1536, 300000, 4096);         /* a sector-aligned start inside a block */
	W(N - 700, 700, 11);                       /* the file's unaligned end */
	/* through a window at an offset off the block, as a partition may be */
	assert_int_equal(ndz_io_open_sub(io, 1536, N - 4096, &win, NULL), 0);
	assert_int_equal(ndz_io_is_direct(win), on);
	assert_int_equal(ndz_io_write_full(win, src + 4096, 70000, (5 << 19) - 1536, NULL), 0);
	memcpy(model + (5 << 19), src + 4096, 70000);
	total += 70000;
	/* zeros written through it too */
	assert_int_equal(ndz_io_zero(win, 8192, 12800, NULL), 0);
	memset(model + 1536 + 8192, 0, 12800);
	ndz_io_close(win);
#undef W
	assert_int_equal(ndz_io_flush(io, NULL), 0);
	memset(out, 0xee, N);
	assert_int_equal(ndz_io_read_full(io, out, N, 0, NULL, NULL), 0);
	assert_memory_equal(out, model, N);
	ndz_io_direct_stats(io, &st);
	if (on) {
		assert_true(st.direct > 0);
		assert_true(st.bounced > 0 && st.bounced <= st.direct);
		assert_true(st.buffered > 0);
		/* every byte once (zeros of a file are a punched hole: not counted) */
		assert_int_equal(st.direct + st.buffered, total);
	}
	ndz_io_close(io);
	/* and what reached the file is the same, read by another descriptor */
	assert_int_equal(ndz_io_open_file(p, NDZ_IO_READ, &io, NULL), 0);
	memset(out, 0xee, N);
	assert_int_equal(ndz_io_read_full(io, out, N, 0, NULL, NULL), 0);
	assert_memory_equal(out, model, N);
	ndz_io_close(io);
	unlink(p);
	free(p);
	free(src);
	free(model);
	free(out);
}

/* What cannot write direct says so and writes through the cache. */
static void test_direct_refused(void **state)
{
	uint8_t buf[64] = { 0 };
	struct ndz_io_direct_stats st;
	struct ndz_io *io;
	int created;

	(void)state;
	assert_int_equal(ndz_io_open_mem(buf, sizeof(buf), 1, &io, NULL), 0);
	assert_int_equal(ndz_io_direct(io, NULL), 0);
	assert_int_equal(ndz_io_is_direct(io), 0);
	ndz_io_direct_stats(io, &st);
	assert_int_equal(st.on, 0);
	ndz_io_close(io);
	/* the null device: a target that keeps nothing (benchmarks), never direct */
	assert_int_equal(ndz_io_open_target("/dev/null", 1 << 20, &created, &io, NULL), 0);
	assert_int_equal(created, 0);
	assert_true(io->size >= (1ull << 40));
	assert_int_equal(ndz_io_direct(io, NULL), 0);
	ndz_io_direct_stats(io, &st);
	assert_string_equal(st.off_why, "not a file or block device");
	assert_int_equal(ndz_io_write_full(io, buf, sizeof(buf), 12345, NULL), 0);
	assert_int_equal(ndz_io_flush(io, NULL), 0);
	assert_string_equal(io->unsynced, "a character device");
	ndz_io_close(io);
	/* but only for writing a target: a source must be a file or device */
	assert_int_equal(ndz_io_open_file("/dev/null", NDZ_IO_READ, &io, NULL), NDZ_ENOTSUP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_fail_messages),
		cmocka_unit_test(test_threads_have_own_errors),
		cmocka_unit_test(test_mem_read),
		cmocka_unit_test(test_mem_write),
		cmocka_unit_test(test_mem_empty),
		cmocka_unit_test(test_sub),
		cmocka_unit_test(test_zeroed),
		cmocka_unit_test(test_fault_nth_read),
		cmocka_unit_test(test_fault_nth_write),
		cmocka_unit_test(test_fault_guard),
		cmocka_unit_test(test_fault_inner_errors),
		cmocka_unit_test(test_file_missing),
		cmocka_unit_test(test_file_not_regular),
		cmocka_unit_test(test_file_rw),
		cmocka_unit_test(test_file_shrinks),
		cmocka_unit_test(test_file_unlinked),
		cmocka_unit_test(test_file_zero),
		cmocka_unit_test(test_file_set_size),
		cmocka_unit_test(test_file_wrapped),
		cmocka_unit_test(test_partial_transfers),
		cmocka_unit_test(test_open_target),
		cmocka_unit_test(test_drop_cache),
		cmocka_unit_test(test_direct_piece),
		cmocka_unit_test(test_direct_file),
		cmocka_unit_test(test_direct_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
