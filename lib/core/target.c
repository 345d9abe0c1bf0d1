/* Is a restore target in use, is an image output an image: checks before writing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/loop.h>

#include "err.h"
#include "image.h"
#include "target.h"

#define MAX_PARTS 128                  /* partitions of one disk looked at */
#define MAX_DEPTH 4                    /* loop devices over loop devices followed */
#define TAIL_MAX 400                   /* "is mounted on /mnt/x" and the like */

/* A block device and its partitions, by device number, with their sysfs names. */
struct devset {
	unsigned n;
	dev_t dev[MAX_PARTS + 1];
	char name[MAX_PARTS + 1][32];      /* "" for the device itself */
};

/* What a loop device's backing file must be to alias the target. */
struct backing {
	int is_blk;
	const struct devset *set;          /* is_blk: the device or one of its partitions */
	dev_t dev;                         /* else: this file */
	ino_t ino;
	dev_t skip;                        /* a loop device not looked at: where we came from */
};

static int check_dev(const char *path, dev_t rdev, int up, dev_t skip, int depth, char *tail);

/* Read a small sysfs or proc file into buf, without its trailing newline. */
static int read_small(const char *path, char *buf, size_t len)
{
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	got = read(fd, buf, len - 1);
	close(fd);
	if (got <= 0)
		return -1;
	buf[got] = 0;
	while (got > 0 && buf[got - 1] == '\n')
		buf[--got] = 0;
	return 0;
}

/* "M:m" (a sysfs dev file) to a device number. */
static int parse_dev(const char *s, dev_t *out)
{
	unsigned ma, mi;

	if (sscanf(s, "%u:%u", &ma, &mi) != 2)
		return -1;
	*out = makedev(ma, mi);
	return 0;
}

static int in_set(const struct devset *s, dev_t d, const char **name)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->dev[i] == d) {
			*name = s->name[i];
			return 1;
		}
	return 0;
}

/* The device rdev and the partitions sysfs lists under it. */
static void devset_fill(dev_t rdev, struct devset *s)
{
	char dir[64], p[400], buf[32];
	struct dirent *de;
	DIR *d;

	s->n = 1;
	s->dev[0] = rdev;
	s->name[0][0] = 0;
	snprintf(dir, sizeof(dir), "/sys/dev/block/%u:%u", major(rdev), minor(rdev));
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d)) && s->n <= MAX_PARTS) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(s->name[0]))
			continue;
		snprintf(p, sizeof(p), "%s/%s/partition", dir, de->d_name);
		if (access(p, F_OK) < 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s/dev", dir, de->d_name);
		if (read_small(p, buf, sizeof(buf)) < 0 || parse_dev(buf, &s->dev[s->n]) < 0)
			continue;
		strcpy(s->name[s->n++], de->d_name);
	}
	closedir(d);
}

/* Undo the octal escapes (\040 for a space) of /proc/self/mountinfo and /proc/swaps. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = 0;
}

/* A mount's source, when it is a path, names a device of s (btrfs shows no real one). */
static int source_in_set(const char *src, const struct devset *s, const char **name)
{
	struct stat st;

	return src[0] == '/' && stat(src, &st) == 0 && S_ISBLK(st.st_mode) &&
	       in_set(s, st.st_rdev, name);
}

/* The first mount of a device of s: "is mounted on DIR" or "its partition P is ...". */
static int find_mount(const struct devset *s, char *tail)
{
	char *line = NULL, *f[64], *save, *tok;
	size_t cap = 0;
	int found = 0;
	FILE *fp = fopen("/proc/self/mountinfo", "re");

	if (!fp)
		return 0;
	while (!found && getline(&line, &cap, fp) > 0) {
		const char *name;
		unsigned nf = 0, sep;
		dev_t d;

		for (tok = strtok_r(line, " \n", &save); tok && nf < 64;
		     tok = strtok_r(NULL, " \n", &save))
			f[nf++] = tok;
		for (sep = 6; sep < nf && strcmp(f[sep], "-") != 0; sep++)
			;
		if (nf < 7 || parse_dev(f[2], &d) < 0)
			continue;
		if (sep + 2 < nf)
			unescape(f[sep + 2]);
		if (in_set(s, d, &name) || (sep + 2 < nf && source_in_set(f[sep + 2], s, &name))) {
			unescape(f[4]);
			if (name[0])
				snprintf(tail, TAIL_MAX, "has its partition %s mounted on %s", name,
					 f[4]);
			else
				snprintf(tail, TAIL_MAX, "is mounted on %s", f[4]);
			found = 1;
		}
	}
	free(line);
	fclose(fp);
	return found;
}

