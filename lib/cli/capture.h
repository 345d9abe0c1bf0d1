/*
 * The capture's options that decide what to image and how to compress it, one
 * parser for imagezip's command line and ndzctl node's --opts (an in-process
 * capture takes the same words imagezip would).
 */
#ifndef NDZ_CLI_CAPTURE_H
#define NDZ_CLI_CAPTURE_H

#include <getopt.h>

#include "codec/zip.h"
#include "scan.h"

struct cli_capture {
	struct ndz_scan_opts scan;
	struct ndz_zip_opts zip;       /* codec zstd unless --codec zlib */
	int level;                     /* -z N; -1: the codec's default */
};

#define CLI_CAPTURE_SHORTOPTS "z:j:rs:S:R:I:F:"
#define CLI_CAPTURE_LONGOPTS                                      \
	{ "level", required_argument, NULL, 'z' },                \
	{ "threads", required_argument, NULL, 'j' },              \
	{ "raw", no_argument, NULL, 'r' },                        \
	{ "slice", required_argument, NULL, 's' },                \
	{ "fs", required_argument, NULL, 'S' },                   \
	{ "raw-part", required_argument, NULL, 'R' },             \
	{ "ignore-part", required_argument, NULL, 'I' },          \
	{ "min-free", required_argument, NULL, 'F' },             \
	{ "keep-pagefile", no_argument, NULL, 'K' },              \
	{ "keep-journal", no_argument, NULL, 'L' },               \
	{ "uuid", required_argument, NULL, 'U' },                 \
	{ "codec", required_argument, NULL, 'C' }

/* cli_capture_init - the defaults: whole source, filesystem-aware, zstd at its level. */
void cli_capture_init(struct cli_capture *c);

/*
 * cli_capture_option - take option opt (a getopt_long value) with arg: 1 when it
 * is one of CLI_CAPTURE_LONGOPTS, 0 when not; -1 for a bad argument, with the
 * reason (an imagezip usage message) in msg.
 */
int cli_capture_option(struct cli_capture *c, int opt, const char *arg, char *msg, size_t len);

/*
 * cli_capture_done - after the options: the level for the codec (to_orig: zlib),
 * checked against its range. 0, or -1 with the reason in msg.
 */
int cli_capture_done(struct cli_capture *c, int to_orig, char *msg, size_t len);

#endif
