#include "engine/table/vector_table.h"

#include <string>

#include "engine/table/writers.h"
#include "util/format.h"
#include "util/fork_join.h"

namespace replaydb::engine {

using util::Quoted;

VectorTableImpl::VectorTableImpl(const TableSpec& spec, PersistSpecFn persist,
                                 std::unique_ptr<DrawStrategy> draws, BlockMemory memory,
                                 std::unique_ptr<DeviceTier> tier,
                                 std::shared_ptr<SlabSource> host_slabs)
    : TableImpl(spec, std::move(persist), std::move(draws), memory, std::move(tier),
                std::move(host_slabs)),
      lanes_(spec.lanes) {}

Result<std::unique_ptr<TrajectoryWriter>> VectorTableImpl::NewWriter(const WriterOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(CheckNewWriter(options));
  return Status::InvalidArgument("table " + Quoted(name()) + " is a vector table of " +
                                 std::to_string(lanes_) +
                                 " environments: write it with NewVectorWriter(" +
                                 std::to_string(lanes_) + ")");
}

Result<std::unique_ptr<VectorWriter>> VectorTableImpl::NewVectorWriter(
    size_t num_envs, const WriterOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(CheckNewVectorWriter(num_envs, options));
  if (num_envs != static_cast<size_t>(lanes_)) {
    return Status::InvalidArgument("table " + Quoted(name()) + " is a vector table of " +
                                   std::to_string(lanes_) + " environments; a vector writer of " +
                                   std::to_string(num_envs) + " cannot write it");
  }
  return std::unique_ptr<VectorWriter>(
      std::make_unique<LaneWriterImpl>(shared_from_this(), num_envs, options));
}

Status VectorTableImpl::DeleteItems(std::span<const ItemKey> /*keys*/, int64_t* deleted) {
  if (deleted != nullptr) *deleted = 0;
  return Status::InvalidArgument("table " + Quoted(name()) + ": DeleteItems: a vector table (lanes " +
                                 std::to_string(lanes_) + ") has no separate items to delete");
}

Status VectorTableImpl::NoPriorities(std::string_view what) const {
  return Status::InvalidArgument("table " + Quoted(name()) + ": " + std::string(what) +
                                 ": a vector table (lanes " + std::to_string(lanes_) +
                                 ") keeps no per-environment priorities (its selector is uniform)");
}

Status VectorTableImpl::UpdatePriorities(std::span<const ItemKey> /*keys*/,
                                         std::span<const double> /*priorities*/,
                                         PriorityUpdateResult* /*result*/) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("UpdatePriorities"));
  return NoPriorities("UpdatePriorities");
}

Status VectorTableImpl::UpdatePrioritiesFromDevice(const uint64_t* /*keys*/,
                                                   const float* /*priorities*/, int64_t /*n*/,
                                                   void* /*stream*/) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("UpdatePrioritiesFromDevice"));
  return NoPriorities("UpdatePrioritiesFromDevice");
}

TableInfo VectorTableImpl::Info() const {
  // A stored step holds an item per environment.
  TableInfo info = TableImpl::Info();
  info.num_items *= lanes_;
  info.items_inserted *= lanes_;
  info.items_removed *= lanes_;
  info.evicted_items *= lanes_;
  return info;
}

Result<SamplingMass> VectorTableImpl::Mass() {
  // Vector tables draw uniformly (CreateTable refuses other selectors): a
  // stored step's mass is an item per environment.
  REPLAYDB_ASSIGN_OR_RETURN(SamplingMass mass, TableImpl::Mass());
  mass.items *= lanes_;
  mass.total *= static_cast<double>(lanes_);
  return mass;
}

