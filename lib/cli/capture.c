/* The capture's scan and compression options, for imagezip and ndzctl node. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "cli.h"
#include "core/fields.h"

void cli_capture_init(struct cli_capture *c)
{
	memset(c, 0, sizeof(*c));
	ndz_zip_opts_init(&c->zip);
	c->zip.codec = NDZ_CODEC_ZSTD;          /* README: why zstd is the default */
	ndz_scan_opts_init(&c->scan);
	c->level = -1;
}

/* an int within [lo, hi], or -1 with msg naming opt */
static int number(const char *s, const char *opt, int lo, int hi, int *out, char *msg,
		  size_t len)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		snprintf(msg, len, "option %s: '%s' is not a number from %d to %d", opt, s, lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* 32 hex digits, dashes anywhere; all zero is refused (it means "random"). */
static int parse_uuid(const char *s, uint8_t *uuid)
{
	unsigned n = 0, nonzero = 0;

	for (; *s; s++) {
		int v;

		if (*s == '-')
			continue;
		if ((v = ndz_hexval((unsigned char)*s)) < 0)
			return -1;
		if (n == 32)
			return -1;
		uuid[n / 2] = (uint8_t)(n % 2 ? uuid[n / 2] | v : v << 4);
		nonzero |= (unsigned)v;
		n++;
	}
	return n == 32 && nonzero ? 0 : -1;
}

static int override(struct cli_capture *c, enum ndz_scan_action a, const char *opt,
		    const char *arg, char *msg, size_t len)
{
	int rc = ndz_scan_override_parse(&c->scan, a, arg);

	if (rc == NDZ_ERANGE)
		snprintf(msg, len, "too many partition options");
	else if (rc < 0)
		snprintf(msg, len, "%s: bad argument '%s'%s", opt, arg,
			 a == NDZ_SCAN_FORCE ? " (want N=TYPE: ext2/3/4, ntfs, ufs, fat, exfat, xfs, "
					       "btrfs, lvm, swap, bsdswap, raw)" : "");
	return rc < 0 ? -1 : 1;
}

int cli_capture_option(struct cli_capture *c, int opt, const char *arg, char *msg, size_t len)
{
	uint64_t u64;
	int v;

	switch (opt) {
	case 'z':
		if (number(arg, "-z", 0, 19, &c->level, msg, len) < 0)
			return -1;
		return 1;
	case 'C':
		if (!strcmp(arg, "zlib"))
			c->zip.codec = NDZ_CODEC_ZLIB;
		else if (!strcmp(arg, "zstd"))
			c->zip.codec = NDZ_CODEC_ZSTD;
		else {
			snprintf(msg, len, "--codec: '%s' is not zlib or zstd", arg);
			return -1;
		}
		return 1;
	case 'j':
		if (number(arg, "-j", 1, 64, &v, msg, len) < 0)
			return -1;
		c->zip.threads = v;
		return 1;
	case 'r':
		c->scan.raw = 1;
		return 1;
	case 's':
		if (number(arg, "-s", 1, 65535, &c->scan.partition, msg, len) < 0)
			return -1;
		return 1;
	case 'S':
		return override(c, NDZ_SCAN_FORCE, "-S", arg, msg, len);
	case 'R':
		return override(c, NDZ_SCAN_RAW, "-R", arg, msg, len);
	case 'I':
		return override(c, NDZ_SCAN_IGNORE, "-I", arg, msg, len);
	case 'F':
		if (cli_parse_u64(arg, 1, &u64) < 0) {
			snprintf(msg, len, "-F: bad size '%s'", arg);
			return -1;
		}
		c->scan.min_free = u64;
		return 1;
	case 'K':
		c->scan.keep_pagefile = 1;
		return 1;
	case 'L':
		c->scan.keep_journal = 1;
		return 1;
	case 'U':
		if (parse_uuid(arg, c->zip.uuid) < 0) {
			snprintf(msg, len, "--uuid: '%s' is not a UUID (32 hex digits, dashes allowed)",
				 arg);
			return -1;
		}
		return 1;
	default:
		return 0;
	}
}

int cli_capture_done(struct cli_capture *c, int to_orig, char *msg, size_t len)
{
	struct ndz_zip_opts *z = &c->zip;

	if (to_orig)
		z->codec = NDZ_CODEC_ZLIB;
	if (z->codec == NDZ_CODEC_ZSTD)
		z->level = c->level < 0 ? NDZ_ZSTD_DEFAULT_LEVEL : c->level;
	else if (c->level >= 0)
		z->level = c->level;
	if (z->codec == NDZ_CODEC_ZSTD ? z->level < 1 : z->level > 9) {
		snprintf(msg, len, "-z: level %d is outside %s for %s", z->level,
			 z->codec == NDZ_CODEC_ZSTD ? "1-19" : "0-9",
			 z->codec == NDZ_CODEC_ZSTD ? "zstd" : "zlib");
		return -1;
	}
	return 0;
}
