// TableSpec and ColumnSpec: sizes, presets and validation.
#include "replaydb/options.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "engine/table/table_layout.h"
#include "replaydb/table.h"
#include "util/checked_math.h"
#include "util/format.h"

namespace replaydb {

using util::Quoted;
namespace {

constexpr size_t kMaxNameLength = 128;

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<Placement> Placement::Parse(std::string_view text) {
  if (text == "host") return Host();
  if (text == "auto") return Auto();
  constexpr std::string_view kDevicePrefix = "device:";
  if (text.starts_with(kDevicePrefix) && text.size() > kDevicePrefix.size() &&
      text.size() <= kDevicePrefix.size() + 4) {
    int32_t device = 0;
    bool digits = true;
    for (char c : text.substr(kDevicePrefix.size())) {
      if (c < '0' || c > '9') digits = false;
      device = device * 10 + (c - '0');
    }
    if (digits) return Device(device);
  }
  return Status::InvalidArgument("placement " + Quoted(text) +
                                 " is not one of host, device:N (N a device index), auto");
}

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kHost: return "host";
    case Kind::kDevice: return "device:" + std::to_string(device);
    case Kind::kAuto: return "auto";
  }
  return "invalid";
}

std::string AcksName(const Acks& acks) {
  switch (acks.mode) {
    case AckMode::kTable:
      return "table";
    case AckMode::kNone:
      return "none";
    case AckMode::kLeader:
      return "leader";
    case AckMode::kLeaderDurable:
      return "leader_durable";
    case AckMode::kReplicated:
      return "replicated(" + std::to_string(acks.replicas) + ")";
  }
  return "invalid";
}

Result<Acks> ParseAcks(std::string_view text) {
  for (AckMode mode :
       {AckMode::kTable, AckMode::kNone, AckMode::kLeader, AckMode::kLeaderDurable}) {
    if (text == AcksName(Acks{mode, 0})) return Acks{mode, 0};
  }
  const std::string_view prefix = "replicated(";
  if (text.starts_with(prefix) && text.ends_with(")")) {
    const std::string_view digits = text.substr(prefix.size(), text.size() - prefix.size() - 1);
    int k = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (error == std::errc() && end == digits.data() + digits.size() && k >= 1 &&
        k <= kMaxAckReplicas) {
      return Acks::Replicated(k);
    }
  }
  return Status::InvalidArgument("acks " + Quoted(text) +
                                 " is not one of table, none, leader, leader_durable, "
                                 "replicated(K) with K from 1 to " +
                                 std::to_string(kMaxAckReplicas));
}

Status ValidateAcks(const Acks& acks, const std::string& where) {
  if (acks.mode == AckMode::kReplicated) {
    if (acks.replicas < 1 || acks.replicas > kMaxAckReplicas) {
      return Status::InvalidArgument(where + ": acks replicated(" + std::to_string(acks.replicas) +
                                     ") needs 1 to " + std::to_string(kMaxAckReplicas) +
                                     " replicas");
    }
    return Status::OK();
  }
  if (acks.mode > AckMode::kReplicated) {
    return Status::InvalidArgument(where + ": acks mode " +
                                   std::to_string(static_cast<int>(acks.mode)) +
                                   " is not an AckMode");
  }
  if (acks.replicas != 0) {
    return Status::InvalidArgument(where + ": acks " + AcksName(acks) + " with replicas " +
                                   std::to_string(acks.replicas) +
                                   " (only replicated(K) counts replicas)");
  }
  return Status::OK();
}

std::string_view PaddingName(Padding p) {
  switch (p) {
    case Padding::kNone: return "none";
    case Padding::kTail: return "tail";
  }
  return "invalid";
}

std::string_view SelectorKindName(SelectorKind s) {
  switch (s) {
    case SelectorKind::kUniform: return "uniform";
    case SelectorKind::kFifo: return "fifo";
    case SelectorKind::kLifo: return "lifo";
    case SelectorKind::kPrioritized: return "prioritized";
    case SelectorKind::kMinHeap: return "min_heap";
    case SelectorKind::kMaxHeap: return "max_heap";
  }
  return "invalid";
}

std::string_view EvictionPolicyName(EvictionPolicy e) {
  switch (e) {
    case EvictionPolicy::kOldestFirst: return "oldest_first";
    case EvictionPolicy::kLowestPriority: return "lowest_priority";
  }
  return "invalid";
}

std::string_view StepPriorityName(StepPriority p) {
  switch (p) {
    case StepPriority::kItem: return "item";
    case StepPriority::kWindowMax: return "window_max";
    case StepPriority::kWindowMean: return "window_mean";
  }
  return "invalid";
}