Status VectorTableImpl::ItemPriorities(std::vector<ItemKey>* keys,
                                       std::vector<double>* priorities) {
  REPLAYDB_RETURN_IF_ERROR(TableImpl::ItemPriorities(keys, priorities));
  // The stored steps' items, spread over their environments.
  std::vector<ItemKey> steps;
  std::vector<double> step_priorities;
  steps.swap(*keys);
  step_priorities.swap(*priorities);
  keys->reserve(steps.size() * static_cast<size_t>(lanes_));
  priorities->reserve(steps.size() * static_cast<size_t>(lanes_));
  for (size_t i = 0; i < steps.size(); ++i) {
    const uint64_t segment = ItemKeyTrajectory(steps[i]);
    const int64_t start = ItemKeyStart(steps[i]);
    for (int64_t lane = 0; lane < lanes_; ++lane) {
      keys->push_back(MakeItemKey(segment, start * lanes_ + lane));
      priorities->push_back(step_priorities[i]);
    }
  }
  return Status::OK();
}

void VectorTableImpl::SpreadOverRowsLocked(util::Random& rng, int64_t* live_items, SampleBatch* out,
                                           std::vector<Window>* windows) {
  // The selector drew a step: the environment is drawn here, uniformly, and
  // folded into the key.
  *live_items *= lanes_;
  for (size_t b = 0; b < windows->size(); ++b) {
    const int64_t lane = static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(lanes_)));
    const ItemKey step = out->keys[b];
    out->keys[b] = MakeItemKey(ItemKeyTrajectory(step), ItemKeyStart(step) * lanes_ + lane);
    out->probabilities[b] /= static_cast<double>(lanes_);
    (*windows)[b].lane = lane;
  }
}

TableImpl::ItemRow VectorTableImpl::RowOf(ItemKey key) const {
  // The key holds step * lanes + environment.
  return {ItemKeyStart(key) / lanes_, ItemKeyStart(key) % lanes_};
}

std::string VectorTableImpl::RowText(const ItemRow& row) const {
  return TableImpl::RowText(row) + ", environment " + std::to_string(row.lane);
}

Status VectorTableImpl::SlotError(const Status& s, size_t /*slot*/) const {
  // The writer's one slot is the whole vector step, no one environment.
  return s;
}

LaneWriterImpl::LaneWriterImpl(std::shared_ptr<TableImpl> table, size_t lanes,
                               const WriterOptions& options)
    : table_(std::move(table)),
      options_(options),
      ack_(ResolveAck(table_->spec(), options)),
      lanes_(lanes) {
  // One stored step per call: the parts split the copy of its bytes.
  const int parts = util::WriterParts(options.threads, lanes);
  if (parts > 1) scratch_.fork_join = std::make_unique<util::ForkJoin>(parts);
}

LaneWriterImpl::~LaneWriterImpl() {
  uint64_t seq = 0;
  (void)table_->EndTrajectory(slot_, EndReason::kTruncated, Clock::now(), &seq);
  (void)table_->SyncLog(seq, /*wait=*/false);
}

Status LaneWriterImpl::AppendStep(std::span<const ConstTensor> steps, bool device, void* stream,
                                  std::span<const double> priorities, std::string_view what) {
  // The stored columns are [lanes, shape...]: one tensor per column of
  // exactly that shape.
  REPLAYDB_RETURN_IF_ERROR(table_->ValidateTensors(steps, -1, what));
  if (!priorities.empty()) {
    return Status::InvalidArgument("table '" + table_->name() + "': " + std::string(what) +
                                   ": a vector table keeps no per-environment priorities "
                                   "(its selector is uniform); pass none");
  }
  SetBases(steps, &bases_);
  return StoreStep(VectorSteps{bases_, device, stream}, {});
}

Status LaneWriterImpl::AppendRecord(std::span<std::byte> record, int64_t first_row,
                                    int64_t* appended) {
  *appended = 0;
  wal::AppendStepsRecord r;
  REPLAYDB_RETURN_IF_ERROR(DecodeRecordFor(*table_, record, 1, &r));
  if (first_row != 0 || !r.priorities.empty()) {
    return Status::InvalidArgument("table '" + table_->name() +
                                   "': a remote vector step's log record must start at its "
                                   "first row and carry no priorities (a vector table keeps "
                                   "none per environment)");
  }
  // (A remote writer's key for its segment, which the log keeps.)
  if (const uint64_t key = r.KeyOf(0); key != 0) slot_.writer_key = key;
  // Column c's [lanes, shape...] after the columns before it: the
  // record's one row.
  ColumnBases(*table_, r.data, 0, &bases_);
  *appended = static_cast<int64_t>(lanes_);
  return StoreStep(VectorSteps{bases_, /*device=*/false, nullptr}, record);
}

