// DevicePriorityTable on CUDA: host-side staging and the calls into the
// device entry points of priority_device.cuh.
//
// Host state: key -> (slot, flags) in a KeySlotMap; where the table chooses
// slots, a free-slot stack (slots freed by Remove are reused first, most
// recent first), and with caller_slots each held slot's key instead (for
// InsertAt's error); per slot whether it holds an item (kSlotHeld), whether
// the device's hash table maps the slot's key (kSlotOnDevice) and whether
// the slot got a new key since the last flush (kSlotNewKey); and the staged
// changes since the last flush:
//   slot_writes_      the final content of every touched slot (coalesced:
//                     one entry per slot, later changes overwrite it)
//   pending_deletes_  keys to delete from the device hash table (removed
//                     keys that were on the device)
//   dirty_segments_   level-0 segments whose sums must be recomputed
// The hash inserts of a flush are the slot writes of kSlotNewKey slots: a
// key inserted and removed between two flushes never reaches the device.
// A flush packs all of it into one byte stream, copies it to the device
// through two pinned chunks (each reused only after the event recorded
// behind its copy has completed) and applies it with kernels on the table's
// internal stream: slot writes, hash deletes then inserts (or a rebuild of
// the hash table when it would pass 3/4 full with tombstones), and the sums
// of every touched segment, bottom-up.
// nvcc warns (2810) when a [[nodiscard]] class such as Status is assigned.
#pragma nv_diag_suppress 2810

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/runtime/cuda_status.cuh"
#include "kernels/priority/device_priority_table.h"
#include "kernels/runtime/gpu.h"
#include "kernels/priority/key_slot_map.h"
#include "kernels/priority/priority_device.cuh"

namespace replaydb::kernels {
namespace {

using priority::HashEntry;
using priority::HashView;
using priority::KeySlot;
using priority::kMaxLevels;
using priority::kSegmentBits;
using priority::kSegmentItems;
using priority::SlotWrite;
using priority::TreeView;

constexpr uint32_t kPositive = 1;     // map flag: the last host-side priority was > 0
constexpr uint8_t kSlotOnDevice = 1;  // the device hash table maps the slot's key
constexpr uint8_t kSlotNewKey = 2;    // the slot got a new key since the last flush
constexpr uint8_t kSlotHeld = 4;      // the slot holds an item (host-side, staged changes counted)

constexpr size_t kPinnedChunkBytes = size_t{8} << 20;
constexpr int64_t kMaxCapacity = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxBatch = (int64_t{1} << 31) - 1;

size_t Align256(size_t bytes) {
  return (bytes + 255) & ~size_t{255};
}

uint64_t NextPowerOfTwo(uint64_t x) {
  uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

bool ValidPriority(double priority) {
  return std::isfinite(priority) && priority >= 0.0;
}

cudaStream_t AsStream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

// cudaMalloc with the bytes and purpose in the error.
template <typename T>
Status DeviceAlloc(T** ptr, size_t bytes, const char* what) {
  void* p = nullptr;
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMalloc(&p, bytes),
                                "cudaMalloc(" + std::to_string(bytes) + " bytes for " + what + ")");
  *ptr = static_cast<T*>(p);
  return Status::OK();
}

class DevicePriorityTableImpl final : public DevicePriorityTable {
 public:
  explicit DevicePriorityTableImpl(const Options& options)
      : device_(options.device),
        capacity_(options.capacity),
        alpha_(options.alpha),
        seed_(options.seed),
        caller_slots_(options.caller_slots),
        track_updates_(options.track_updates) {}
  ~DevicePriorityTableImpl() override;

  Status Init();

  Status Insert(ItemKey key, double priority) override;
  Status InsertAt(ItemKey key, double priority, int64_t slot) override;
  Status Remove(ItemKey key) override;
  Status SetPriority(ItemKey key, double priority) override;
  int64_t size() const override { return size_; }

  Status Flush(void* stream) override;
  Status Sample(int64_t batch, const SampleParams& params, uint64_t* d_keys, float* d_probabilities,
                float* d_weights, void* stream) override;
  Status UpdatePriorities(const uint64_t* d_keys, const float* d_priorities, int64_t n,
                          void* stream) override;
  Result<int64_t> SkippedUpdates() override;
  Result<std::vector<double>> ReadPriorities(const std::vector<ItemKey>& keys) override;
  Result<double> Mass() override;
  Result<std::unique_ptr<Updated>> NewUpdated(int64_t max_items) override;
  Status CollectUpdated(int mark, Updated* into) override;

 private:
  struct Section {
    const void* data;
    size_t bytes;
    size_t offset;  // in the packed stream
  };

  TreeView tree() const {
    TreeView t{};
    t.d_values = d_values_;
    for (int k = 1; k <= top_; ++k) t.d_levels[k] = d_levels_[k];
    t.top = top_;
    return t;
  }
  HashView hash() const { return HashView{d_hash_, hash_entries_ - 1}; }

