// TrajectoryWriter and VectorWriter implementations: schema checks on the
// caller's thread, then TableImpl::AppendStep for one step, AppendSteps for
// several (a vector step: one TableImpl::AppendVectorStep for every
// environment). A vector table's writer is LaneWriterImpl
// (engine/table/vector_table.h). Each also takes a remote writer's appends
// as log records (RecordAppender).
#ifndef REPLAYDB_ENGINE_TABLE_WRITERS_H_
#define REPLAYDB_ENGINE_TABLE_WRITERS_H_

#include <array>
#include <memory>
#include <vector>

#include "engine/table/table_impl.h"
#include "wal/records.h"
#include "replaydb/table.h"

namespace replaydb::engine {

// What a served database's writers take from remote writers
// (rdma/db_service.cc): appends as AppendSteps records of the log
// (wal/wal.fbs) that the client built for the writer's table (its id and
// step bytes), the trajectory ids and step numbers left to this side, which
// fills them in place and logs the record as it is where all its rows go in
// at once. A trajectory writer's record holds any number of rows; a vector
// writer's one per environment (a vector table's: one entry, the whole
// [lanes, shape...] step). InvalidArgument naming the table when the record
// does not decode or does not fit.
class RecordAppender {
 public:
  virtual ~RecordAppender() = default;
  // Rows [first_row, n) of `record` (a vector writer's: first_row 0);
  // *appended counts the rows stored (a vector writer's: all it tried,
  // whatever environments failed; the first failure is returned).
  virtual Status AppendRecord(std::span<std::byte> record, int64_t first_row,
                              int64_t* appended) = 0;
  // The table's id (TableDef.id), which such records name.
  virtual uint32_t table_id() const = 0;
};

// A served vector writer that a remote one opens again after a failover
// (rdma/db_service.cc, docs/replication.md "Writers through a failover"):
// it takes over the trajectories the remote writer's keys name. An
// ordinary table's vector writer resumes one per environment; a vector
// table's (TableSpec::lanes > 1), the one segment all its environments
// write.
class ResumableVectorWriter {
 public:
  virtual ~ResumableVectorWriter() = default;
  // How many trajectories Resume takes: one per environment, or 1.
  virtual size_t resumable() const = 0;
  // Trajectory `i`'s is the one TableImpl::Adopt finds for `writer_key`
  // (and `trajectory_id`, where the writer knows it); an open orphan
  // becomes the writer's, which its next step continues. REQUIRES:
  // nothing appended yet, i < resumable().
  virtual Result<TableImpl::Adopted> Resume(size_t i, uint64_t writer_key,
                                            uint64_t trajectory_id) = 0;
  // Gives every trajectory Resume adopted back (an orphan again, not
  // ended when this writer goes): the writer was not opened after all.
  virtual void GiveBack() = 0;
  // The steps of environment `env`'s trajectory while it is open (0:
  // none; its next step begins one).
  virtual int64_t open_steps(size_t env) const = 0;
};

// Decodes `record` for `table`: its id and step bytes must be the table's,
// and it must hold `entries` rows (-1: any number, at least one).
Status DecodeRecordFor(const TableImpl& table, std::span<std::byte> record, int64_t entries,
                       wal::AppendStepsRecord* out);

// One pointer per column of `table` into the record's `rows` (each row the
// table's step_bytes, its columns in schema order), starting at row
// `first_row`: column c of row i at bases[c] + (i - first_row) * step_bytes.
void ColumnBases(const TableImpl& table, std::span<const std::byte> rows, int64_t first_row,
                 std::vector<const std::byte*>* bases);

class TrajectoryWriterImpl final : public TrajectoryWriter, public RecordAppender {
 public:
  TrajectoryWriterImpl(std::shared_ptr<TableImpl> table, const WriterOptions& options);
  ~TrajectoryWriterImpl() override;

  Status Append(std::span<const ConstTensor> step, std::optional<double> priority) override;
  Status AppendMany(std::span<const ConstTensor> steps,
                    std::span<const double> priorities) override;
  Status End(EndReason reason) override;
  uint64_t trajectory_id() const override;
  int64_t num_steps() const override;

  // (Logged as it is where all its rows go in as one run:
  // TableImpl::AppendSteps.)
  Status AppendRecord(std::span<std::byte> record, int64_t first_row,
                      int64_t* appended) override;
  uint32_t table_id() const override { return table_->id(); }

  // A served writer opened for a remote writer that resumes its trajectory
  // after a failover (TableImpl::Adopt): an open orphan becomes this
  // writer's trajectory, which its next steps continue. REQUIRES: nothing
  // appended yet.
  Result<TableImpl::Adopted> Resume(uint64_t writer_key, uint64_t trajectory_id);