/* Active swap on a device of s (set) or on the file dev/ino (set NULL). */
static int find_swap(const struct devset *s, dev_t dev, ino_t ino, char *tail)
{
	char *line = NULL, *sp;
	size_t cap = 0;
	int found = 0;
	FILE *fp = fopen("/proc/swaps", "re");

	if (!fp)
		return 0;
	while (!found && getline(&line, &cap, fp) > 0) {
		const char *name = "";
		struct stat st;

		if (line[0] != '/')
			continue;              /* the header line */
		sp = strpbrk(line, " \t\n");
		if (sp)
			*sp = 0;
		unescape(line);
		if (stat(line, &st) < 0)
			continue;
		if (s ? S_ISBLK(st.st_mode) && in_set(s, st.st_rdev, &name) :
			S_ISREG(st.st_mode) && st.st_dev == dev && st.st_ino == ino) {
			if (name[0])
				snprintf(tail, TAIL_MAX, "has its partition %s in use as swap", name);
			else
				snprintf(tail, TAIL_MAX, "is in use as swap");
			found = 1;
		}
	}
	free(line);
	fclose(fp);
	return found;
}

/* A device of s held by another (device-mapper, md, bcache): "is held by dm-0". */
static int find_holder(const struct devset *s, char *tail)
{
	char dir[96];
	struct dirent *de;

	for (unsigned i = 0; i < s->n; i++) {
		DIR *d;

		snprintf(dir, sizeof(dir), "/sys/dev/block/%u:%u/holders", major(s->dev[i]),
			 minor(s->dev[i]));
		d = opendir(dir);
		if (!d)
			continue;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				break;
		if (de) {
			if (s->name[i][0])
				snprintf(tail, TAIL_MAX, "has its partition %s held by %.64s",
					 s->name[i], de->d_name);
			else
				snprintf(tail, TAIL_MAX, "is held by %.64s", de->d_name);
		}
		closedir(d);
		if (de)
			return 1;
	}
	return 0;
}

static int backing_matches(const struct backing *b, const char *file)
{
	const char *name;
	struct stat st;

	if (stat(file, &st) < 0)
		return 0;                      /* gone: " (deleted)", or not ours to see */
	if (b->is_blk)
		return S_ISBLK(st.st_mode) && in_set(b->set, st.st_rdev, &name);
	return S_ISREG(st.st_mode) && st.st_dev == b->dev && st.st_ino == b->ino;
}

/*
 * A loop device whose backing file is b's and that is in use: "backs /dev/loop5,
 * which is mounted on /mnt/x" (how, with what after it). Loop devices are
 * compared through their backing file's device and inode, as the kernel shows
 * it, so another name for the same file is found too.
 */
static int find_loop(const struct backing *b, const char *how, int depth, char *tail)
{
	char p[300], file[4096], buf[32], inner[TAIL_MAX], lpath[300];
	struct dirent *de;
	int found = 0;
	dev_t ld;
	DIR *d;

	if (depth >= MAX_DEPTH)
		return 0;
	d = opendir("/sys/block");
	if (!d)
		return 0;
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0 || strlen(de->d_name) > 64)
			continue;
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", de->d_name);
		if (read_small(p, file, sizeof(file)) < 0)
			continue;              /* not bound to a file */
		snprintf(p, sizeof(p), "/sys/block/%s/dev", de->d_name);
		if (read_small(p, buf, sizeof(buf)) < 0 || parse_dev(buf, &ld) < 0 || ld == b->skip)
			continue;
		if (!backing_matches(b, file))
			continue;
		snprintf(lpath, sizeof(lpath), "/dev/%s", de->d_name);
		/* (a chain of names longer than TAIL_MAX is cut short, still a message) */
		if (check_dev(lpath, ld, 0, 0, depth + 1, inner))
			found = snprintf(tail, TAIL_MAX, "%s %s, which %s", how, lpath, inner) >= 0;
	}
	closedir(d);
	return found;
}

/*
 * The regular file dev/ino in use, but for loop device skip (a target's own):
 * active swap, or a loop device over it in use ("how /dev/loop5, which ...").
 */
static int check_file(dev_t dev, ino_t ino, dev_t skip, const char *how, int depth, char *tail)
{
	struct backing b = { 0, NULL, dev, ino, skip };

	return find_swap(NULL, dev, ino, tail) || find_loop(&b, how, depth, tail);
}

/*
 * Block device rdev (path: a node for it, may not exist) in use: 1 and tail says
 * how, else 0. Looked at: its mounts, swap, holders and loop devices over it (all
 * with its partitions), except loop device skip, then an exclusive open. With up,
 * a loop device's backing file or device too, which it writes through to; a loop
 * device reached from its backing is not looked at upwards again.
 */
