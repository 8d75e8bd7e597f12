#ifndef HOIST_CHECKSUM_H
#define HOIST_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>

/// Extends a CRC32C (Castagnoli) over `len` bytes. Start with 0; the result is final (no extra xor).
/// Uses the SSE4.2 `crc32` instruction when the CPU has it, else a slicing-by-8 table.
uint32_t hoist_crc32c_update(uint32_t crc, const void *buf, size_t len);

/// The same by the table alone, whatever the CPU (to check the hardware path against).
uint32_t hoist_crc32c_update_software(uint32_t crc, const void *buf, size_t len);

/// The CRC32C of A followed by B, from the CRC32C of A, that of B and B's length: how the
/// checksums of a parallel upload's parts make the whole object's.
uint32_t hoist_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

/// 1 when the hardware path is in use.
int hoist_crc32c_hardware(void);
#endif