  void StageSlot(int32_t slot, ItemKey key, double priority);
  // Stages a new item in the free `slot`, already entered in map_.
  void StageNewItem(int32_t slot, ItemKey key, double priority);
  // Applies every staged change on stream_. REQUIRES: device_ is current.
  Status FlushStaged();
  // Copies the sections, packed, to d_stage_ (grown as needed).
  Status Upload(const std::vector<Section>& sections, size_t total);
  // Grows a device scratch buffer to `bytes`; the old one is freed only
  // after stream_ has finished with it.
  Status EnsureScratch(void** buffer, size_t* have, size_t bytes, const char* what);

  // The table's stream waits for the caller's, and the other way round.
  Status StreamWaitsForCaller(void* stream);
  Status CallerWaitsForStream(void* stream);

  // ---- options
  const int device_;
  const int64_t capacity_;
  const double alpha_;
  const uint64_t seed_;
  const bool caller_slots_;
  const bool track_updates_;

  // ---- host state
  KeySlotMap map_;
  std::vector<int32_t> free_slots_;  // !caller_slots_ only
  int64_t next_fresh_slot_ = 0;      // !caller_slots_ only
  std::vector<ItemKey> slot_keys_;   // caller_slots_ only: per kSlotHeld slot, its key
  int64_t size_ = 0;
  int64_t num_positive_ = 0;
  uint64_t sample_calls_ = 0;

  // ---- staged changes
  std::vector<SlotWrite> slot_writes_;
  std::vector<int32_t> slot_write_index_;  // per slot: index in slot_writes_ or -1
  std::vector<uint8_t> slot_state_;        // per slot: kSlotHeld, kSlotOnDevice, kSlotNewKey
  std::vector<unsigned long long> pending_deletes_;
  std::vector<int32_t> dirty_segments_;
  std::vector<uint8_t> segment_dirty_;  // per level-0 segment

  // ---- device state
  int top_ = 1;
  int64_t level_entries_[kMaxLevels] = {};  // entries of level k, unpadded
  unsigned long long* d_slot_keys_ = nullptr;
  double* d_priorities_ = nullptr;  // -1 marks an empty slot
  uint8_t* d_marks_ = nullptr;      // track_updates_: per slot, kLogMark | kCheckpointMark
  float* d_values_ = nullptr;
  double* d_levels_[kMaxLevels] = {};
  HashEntry* d_hash_ = nullptr;
  uint64_t hash_entries_ = 0;
  int64_t hash_used_ = 0;  // live entries + tombstones
  unsigned long long* d_skipped_ = nullptr;
  unsigned* d_counters_ = nullptr;            // SampleKernel's LastBlockToFinish
  unsigned long long* d_min_bits_ = nullptr;  // SampleKernel's batch minimum
  priority::ClaimState claims_{};             // UpdateCooperativeKernel's state
  int cooperative_grid_ = 0;                  // its blocks; 0: no cooperative launches

  // ---- streams, staging and scratch
  cudaStream_t stream_ = nullptr;
  cudaEvent_t caller_ready_ = nullptr;
  cudaEvent_t table_done_ = nullptr;
  void* pinned_[2] = {nullptr, nullptr};
  cudaEvent_t pinned_free_[2] = {nullptr, nullptr};
  size_t pinned_bytes_ = 0;
  int next_pinned_ = 0;
  void* d_stage_ = nullptr;
  size_t stage_bytes_ = 0;
  void* d_update_temp_ = nullptr;
  size_t update_temp_bytes_ = 0;
  void* d_sample_temp_ = nullptr;
  size_t sample_temp_bytes_ = 0;
};

DevicePriorityTableImpl::~DevicePriorityTableImpl() {
  ScopedDevice on(device_);
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  void* device_buffers[] = {d_slot_keys_, d_priorities_,  d_values_,      d_hash_,
                            d_skipped_,   d_counters_,    d_min_bits_,    claims_.d_entry_of,
                            d_stage_,     d_update_temp_, d_sample_temp_, d_marks_};
  for (void* p : device_buffers) {
    if (p != nullptr) (void)cudaFree(p);
  }
  for (int k = 1; k < kMaxLevels; ++k) {
    if (d_levels_[k] != nullptr) (void)cudaFree(d_levels_[k]);
    for (int32_t* p : {claims_.d_marks[k], claims_.d_expected[k], claims_.d_arrived[k]}) {
      if (p != nullptr) (void)cudaFree(p);
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (pinned_[i] != nullptr) (void)cudaFreeHost(pinned_[i]);
    if (pinned_free_[i] != nullptr) (void)cudaEventDestroy(pinned_free_[i]);
  }
  if (caller_ready_ != nullptr) (void)cudaEventDestroy(caller_ready_);
  if (table_done_ != nullptr) (void)cudaEventDestroy(table_done_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Status DevicePriorityTableImpl::Init() {
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                                "cudaStreamCreateWithFlags");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&caller_ready_, cudaEventDisableTiming),
                                "cudaEventCreateWithFlags");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&table_done_, cudaEventDisableTiming),
                                "cudaEventCreateWithFlags");
  for (int i = 0; i < 2; ++i) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        cudaEventCreateWithFlags(&pinned_free_[i], cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  }

