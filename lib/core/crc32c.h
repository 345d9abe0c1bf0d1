/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), as XFS and btrfs store it. */
#ifndef NDZ_CRC32C_H
#define NDZ_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * ndz_crc32c_update - the register after len more bytes, from state (start with
 * 0xffffffff; the CRC is the final state inverted, ~state).
 */
uint32_t ndz_crc32c_update(uint32_t state, const void *buf, size_t len);

/* ndz_crc32c - the CRC-32C of len bytes. */
uint32_t ndz_crc32c(const void *buf, size_t len);

#endif