std::string_view WeightNormalizationName(WeightNormalization w) {
  switch (w) {
    case WeightNormalization::kBuffer: return "buffer";
    case WeightNormalization::kBatch: return "batch";
  }
  return "invalid";
}

std::string_view TableLoggingName(TableLogging l) {
  switch (l) {
    case TableLogging::kDefault: return "default";
    case TableLogging::kOn: return "on";
    case TableLogging::kOff: return "off";
  }
  return "invalid";
}

std::string_view WalSyncModeName(WalSyncMode mode) {
  switch (mode) {
    case WalSyncMode::kNone: return "none";
    case WalSyncMode::kBatch: return "batch";
    case WalSyncMode::kAlways: return "always";
  }
  return "invalid";
}

std::string_view RecoveryModeName(RecoveryMode mode) {
  switch (mode) {
    case RecoveryMode::kTolerateTornTail: return "tolerate_torn_tail";
    case RecoveryMode::kAbsoluteConsistency: return "absolute_consistency";
    case RecoveryMode::kPointInTime: return "point_in_time";
  }
  return "invalid";
}

std::string_view EndReasonName(EndReason r) {
  switch (r) {
    case EndReason::kTerminal: return "terminal";
    case EndReason::kTruncated: return "truncated";
  }
  return "invalid";
}

std::string_view TierName(Tier t) {
  switch (t) {
    case Tier::kHot: return "hot";
    case Tier::kCold: return "cold";
  }
  return "invalid";
}

size_t ColumnSpec::step_bytes() const {
  if (!shape.valid()) return std::numeric_limits<size_t>::max();
  // num_elements() saturates too, so an overflow anywhere gives SIZE_MAX.
  return util::SaturatingMul<size_t>(static_cast<uint64_t>(shape.num_elements()),
                                     DTypeSize(dtype));
}

size_t TableSpec::step_bytes() const {
  size_t total = 0;
  for (const ColumnSpec& c : columns) total = util::SaturatingAdd<size_t>(total, c.step_bytes());
  return total;
}

Status DBOptions::Validate() const {
  // The values of enum `name` in order, for the message.
  const auto bad = [](std::string_view field, int value, std::string_view names) {
    return Status::InvalidArgument("DBOptions::" + std::string(field) + " is " +
                                   std::to_string(value) + "; it must be one of " +
                                   std::string(names));
  };
  if (WalSyncModeName(wal.sync) == "invalid") {
    return bad("wal.sync", static_cast<int>(wal.sync), "none (0), batch (1), always (2)");
  }
  if (RecoveryModeName(wal.recovery) == "invalid") {
    return bad("wal.recovery", static_cast<int>(wal.recovery),
               "tolerate_torn_tail (0), absolute_consistency (1), point_in_time (2)");
  }
  if (cold_compression != ColdCompression::kNone && cold_compression != ColdCompression::kZstd &&
      cold_compression != ColdCompression::kLz4) {
    return bad("cold_compression", static_cast<int>(cold_compression),
               "none (0), zstd (1), lz4 (2)");
  }
  if (writer_resume_window.count() < 0) {
    return Status::InvalidArgument("DBOptions::writer_resume_window is " +
                                   std::to_string(writer_resume_window.count()) +
                                   " ms; it must be >= 0");
  }
  return Status::OK();
}

TableSpec TableSpec::Queue(std::string name, std::vector<ColumnSpec> columns, int64_t size) {
  TableSpec spec;
  spec.name = std::move(name);
  spec.columns = std::move(columns);
  spec.selector = SelectorKind::kFifo;
  spec.max_times_sampled = 1;
  spec.rate_limiter = RateLimiterSpec::Queue(size);
  return spec;
}

TableSpec TableSpec::Stack(std::string name, std::vector<ColumnSpec> columns, int64_t size) {
  TableSpec spec = Queue(std::move(name), std::move(columns), size);
  spec.selector = SelectorKind::kLifo;
  spec.rate_limiter = RateLimiterSpec::Stack(size);
  return spec;
}