  // Levels: 0 is per slot; add levels until one fits a single segment, and
  // always have at least one sum level.
  level_entries_[0] = capacity_;
  top_ = 0;
  do {
    level_entries_[top_ + 1] = (level_entries_[top_] + kSegmentItems - 1) / kSegmentItems;
    ++top_;
  } while (level_entries_[top_] > kSegmentItems);

  const size_t cap = static_cast<size_t>(capacity_);
  const auto padded = [](int64_t entries) {
    return static_cast<size_t>((entries + kSegmentItems - 1) / kSegmentItems) * kSegmentItems;
  };
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_slot_keys_, sizeof(uint64_t) * cap, "slot keys"));
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_priorities_, sizeof(double) * cap, "slot priorities"));
  const size_t values_bytes = sizeof(float) * padded(capacity_);
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_values_, values_bytes, "slot values"));
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_values_, 0, values_bytes, stream_),
                                "cudaMemsetAsync(slot values)");
  for (int k = 1; k <= top_; ++k) {
    const size_t bytes = sizeof(double) * padded(level_entries_[k]);
    REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_levels_[k], bytes, "segment sums"));
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_levels_[k], 0, bytes, stream_),
                                  "cudaMemsetAsync(segment sums)");
  }
  REPLAYDB_RETURN_IF_CUDA_ERROR(priority::DeviceFill(d_priorities_, capacity_, -1.0, stream_),
                                "FillKernel launch");
  if (track_updates_) {
    REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_marks_, cap, "update marks"));
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_marks_, 0, cap, stream_),
                                  "cudaMemsetAsync(update marks)");
  }

  hash_entries_ = NextPowerOfTwo(std::max<uint64_t>(2 * cap, 1024));
  const size_t hash_bytes = sizeof(HashEntry) * hash_entries_;
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_hash_, hash_bytes, "the key hash table"));
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_hash_, 0xff, hash_bytes, stream_),
                                "cudaMemsetAsync(key hash table)");
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_skipped_, sizeof(unsigned long long), "a counter"));
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_skipped_, 0, sizeof(unsigned long long), stream_),
                                "cudaMemsetAsync(skipped counter)");
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_counters_, sizeof(unsigned), "a counter"));
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_counters_, 0, sizeof(unsigned), stream_),
                                "cudaMemsetAsync(counter)");
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_min_bits_, sizeof(unsigned long long), "a minimum"));
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaMemsetAsync(d_min_bits_, 0xff, sizeof(unsigned long long), stream_),
      "cudaMemsetAsync(minimum)");

  // UpdateCooperativeKernel: as many blocks as can all be resident, and its
  // per-entry counters (zero) per level.
  int cooperative = 0;
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device_),
      "cudaDeviceGetAttribute(cooperative launch)");
  if (cooperative) {
    int sms = 0;
    int per_sm = 0;
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_),
        "cudaDeviceGetAttribute(multiprocessors)");
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, priority::UpdateCooperativeKernel,
                                                      priority::kBigBlockThreads, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor(UpdateCooperativeKernel)");
    cooperative_grid_ = sms * per_sm;
  }
  if (cooperative_grid_ > 0) {
    REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(
        &claims_.d_entry_of, sizeof(long long) * priority::kCooperativeMaxUpdates, "claims"));
    for (int k = 1; k <= top_; ++k) {
      const size_t bytes = sizeof(int32_t) * static_cast<size_t>(level_entries_[k]);
      for (int32_t** p : {&claims_.d_marks[k], &claims_.d_expected[k], &claims_.d_arrived[k]}) {
        REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(p, bytes, "update counters"));
        REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(*p, 0, bytes, stream_),
                                      "cudaMemsetAsync(update counters)");
      }
    }
  }
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");

  slot_write_index_.assign(cap, -1);
  slot_state_.assign(cap, 0);
  if (caller_slots_) slot_keys_.assign(cap, 0);
  segment_dirty_.assign(static_cast<size_t>(level_entries_[1]), 0);
  return Status::OK();
}

// ------------------------------------------------------------ host changes

void DevicePriorityTableImpl::StageSlot(int32_t slot, ItemKey key, double priority) {
  int32_t& index = slot_write_index_[slot];
  if (index < 0) {
    index = static_cast<int32_t>(slot_writes_.size());
    slot_writes_.push_back(SlotWrite{key, priority, slot, 0});
  } else {
    slot_writes_[index].key = key;
    slot_writes_[index].priority = priority;
  }
  const int32_t segment = slot >> kSegmentBits;
  if (!segment_dirty_[segment]) {
    segment_dirty_[segment] = 1;
    dirty_segments_.push_back(segment);
  }
}

void DevicePriorityTableImpl::StageNewItem(int32_t slot, ItemKey key, double priority) {
  slot_state_[slot] = kSlotHeld | kSlotNewKey;
  StageSlot(slot, key, priority);
  ++size_;
  if (priority > 0.0) ++num_positive_;
}