Status LaneWriterImpl::StoreStep(const VectorSteps& steps, std::span<std::byte> record) {
  REPLAYDB_RETURN_IF_ERROR(table_->CheckAck(ack_));
  uint64_t seq = 0;
  Status s = table_->AppendVectorStep(std::span<WriterSlot>(&slot_, 1), steps, {},
                                      DeadlineAfter(options_.timeout), &scratch_, &seq, record);
  // A full segment ends, so that eviction can take it and keys stay below
  // kMaxTrajectorySteps.
  if (s.ok() && slot_.trajectory != nullptr &&
      slot_.trajectory->length >= table_->layout().block_steps) {
    s = table_->EndTrajectory(slot_, EndReason::kTruncated, DeadlineAfter(options_.timeout), &seq);
  }
  Status synced = table_->AckLog(seq, ack_);
  return s.ok() ? synced : s;
}

Status LaneWriterImpl::Append(std::span<const ConstTensor> steps,
                              std::span<const double> priorities) {
  return AppendStep(steps, /*device=*/false, nullptr, priorities, "vector step");
}

Status LaneWriterImpl::AppendFromDevice(std::span<const ConstTensor> steps, void* stream,
                                        std::span<const double> priorities) {
  return AppendStep(steps, /*device=*/true, stream, priorities, "device vector step");
}

Status LaneWriterImpl::End(size_t env, EndReason reason) {
  REPLAYDB_RETURN_IF_ERROR(CheckEndReason(*table_, reason, "End"));
  return CheckWriterEnv(*table_, env, lanes_, "End");
}

Status LaneWriterImpl::EndMany(std::span<const size_t> envs, EndReason reason) {
  REPLAYDB_RETURN_IF_ERROR(CheckEndReason(*table_, reason, "EndMany"));
  for (const size_t env : envs) {
    REPLAYDB_RETURN_IF_ERROR(CheckWriterEnv(*table_, env, lanes_, "EndMany"));
  }
  return Status::OK();
}

Result<TableImpl::Adopted> LaneWriterImpl::Resume(size_t i, uint64_t writer_key,
                                                  uint64_t trajectory_id) {
  if (i != 0) {
    return Status::InvalidArgument("table '" + table_->name() +
                                   "': a vector table's writer resumes one segment, not " +
                                   std::to_string(i + 1));
  }
  REPLAYDB_ASSIGN_OR_RETURN(TableImpl::Adopted adopted, table_->Adopt(writer_key, trajectory_id));
  slot_ = WriterSlot{};
  slot_.writer_key = writer_key;
  if (adopted.state != TableImpl::Adopted::State::kOpen) return adopted;
  slot_.trajectory = adopted.trajectory;
  if (adopted.num_steps >= table_->layout().block_steps) {
    // (Its end, as StoreStep would have made it.)
    uint64_t seq = 0;
    Status ended =
        table_->EndTrajectory(slot_, EndReason::kTruncated, DeadlineAfter(options_.timeout), &seq);
    if (ended.ok()) ended = table_->AckLog(seq, ack_);
    if (!ended.ok()) {
      GiveBack();
      return ended.WithContext("ending the full segment " + std::to_string(adopted.trajectory_id) +
                               " it resumed");
    }
    adopted.state = TableImpl::Adopted::State::kEnded;
    adopted.end_reason = EndReason::kTruncated;
    adopted.trajectory = nullptr;
  }
  return adopted;
}

void LaneWriterImpl::GiveBack() {
  table_->Unadopt(slot_.trajectory);
  slot_ = WriterSlot{};
}

int64_t LaneWriterImpl::open_steps(size_t env) const {
  return env < lanes_ ? table_->OpenLength(slot_) : 0;
}

uint64_t LaneWriterImpl::trajectory_id(size_t env) const {
  return env < lanes_ && slot_.trajectory ? slot_.trajectory->id : 0;
}

}  // namespace replaydb::engine
