// CRC32C (Castagnoli): the checksum of replaydb's stored bytes (catalog, WAL
// records). Polynomial 0x1EDC6F41, reflected 0x82F63B78, initial value and
// final xor 0xFFFFFFFF, as in iSCSI (RFC 3720), ext4 and LevelDB; the check
// value of "123456789" is 0xE3069283.
//
// Thread safety: pure functions.
#ifndef REPLAYDB_UTIL_CRC32C_H_
#define REPLAYDB_UTIL_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace replaydb::util {

// The CRC32C of data[0, n). `data` may be null when n == 0.
uint32_t Crc32c(const void* data, size_t n);

// The CRC32C of A + data[0, n), where `crc` is the CRC32C of some bytes A:
// Crc32cExtend(Crc32c(a, na), b, nb) == Crc32c(a followed by b).
// Crc32cExtend(0, data, n) == Crc32c(data, n).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

namespace internal {
// The two implementations Crc32cExtend picks from (for tests and benches):
// the portable tables, and the CPU instruction (the tables where the CPU
// lacks it, which Crc32cHardwareAvailable reports).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);
uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, size_t n);
bool Crc32cHardwareAvailable();
}  // namespace internal

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_CRC32C_H_