Status DevicePriorityTableImpl::Insert(ItemKey key, double priority) {
  if (caller_slots_) {
    return Status::FailedPrecondition(
        "DevicePriorityTable::Insert: the table was created with Options::caller_slots, so the "
        "caller chooses each item's slot: use InsertAt");
  }
  if (!ValidPriority(priority)) {
    return Status::InvalidArgument("DevicePriorityTable::Insert: priority " +
                                   std::to_string(priority) + " is negative or not finite");
  }
  const auto already = [key] {
    return Status::AlreadyExists("DevicePriorityTable::Insert: key " + std::to_string(key) +
                                 " is present");
  };
  if (size_ >= capacity_) {  // every slot holds a key
    if (map_.Find(key) != nullptr) return already();
    return Status::ResourceExhausted("DevicePriorityTable::Insert: all " +
                                     std::to_string(capacity_) + " slots are taken");
  }
  const int32_t slot =
      free_slots_.empty() ? static_cast<int32_t>(next_fresh_slot_) : free_slots_.back();
  const bool positive = priority > 0.0;
  bool inserted;
  map_.TryInsert(key, slot, positive ? kPositive : 0, &inserted);
  if (!inserted) return already();
  if (free_slots_.empty()) {
    ++next_fresh_slot_;
  } else {
    free_slots_.pop_back();
  }
  StageNewItem(slot, key, priority);
  return Status::OK();
}

Status DevicePriorityTableImpl::InsertAt(ItemKey key, double priority, int64_t slot) {
  if (!caller_slots_) {
    return Status::FailedPrecondition(
        "DevicePriorityTable::InsertAt: the table chooses slots (Options::caller_slots is "
        "false): use Insert");
  }
  if (slot < 0 || slot >= capacity_) {
    return Status::InvalidArgument("DevicePriorityTable::InsertAt: slot " + std::to_string(slot) +
                                   " is outside [0, capacity " + std::to_string(capacity_) + ")");
  }
  if (!ValidPriority(priority)) {
    return Status::InvalidArgument("DevicePriorityTable::InsertAt: priority " +
                                   std::to_string(priority) + " is negative or not finite");
  }
  const auto already = [key] {
    return Status::AlreadyExists("DevicePriorityTable::InsertAt: key " + std::to_string(key) +
                                 " is present");
  };
  const int32_t s = static_cast<int32_t>(slot);
  if (slot_state_[s] & kSlotHeld) {
    if (map_.Find(key) != nullptr) return already();
    return Status::FailedPrecondition("DevicePriorityTable::InsertAt: slot " +
                                      std::to_string(slot) + " holds key " +
                                      std::to_string(slot_keys_[s]) + " (Remove it first)");
  }
  bool inserted;
  map_.TryInsert(key, s, priority > 0.0 ? kPositive : 0, &inserted);
  if (!inserted) return already();
  slot_keys_[s] = key;
  StageNewItem(s, key, priority);
  return Status::OK();
}

Status DevicePriorityTableImpl::Remove(ItemKey key) {
  KeySlotMap::Entry* e = map_.Find(key);
  if (e == nullptr) {
    return Status::NotFound("DevicePriorityTable::Remove: key " + std::to_string(key) +
                            " is absent");
  }
  const int32_t slot = e->slot;
  if (slot_state_[slot] & kSlotOnDevice) pending_deletes_.push_back(key);
  slot_state_[slot] = 0;
  if (e->flags & kPositive) --num_positive_;
  map_.Erase(e);
  if (!caller_slots_) free_slots_.push_back(slot);
  StageSlot(slot, 0, -1.0);
  --size_;
  return Status::OK();
}

Status DevicePriorityTableImpl::SetPriority(ItemKey key, double priority) {
  if (!ValidPriority(priority)) {
    return Status::InvalidArgument("DevicePriorityTable::SetPriority: priority " +
                                   std::to_string(priority) + " is negative or not finite");
  }
  KeySlotMap::Entry* e = map_.Find(key);
  if (e == nullptr) {
    return Status::NotFound("DevicePriorityTable::SetPriority: key " + std::to_string(key) +
                            " is absent");
  }
  const bool was_positive = (e->flags & kPositive) != 0;
  const bool positive = priority > 0.0;
  if (was_positive != positive) {
    e->flags ^= kPositive;
    num_positive_ += positive ? 1 : -1;
  }
  StageSlot(e->slot, key, priority);
  return Status::OK();
}

// ------------------------------------------------------------ device calls

Status DevicePriorityTableImpl::StreamWaitsForCaller(void* stream) {
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventRecord(caller_ready_, AsStream(stream)),
                                "cudaEventRecord(caller stream)");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(stream_, caller_ready_, 0),
                                "cudaStreamWaitEvent(table stream)");
  return Status::OK();
}

Status DevicePriorityTableImpl::CallerWaitsForStream(void* stream) {
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventRecord(table_done_, stream_),
                                "cudaEventRecord(table stream)");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(AsStream(stream), table_done_, 0),
                                "cudaStreamWaitEvent(caller stream)");
  return Status::OK();
}

Status DevicePriorityTableImpl::EnsureScratch(void** buffer, size_t* have, size_t bytes,
                                              const char* what) {
  if (*have >= bytes) return Status::OK();
  if (*buffer != nullptr) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaFree(*buffer), "cudaFree");
    *buffer = nullptr;
    *have = 0;
  }
  const size_t grown = std::max(bytes, std::min<size_t>(2 * bytes, bytes + (size_t{64} << 20)));
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(buffer, grown, what));
  *have = grown;
  return Status::OK();
}

