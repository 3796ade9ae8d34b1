#include "engine/table/writers.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "wal/records.h"

namespace replaydb::engine {

Status CheckWriterEnv(const TableImpl& table, size_t env, size_t num_envs, std::string_view what) {
  if (env < num_envs) return Status::OK();
  return Status::InvalidArgument(
      "table '" + table.name() + "': " + (what.empty() ? "" : std::string(what) + ": ") +
      "environment " + std::to_string(env) + " is out of range; the vector writer has " +
      std::to_string(num_envs) + " environments");
}

Status CheckEndReason(const TableImpl& table, EndReason reason, std::string_view what) {
  if (EndReasonName(reason) != "invalid") return Status::OK();
  return Status::InvalidArgument("table '" + table.name() + "': " + std::string(what) +
                                 ": reason " + std::to_string(static_cast<int>(reason)) +
                                 " is not an EndReason (0 terminal, 1 truncated)");
}

void SetBases(std::span<const ConstTensor> tensors, std::vector<const std::byte*>* bases) {
  bases->resize(tensors.size());
  for (size_t c = 0; c < tensors.size(); ++c) {
    (*bases)[c] = static_cast<const std::byte*>(tensors[c].data);
  }
}

namespace {

// `priorities` must be empty or hold n valid values.
Status ValidatePriorities(const TableImpl& table, std::span<const double> priorities, int64_t n,
                          std::string_view what) {
  if (priorities.empty()) return Status::OK();
  if (static_cast<int64_t>(priorities.size()) != n) {
    return Status::InvalidArgument("table '" + table.name() + "': " + std::string(what) + " has " +
                                   std::to_string(n) + " steps but " +
                                   std::to_string(priorities.size()) + " priorities");
  }
  return ValidatePrioritiesOf(table.name(), priorities, what);
}

int64_t LeadingDim(std::span<const ConstTensor> tensors) {
  return tensors.empty() || tensors[0].shape.rank() == 0 ? 0 : tensors[0].shape.dim(0);
}

}  // namespace

TrajectoryWriterImpl::TrajectoryWriterImpl(std::shared_ptr<TableImpl> table,
                                           const WriterOptions& options)
    : table_(std::move(table)), options_(options), ack_(ResolveAck(table_->spec(), options)) {}

TrajectoryWriterImpl::~TrajectoryWriterImpl() {
  // Best effort: nobody is left to report an error to.
  uint64_t seq = 0;
  (void)table_->EndTrajectory(slot_, EndReason::kTruncated, Clock::now(), &seq);
  (void)table_->SyncLog(seq, /*wait=*/false);
}

Status TrajectoryWriterImpl::Append(std::span<const ConstTensor> step,
                                    std::optional<double> priority) {
  REPLAYDB_RETURN_IF_ERROR(table_->CheckAck(ack_));
  REPLAYDB_RETURN_IF_ERROR(table_->ValidateTensors(step, -1, "step"));
  if (priority) REPLAYDB_RETURN_IF_ERROR(table_->ValidatePriority(*priority, "step"));
  SetBases(step, &bases_);
  uint64_t seq = 0;
  const double* p = priority ? &*priority : nullptr;
  const Deadline deadline = DeadlineAfter(options_.timeout);
  if (table_->device_blocks()) {
    int64_t appended = 0;
    REPLAYDB_RETURN_IF_ERROR(table_->AppendSteps(slot_, {bases_.data()}, 1, p, deadline, Staged(),
                                                 {}, &seq, &appended));
  } else {
    REPLAYDB_RETURN_IF_ERROR(table_->AppendStep(slot_, {bases_.data()}, 0, p, deadline, &seq));
  }
  return table_->AckLog(seq, ack_);
}

StagedRows* TrajectoryWriterImpl::Staged() {
  std::unique_ptr<StagedRows>& staged = staged_[staged_turn_];
  staged_turn_ ^= 1;
  if (staged == nullptr) staged = std::make_unique<StagedRows>();
  return staged.get();
}

Status TrajectoryWriterImpl::AppendMany(std::span<const ConstTensor> steps,
                                        std::span<const double> priorities) {
  REPLAYDB_RETURN_IF_ERROR(table_->CheckAck(ack_));
  const int64_t n = LeadingDim(steps);
  if (n < 0) {
    return Status::InvalidArgument("table '" + table_->name() +
                                   "': AppendMany: the tensors' leading dim (steps) is " +
                                   std::to_string(n) + "; it must be >= 0");
  }
  REPLAYDB_RETURN_IF_ERROR(table_->ValidateTensors(steps, n, "AppendMany"));
  REPLAYDB_RETURN_IF_ERROR(ValidatePriorities(*table_, priorities, n, "AppendMany"));
  SetBases(steps, &bases_);
  const Deadline deadline = DeadlineAfter(options_.timeout);
  uint64_t seq = 0;
  // The steps before a failing one are acknowledged: make them durable too.
  const auto failed = [&](const Status& s, int64_t i) {
    (void)table_->SyncLog(seq, ack_.sync);
    return s.WithContext("AppendMany step " + std::to_string(i) + " of " + std::to_string(n));
  };
  int64_t appended = 0;
  Status s = table_->AppendSteps(slot_, {bases_.data()}, n,
                                 priorities.empty() ? nullptr : priorities.data(), deadline,
                                 table_->device_blocks() ? Staged() : nullptr, {}, &seq, &appended);
  if (!s.ok()) return failed(s, appended);
  return table_->AckLog(seq, ack_);
}

Status DecodeRecordFor(const TableImpl& table, std::span<std::byte> record, int64_t entries,
                       wal::AppendStepsRecord* r) {
  const std::string what = "table '" + table.name() + "': a remote append's log record";
  Status decoded = wal::Decode(record, r);
  if (!decoded.ok()) return Status::InvalidArgument(what + ": " + decoded.message());
  if (r->table_id != table.id()) {
    return Status::InvalidArgument(what + " names table id " + std::to_string(r->table_id) +
                                   "; this table's id is " + std::to_string(table.id()));
  }
  if (r->step_bytes != table.layout().step_bytes) {
    return Status::InvalidArgument(what + " holds steps of " + std::to_string(r->step_bytes) +
                                   " bytes; this table's steps take " +
                                   std::to_string(table.layout().step_bytes));
  }
  const int64_t n = static_cast<int64_t>(r->trajectory_ids.size());
  if (entries >= 0 && n != entries) {
    return Status::InvalidArgument(what + " holds " + std::to_string(n) + " rows; the writer's " +
                                   "vector step takes " + std::to_string(entries));
  }
  if (!r->priorities.empty()) {
    REPLAYDB_RETURN_IF_ERROR(ValidatePriorities(table, r->priorities, n, "a remote append"));
  }
  return Status::OK();
}

void ColumnBases(const TableImpl& table, std::span<const std::byte> rows, int64_t first_row,
                 std::vector<const std::byte*>* bases) {
  const TableLayout& layout = table.layout();
  bases->resize(layout.column_bytes.size());
  size_t offset = static_cast<size_t>(first_row) * layout.step_bytes;
  for (size_t c = 0; c < bases->size(); ++c) {
    (*bases)[c] = rows.data() + offset;
    offset += layout.column_bytes[c];
  }
}

Status TrajectoryWriterImpl::AppendRecord(std::span<std::byte> record, int64_t first_row,
                                          int64_t* appended) {
  REPLAYDB_RETURN_IF_ERROR(table_->CheckAck(ack_));
  *appended = 0;
  wal::AppendStepsRecord r;
  REPLAYDB_RETURN_IF_ERROR(DecodeRecordFor(*table_, record, -1, &r));
  const int64_t n = static_cast<int64_t>(r.trajectory_ids.size());
  if (first_row < 0 || first_row >= n) {
    return Status::InvalidArgument("table '" + table_->name() +
                                   "': a remote append's log record holds " + std::to_string(n) +
                                   " steps; it has none from step " + std::to_string(first_row));
  }
  if (r.writer_key != 0) slot_.writer_key = r.writer_key;
  ColumnBases(*table_, r.data, first_row, &bases_);
  const int64_t rows = n - first_row;
  uint64_t seq = 0;
  Status s = table_->AppendSteps(
      slot_, {bases_.data(), table_->layout().step_bytes}, rows,
      r.priorities.empty() ? nullptr : r.priorities.data() + first_row,
      DeadlineAfter(options_.timeout), table_->device_blocks() ? Staged() : nullptr,
      first_row == 0 ? record : std::span<std::byte>(), &seq, appended);
  if (!s.ok()) {
    // The steps before the failing one are acknowledged: durable too.
    (void)table_->SyncLog(seq, ack_.sync);
    return s.WithContext("a remote append's step " + std::to_string(first_row + *appended) +
                         " of " + std::to_string(n));
  }
  return table_->AckLog(seq, ack_);
}

Result<TableImpl::Adopted> TrajectoryWriterImpl::Resume(uint64_t writer_key,
                                                        uint64_t trajectory_id) {
  REPLAYDB_ASSIGN_OR_RETURN(TableImpl::Adopted adopted, table_->Adopt(writer_key, trajectory_id));
  slot_ = WriterSlot{};
  slot_.writer_key = writer_key;
  if (adopted.state == TableImpl::Adopted::State::kOpen) slot_.trajectory = adopted.trajectory;
  return adopted;
}

void TrajectoryWriterImpl::Place(int64_t n, PlacedSteps* placed,
                                 std::vector<std::span<std::byte>>* pieces) {
  table_->PlaceSteps(slot_, placed_ahead_, n, placed, pieces);
  if (placed->trajectory != nullptr) placed_ahead_ += static_cast<int64_t>(placed->run.size());
}

Status TrajectoryWriterImpl::CommitPlaced(PlacedSteps& placed, std::span<std::byte> record,
                                          size_t data_offset) {
  const int64_t n = static_cast<int64_t>(placed.run.size());
  wal::AppendStepsRecord r;
  Status s = DecodeRecordFor(*table_, record, -1, &r);
  const size_t data_bytes = static_cast<size_t>(n) * table_->layout().step_bytes;
  // (Where the decoded data lies: only a decoded record's points into it.)
  const ptrdiff_t data_at =
      s.ok() ? reinterpret_cast<const std::byte*>(r.data.data()) - record.data() : 0;
  if (s.ok() && (static_cast<int64_t>(r.trajectory_ids.size()) != n ||
                 data_at != static_cast<ptrdiff_t>(data_offset) || r.data.size() != data_bytes)) {
    s = Status::InvalidArgument(
        "table '" + table_->name() + "': a remote append's log record holds " +
        std::to_string(r.trajectory_ids.size()) + " rows of data at byte " +
        std::to_string(data_at) + " (" + std::to_string(r.data.size()) +
        " bytes); its request said " + std::to_string(n) + " rows at byte " +
        std::to_string(data_offset) + " (" + std::to_string(data_bytes) + " bytes)");
  }
  if (!s.ok()) {
    AbandonPlaced(placed);
    return s;
  }
  placed_ahead_ -= n;
  return table_->PublishPlaced(slot_, placed, r.priorities.empty() ? nullptr : r.priorities.data());
}

void TrajectoryWriterImpl::AbandonPlaced(PlacedSteps& placed) {
  if (placed.trajectory == nullptr) return;
  placed_ahead_ -= static_cast<int64_t>(placed.run.size());
  table_->AbandonPlaced(slot_, placed);
}

Status TrajectoryWriterImpl::End(EndReason reason) {
  // Checked before anything is logged: recovery refuses a logged value it
  // does not know.
  REPLAYDB_RETURN_IF_ERROR(CheckEndReason(*table_, reason, "End"));
  uint64_t seq = 0;
  REPLAYDB_RETURN_IF_ERROR(
      table_->EndTrajectory(slot_, reason, DeadlineAfter(options_.timeout), &seq));
  return table_->AckLog(seq, ack_);
}

uint64_t TrajectoryWriterImpl::trajectory_id() const {
  return slot_.trajectory ? slot_.trajectory->id : 0;
}

int64_t TrajectoryWriterImpl::num_steps() const {
  return slot_.trajectory ? slot_.trajectory->length : 0;
}

VectorWriterImpl::VectorWriterImpl(std::shared_ptr<TableImpl> table, size_t num_envs,
                                   const WriterOptions& options)
    : table_(std::move(table)),
      options_(options),
      ack_(ResolveAck(table_->spec(), options)),
      slots_(num_envs) {
  const int parts = util::WriterParts(options.threads, num_envs);
  // Never more parts than environments.
  const int used = static_cast<int>(std::min<size_t>(static_cast<size_t>(parts), num_envs));
  if (used > 1) scratch_.fork_join = std::make_unique<util::ForkJoin>(used);
}

VectorWriterImpl::~VectorWriterImpl() {
  std::vector<size_t> envs(slots_.size());
  std::iota(envs.begin(), envs.end(), size_t{0});
  uint64_t seq = 0;
  (void)table_->EndTrajectories(slots_, envs, EndReason::kTruncated, Clock::now(), &seq);
  (void)table_->SyncLog(seq, /*wait=*/false);
}

Status VectorWriterImpl::Append(std::span<const ConstTensor> steps,
                                std::span<const double> priorities) {
  REPLAYDB_RETURN_IF_ERROR(table_->CheckAck(ack_));
  const int64_t n = static_cast<int64_t>(slots_.size());
  REPLAYDB_RETURN_IF_ERROR(table_->ValidateTensors(steps, n, "vector step"));
  REPLAYDB_RETURN_IF_ERROR(ValidatePriorities(*table_, priorities, n, "vector step"));
  SetBases(steps, &bases_);
  uint64_t seq = 0;
  Status s = table_->AppendVectorStep(slots_, VectorSteps{bases_, /*device=*/false, nullptr},
                                      priorities, DeadlineAfter(options_.timeout), &scratch_,
                                      &seq);
  Status synced = table_->AckLog(seq, ack_);
  return s.ok() ? synced : s;
}

Status VectorWriterImpl::AppendRecord(std::span<std::byte> record, int64_t first_row,
                                      int64_t* appended) {
  REPLAYDB_RETURN_IF_ERROR(table_->CheckAck(ack_));
  *appended = 0;
  if (first_row != 0) {
    return Status::InvalidArgument("table '" + table_->name() +
                                   "': a remote vector step starts at environment 0, not " +
                                   std::to_string(first_row));
  }
  wal::AppendStepsRecord r;
  REPLAYDB_RETURN_IF_ERROR(
      DecodeRecordFor(*table_, record, static_cast<int64_t>(slots_.size()), &r));
  return AppendDecoded(record, r, appended);
}

Status VectorWriterImpl::AppendRecordFrom(std::span<std::byte> record,
                                          std::span<const int64_t> first_steps) {
  REPLAYDB_RETURN_IF_ERROR(table_->CheckAck(ack_));
  const size_t n = slots_.size();
  if (first_steps.size() != n) {
    return Status::InvalidArgument("table '" + table_->name() + "': a resent vector step says " +
                                   std::to_string(first_steps.size()) + " first steps for " +
                                   std::to_string(n) + " environments");
  }
  // (Checked even when every environment holds the step: a record that
  // does not decode is refused whatever it is for.)
  wal::AppendStepsRecord r;
  REPLAYDB_RETURN_IF_ERROR(DecodeRecordFor(*table_, record, static_cast<int64_t>(n), &r));
  std::vector<uint8_t> skip(n, 0);
  size_t skipped = 0;
  for (size_t e = 0; e < n; ++e) {
    const int64_t holds = open_steps(e);
    if (holds > first_steps[e]) {
      skip[e] = 1;  // (the step is there already)
      ++skipped;
    } else if (holds < first_steps[e]) {
      // (An open trajectory holds a step at least: one with none is
      // ended, evicted or removed.)
      const uint64_t id = trajectory_id(e);
      const std::string which = "environment " + std::to_string(e) + "'s step " +
                                std::to_string(first_steps[e]) + ", but its trajectory";
      return Status::FailedPrecondition(
          "table '" + table_->name() + "': a resent vector step is " + which +
          (id == 0 ? " is not open here"
           : holds == 0
               ? " " + std::to_string(id) + " is no longer open here (ended, evicted or removed)"
               : " " + std::to_string(id) + " holds " + std::to_string(holds) +
                     " steps here: steps " + std::to_string(holds) + " to " +
                     std::to_string(first_steps[e] - 1) + " are not on this server"));
    }
  }
  if (skipped == n) return Status::OK();
  scratch_.skip = std::move(skip);
  int64_t appended = 0;
  Status s = AppendDecoded(record, r, &appended);
  scratch_.skip.clear();
  return s;
}

Status VectorWriterImpl::AppendDecoded(std::span<std::byte> record, const wal::AppendStepsRecord& r,
                                       int64_t* appended) {
  const int64_t n = static_cast<int64_t>(slots_.size());
  // Each environment's key, for the records the engine writes itself when
  // it logs the step in parts (and noted on the trajectories).
  if (!r.writer_keys.empty()) {
    for (size_t e = 0; e < slots_.size(); ++e) slots_[e].writer_key = r.writer_keys[e];
  }
  // Environment e's row is the record's row e.
  ColumnBases(*table_, r.data, 0, &bases_);
  uint64_t seq = 0;
  Status s = table_->AppendVectorStep(
      slots_, VectorSteps{bases_, /*device=*/false, nullptr, table_->layout().step_bytes}, r.priorities,
      DeadlineAfter(options_.timeout), &scratch_, &seq, record);
  *appended = n;
  Status synced = table_->AckLog(seq, ack_);
  return s.ok() ? synced : s;
}

Status VectorWriterImpl::AppendFromDevice(std::span<const ConstTensor> steps, void* stream,
                                          std::span<const double> priorities) {
  REPLAYDB_RETURN_IF_ERROR(table_->CheckAck(ack_));
  const int64_t n = static_cast<int64_t>(slots_.size());
  REPLAYDB_RETURN_IF_ERROR(table_->ValidateTensors(steps, n, "device vector step"));
  REPLAYDB_RETURN_IF_ERROR(ValidatePriorities(*table_, priorities, n, "device vector step"));
  SetBases(steps, &bases_);
  uint64_t seq = 0;
  Status s = table_->AppendVectorStep(slots_, VectorSteps{bases_, /*device=*/true, stream},
                                      priorities, DeadlineAfter(options_.timeout), &scratch_,
                                      &seq);
  Status synced = table_->AckLog(seq, ack_);
  return s.ok() ? synced : s;
}

Status VectorWriterImpl::End(size_t env, EndReason reason) {
  REPLAYDB_RETURN_IF_ERROR(CheckEndReason(*table_, reason, "End"));
  REPLAYDB_RETURN_IF_ERROR(CheckWriterEnv(*table_, env, slots_.size(), {}));
  uint64_t seq = 0;
  REPLAYDB_RETURN_IF_ERROR(
      table_->EndTrajectory(slots_[env], reason, DeadlineAfter(options_.timeout), &seq));
  return table_->AckLog(seq, ack_);
}

Status VectorWriterImpl::EndMany(std::span<const size_t> envs, EndReason reason) {
  REPLAYDB_RETURN_IF_ERROR(CheckEndReason(*table_, reason, "EndMany"));
  for (const size_t env : envs) {
    REPLAYDB_RETURN_IF_ERROR(
        CheckWriterEnv(*table_, env, slots_.size(), {}).WithContext("EndMany"));
  }
  uint64_t seq = 0;
  Status s = table_->EndTrajectories(slots_, envs, reason, DeadlineAfter(options_.timeout), &seq);
  // What was logged is synced even when an environment failed.
  Status synced = table_->AckLog(seq, ack_);
  return s.ok() ? synced : s;
}

Result<TableImpl::Adopted> VectorWriterImpl::Resume(size_t env, uint64_t writer_key,
                                                    uint64_t trajectory_id) {
  REPLAYDB_RETURN_IF_ERROR(CheckWriterEnv(*table_, env, slots_.size(), "Resume"));
  REPLAYDB_ASSIGN_OR_RETURN(TableImpl::Adopted adopted, table_->Adopt(writer_key, trajectory_id));
  slots_[env] = WriterSlot{};
  slots_[env].writer_key = writer_key;
  if (adopted.state == TableImpl::Adopted::State::kOpen)
    slots_[env].trajectory = adopted.trajectory;
  return adopted;
}

void VectorWriterImpl::GiveBack() {
  for (WriterSlot& slot : slots_) {
    table_->Unadopt(slot.trajectory);
    slot = WriterSlot{};
  }
}

int64_t VectorWriterImpl::open_steps(size_t env) const {
  return env < slots_.size() ? table_->OpenLength(slots_[env]) : 0;
}

uint64_t VectorWriterImpl::trajectory_id(size_t env) const {
  return env < slots_.size() && slots_[env].trajectory ? slots_[env].trajectory->id : 0;
}

}  // namespace replaydb::engine
