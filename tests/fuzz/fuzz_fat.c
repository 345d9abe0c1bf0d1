/* libFuzzer target: the FAT12/16/32 boot sector and allocation table parser. */
#include "fsmodule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_module(&ndz_fs_fat, data, size, 0);
	return 0;
}