Status DevicePriorityTableImpl::Upload(const std::vector<Section>& sections, size_t total) {
  REPLAYDB_RETURN_IF_ERROR(EnsureScratch(&d_stage_, &stage_bytes_, total, "staged changes"));
  const size_t want_pinned = std::min(kPinnedChunkBytes, total);
  if (pinned_bytes_ < want_pinned) {
    for (int i = 0; i < 2; ++i) {
      REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(pinned_free_[i]), "cudaEventSynchronize");
      if (pinned_[i] != nullptr) {
        REPLAYDB_RETURN_IF_CUDA_ERROR(cudaFreeHost(pinned_[i]), "cudaFreeHost");
        pinned_[i] = nullptr;
      }
    }
    pinned_bytes_ = 0;
    const size_t bytes = std::min(kPinnedChunkBytes, std::max<size_t>(want_pinned, 64 << 10));
    for (int i = 0; i < 2; ++i) {
      REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMallocHost(&pinned_[i], bytes),
                                    "cudaMallocHost(" + std::to_string(bytes) + " bytes)");
    }
    pinned_bytes_ = bytes;
  }
  size_t section = 0;
  for (size_t pos = 0; pos < total; pos += pinned_bytes_) {
    const size_t len = std::min(pinned_bytes_, total - pos);
    const int buf = next_pinned_;
    next_pinned_ ^= 1;
    // The copy last issued from this buffer must be done before it is refilled.
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(pinned_free_[buf]), "cudaEventSynchronize");
    char* dst = static_cast<char*>(pinned_[buf]);
    while (section < sections.size() && sections[section].offset + sections[section].bytes <= pos) {
      ++section;
    }
    for (size_t s = section; s < sections.size() && sections[s].offset < pos + len; ++s) {
      const Section& sec = sections[s];
      const size_t from = std::max(pos, sec.offset);
      const size_t to = std::min(pos + len, sec.offset + sec.bytes);
      if (from < to) {
        std::memcpy(dst + (from - pos), static_cast<const char*>(sec.data) + (from - sec.offset),
                    to - from);
      }
    }
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(static_cast<char*>(d_stage_) + pos, dst, len,
                                                  cudaMemcpyHostToDevice, stream_),
                                  "cudaMemcpyAsync(staged changes)");
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventRecord(pinned_free_[buf], stream_),
                                  "cudaEventRecord(staging buffer)");
  }
  return Status::OK();
}

Status DevicePriorityTableImpl::FlushStaged() {
  if (slot_writes_.empty() && pending_deletes_.empty()) return Status::OK();
  // Hash inserts: the slots that got a new key, with the key they hold now.
  std::vector<KeySlot> inserts;
  for (const SlotWrite& w : slot_writes_) {
    uint8_t& state = slot_state_[w.slot];
    if (state & kSlotNewKey) {
      inserts.push_back(KeySlot{w.key, w.slot, 0});
      state = kSlotHeld | kSlotOnDevice;  // a removed slot's kSlotNewKey is cleared
    }
  }
  const bool rebuild = 4 * (hash_used_ + static_cast<int64_t>(inserts.size())) >
                       3 * static_cast<int64_t>(hash_entries_);

  // Touched entries of every level, sorted and distinct.
  std::vector<std::vector<int32_t>> touched(static_cast<size_t>(top_ + 1));
  std::sort(dirty_segments_.begin(), dirty_segments_.end());
  touched[1] = dirty_segments_;
  for (int k = 2; k <= top_; ++k) {
    for (int32_t e : touched[k - 1]) {
      const int32_t parent = e >> kSegmentBits;
      if (touched[k].empty() || touched[k].back() != parent) touched[k].push_back(parent);
    }
  }

  std::vector<Section> sections;
  size_t total = 0;
  const auto add = [&](const void* data, size_t bytes) {
    sections.push_back(Section{data, bytes, total});
    total += Align256(bytes);
    return sections.size() - 1;
  };
  const size_t writes_at = add(slot_writes_.data(), sizeof(SlotWrite) * slot_writes_.size());
  const size_t deletes_at =
      add(pending_deletes_.data(), rebuild ? 0 : sizeof(uint64_t) * pending_deletes_.size());
  const size_t inserts_at = add(inserts.data(), rebuild ? 0 : sizeof(KeySlot) * inserts.size());
  size_t touched_at[kMaxLevels + 1] = {};
  for (int k = 1; k <= top_; ++k) {
    touched_at[k] = add(touched[k].data(), sizeof(int32_t) * touched[k].size());
  }
  REPLAYDB_RETURN_IF_ERROR(Upload(sections, total));
  char* stage = static_cast<char*>(d_stage_);

  REPLAYDB_RETURN_IF_CUDA_ERROR(
      priority::DeviceApplySlotWrites(
          reinterpret_cast<const SlotWrite*>(stage + sections[writes_at].offset),
          static_cast<int>(slot_writes_.size()), d_slot_keys_, d_priorities_, d_values_, alpha_,
          stream_),
      "ApplySlotWritesKernel launch");
  if (rebuild) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        priority::DeviceHashRebuild(hash(), d_slot_keys_, d_priorities_, capacity_, stream_),
        "HashRebuildKernel launch");
    hash_used_ = size_;
  } else {
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        priority::DeviceHashDelete(
            hash(),
            reinterpret_cast<const unsigned long long*>(stage + sections[deletes_at].offset),
            static_cast<int>(pending_deletes_.size()), stream_),
        "HashDeleteKernel launch");
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        priority::DeviceHashInsert(
            hash(), reinterpret_cast<const KeySlot*>(stage + sections[inserts_at].offset),
            static_cast<int>(inserts.size()), stream_),
        "HashInsertKernel launch");
    hash_used_ += static_cast<int64_t>(inserts.size());
  }
  for (int k = 1; k <= top_; ++k) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        priority::DeviceRecomputeEntries(
            tree(), k, reinterpret_cast<const int32_t*>(stage + sections[touched_at[k]].offset),
            static_cast<int>(touched[k].size()), stream_),
        "RecomputeEntriesKernel launch");
  }

  for (const SlotWrite& w : slot_writes_) slot_write_index_[w.slot] = -1;
  for (int32_t s : dirty_segments_) segment_dirty_[s] = 0;
  slot_writes_.clear();
  dirty_segments_.clear();
  pending_deletes_.clear();
  return Status::OK();
}