static int check_dev(const char *path, dev_t rdev, int up, dev_t skip, int depth, char *tail)
{
	struct devset *s = malloc(sizeof(*s));
	struct backing b = { 1, NULL, 0, 0, skip };
	char p[96], file[4096], inner[TAIL_MAX];
	struct stat st;
	int fd, busy = 0;

	if (!s)
		return 0;
	devset_fill(rdev, s);
	b.set = s;
	if (find_mount(s, tail) || find_swap(s, 0, 0, tail) || find_holder(s, tail) ||
	    find_loop(&b, "backs", depth, tail))
		busy = 1;
	free(s);
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/loop/backing_file", major(rdev),
		 minor(rdev));
	if (!busy && up && depth < MAX_DEPTH && read_small(p, file, sizeof(file)) == 0 &&
	    stat(file, &st) == 0) {
		if (S_ISREG(st.st_mode))
			busy = check_file(st.st_dev, st.st_ino, rdev, "shares its backing file with",
					  depth, tail);
		else if (S_ISBLK(st.st_mode) && check_dev(file, st.st_rdev, 1, rdev, depth + 1,
							  inner))
			busy = snprintf(tail, TAIL_MAX, "is backed by %s, which %s", file,
					inner) >= 0;
	}
	if (busy)
		return 1;
	/* the kernel knows of holders we cannot see (other mount namespaces) */
	fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		close(fd);
	} else if (errno == EBUSY) {
		snprintf(tail, TAIL_MAX, "is in use (the kernel refuses an exclusive open: "
			 "mounted, perhaps in another namespace, or held by another driver)");
		return 1;
	}
	return 0;
}

int ndz_target_check(const char *path, struct ndz_error *e)
{
	char tail[TAIL_MAX];
	struct stat st;

	if (stat(path, &st) < 0)
		return 0;
	if ((S_ISBLK(st.st_mode) && check_dev(path, st.st_rdev, 1, 0, 0, tail)) ||
	    (S_ISREG(st.st_mode) && check_file(st.st_dev, st.st_ino, 0, "backs", 0, tail)))
		return ndz_error_set(e, NDZ_EBUSY, 0, "%s %s", path, tail);
	return 0;
}

static const char *kind(mode_t m)
{
	return S_ISBLK(m) ? "a block device" : S_ISCHR(m) ? "a character device" :
	       S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a pipe" :
	       S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int ndz_output_check(const char *path, int force, struct ndz_error *e)
{
	struct ndz_error pe = { 0 };
	struct stat lst, st;
	int rc;

	if (lstat(path, &lst) < 0)
		return 0;
	if (stat(path, &st) < 0)
		st = lst;                      /* a link to nothing: judged as a link */
	if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return ndz_error_set(e, NDZ_ENOTFILE, 0, "%s is %s%s, not an image file%s", path,
				     S_ISLNK(lst.st_mode) ? "a link to " : "", kind(st.st_mode),
				     S_ISBLK(st.st_mode) ? " (imageunzip IMAGE DEVICE restores "
				     "an image onto a device)" : "");
	if (force)
		return 0;
	if (S_ISLNK(lst.st_mode))
		return ndz_error_set(e, NDZ_EEXIST, 0, "%s is a symbolic link: the new image would "
				     "replace the link, not the file it names", path);
	if (st.st_size == 0)
		return 0;
	rc = ndz_image_probe_file(path, &pe);
	if (rc == NDZ_EBADMAGIC)
		return ndz_error_set(e, NDZ_EBADMAGIC, 0, "%s exists and is not an image", path);
	if (rc < 0)
		return ndz_error_set(e, NDZ_EBADMAGIC, 0, "%s exists and is not an image (its "
				     "first chunk header: %s)", path, ndz_strerror(rc));
	return 0;
}

/* What path's data is: its inode, its device number, and a loop device's backing inode. */
struct identity {
	dev_t dev, rdev, back_dev;
	ino_t ino, back_ino;
	int blk, loop;
};

static int identify(const char *path, struct identity *id)
{
	struct stat st;
	struct loop_info64 li;
	int fd;

	memset(id, 0, sizeof(*id));
	if (stat(path, &st) != 0)
		return -1;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	if (!S_ISBLK(st.st_mode))
		return 0;
	id->blk = 1;
	id->rdev = st.st_rdev;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	if (ioctl(fd, LOOP_GET_STATUS64, &li) == 0) {
		id->loop = 1;
		id->back_dev = (dev_t)li.lo_device;
		id->back_ino = (ino_t)li.lo_inode;
	}
	close(fd);
	return 0;
}

int ndz_same_file(const char *a, const char *b)
{
	struct identity x, y;

	if (identify(a, &x) != 0 || identify(b, &y) != 0)
		return 0;
	if (x.blk && y.blk)
		return x.rdev == y.rdev ||
		       (x.loop && y.loop && x.back_dev == y.back_dev && x.back_ino == y.back_ino);
	if (!x.blk && !y.blk)
		return x.dev == y.dev && x.ino == y.ino;
	if (x.blk)                     /* the loop device is y's */
		return x.loop && x.back_dev == y.dev && x.back_ino == y.ino;
	return y.loop && y.back_dev == x.dev && y.back_ino == x.ino;
}
