/*
 * frisbee-upload: send an image (a file, or a stream such as imagezip's output on
 * stdin) to an image master (mfrisbeed), which checks it and stores it under a name.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/format.h"
#include "ctl/upload.h"

#define EXIT_REFUSED 3                 /* the master refused before the transfer */

/* Progress counts image bytes sent; once all are, the master checks and flushes them. */
static void show_progress(void *ctx, uint64_t sent, int sent_all)
{
	struct cli_progress *p = ctx;

	cli_progress_update(p, sent, (uint32_t)(sent / NDZ_CHUNK_SIZE));
	if (sent_all)
		cli_progress_phase(p, "flushing");
}

static const char usage_text[] =
	"Usage: frisbee-upload -M HOST[:PORT] -I NAME [options] FILE|-\n"
	"Upload an image to an image master (mfrisbeed), which checks every chunk and\n"
	"stores it as image NAME; '-' reads the image from stdin, e.g.\n"
	"  imagezip /dev/sda - | frisbee-upload -M master -I golden -\n\n"
	"  -M, --master HOST[:PORT] the master (TCP port 3563 by default)\n"
	"  -I, --image NAME         the image's name on the master\n"
	"  -s, --size BYTES         the image's size, checked by the master (default: a\n"
	"                           file's size; not known for '-')\n"
	"  -w, --wait SECONDS       how long to wait for the master at each step (default\n"
	"                           60; for its verdict after the last byte, at least 600)\n"
	"  -o, --progress           show progress and the time left (with a known size):\n"
	"                           a line redrawn on a terminal, else a plain line\n"
	"                           every few seconds\n"
	"      --progress=json      progress as one JSON object a line (see the man page)\n"
	"  -q, --quiet              only errors\n"
	"  -v, --verbose            say what happens\n"
	"  -h, --help               this help\n"
	"  -V, --version            show the version and exit\n"
	"\nExit status: 0 the master checked, synced and stored the image; 1 failure (the\n"
	"image was rejected, the input or the network failed, no answer); 2 bad usage;\n"
	"3 the master refused the upload before it began (unknown image, access denied,\n"
	"another upload to NAME running, quota, too many uploads at once).\n";

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "master", required_argument, NULL, 'M' },
		{ "image", required_argument, NULL, 'I' },
		{ "size", required_argument, NULL, 's' },
		{ "wait", required_argument, NULL, 'w' },
		{ "progress", optional_argument, NULL, 'o' },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	const char *master = NULL, *name = NULL, *path;
	struct ndz_error e = { 0 };
	uint64_t size = 0;
	int c, fd, wait_s = 60, refused, rc, progress = 0;
	struct cli_progress prog;
	struct stat st;
	char rate[64];

	cli_init(argv[0]);
	while ((c = getopt_long(argc, argv, "M:I:s:w:oqvhV", lopts, NULL)) != -1) {
		switch (c) {
		case 'M': master = optarg; break;
		case 'I': name = optarg; break;
		case 's':
			if (cli_parse_u64(optarg, 1, &size) != 0 || size == 0)
				cli_usage_error("-s: bad size '%s'", optarg);
			break;
		case 'w': wait_s = cli_parse_int(optarg, "-w", 1, 3600); break;
		case 'o': progress = cli_progress_option(optarg); break;
		default: cli_common_option(c, usage_text); break;
		}
	}
	if (!master || !name)
		cli_usage_error("-M HOST and -I NAME are required");
	if (optind + 1 != argc)
		cli_usage_error(optind == argc ? "an image file or '-' is required" :
				"unexpected argument '%s'", argv[optind + 1]);
	if (!ndz_ctl_valid_name(name))
		cli_usage_error("-I: '%s' is not a valid image name (%s)", name,
				NDZ_CTL_NAME_RULE);
	path = argv[optind];
	if (strcmp(path, "-") == 0) {
		fd = 0;
		path = "stdin";
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			cli_die(EXIT_FAIL, "%s: %s", path, strerror(errno));
	}
	if (!size && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		size = (uint64_t)st.st_size;
	cli_progress_init(&prog, progress, "sending", "image", "sent");
	cli_progress_total(&prog, size, (uint32_t)(size / NDZ_CHUNK_SIZE));
	rc = ndz_upload_send(master, name, fd, size, wait_s, show_progress, &prog, &refused, &e);
	cli_progress_end(&prog, rc == 0);
	if (fd != 0)
		close(fd);
	if (rc < 0)
	{
		/* reading the input, or what it holds: the message names it */
		int mine = !refused && (e.code == NDZ_EIO || e.code == NDZ_EBADMAGIC);

		cli_die(e.code == NDZ_EINVAL ? EXIT_USAGE : refused ? EXIT_REFUSED : EXIT_FAIL,
			"%s%s%s", mine ? path : "", mine ? ": " : "", ndz_error_msg(&e));
	}
	if (cli_verbose)
		cli_info("%s stored as image '%s' on %s (%.1f s, %s, checked and flushed by "
			 "the master in %.1f s)", path, name, master, cli_progress_elapsed(&prog),
			 cli_progress_rate(&prog, rate, sizeof(rate)), prog.flush_s);
	return EXIT_OK;
}
