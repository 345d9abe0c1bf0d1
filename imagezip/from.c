/* imagezip --from-image: an image (ours or the original Frisbee's) as the source. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "codec/convert.h"
#include "from.h"

struct ndz_io *from_image(const char *path, const char *out_path, const char *orig_key,
			  struct ndz_scan_result *scan, struct ndz_orig_reloc **labels,
			  uint32_t *nlabels)
{
	struct ndz_orig_keys k = { 0 };
	struct ndz_unpacked u;
	struct ndz_error e = { 0 };
	struct ndz_io *in, *scratch;
	char tmp[PATH_MAX];
	const char *dir = getenv("TMPDIR");
	int fd;

	if (orig_key && ndz_orig_load_keys(orig_key, NULL, &k, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (ndz_io_open_file(path, NDZ_IO_READ | NDZ_IO_SEQUENTIAL, &in, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	/* the restore, beside the output (room for it there), sparse and unlinked */
	if (strcmp(out_path, "-") != 0)
		snprintf(tmp, sizeof(tmp), "%s.scratch.XXXXXX", out_path);
	else
		snprintf(tmp, sizeof(tmp), "%s/imagezip.scratch.XXXXXX", dir ? dir : "/tmp");
	fd = mkstemp(tmp);
	if (fd < 0)
		cli_die(EXIT_FAIL, "%s: cannot create a scratch file", tmp);
	close(fd);
	if (ndz_io_open_file(tmp, NDZ_IO_WRITE, &scratch, &e) < 0) {
		unlink(tmp);
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	}
	unlink(tmp);
	if (ndz_image_unpack(in, orig_key ? &k : NULL, scratch, &u, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	memset(&k, 0, sizeof(k));
	ndz_io_close(in);
	if (labels) {
		*labels = u.labels;
		*nlabels = u.disklabels;
	} else {
		free(u.labels);
	}
	if (u.disklabels && !labels)
		cli_warn("%s: %u FreeBSD disklabel relocation(s) are not kept: the label is stored "
			 "with offsets relative to its slice, as a plain restore of the original "
			 "writes it", path, u.disklabels);
	memset(scan, 0, sizeof(*scan));
	scan->alloc = u.alloc;
	scan->bytes = u.bytes;
	scan->image_kind = NDZ_KIND_WHOLE;
	return scratch;
}
