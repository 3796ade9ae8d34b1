// VectorTableImpl: a table of vector steps (TableSpec::lanes = N > 1,
// docs/vector_tables.md), the layout a GPU simulator hands over: each stored
// step holds one row per environment of N, [N, shape...] per column, and
// each environment's row is an item. It shares everything else with
// TableImpl (the hot tier's blocks and device tier, the trajectory store,
// the log, checkpoints and the cold tier); what differs lives here:
//
// - Writing: one vector writer of exactly N environments (LaneWriterImpl),
//   which stores one step per call into a segment of block_steps steps that
//   it ends itself; no TrajectoryWriter.
// - Items: the selector holds one entry per stored step (the item of
//   environment 0, whose key stands for the step); a draw picks a step, then
//   an environment uniformly (probability / N). Keys are
//   MakeItemKey(segment, step * N + environment).
// - No per-environment priorities: UpdatePriorities and
//   UpdatePrioritiesFromDevice are refused.
// - Counts of items (TableInfo) and ItemPriorities are per environment.
#ifndef REPLAYDB_ENGINE_TABLE_VECTOR_TABLE_H_
#define REPLAYDB_ENGINE_TABLE_VECTOR_TABLE_H_

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/table/table_impl.h"
#include "engine/table/writers.h"

namespace replaydb::engine {

class VectorTableImpl final : public TableImpl {
 public:
  // Use TableImpl::Create. REQUIRES: spec.lanes > 1.
  VectorTableImpl(const TableSpec& spec, PersistSpecFn persist,
                  std::unique_ptr<DrawStrategy> draws, BlockMemory memory,
                  std::unique_ptr<DeviceTier> tier, std::shared_ptr<SlabSource> host_slabs);

  Result<std::unique_ptr<TrajectoryWriter>> NewWriter(const WriterOptions& options) override;
  Result<std::unique_ptr<VectorWriter>> NewVectorWriter(size_t num_envs,
                                                        const WriterOptions& options) override;
  Status UpdatePriorities(std::span<const ItemKey> keys, std::span<const double> priorities,
                          PriorityUpdateResult* result) override;
  Status UpdatePrioritiesFromDevice(const uint64_t* keys, const float* priorities, int64_t n,
                                    void* stream) override;
  TableInfo Info() const override;
  // Per environment, as Info: a stored step's mass is its lanes' items.
  Result<SamplingMass> Mass() override;
  Status DeleteItems(std::span<const ItemKey> keys, int64_t* deleted) override;
  Status ItemPriorities(std::vector<ItemKey>* keys, std::vector<double>* priorities) override;

  int64_t lanes() const { return lanes_; }

 protected:
  void SpreadOverRowsLocked(util::Random& rng, int64_t* live_items, SampleBatch* out,
                            std::vector<Window>* windows) override;
  ItemRow RowOf(ItemKey key) const override;
  std::string RowText(const ItemRow& row) const override;
  Status SlotError(const Status& s, size_t slot) const override;

 private:
  // InvalidArgument: `what` needs per-environment priorities.
  Status NoPriorities(std::string_view what) const;

  const int64_t lanes_;
};

// The vector writer of a vector table: a step of the writer's `lanes`
// environments is one stored step, [lanes, shape...] per column, of one
// trajectory (a segment), which the writer ends after the table's
// block_steps steps and follows with the next. End and EndMany check their
// environments and change nothing: with windows of one step an episode's
// end changes no item. A remote writer's records carry its segment's key
// (one per segment), which a writer opened again after a failover resumes
// (ResumableVectorWriter, of one trajectory: the segment).
class LaneWriterImpl final : public VectorWriter,
                             public RecordAppender,
                             public ResumableVectorWriter {
 public:
  LaneWriterImpl(std::shared_ptr<TableImpl> table, size_t lanes, const WriterOptions& options);
  ~LaneWriterImpl() override;

  Status Append(std::span<const ConstTensor> steps, std::span<const double> priorities) override;
  Status End(size_t env, EndReason reason) override;
  Status EndMany(std::span<const size_t> envs, EndReason reason) override;
  Status AppendFromDevice(std::span<const ConstTensor> steps, void* stream,
                          std::span<const double> priorities) override;
  size_t num_envs() const override { return lanes_; }
  // The segment being written (every environment's).
  uint64_t trajectory_id(size_t env) const override;
  int threads() const override {
    return scratch_.fork_join != nullptr ? scratch_.fork_join->parts() : 1;
  }
  // A remote vector writer's step: a record of one entry, the stored step
  // ([lanes, shape...] per column, the columns one after another).
  Status AppendRecord(std::span<std::byte> record, int64_t first_row,
                      int64_t* appended) override;
  uint32_t table_id() const override { return table_->id(); }

  // ResumableVectorWriter: the segment (i 0). A segment adopted full (its
  // last step's record came through, its end's did not) is ended here,
  // and reported ended.
  size_t resumable() const override { return 1; }
  Result<TableImpl::Adopted> Resume(size_t i, uint64_t writer_key, uint64_t trajectory_id) override;
  void GiveBack() override;
  int64_t open_steps(size_t env) const override;

 private:
  Status AppendStep(std::span<const ConstTensor> steps, bool device, void* stream,
                    std::span<const double> priorities, std::string_view what);
  // Stores `steps` (checked) as the segment's next step, `record` its log
  // record if it came as one; ends a full segment.
  Status StoreStep(const VectorSteps& steps, std::span<std::byte> record);

  const std::shared_ptr<TableImpl> table_;
  const WriterOptions options_;
  const WriteAck ack_;  // options_ with the table's TableSpec::acks
  const size_t lanes_;
  WriterSlot slot_;
  std::vector<const std::byte*> bases_;
  VectorScratch scratch_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_TABLE_VECTOR_TABLE_H_
