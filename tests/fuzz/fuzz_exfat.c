/* libFuzzer target: the exFAT boot region, root directory and allocation bitmap parser. */
#include "fsmodule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_module(&ndz_fs_exfat, data, size, 0);
	return 0;
}
