/* libFuzzer target: the XFS superblock, log head, AGF and free-space B+tree parser. */
#include "fsmodule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_module(&ndz_fs_xfs, data, size, 0);
	return 0;
}
