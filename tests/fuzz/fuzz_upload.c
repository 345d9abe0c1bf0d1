/*
 * libFuzzer target for the master's side of an upload (lib/upload.c): the input is
 * the uploaded stream. No crash; a stream accepted is whole chunks, all written
 * out, and exactly the input; one refused leaves a status that names why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/format.h"
#include "ctl/ctl.h"
#include "master/upreceive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int out = -1;
	struct ndz_upload_stats st;
	struct ndz_error e = { 0 };
	struct ndz_io *io;
	int rc;

	if (out < 0 && (out = memfd_create("fuzz_upload", 0)) < 0)
		abort();
	if (ftruncate(out, 0) != 0 || lseek(out, 0, SEEK_SET) != 0)
		abort();
	if (ndz_io_open_mem((void *)data, size, 0, &io, NULL) != 0)
		abort();
	io->is_stream = 1;             /* read in order, as from a socket */
	rc = ndz_upload_receive(io, out, 0, 0, &st, &e);
	if (rc == 0 && (e.code || st.bytes != size || size % NDZ_CHUNK_SIZE ||
			lseek(out, 0, SEEK_CUR) != (off_t)size))
		abort();
	if (rc != 0 && (ndz_ctl_status_of(rc) == NDZ_CTL_OK || !e.code))
		abort();
	ndz_io_close(io);
	return 0;
}
