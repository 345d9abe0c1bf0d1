/* Starting a session: the image's identity, and frisbeed as a detached child. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"
#include "core/image.h"
#include "core/io.h"

int ndz_spawn_identity(const char *path, uint8_t uuid[16], uint32_t *chunks,
		       uint64_t *source_bytes, struct ndz_error *e)
{
	struct ndz_io *io = NULL;
	struct ndz_image_reader *r = NULL;
	const struct ndz_chunk_hdr *h;
	int rc;

	if ((rc = ndz_io_open_file(path, NDZ_IO_READ, &io, e)) < 0 ||
	    (rc = ndz_image_reader_open(io, &r, e)) < 0) {
		ndz_io_close(io);
		return rc;
	}
	h = ndz_image_reader_first(r);
	memcpy(uuid, h->uuid, 16);
	*chunks = ndz_image_reader_chunks(r);
	*source_bytes = h->source_bytes;
	ndz_image_reader_free(r);
	ndz_io_close(io);
	return 0;
}

int ndz_spawn(const char *const *argv, pid_t *pid, struct ndz_error *e)
{
	int pfd[2], err = 0;
	pid_t p;

	if (pipe2(pfd, O_CLOEXEC) != 0)
		return ndz_error_set(e, NDZ_EIO, errno, "pipe");
	p = fork();
	if (p == 0) {
		sigset_t none;
		int fd = open("/dev/null", O_RDONLY);

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		if (fd > 0) {
			dup2(fd, 0);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		err = errno;
		if (write(pfd[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	if (p < 0) {
		close(pfd[0]);
		return ndz_error_set(e, NDZ_EIO, errno, "fork");
	}
	while (read(pfd[0], &err, sizeof(err)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (err) {
		waitpid(p, NULL, 0);
		return ndz_error_set(e, NDZ_EIO, err, "cannot run %s", argv[0]);
	}
	*pid = p;
	return 0;
}
