/*
 * Before a program overwrites something: is a restore target in use (a mounted
 * filesystem, swap, a device-mapper or md member, the file behind a mounted loop
 * device), and is an image output an image at all?
 */
#ifndef NDZ_TARGET_H
#define NDZ_TARGET_H

#include "err.h"

/*
 * ndz_target_check - may path be restored onto? Not while something uses it.
 * A block device is in use when it or one of its partitions is mounted (by device
 * number in /proc/self/mountinfo, or a mount whose source names it), is active
 * swap, is held by another device (/sys/dev/block/M:m/holders), backs a loop
 * device that is in use, shares its backing file with one (a loop device), or
 * cannot be opened exclusively (O_EXCL: mounted in another mount namespace, or
 * any other exclusive holder). A regular file is in use when it is active swap or
 * backs a loop device that is in use (matched by device and inode, not by name).
 * A path that does not exist, or cannot be examined, passes: opening it will say
 * why. Nothing is written; an exclusive open is closed again at once, so this is
 * a check at the start, not a lock.
 * Returns 0, or NDZ_EBUSY with e naming what is in use where ("/dev/loop3 is
 * mounted on /mnt/x").
 */
int ndz_target_check(const char *path, struct ndz_error *e);

/*
 * ndz_output_check - may an image be written to path, by a new file renamed over
 * it? Yes when nothing is there, when it is an empty regular file, or a regular
 * file that starts with a valid chunk header (an image, replaced). Else:
 * NDZ_ENOTFILE when path names (or links to) anything but a regular file (a
 * device node, a pipe, a directory: never replaced, whatever force says);
 * unless force, NDZ_EEXIST when path is a symbolic link (the rename would
 * replace the link, not the file it names) and NDZ_EBADMAGIC when the file is
 * not an image or cannot be read to tell. e names path and the reason.
 */
int ndz_output_check(const char *path, int force, struct ndz_error *e);

/*
 * ndz_same_file - 1 when paths a and b (symbolic links followed) reach the same
 * data: one inode (hard links too), one block device, or a loop device and the
 * file (or another loop device's file) it is backed by, matched by device and
 * inode. 0 otherwise, and when either cannot be examined (opening it will say why).
 */
int ndz_same_file(const char *a, const char *b);

#endif
