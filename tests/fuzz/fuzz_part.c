/* libFuzzer target: the MBR/EBR, GPT and BSD disklabel parsers over a memory disk. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/io.h"
#include "part.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the input is the start of a disk; a copy of its tail sits at the end (backup GPT) */
	size_t disk = 1u << 20;
	uint8_t *buf;
	struct ndz_io *io;
	struct ndz_ptable t;
	struct ndz_error err = { 0 };

	if (size > disk)
		size = disk;
	buf = calloc(1, disk);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (size >= 1024)
		memcpy(buf + disk - 512, data + size - 512, 512);
	if (ndz_io_open_mem(buf, disk, 0, &io, NULL) == 0) {
		ndz_ptable_init(&t);
		if (ndz_part_read(io, &t, &err) == 0) {
			for (size_t i = 0; i < t.n; i++) {
				struct ndz_io *sub;
				struct ndz_ptable b;

				if (ndz_io_open_sub(io, t.v[i].start * 512, t.v[i].count * 512,
						    &sub, NULL) < 0)
					continue;
				ndz_ptable_init(&b);
				ndz_bsd_read(sub, &b, &err);
				ndz_ptable_release(&b);
				ndz_io_close(sub);
			}
		}
		ndz_ptable_release(&t);
		/* the input as a slice holding a disklabel */
		ndz_bsd_read(io, &t, &err);
		ndz_ptable_release(&t);
		ndz_io_close(io);
	}
	free(buf);
	return 0;
}
