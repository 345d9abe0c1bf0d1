/* libFuzzer target: the UFS1/UFS2 superblock and cylinder group parser, and swap. */
#include "fsmodule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* where UFS1 and makefs's UFS2 keep the superblock, and at 0 for the swap header */
	fuzz_module(&ndz_fs_ufs, data, size, 8192);
	fuzz_module(&ndz_fs_swap, data, size, 0);
	return 0;
}