Status TableSpec::Validate() const {
  if (!ValidName(name)) {
    return Status::InvalidArgument("table name " + Quoted(name) +
                                   " is invalid: use 1 to 128 characters of [A-Za-z0-9_.-]");
  }
  const std::string table = "table " + Quoted(name);
  if (columns.empty()) return Status::InvalidArgument(table + " has no columns");
  if (acks.mode == AckMode::kTable) {
    return Status::InvalidArgument(table +
                                   ": acks is \"table\", which only a writer's options may say "
                                   "(a table's is none, leader, leader_durable or replicated(K))");
  }
  REPLAYDB_RETURN_IF_ERROR(ValidateAcks(acks, table));
  if (max_lag_ms < 1) {
    return Status::InvalidArgument(table + ": max_lag_ms is " + std::to_string(max_lag_ms) +
                                   "; it must be >= 1");
  }

  std::set<std::string_view> seen;
  for (size_t i = 0; i < columns.size(); ++i) {
    const ColumnSpec& c = columns[i];
    if (!ValidName(c.name)) {
      return Status::InvalidArgument(table + ": column " + std::to_string(i) + " name " +
                                     Quoted(c.name) +
                                     " is invalid: use 1 to 128 characters of [A-Za-z0-9_.-]");
    }
    const std::string column = table + ": column " + Quoted(c.name);
    if (!seen.insert(c.name).second) {
      return Status::InvalidArgument(table + ": duplicate column name " + Quoted(c.name));
    }
    if (static_cast<int>(c.dtype) >= kNumDTypes) {
      return Status::InvalidArgument(column + " has unknown dtype " +
                                     std::to_string(static_cast<int>(c.dtype)));
    }
    if (!c.shape.valid()) {
      return Status::InvalidArgument(column + " has shape " + c.shape.ToString() +
                                     ": at most " + std::to_string(Shape::kMaxRank) +
                                     " dims, each >= 1");
    }
    for (int64_t d : c.shape.dims()) {
      if (d < 1) {
        return Status::InvalidArgument(column + " has shape " + c.shape.ToString() +
                                       ": every dim must be >= 1");
      }
    }
    // Computed without wrapping: a wrapped size (f32[2^62] is 2^64 bytes,
    // 0 when wrapped) would pass every check below.
    uint64_t bytes = DTypeSize(c.dtype);
    for (int64_t d : c.shape.dims()) {
      if (!util::CheckedMul(bytes, static_cast<uint64_t>(d), &bytes)) {
        return Status::InvalidArgument(
            column + " has shape " + c.shape.ToString() + " of " +
            std::string(DTypeName(c.dtype)) +
            ", whose bytes per step overflow 64 bits; a column's step holds at most " +
            std::to_string(kMaxStepBytes) + " bytes (kMaxStepBytes)");
      }
    }
    if (bytes > kMaxStepBytes) {
      return Status::InvalidArgument(column + " needs " + std::to_string(bytes) +
                                     " bytes per step, more than the limit of " +
                                     std::to_string(kMaxStepBytes) + " (kMaxStepBytes)");
    }
  }
  if (lanes < 1 || lanes > kMaxTrajectorySteps) {
    return Status::InvalidArgument(table + ": lanes is " + std::to_string(lanes) +
                                   "; it must be between 1 and " +
                                   std::to_string(kMaxTrajectorySteps));
  }
  // What a step stores: one row per lane. Each column fits, so only the
  // product can overflow (step_bytes() saturates in any case).
  const std::string vector_steps =
      lanes > 1 ? " (a vector step of " + std::to_string(lanes) + " environments)" : "";
  uint64_t stored_step_bytes = 0;
  if (!util::CheckedMul(uint64_t{step_bytes()}, static_cast<uint64_t>(lanes),
                        &stored_step_bytes) ||
      step_bytes() == std::numeric_limits<size_t>::max()) {
    return Status::InvalidArgument(table + ": a step of all columns" + vector_steps +
                                   " needs more than 2^64 bytes, more than the limit of " +
                                   std::to_string(kMaxStepBytes) + " (kMaxStepBytes)");
  }
  if (stored_step_bytes > kMaxStepBytes) {
    return Status::InvalidArgument(table + ": a step of all columns" + vector_steps + " needs " +
                                   std::to_string(stored_step_bytes) +
                                   " bytes, more than the limit of " +
                                   std::to_string(kMaxStepBytes) + " (kMaxStepBytes)");
  }
  if (block_steps < 1 || block_steps > engine::kMaxBlockSteps) {
    return Status::InvalidArgument(table + ": block_steps is " + std::to_string(block_steps) +
                                   "; it must be between 1 and " +
                                   std::to_string(engine::kMaxBlockSteps));
  }
  const uint64_t block_bytes = static_cast<uint64_t>(block_steps) * stored_step_bytes;
  if (block_bytes > engine::kMaxBlockBytes) {
    return Status::InvalidArgument(table + ": a block of " + std::to_string(block_steps) +
                                   " steps of " + std::to_string(stored_step_bytes) + " bytes is " +
                                   std::to_string(block_bytes) + " bytes, more than the limit of " +
                                   std::to_string(engine::kMaxBlockBytes) + "; lower block_steps");
  }
  if (capacity_steps < 0) {
    return Status::InvalidArgument(table + ": capacity_steps is " +
                                   std::to_string(capacity_steps) + "; it must be >= 0");
  }
  // block_bytes <= kMaxBlockBytes and blocks <= kMaxBlocks below keep
  // every later product (steps, bytes of the tier) far from overflowing.
  int64_t blocks = 0;
  if (capacity_steps > 0) {
    blocks = util::CeilDiv(capacity_steps, block_steps);
    if (blocks > engine::kMaxBlocks) {
      return Status::InvalidArgument(
          table + ": capacity_steps " + std::to_string(capacity_steps) + " needs " +
          std::to_string(blocks) + " blocks of " + std::to_string(block_steps) +
          " steps, more than the limit of " + std::to_string(engine::kMaxBlocks) +
          " blocks; lower capacity_steps or raise block_steps");
    }
  } else {
    if (capacity_bytes <= 0) {
      return Status::InvalidArgument(table + ": capacity_bytes is " +
                                     std::to_string(capacity_bytes) +
                                     "; set capacity_steps or a positive capacity_bytes");
    }
    if (static_cast<uint64_t>(capacity_bytes) < block_bytes) {
      return Status::InvalidArgument(table + ": capacity_bytes " + std::to_string(capacity_bytes) +
                                     " is smaller than one block (" + std::to_string(block_steps) +
                                     " steps x " + std::to_string(stored_step_bytes) +
                                     " bytes = " + std::to_string(block_bytes) + " bytes)");
    }
    blocks = static_cast<int64_t>(static_cast<uint64_t>(capacity_bytes) / block_bytes);
    if (blocks > engine::kMaxBlocks) {
      return Status::InvalidArgument(
          table + ": capacity_bytes " + std::to_string(capacity_bytes) + " makes " +
          std::to_string(blocks) + " blocks of " + std::to_string(block_bytes) +
          " bytes, more than the limit of " + std::to_string(engine::kMaxBlocks) +
          " blocks; lower capacity_bytes or raise block_steps");
    }
  }
  assert(blocks == engine::CapacityBlocks(*this));
  if (sequence_length < 1) {
    return Status::InvalidArgument(table + ": sequence_length is " +
                                   std::to_string(sequence_length) + "; it must be >= 1");
  }
  const int64_t capacity = blocks * block_steps;
  if (sequence_length > capacity) {
    return Status::InvalidArgument(table + ": sequence_length " + std::to_string(sequence_length) +
                                   " is larger than the hot-tier capacity of " +
                                   std::to_string(capacity) + " steps");
  }
  if (sequence_length > kMaxTrajectorySteps) {
    return Status::InvalidArgument(table + ": sequence_length " + std::to_string(sequence_length) +
                                   " exceeds the longest trajectory, " +
                                   std::to_string(kMaxTrajectorySteps) + " steps");
  }
  if (PaddingName(padding) == "invalid") {
    return Status::InvalidArgument(table + ": unknown padding " +
                                   std::to_string(static_cast<int>(padding)));
  }
  if (SelectorKindName(selector) == "invalid") {
    return Status::InvalidArgument(table + ": unknown selector " +
                                   std::to_string(static_cast<int>(selector)));
  }
  if (EvictionPolicyName(eviction) == "invalid") {
    return Status::InvalidArgument(table + ": unknown eviction policy " +
                                   std::to_string(static_cast<int>(eviction)));
  }
  if (!std::isfinite(priority_exponent) || priority_exponent < 0) {
    return Status::InvalidArgument(table + ": priority_exponent is " +
                                   std::to_string(priority_exponent) +
                                   "; it must be finite and >= 0");
  }
  if (TableLoggingName(logging) == "invalid") {
    return Status::InvalidArgument(table + ": unknown logging " +
                                   std::to_string(static_cast<int>(logging)));
  }
  const bool rotates = rotation_fraction != 0 || rotation_every_samples != 0;
  if (rotates && (!(rotation_fraction > 0 && rotation_fraction <= 1) ||
                  rotation_every_samples <= 0)) {
    return Status::InvalidArgument(
        table + ": rotation_fraction is " + std::to_string(rotation_fraction) +
        " and rotation_every_samples " + std::to_string(rotation_every_samples) +
        "; rotation needs a fraction in (0, 1] and a sample count > 0 (both 0: off)");
  }
  if (rotates && !spill) {
    return Status::InvalidArgument(table +
                                   ": rotation needs spill: trajectories rotated out of the hot "
                                   "tier go to the cold tier");
  }
  if (StepPriorityName(step_priority) == "invalid") {
    return Status::InvalidArgument(table + ": unknown step_priority " +
                                   std::to_string(static_cast<int>(step_priority)));
  }
  if (priority_device < -1) {
    return Status::InvalidArgument(table + ": priority_device is " +
                                   std::to_string(priority_device) +
                                   "; use -1 (host) or a CUDA device index");
  }
  if (priority_device >= 0 && selector != SelectorKind::kPrioritized &&
      selector != SelectorKind::kUniform) {
    return Status::InvalidArgument(table + ": priority_device " + std::to_string(priority_device) +
                                   " needs the prioritized or uniform selector, not " +
                                   std::string(SelectorKindName(selector)));
  }
  if (placement.kind != Placement::Kind::kHost && placement.kind != Placement::Kind::kDevice &&
      placement.kind != Placement::Kind::kAuto) {
    return Status::InvalidArgument(table + ": unknown placement kind " +
                                   std::to_string(static_cast<int>(placement.kind)));
  }
  if (placement.kind == Placement::Kind::kDevice && placement.device < 0) {
    return Status::InvalidArgument(table + ": placement device:" +
                                   std::to_string(placement.device) +
                                   " names no device; use device:N with N >= 0");
  }
  if (placement.kind == Placement::Kind::kDevice && priority_device >= 0 &&
      placement.device != priority_device) {
    return Status::InvalidArgument(
        table + ": placement " + placement.ToString() + " and priority_device " +
        std::to_string(priority_device) +
        " differ; keep the blocks on the priorities' device or in host memory");
  }
  if (priority_device >= 0 && max_times_sampled != 0) {
    return Status::InvalidArgument(
        table + ": priority_device " + std::to_string(priority_device) +
        " needs max_times_sampled = 0 (device draws are not counted per item), got " +
        std::to_string(max_times_sampled));
  }
  if (priority_device >= 0 && eviction != EvictionPolicy::kOldestFirst) {
    return Status::InvalidArgument(table + ": priority_device " + std::to_string(priority_device) +
                                   " needs eviction oldest_first (device-side updates are not "
                                   "seen by the host), got " +
                                   std::string(EvictionPolicyName(eviction)));
  }
  if (max_times_sampled < 0 || max_times_sampled > engine::kMaxTimesSampledLimit) {
    return Status::InvalidArgument(table + ": max_times_sampled is " +
                                   std::to_string(max_times_sampled) +
                                   "; it must be between 0 (unlimited) and " +
                                   std::to_string(engine::kMaxTimesSampledLimit));
  }
  if (lanes > 1) {
    // docs/vector_tables.md: what a vector table's first version refuses.
    const std::string vector_table =
        table + ": a vector table (lanes " + std::to_string(lanes) + ")";
    const auto refuse = [&](const std::string& what) {
      return Status::InvalidArgument(vector_table + " needs " + what);
    };
    for (const ColumnSpec& c : columns) {
      if (c.shape.rank() >= Shape::kMaxRank) {
        return refuse("columns of at most " + std::to_string(Shape::kMaxRank - 1) +
                      " dims (it stores [lanes, shape...]); column " + Quoted(c.name) +
                      " has shape " + c.shape.ToString());
      }
    }
    if (sequence_length != 1) {
      return refuse("sequence_length 1, got " + std::to_string(sequence_length));
    }
    if (selector != SelectorKind::kUniform) {
      return refuse("the uniform selector, got " + std::string(SelectorKindName(selector)));
    }
    if (max_times_sampled != 0) {
      return refuse("max_times_sampled 0, got " + std::to_string(max_times_sampled));
    }
    if (eviction != EvictionPolicy::kOldestFirst) {
      return refuse("eviction oldest_first, got " + std::string(EvictionPolicyName(eviction)));
    }
    if (spill) return refuse("spill off");
    if (block_steps * lanes > kMaxTrajectorySteps) {
      return refuse("block_steps * lanes <= " + std::to_string(kMaxTrajectorySteps) +
                    " (item keys hold step * lanes + environment), got " +
                    std::to_string(block_steps) + " * " + std::to_string(lanes));
    }
  }
  return rate_limiter.Validate().WithContext(table);
}

}  // namespace replaydb