Status DevicePriorityTableImpl::Flush(void* stream) {
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_ERROR(StreamWaitsForCaller(stream));
  REPLAYDB_RETURN_IF_ERROR(FlushStaged());
  return CallerWaitsForStream(stream);
}

Status DevicePriorityTableImpl::Sample(int64_t batch, const SampleParams& params, uint64_t* d_keys,
                                       float* d_probabilities, float* d_weights, void* stream) {
  if (batch < 0 || batch > kMaxBatch) {
    return Status::InvalidArgument("DevicePriorityTable::Sample: batch " + std::to_string(batch) +
                                   " is outside [0, 2^31 - 1]");
  }
  const bool weights = params.beta >= 0.0;
  if (std::isnan(params.beta) || std::isinf(params.beta)) {
    return Status::InvalidArgument("DevicePriorityTable::Sample: beta is not finite");
  }
  if (batch > 0 &&
      (d_keys == nullptr || d_probabilities == nullptr || (weights && d_weights == nullptr))) {
    return Status::InvalidArgument(
        "DevicePriorityTable::Sample: null output (d_keys, d_probabilities, or d_weights with "
        "beta >= 0)");
  }
  if (num_positive_ == 0) {
    return Status::FailedPrecondition("DevicePriorityTable::Sample: no item of priority > 0 (" +
                                      std::to_string(size_) + " items present)");
  }
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  priority::SampleArgs args{};
  args.tree = tree();
  args.d_slot_keys = d_slot_keys_;
  args.batch = batch;
  args.stratified = params.stratified;
  args.seed = seed_;
  args.call = sample_calls_;
  args.d_keys = reinterpret_cast<unsigned long long*>(d_keys);
  args.d_probabilities = d_probabilities;
  args.d_slots = reinterpret_cast<long long*>(params.d_slots);
  args.beta = params.beta;
  args.d_counter = d_counters_;
  args.d_min_bits = d_min_bits_;
  float* weights_out = weights ? d_weights : nullptr;
  size_t temp_bytes = 0;
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      priority::DeviceSample(nullptr, temp_bytes, args, level_entries_[top_], weights_out, stream_),
      "cub::DeviceReduce::Min(sizing)");
  // Never null, so that the call below is not taken for a sizing call.
  REPLAYDB_RETURN_IF_ERROR(EnsureScratch(&d_sample_temp_, &sample_temp_bytes_,
                                         std::max<size_t>(temp_bytes, 256), "sample scratch"));
  REPLAYDB_RETURN_IF_ERROR(StreamWaitsForCaller(stream));
  REPLAYDB_RETURN_IF_ERROR(FlushStaged());
  temp_bytes = sample_temp_bytes_;
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      priority::DeviceSample(d_sample_temp_, temp_bytes, args, level_entries_[top_], weights_out,
                             stream_, params.table_weights ? capacity_ : 0),
      "DeviceSample (TableMinKernel, SampleKernel; cub::DeviceReduce::Min, "
      "ImportanceWeightsKernel)");
  ++sample_calls_;
  return CallerWaitsForStream(stream);
}

