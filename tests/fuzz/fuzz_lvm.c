/*
 * libFuzzer target: the LVM2 metadata text parser, and the PV module (label, PV
 * header, metadata area header and text, the LV views). Byte 0 chooses: even,
 * the rest is metadata text for ndz_lvm_parse; odd, it is the start of a PV.
 */
#include "fsmodule.h"

#define FUZZ_UUID "FmM2ok-67ab-Unwf-l2y4-B3yV-cJde-5mIhtK"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ndz_error err = { 0 };
	struct ndz_lvm_vg vg;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		fuzz_module(&ndz_fs_lvm, data + 1, size - 1, 0);
		return 0;
	}
	if (ndz_lvm_parse((const char *)data + 1, size - 1, FUZZ_UUID, &vg, &err) == 0) {
		/* map every LV's bytes back, as a walk would */
		for (size_t i = 0; i < vg.nlv; i++)
			if (vg.lv[i].linear)
				ndz_lvm_map_back(&vg, (int)i, 0, UINT64_MAX, fuzz_sink, NULL);
		ndz_lvm_vg_release(&vg);
	}
	return 0;
}
