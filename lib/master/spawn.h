/*
 * Starting a session: the image's identity (what the master tells clients) and its
 * frisbeed as a process of its own session, so that it outlives the master.
 */
#ifndef NDZ_SPAWN_H
#define NDZ_SPAWN_H

#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"

/*
 * ndz_spawn_identity - the image at path: its uuid, chunks and source bytes, from
 * its first chunk. 0, or a negative code with e naming the file.
 */
int ndz_spawn_identity(const char *path, uint8_t uuid[16], uint32_t *chunks,
		       uint64_t *source_bytes, struct ndz_error *e);

/*
 * ndz_spawn - run argv[0] with argv (NULL-terminated) as a child in a new session
 * (setsid: a master killed or stopped leaves it running), stdin from /dev/null, no
 * signal blocked. Returns 0 with *pid once the program runs (an exec failure comes
 * back through a close-on-exec pipe and the child is reaped), or NDZ_EIO with e
 * saying why ("cannot run PATH: ...").
 */
int ndz_spawn(const char *const *argv, pid_t *pid, struct ndz_error *e);

#endif