Status DevicePriorityTableImpl::UpdatePriorities(const uint64_t* d_keys, const float* d_priorities,
                                                 int64_t n, void* stream) {
  if (n < 0 || n > kMaxBatch) {
    return Status::InvalidArgument("DevicePriorityTable::UpdatePriorities: n " + std::to_string(n) +
                                   " is outside [0, 2^31 - 1]");
  }
  if (n > 0 && (d_keys == nullptr || d_priorities == nullptr)) {
    return Status::InvalidArgument("DevicePriorityTable::UpdatePriorities: null input");
  }
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  priority::UpdateArgs args{};
  args.tree = tree();
  args.hash = hash();
  args.d_priorities = d_priorities_;
  args.d_keys = reinterpret_cast<const unsigned long long*>(d_keys);
  args.d_new_priorities = d_priorities;
  args.n = static_cast<int>(n);
  args.capacity = static_cast<uint32_t>(capacity_);
  args.alpha = alpha_;
  args.d_skipped = d_skipped_;
  args.d_marks = d_marks_;
  // Enough blocks for one warp per update, all resident.
  const int64_t useful_warps = n;
  const int grid = static_cast<int>(
      std::clamp<int64_t>((useful_warps + priority::kBigBlockWarps - 1) / priority::kBigBlockWarps,
                          1, std::max(cooperative_grid_, 1)));
  const int cooperative_grid = cooperative_grid_ > 0 ? grid : 0;
  size_t temp_bytes = 0;
  REPLAYDB_RETURN_IF_CUDA_ERROR(priority::DeviceUpdatePriorities(nullptr, temp_bytes, args, claims_,
                                                                 cooperative_grid, stream_),
                                "cub::DeviceRadixSort::SortPairs(sizing)");
  // Never null, so that the call below is not taken for a sizing call.
  REPLAYDB_RETURN_IF_ERROR(EnsureScratch(&d_update_temp_, &update_temp_bytes_,
                                         std::max<size_t>(temp_bytes, 256), "update scratch"));
  REPLAYDB_RETURN_IF_ERROR(StreamWaitsForCaller(stream));
  REPLAYDB_RETURN_IF_ERROR(FlushStaged());
  temp_bytes = update_temp_bytes_;
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      priority::DeviceUpdatePriorities(d_update_temp_, temp_bytes, args, claims_, cooperative_grid,
                                       stream_),
      "DeviceUpdatePriorities (cudaLaunchCooperativeKernel(UpdateCooperativeKernel); or "
      "UpdateLookupKernel, cub::DeviceRadixSort::SortPairs, UpdateApplyKernel, "
      "UpdateLevelKernel)");
  return CallerWaitsForStream(stream);
}

Result<int64_t> DevicePriorityTableImpl::SkippedUpdates() {
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  unsigned long long skipped = 0;
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(&skipped, d_skipped_, sizeof(skipped), cudaMemcpyDeviceToHost, stream_),
      "cudaMemcpyAsync(skipped counter)");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return static_cast<int64_t>(skipped);
}

Result<double> DevicePriorityTableImpl::Mass() {
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_ERROR(FlushStaged());
  std::vector<double> top(static_cast<size_t>(level_entries_[top_]));
  if (!top.empty()) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(top.data(), d_levels_[top_],
                                                  sizeof(double) * top.size(),
                                                  cudaMemcpyDeviceToHost, stream_),
                                  "cudaMemcpyAsync(top level of sums)");
  }
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  double total = 0;
  for (double v : top) total += v;
  return total;
}

Result<std::vector<double>> DevicePriorityTableImpl::ReadPriorities(
    const std::vector<ItemKey>& keys) {
  if (keys.size() > static_cast<size_t>(kMaxBatch)) {
    return Status::InvalidArgument("DevicePriorityTable::ReadPriorities: too many keys");
  }
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_ERROR(FlushStaged());
  std::vector<double> out(keys.size());
  if (keys.empty()) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return out;
  }
  const size_t n = keys.size();
  const size_t keys_bytes = Align256(sizeof(uint64_t) * n);
  REPLAYDB_RETURN_IF_ERROR(EnsureScratch(&d_sample_temp_, &sample_temp_bytes_,
                                         keys_bytes + sizeof(double) * n, "lookup scratch"));
  auto* d_keys = static_cast<unsigned long long*>(d_sample_temp_);
  auto* d_out = reinterpret_cast<double*>(static_cast<char*>(d_sample_temp_) + keys_bytes);
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(d_keys, keys.data(), sizeof(uint64_t) * n, cudaMemcpyHostToDevice, stream_),
      "cudaMemcpyAsync(keys)");
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      priority::DeviceLookupPriorities(hash(), d_keys, static_cast<int>(n), d_priorities_, d_out,
                                       stream_),
      "LookupPrioritiesKernel launch");
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(out.data(), d_out, sizeof(double) * n, cudaMemcpyDeviceToHost, stream_),
      "cudaMemcpyAsync(priorities)");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return out;
}

// Pinned host memory the device writes through its mapping, a counter on
// the device and the event behind a collection.
class UpdatedImpl final : public DevicePriorityTable::Updated {
 public:
  UpdatedImpl(int device, int64_t max) : device_(device), max_(max) {}
  ~UpdatedImpl() override {
    ScopedDevice on(device_);
    if (done_ != nullptr) {
      (void)cudaEventSynchronize(done_);
      (void)cudaEventDestroy(done_);
    }
    if (d_count_ != nullptr) (void)cudaFree(d_count_);
    if (host_ != nullptr) (void)cudaFreeHost(host_);
  }

