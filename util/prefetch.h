// Software prefetch for the hot paths that walk state scattered over many
// cache lines (one trajectory, block and slot entry per environment of a
// vector append; a trajectory's item entries, kMetaStride apart).
#ifndef REPLAYDB_UTIL_PREFETCH_H_
#define REPLAYDB_UTIL_PREFETCH_H_

namespace replaydb::util {

// Asks for the cache line at `p`, to be written soon, kept in every cache
// level. A hint: never faults, whatever `p` is.
inline void PrefetchForWrite(const void* p) { __builtin_prefetch(p, 1, 3); }

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_PREFETCH_H_
