/* libFuzzer target: the btrfs superblock, chunk map and tree walks. */
#include "fsmodule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_module(&ndz_fs_btrfs, data, size, 0);
	return 0;
}