  Status Init() {
    ScopedDevice on(device_);
    REPLAYDB_RETURN_IF_ERROR(on.status());
    const size_t bytes = sizeof(unsigned long long) + static_cast<size_t>(max_) * 16;
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        cudaHostAlloc(&host_, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
        "cudaHostAlloc(" + std::to_string(bytes) + " bytes for collected priorities)");
    void* mapped = nullptr;
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaHostGetDevicePointer(&mapped, host_, 0),
                                  "cudaHostGetDevicePointer(collected priorities)");
    auto* base = static_cast<unsigned long long*>(mapped);
    d_keys_ = base + 1;
    d_priorities_ = reinterpret_cast<double*>(base + 1 + max_);
    REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_count_, sizeof(unsigned long long), "a counter"));
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming),
                                  "cudaEventCreateWithFlags");
    return Status::OK();
  }

  Status Wait() override {
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(done_),
                                  "cudaEventSynchronize(collected priorities)");
    return Status::OK();
  }
  int64_t count() const override {
    return std::min<int64_t>(static_cast<int64_t>(*found()), max_);
  }
  bool more() const override { return static_cast<int64_t>(*found()) > max_; }
  const uint64_t* keys() const override {
    return reinterpret_cast<const uint64_t*>(static_cast<const unsigned long long*>(host_) + 1);
  }
  const double* priorities() const override {
    return reinterpret_cast<const double*>(static_cast<const unsigned long long*>(host_) + 1 +
                                           max_);
  }

  // Queues the collection on `stream`.
  Status Collect(uint8_t* d_marks, uint8_t mark, const unsigned long long* d_slot_keys,
                 const double* d_priorities, int64_t capacity, cudaStream_t stream) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        priority::DeviceCollectMarked(d_marks, mark, d_slot_keys, d_priorities, capacity, max_,
                                      d_count_, d_keys_, d_priorities_, stream),
        "CollectMarkedKernel launch");
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(host_, d_count_, sizeof(unsigned long long),
                                                  cudaMemcpyDeviceToHost, stream),
                                  "cudaMemcpyAsync(collected count)");
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventRecord(done_, stream), "cudaEventRecord");
    return Status::OK();
  }

  int device() const { return device_; }

 private:
  const unsigned long long* found() const { return static_cast<const unsigned long long*>(host_); }

  const int device_;
  const int64_t max_;
  void* host_ = nullptr;  // [found count][max_ keys][max_ priorities]
  unsigned long long* d_keys_ = nullptr;
  double* d_priorities_ = nullptr;
  unsigned long long* d_count_ = nullptr;
  cudaEvent_t done_ = nullptr;
};

Result<std::unique_ptr<DevicePriorityTable::Updated>> DevicePriorityTableImpl::NewUpdated(
    int64_t max_items) {
  if (max_items < 1 || max_items > kMaxBatch) {
    return Status::InvalidArgument("DevicePriorityTable::NewUpdated: max_items " +
                                   std::to_string(max_items) + " is outside [1, 2^31 - 1]");
  }
  auto updated = std::make_unique<UpdatedImpl>(device_, max_items);
  REPLAYDB_RETURN_IF_ERROR(updated->Init());
  return std::unique_ptr<Updated>(std::move(updated));
}

Status DevicePriorityTableImpl::CollectUpdated(int mark, Updated* into) {
  if (!track_updates_) {
    return Status::FailedPrecondition(
        "DevicePriorityTable::CollectUpdated: the table was made without track_updates");
  }
  if (mark != kLogMark && mark != kCheckpointMark) {
    return Status::InvalidArgument("DevicePriorityTable::CollectUpdated: mark " +
                                   std::to_string(mark) + " is neither kLogMark nor kCheckpointMark");
  }
  auto* impl = dynamic_cast<UpdatedImpl*>(into);
  if (impl == nullptr || impl->device() != device_) {
    return Status::InvalidArgument(
        "DevicePriorityTable::CollectUpdated: `into` was not made by NewUpdated of this device");
  }
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_ERROR(FlushStaged());
  return impl->Collect(d_marks_, static_cast<uint8_t>(mark), d_slot_keys_, d_priorities_,
                       capacity_, stream_);
}

}  // namespace

Result<std::unique_ptr<DevicePriorityTable>> DevicePriorityTable::Create(const Options& options) {
  if (options.capacity < 1 || options.capacity > kMaxCapacity) {
    return Status::InvalidArgument("DevicePriorityTable: capacity " +
                                   std::to_string(options.capacity) + " is outside [1, 2^31 - 1]");
  }
  if (!std::isfinite(options.alpha) || options.alpha < 0.0) {
    return Status::InvalidArgument("DevicePriorityTable: alpha " + std::to_string(options.alpha) +
                                   " is negative or not finite");
  }
  std::string why;
  const int count = CudaDeviceCount(&why);
  if (count == 0) return Status::NotSupported("DevicePriorityTable: no usable GPU: " + why);
  if (options.device < 0 || options.device >= count) {
    return Status::InvalidArgument("DevicePriorityTable: device " + std::to_string(options.device) +
                                   " is outside [0, " + std::to_string(count) + ")");
  }
  auto table = std::make_unique<DevicePriorityTableImpl>(options);
  REPLAYDB_RETURN_IF_ERROR(table->Init().WithContext("DevicePriorityTable::Create"));
  return std::unique_ptr<DevicePriorityTable>(std::move(table));
}

}  // namespace replaydb::kernels