  // A remote append whose rows a transport receives straight into the hot
  // tier (TableImpl::PlaceSteps): Place reserves the next `n` steps, after
  // those placed before and not yet committed or abandoned, and gives the
  // places of their bytes (nothing placed: the append goes through
  // AppendRecord). CommitPlaced decodes the append's record, whose data
  // never came into it (the places hold the rows), checks that it holds
  // the n rows with its data at `data_offset`, and publishes them;
  // AbandonPlaced gives them up. In Place's order.
  void Place(int64_t n, PlacedSteps* placed, std::vector<std::span<std::byte>>* pieces);
  Status CommitPlaced(PlacedSteps& placed, std::span<std::byte> record, size_t data_offset);
  void AbandonPlaced(PlacedSteps& placed);

 private:
  // The set of staged rows for this call's turn.
  StagedRows* Staged();

  const std::shared_ptr<TableImpl> table_;
  const WriterOptions options_;
  const WriteAck ack_;  // options_ with the table's TableSpec::acks
  WriterSlot slot_;
  std::vector<const std::byte*> bases_;  // scratch: one pointer per column
  // A table in device memory: the rows on their way there
  // (TableImpl::AppendStepsToDevice), in two sets used by turns, so that a
  // call stages its rows while the previous call's scatter still reads the
  // other set (each set waits only for its own scatters, on its own
  // stream). Made on first use.
  std::array<std::unique_ptr<StagedRows>, 2> staged_;
  size_t staged_turn_ = 0;
  // Steps placed (Place) and not yet committed or abandoned.
  int64_t placed_ahead_ = 0;
};

class VectorWriterImpl final : public VectorWriter,
                               public RecordAppender,
                               public ResumableVectorWriter {
 public:
  VectorWriterImpl(std::shared_ptr<TableImpl> table, size_t num_envs,
                   const WriterOptions& options);
  ~VectorWriterImpl() override;

  Status Append(std::span<const ConstTensor> steps, std::span<const double> priorities) override;
  Status End(size_t env, EndReason reason) override;
  Status EndMany(std::span<const size_t> envs, EndReason reason) override;
  Status AppendFromDevice(std::span<const ConstTensor> steps, void* stream,
                          std::span<const double> priorities) override;
  size_t num_envs() const override { return slots_.size(); }
  Status AppendRecord(std::span<std::byte> record, int64_t first_row,
                      int64_t* appended) override;
  uint32_t table_id() const override { return table_->id(); }
  uint64_t trajectory_id(size_t env) const override;
  int threads() const override {
    return scratch_.fork_join != nullptr ? scratch_.fork_join->parts() : 1;
  }

  // ResumableVectorWriter: environment `env`'s trajectory.
  size_t resumable() const override { return slots_.size(); }
  Result<TableImpl::Adopted> Resume(size_t env, uint64_t writer_key,
                                    uint64_t trajectory_id) override;
  // AppendRecord of a step a remote vector writer sends again after a
  // failover: environment e's row is step first_steps[e] of its open
  // trajectory (0: it begins one). Environments whose trajectories hold
  // that step already take nothing (the old primary logged the step in
  // parts, and some reached this server); one whose trajectory holds
  // fewer steps fails the call, naming it, before anything is stored.
  Status AppendRecordFrom(std::span<std::byte> record, std::span<const int64_t> first_steps);
  void GiveBack() override;
  int64_t open_steps(size_t env) const override;

 private:
  const std::shared_ptr<TableImpl> table_;
  const WriterOptions options_;
  const WriteAck ack_;  // options_ with the table's TableSpec::acks
  // AppendRecord's work, once its arguments are checked and `record`
  // decoded as `r` (*appended: as AppendRecord's).
  Status AppendDecoded(std::span<std::byte> record, const wal::AppendStepsRecord& r,
                       int64_t* appended);

  std::vector<WriterSlot> slots_;
  std::vector<const std::byte*> bases_;
  VectorScratch scratch_;
};

// InvalidArgument naming `env` when it is not one of a vector writer's
// `num_envs` environments; `what` (may be empty) names the call.
Status CheckWriterEnv(const TableImpl& table, size_t env, size_t num_envs, std::string_view what);
// InvalidArgument naming `reason` when it is not an EndReason value; `what`
// names the call ("End", "EndMany").
Status CheckEndReason(const TableImpl& table, EndReason reason, std::string_view what);
// Each tensor's data pointer, in *bases.
void SetBases(std::span<const ConstTensor> tensors, std::vector<const std::byte*>* bases);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_TABLE_WRITERS_H_
