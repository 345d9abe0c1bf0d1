/* The upload sink: what is written to one end of a socket pair, ndz_upload_send reads from the other. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl.h"
#include "upload.h"
#include "upsink.h"

struct ndz_upsink {
	int fd;                        /* the writer's end */
	int peer;                      /* the uploader's end, its input */
	pthread_t thread;
	char spec[256];
	char name[NDZ_CTL_NAME_MAX + 1];
	uint64_t size;
	int wait_s;
	/* the uploader's result, written by its thread before `ended` */
	int rc, refused;
	struct ndz_error err;
	int ended;                     /* atomic: the uploader has returned */
	int joined;                    /* the writer's: the thread was joined */
};

static void *uploader(void *arg)
{
	struct ndz_upsink *u = arg;

	u->rc = ndz_upload_send(u->spec, u->name, u->peer, u->size, u->wait_s, NULL, NULL,
				&u->refused, &u->err);
	__atomic_store_n(&u->ended, 1, __ATOMIC_RELEASE);
	/* an upload that ended early: the writer's next write fails (EPIPE) */
	shutdown(u->peer, SHUT_RDWR);
	return NULL;
}

int ndz_upsink_open(const char *spec, const char *name, uint64_t size, int wait_s,
		    struct ndz_upsink **out, struct ndz_error *e)
{
	struct ndz_upsink *u;
	char host[256];
	uint16_t port;
	sigset_t all, old;
	int sv[2], rc;

	*out = NULL;
	if (ndz_ctl_hostport(spec, NDZ_CTL_PORT, host, sizeof(host), &port, NULL) != 0 ||
	    strlen(spec) >= sizeof(u->spec))
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad master address '%s' (HOST[:PORT])", spec);
	if (!ndz_ctl_valid_name(name))
		return ndz_error_set(e, NDZ_EINVAL, 0, "'%s' is not a valid image name (%s)", name,
				     NDZ_CTL_NAME_RULE);
	u = calloc(1, sizeof(*u));
	if (!u)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "upload of image '%s': %s", name,
				     ndz_strerror(NDZ_ENOMEM));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		rc = ndz_error_set(e, NDZ_ENET, errno, "upload of image '%s': socketpair", name);
		free(u);
		return rc;
	}
	u->fd = sv[0];
	u->peer = sv[1];
	strcpy(u->spec, spec);
	strcpy(u->name, name);
	u->size = size;
	u->wait_s = wait_s;
	/* signals are the program's: its own threads take them, never the uploader */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&u->thread, NULL, uploader, u);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		close(u->fd);
		close(u->peer);
		free(u);
		return ndz_error_set(e, NDZ_ENOMEM, rc, "upload of image '%s': thread", name);
	}
	*out = u;
	return 0;
}

int ndz_upsink_fd(const struct ndz_upsink *u)
{
	return u->fd;
}

/* The uploader's result, once it has returned: its error copied into e. */
static int result(struct ndz_upsink *u, int *refused, struct ndz_error *e)
{
	if (refused)
		*refused = u->refused;
	if (u->rc < 0 && !u->err.code)
		ndz_error_set(&u->err, u->rc, 0, "upload of image '%s' to master %s: %s", u->name,
			      u->spec, ndz_strerror(u->rc));
	if (u->rc < 0)
		ndz_error_copy(e, &u->err);
	return u->rc < 0 ? u->rc : 0;
}

int ndz_upsink_write(struct ndz_upsink *u, const void *buf, size_t len, struct ndz_error *e)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(u->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && __atomic_load_n(&u->ended, __ATOMIC_ACQUIRE)) {
			pthread_join(u->thread, NULL);
			u->joined = 1;
			if (u->rc < 0)
				return result(u, NULL, e);
		}
		if (n <= 0)
			return ndz_error_set(e, NDZ_ENET, n < 0 ? errno : 0,
					     "upload of image '%s': writing", u->name);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ndz_upsink_finish(struct ndz_upsink *u, int cancel, int *refused, struct ndz_error *e)
{
	int early, rc;

	if (refused)
		*refused = 0;
	if (!u)
		return 0;
	early = __atomic_load_n(&u->ended, __ATOMIC_ACQUIRE) != 0;
	/* a stray byte: a truncated chunk, or data after the last one; never an image */
	if (cancel && !early)
		(void)!send(u->fd, "\377", 1, MSG_NOSIGNAL);
	shutdown(u->fd, SHUT_WR);
	if (!u->joined)
		pthread_join(u->thread, NULL);
	if (cancel && !early && u->rc < 0)
		rc = ndz_error_set(e, NDZ_ECANCELED, 0, "upload of image '%s' to master %s: "
				   "canceled, nothing stored", u->name, u->spec);
	else if (cancel && !early)     /* cannot be: the master took a stray byte */
		rc = ndz_error_set(e, NDZ_ECANCELED, 0, "upload of image '%s' to master %s: "
				   "canceled, but the master stored it", u->name, u->spec);
	else
		rc = result(u, refused, e);
	close(u->fd);
	close(u->peer);
	free(u);
	return rc;
}
