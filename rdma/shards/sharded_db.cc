// ShardedDB and its tables and writers (sharded_db.h, docs/sharding.md).
#include "rdma/shards/sharded_db.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "rdma/remote_db.h"
#include "rdma/through_host.h"
#include "util/format.h"

namespace replaydb::rdma {
namespace {

using util::Quoted;

}  // namespace

// Runs fn(0), ..., fn(n - 1) at once: the caller runs fn(0) and whatever no
// thread has taken when it is done; the threads take the rest. Threads are
// started once and kept, shared by every table and writer of a database.
// Runs from several callers at once share the threads (each caller still
// works through its own run, so none waits for another's).
class ShardFanOut {
 public:
  explicit ShardFanOut(size_t threads) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~ShardFanOut() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  template <typename Fn>
  void Run(size_t n, const Fn& fn) {
    if (threads_.empty() || n < 2) {
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    Job job;
    job.task = [&fn](size_t i) { fn(i); };
    job.n = n;
    job.next = 1;  // fn(0) is the caller's
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(&job);
    }
    wake_.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lock(mu_);
    ++job.done;
    while (job.next < job.n) {
      const size_t i = Take(&job);
      lock.unlock();
      fn(i);
      lock.lock();
      ++job.done;
    }
    job.finished.wait(lock, [&] { return job.done == job.n; });
  }

 private:
  struct Job {
    std::function<void(size_t)> task;
    size_t n = 0, next = 0, done = 0;
    std::condition_variable finished;
  };

  // The job's next index; a job with none left leaves the queue. Under mu_.
  size_t Take(Job* job) {
    const size_t i = job->next++;
    if (job->next == job->n) jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
    return i;
  }

  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      Job* job = jobs_.front();
      const size_t i = Take(job);
      lock.unlock();
      job->task(i);
      lock.lock();
      if (++job->done == job->n) job->finished.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job*> jobs_;  // runs with indices no one took yet
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

namespace {

std::string ShardName(size_t s, const std::string& address) {
  return "shard " + std::to_string(s) + (address.empty() ? "" : " (" + address + ")");
}

// What every shard's table shares.
struct Shards {
  std::string name;
  TableSpec spec;
  std::vector<std::shared_ptr<Table>> tables;
  std::vector<std::string> addresses;
  std::shared_ptr<ShardFanOut> fan_out;  // the database's
  bool skip_unavailable;                 // ConnectOptions::skip_unavailable_shards
  std::atomic<uint64_t> next_writer_shard{0};
  // A vector table's lanes on each shard (spec.lanes is their sum); 1 for
  // other tables, 0 where a shard left.
  std::vector<int64_t> lanes;

  Shards(std::string n, TableSpec s, std::vector<std::shared_ptr<Table>> t,
         std::vector<std::string> a, std::shared_ptr<ShardFanOut> f, bool skip)
      : name(std::move(n)),
        spec(std::move(s)),
        tables(std::move(t)),
        addresses(std::move(a)),
        fan_out(std::move(f)),
        skip_unavailable(skip) {
    for (const auto& t : tables) lanes.push_back(t == nullptr ? 0 : t->spec().lanes);
  }

  size_t size() const { return tables.size(); }
  // Whether shard s is there: a shard that left ("-" in the address) has no
  // table.
  bool present(size_t s) const { return tables[s] != nullptr; }
  std::string Where(size_t s) const {
    return "table " + Quoted(name) + " on " + ShardName(s, addresses[s]);
  }

  // fn(s) on every shard that is there, at once; each shard's status (OK
  // for shards that left).
  template <typename Fn>
  std::vector<Status> All(const Fn& fn) {
    std::vector<Status> statuses(size());
    fan_out->Run(size(), [&](size_t s) {
      if (present(s)) statuses[s] = fn(s);
    });
    return statuses;
  }
  // The same; the first error (by shard), in context.
  template <typename Fn>
  Status Each(const Fn& fn) {
    const std::vector<Status> statuses = All(fn);
    for (size_t s = 0; s < size(); ++s) {
      if (!statuses[s].ok()) return statuses[s].WithContext(Where(s));
    }
    return Status::OK();
  }
  // Whether no shard is there and in it (every one left or out_of_it).
  bool NoneLeft(const std::vector<bool>& out_of_it) const {
    for (size_t s = 0; s < size(); ++s) {
      if (present(s) && !out_of_it[s]) return false;
    }
    return true;
  }
  // Whether a call may go on without shard s, which answered `status`.
  bool LeaveOut(const Status& status) const {
    return skip_unavailable && status.code() == Status::Code::kUnavailable;
  }

  // A shard's id or key as the table's: InvalidArgument where the shard's
  // own id does not fit the bits a sharded table leaves it.
  Status Tag(size_t s, uint64_t* id) const {
    if (*id > kMaxShardTrajectoryId) {
      return Status::FailedPrecondition(
          Where(s) + ": its trajectory id " + std::to_string(*id) +
          " does not fit the 32 bits a sharded table leaves each shard's ids");
    }
    *id = ShardedTrajectoryId(static_cast<int>(s), *id);
    return Status::OK();
  }
  // NotFound for an id or key of a shard that left.
  Status Left(size_t s, const std::string& what) const {
    return Status::NotFound("table " + Quoted(name) + ": " + what + " names shard " +
                            std::to_string(s) + ", which has left (the address gives '-' there)");
  }
  Status TagKey(size_t s, ItemKey* key) const {
    uint64_t id = ItemKeyTrajectory(*key);
    REPLAYDB_RETURN_IF_ERROR(Tag(s, &id));
    *key = MakeItemKey(id, ItemKeyStart(*key));
    return Status::OK();
  }
};

// Keys by shard: for each shard its keys (shard-local) and where each
// came from in the caller's list. Keys naming no shard of the table go to
// `foreign` (their places).
struct KeysByShard {
  std::vector<std::vector<ItemKey>> keys;
  std::vector<std::vector<size_t>> places;
  std::vector<size_t> foreign;
  KeysByShard(size_t shards, std::span<const ItemKey> all) : keys(shards), places(shards) {
    for (size_t i = 0; i < all.size(); ++i) {
      const auto s = static_cast<size_t>(ShardOfKey(all[i]));
      if (s >= shards) {
        foreign.push_back(i);
        continue;
      }
      keys[s].push_back(ShardLocalKey(all[i]));
      places[s].push_back(i);
    }
  }
};

// Rows [0, part.batch_size) of `part` into rows `places` of `out`, whose
// per-item vectors and columns are sized already.
void CopyRows(const SampleBatch& part, const std::vector<size_t>& places, SampleBatch* out) {
  const int64_t L = out->sequence_length;
  for (size_t c = 0; c < out->columns.size() && c < part.columns.size(); ++c) {
    const size_t row = part.columns[c].size_bytes() / static_cast<size_t>(part.batch_size);
    for (size_t i = 0; i < places.size(); ++i) {
      std::memcpy(out->columns[c].data() + places[i] * row, part.columns[c].data() + i * row, row);
    }
  }
  for (size_t i = 0; i < places.size(); ++i) {
    const size_t to = places[i];
    out->priorities[to] = part.priorities[i];
    out->times_sampled[to] = part.times_sampled[i];
    out->insertion_order[to] = i < part.insertion_order.size() ? part.insertion_order[i] : 0;
    std::memcpy(out->mask.data() + to * static_cast<size_t>(L),
                part.mask.data() + i * static_cast<size_t>(L), static_cast<size_t>(L));
  }
}

// `out` sized for B items of the table's columns (gathered or not).
Status SizeBatch(const TableSpec& spec, int64_t B, bool gather, SampleBatch* out) {
  const int64_t L = std::max<int64_t>(spec.sequence_length, 1);
  out->batch_size = B;
  out->sequence_length = L;
  try {
    out->keys.resize(B);
    out->probabilities.resize(B);
    out->priorities.resize(B);
    out->times_sampled.resize(B);
    out->insertion_order.assign(static_cast<size_t>(B), 0);
    out->mask.resize(static_cast<size_t>(B * L));
    if (gather) {
      out->columns.resize(spec.columns.size());
      for (size_t c = 0; c < spec.columns.size(); ++c) {
        out->columns[c].Reset(spec.columns[c].dtype, spec.columns[c].shape.Prepend(L).Prepend(B));
      }
    } else {
      out->columns.clear();
    }
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("table " + Quoted(spec.name) + ": a batch of " +
                                     std::to_string(B) + " items could not be allocated");
  }
  return Status::OK();
}

class ShardedWriter final : public TrajectoryWriter {
 public:
  ShardedWriter(std::shared_ptr<Shards> shards, WriterOptions options)
      : shards_(std::move(shards)), options_(options), writers_(shards_->size()) {}

  Status Append(std::span<const ConstTensor> step, std::optional<double> priority) override {
    REPLAYDB_ASSIGN_OR_RETURN(TrajectoryWriter * w, Current());
    return w->Append(step, priority).WithContext(shards_->Where(current_));
  }
  Status AppendMany(std::span<const ConstTensor> steps,
                    std::span<const double> priorities) override {
    REPLAYDB_ASSIGN_OR_RETURN(TrajectoryWriter * w, Current());
    return w->AppendMany(steps, priorities).WithContext(shards_->Where(current_));
  }
  // The trajectory's shard keeps it until it ended there: an End that
  // failed (a rate-limiter timeout for padded items) is called again there.
  Status End(EndReason reason) override {
    if (!open_) {
      if (EndReasonName(reason) == "invalid") {
        return Status::InvalidArgument("table " + Quoted(shards_->name) + ": end reason " +
                                       std::to_string(static_cast<int>(reason)) +
                                       " is not an EndReason");
      }
      return Status::OK();
    }
    Status s = writers_[current_]->End(reason);
    if (s.ok()) open_ = false;
    return s.WithContext(shards_->Where(current_));
  }
  uint64_t trajectory_id() const override {
    if (!open_) return 0;
    const uint64_t id = writers_[current_]->trajectory_id();
    return id == 0 ? 0 : ShardedTrajectoryId(static_cast<int>(current_), id);
  }
  int64_t num_steps() const override { return open_ ? writers_[current_]->num_steps() : 0; }

 private:
  // The writer of the open trajectory's shard; a new trajectory goes to the
  // next shard in turn (the table's turn, shared by its writers).
  Result<TrajectoryWriter*> Current() {
    if (open_) return writers_[current_].get();
    do {  // the next shard that is there (one is)
      current_ = static_cast<size_t>(shards_->next_writer_shard.fetch_add(1) % shards_->size());
    } while (!shards_->present(current_));
    std::unique_ptr<TrajectoryWriter>& w = writers_[current_];
    if (w == nullptr) {
      Result<std::unique_ptr<TrajectoryWriter>> made =
          shards_->tables[current_]->NewWriter(options_);
      if (!made.ok()) return made.status().WithContext(shards_->Where(current_));
      w = std::move(made).value();
    }
    open_ = true;
    return w.get();
  }

  std::shared_ptr<Shards> shards_;
  WriterOptions options_;
  std::vector<std::unique_ptr<TrajectoryWriter>> writers_;
  size_t current_ = 0;
  bool open_ = false;  // a trajectory was started on shard current_ and not ended
};

// Environments [first[s], first[s + 1]) write to shard s.
class ShardedVectorWriter final : public VectorWriter {
 public:
  ShardedVectorWriter(std::shared_ptr<Shards> shards, std::vector<size_t> first,
                      std::vector<std::unique_ptr<VectorWriter>> writers)
      : shards_(std::move(shards)), first_(std::move(first)), writers_(std::move(writers)) {}

  Status Append(std::span<const ConstTensor> steps, std::span<const double> priorities) override {
    return AppendSlices(steps, priorities,
                        [](VectorWriter& w, std::span<const ConstTensor> part,
                           std::span<const double> p) { return w.Append(part, p); });
  }
  Status AppendFromDevice(std::span<const ConstTensor> steps, void* stream,
                          std::span<const double> priorities) override {
    return AppendSlices(
        steps, priorities,
        [stream](VectorWriter& w, std::span<const ConstTensor> part, std::span<const double> p) {
          return w.AppendFromDevice(part, stream, p);
        },
        /*parallel=*/false);
  }
  Status End(size_t env, EndReason reason) override {
    if (env >= num_envs()) return OutOfRange(env);
    const size_t s = ShardOfEnv(env);
    return writers_[s]->End(env - first_[s], reason).WithContext(Envs(s));
  }
  Status EndMany(std::span<const size_t> envs, EndReason reason) override {
    std::vector<std::vector<size_t>> by_shard(writers_.size());
    for (size_t env : envs) {
      if (env >= num_envs()) return OutOfRange(env);
      const size_t s = ShardOfEnv(env);
      by_shard[s].push_back(env - first_[s]);
    }
    Status first;
    for (size_t s = 0; s < writers_.size(); ++s) {
      if (by_shard[s].empty()) continue;
      Status e = writers_[s]->EndMany(by_shard[s], reason);
      if (!e.ok() && first.ok()) first = e.WithContext(Envs(s));
    }
    return first;
  }
  size_t num_envs() const override { return first_.back(); }
  uint64_t trajectory_id(size_t env) const override {
    if (env >= num_envs()) return 0;
    const size_t s = ShardOfEnv(env);
    const uint64_t id = writers_[s]->trajectory_id(env - first_[s]);
    return id == 0 ? 0 : ShardedTrajectoryId(static_cast<int>(s), id);
  }
  int threads() const override {
    for (const auto& w : writers_) {
      if (w != nullptr) return w->threads();
    }
    return 1;
  }

 private:
  size_t ShardOfEnv(size_t env) const {
    return static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), env) -
                               first_.begin()) -
           1;
  }
  std::string Envs(size_t s) const {
    return shards_->Where(s) + " (its environments " + std::to_string(first_[s]) + " to " +
           std::to_string(first_[s + 1] - 1) + " of this writer are its 0 to " +
           std::to_string(first_[s + 1] - first_[s] - 1) + ")";
  }
  Status OutOfRange(size_t env) const {
    return Status::InvalidArgument("table " + Quoted(shards_->name) + ": environment " +
                                   std::to_string(env) + " of a vector writer of " +
                                   std::to_string(num_envs()));
  }

  // Each shard's rows of every column ([N, ...] -> [n_s, ...]), appended
  // by `append`, the shards at once where `parallel`.
  template <typename Append>
  Status AppendSlices(std::span<const ConstTensor> steps, std::span<const double> priorities,
                      const Append& append, bool parallel = true) {
    const size_t N = num_envs();
    const TableSpec& spec = shards_->spec;
    if (steps.size() != spec.columns.size()) {
      return Status::InvalidArgument("table " + Quoted(shards_->name) + ": a vector step of " +
                                     std::to_string(steps.size()) + " columns; the table has " +
                                     std::to_string(spec.columns.size()));
    }
    if (!priorities.empty() && priorities.size() != N) {
      return Status::InvalidArgument(
          "table " + Quoted(shards_->name) + ": " + std::to_string(priorities.size()) +
          " priorities for a vector writer of " + std::to_string(N) + " environments");
    }
    for (size_t c = 0; c < steps.size(); ++c) {
      const ColumnSpec& column = spec.columns[c];
      const Shape want = column.shape.Prepend(static_cast<int64_t>(N));
      if (steps[c].dtype != column.dtype || !(steps[c].shape == want) ||
          steps[c].size_bytes != column.step_bytes() * N) {
        return Status::InvalidArgument(
            "table " + Quoted(shards_->name) + ", column " + Quoted(column.name) + ": got " +
            std::string(DTypeName(steps[c].dtype)) + steps[c].shape.ToString() + " (" +
            std::to_string(steps[c].size_bytes) + " bytes), want " +
            std::string(DTypeName(column.dtype)) + want.ToString());
      }
    }
    std::vector<Status> statuses(writers_.size());
    const auto one = [&](size_t s) {
      if (writers_[s] == nullptr) return;
      const size_t n = first_[s + 1] - first_[s];
      std::vector<ConstTensor> part(steps.size());
      for (size_t c = 0; c < steps.size(); ++c) {
        const size_t row = spec.columns[c].step_bytes();
        part[c] = {steps[c].dtype, spec.columns[c].shape.Prepend(static_cast<int64_t>(n)),
                   static_cast<const std::byte*>(steps[c].data) + first_[s] * row, n * row};
      }
      std::span<const double> p =
          priorities.empty() ? priorities : priorities.subspan(first_[s], n);
      statuses[s] = append(*writers_[s], part, p);
    };
    if (parallel) {
      shards_->fan_out->Run(writers_.size(), one);
    } else {
      for (size_t s = 0; s < writers_.size(); ++s) one(s);
    }
    for (size_t s = 0; s < writers_.size(); ++s) {
      if (!statuses[s].ok()) return statuses[s].WithContext(Envs(s));
    }
    return Status::OK();
  }

  std::shared_ptr<Shards> shards_;
  std::vector<size_t> first_;                           // S + 1
  std::vector<std::unique_ptr<VectorWriter>> writers_;  // null where a shard has none
};

class ShardedTable final : public Table, public std::enable_shared_from_this<ShardedTable> {
 public:
  explicit ShardedTable(std::shared_ptr<Shards> shards)
      : shards_(std::move(shards)), rng_(std::random_device{}()) {}

  TableSpec spec() const override { return shards_->spec; }
  const std::string& name() const override { return shards_->name; }

  Result<std::unique_ptr<TrajectoryWriter>> NewWriter(const WriterOptions& options) override {
    return std::unique_ptr<TrajectoryWriter>(new ShardedWriter(shards_, options));
  }

  Result<std::unique_ptr<VectorWriter>> NewVectorWriter(size_t num_envs,
                                                        const WriterOptions& options) override {
    if (num_envs == 0 || num_envs > kMaxVectorWriterEnvs) {
      return Status::InvalidArgument("table " + Quoted(name()) + ": a vector writer of " +
                                     std::to_string(num_envs) + " environments (1 to " +
                                     std::to_string(kMaxVectorWriterEnvs) + ")");
    }
    // The k-th of the P shards that are there takes [k N / P, (k + 1) N / P);
    // of a vector table, each shard its lanes, in shard order.
    const size_t S = shards_->size();
    std::vector<size_t> first(S + 1);
    if (shards_->spec.lanes > 1) {
      if (num_envs != static_cast<size_t>(shards_->spec.lanes)) {
        return Status::InvalidArgument(
            "table " + Quoted(name()) + ": a vector writer of " + std::to_string(num_envs) +
            " environments; the vector table has " + std::to_string(shards_->spec.lanes) +
            " lanes over its shards");
      }
      for (size_t s = 0; s < S; ++s)
        first[s + 1] = first[s] + static_cast<size_t>(shards_->lanes[s]);
    } else {
      size_t P = 0;
      for (size_t s = 0; s < S; ++s) P += shards_->present(s) ? 1 : 0;
      for (size_t s = 0, k = 0; s <= S; ++s) {
        first[s] = k * num_envs / P;
        if (s < S && shards_->present(s)) ++k;
      }
    }
    std::vector<std::unique_ptr<VectorWriter>> writers(S);
    for (size_t s = 0; s < S; ++s) {
      if (first[s + 1] == first[s]) continue;
      Result<std::unique_ptr<VectorWriter>> w =
          shards_->tables[s]->NewVectorWriter(first[s + 1] - first[s], options);
      if (!w.ok()) return w.status().WithContext(shards_->Where(s));
      writers[s] = std::move(w).value();
    }
    return std::unique_ptr<VectorWriter>(
        new ShardedVectorWriter(shards_, std::move(first), std::move(writers)));
  }

  Status Sample(int64_t batch_size, const SampleOptions& options, SampleBatch* out) override {
    if (out == nullptr) return Status::InvalidArgument("table " + Quoted(name()) + ": out is null");
    const size_t S = shards_->size();
    if (S == 1) return shards_->tables[0]->Sample(batch_size, options, out);
    if (batch_size < 1 || batch_size > kMaxBatchSize) {
      return Status::InvalidArgument("table " + Quoted(name()) + ": batch_size is " +
                                     std::to_string(batch_size) + "; it must be between 1 and " +
                                     std::to_string(kMaxBatchSize));
    }
    const TableSpec& spec = shards_->spec;
    if (spec.selector != SelectorKind::kUniform && spec.selector != SelectorKind::kPrioritized) {
      return SampleMerged(batch_size, options, out);
    }
    // Round 1: every shard's mass, until some shard has something to draw
    // (as a local table waits for items), at most options.timeout. Shards
    // left out (down, where the connection skips unavailable shards) weigh
    // 0 from then on.
    const auto deadline = options.timeout == kWaitForever
                              ? std::chrono::steady_clock::time_point::max()
                              : std::chrono::steady_clock::now() + options.timeout;
    std::vector<SamplingMass> masses;
    std::vector<bool> out_of_it;
    SamplingMass sum;  // over the shards that answered
    std::vector<double> weight(S);
    double total = 0;
    bool by_priority = false;
    while (true) {
      REPLAYDB_RETURN_IF_ERROR(ShardMasses(&masses, &out_of_it, &sum));
      if (std::isinf(sum.total) || std::isnan(sum.total)) {
        return Status::FailedPrecondition("table " + Quoted(name()) +
                                          ": its shards' priority masses add up to more than a "
                                          "double holds; lower the priorities or their exponent");
      }
      // Prioritized draws go by mass; where every priority is 0 (the
      // shards then draw uniformly) and for uniform tables, by items.
      by_priority = spec.selector == SelectorKind::kPrioritized && sum.total > 0;
      total = 0;
      for (size_t s = 0; s < S; ++s) {
        weight[s] = by_priority ? masses[s].total : static_cast<double>(masses[s].items);
        total += weight[s];
      }
      if (total > 0 && sum.items > 0) break;
      REPLAYDB_RETURN_IF_ERROR(AwaitItems(options, deadline, out_of_it, ""));
    }
    // n_s ~ Multinomial(B, weight_s / total), as binomials in turn; or,
    // stratified (prioritized tables, as locally), the B strata of the
    // shards' masses laid end to end, one point drawn in each, counted by
    // the shard it falls in (each shard then draws its n_s stratified).
    std::vector<int64_t> n = options.stratified && spec.selector == SelectorKind::kPrioritized
                                 ? Strata(batch_size, weight, total)
                                 : Split(batch_size, weight, total);
    // Round 2: n_s draws from each shard, with its side effects (the
    // shard's rate limiter, times sampled, removals), each copied into its
    // rows of `out` by the thread that fetched it. A shard left out now
    // (down) gives its rows to the others, split by their weights: a draw
    // then lands in shard t with chance weight_t / (total - weight_s), the
    // table of the shards that answered.
    REPLAYDB_RETURN_IF_ERROR(SizeBatch(spec, batch_size, options.gather, out));
    std::vector<std::vector<size_t>> rows(S);  // the rows of `out` each shard fills
    size_t row = 0;
    for (size_t s = 0; s < S; ++s) {
      for (int64_t i = 0; i < n[s]; ++i) rows[s].push_back(row++);
    }
    std::vector<uint8_t> shard_of(static_cast<size_t>(batch_size));
    SampleOptions each = options;
    each.importance_beta = -1;
    for (size_t round = 0; round < S; ++round) {  // each round but the last leaves one out
      const std::vector<Status> statuses = shards_->All([&](size_t s) -> Status {
        if (rows[s].empty()) return Status::OK();
        SampleBatch part;
        REPLAYDB_RETURN_IF_ERROR(
            shards_->tables[s]->Sample(static_cast<int64_t>(rows[s].size()), each, &part));
        CopyRows(part, rows[s], out);
        for (size_t i = 0; i < rows[s].size(); ++i) {
          ItemKey key = part.keys[i];
          REPLAYDB_RETURN_IF_ERROR(shards_->TagKey(s, &key));
          out->keys[rows[s][i]] = key;
          out->probabilities[rows[s][i]] = part.probabilities[i];  // the shard's; scaled below
          shard_of[rows[s][i]] = static_cast<uint8_t>(s);
        }
        rows[s].clear();
        return Status::OK();
      });
      std::vector<size_t> orphans;
      Status first_out;
      for (size_t s = 0; s < S; ++s) {
        if (statuses[s].ok()) continue;
        if (!shards_->LeaveOut(statuses[s])) return statuses[s].WithContext(shards_->Where(s));
        if (first_out.ok()) first_out = statuses[s].WithContext(shards_->Where(s));
        out_of_it[s] = true;
        total -= weight[s];
        weight[s] = 0;
        orphans.insert(orphans.end(), rows[s].begin(), rows[s].end());
        rows[s].clear();
      }
      if (orphans.empty()) break;
      if (std::none_of(weight.begin(), weight.end(), [](double w) { return w > 0; })) {
        return first_out.WithContext("every shard with something to draw is unavailable");
      }
      const std::vector<int64_t> more = Split(static_cast<int64_t>(orphans.size()), weight, total);
      size_t next = 0;
      for (size_t s = 0; s < S; ++s) {
        for (int64_t i = 0; i < more[s]; ++i) rows[s].push_back(orphans[next++]);
      }
    }
    // The draws' global chances, and the counts of the shards that answered.
    total = std::accumulate(weight.begin(), weight.end(), 0.0);
    for (size_t b = 0; b < static_cast<size_t>(batch_size); ++b) {
      out->probabilities[b] *= weight[shard_of[b]] / total;
    }
    sum = Sum(masses, out_of_it);
    return Weights(options, sum.items, by_priority, sum.smallest_priority, out);
  }

  Status UpdatePriorities(std::span<const ItemKey> keys, std::span<const double> priorities,
                          PriorityUpdateResult* result) override {
    if (keys.size() != priorities.size()) {
      return Status::InvalidArgument("table " + Quoted(name()) + ": " +
                                     std::to_string(keys.size()) + " keys and " +
                                     std::to_string(priorities.size()) + " priorities");
    }
    for (size_t i = 0; i < priorities.size(); ++i) {
      if (!std::isfinite(priorities[i]) || priorities[i] < 0) {
        return Status::InvalidArgument("table " + Quoted(name()) + ": priority " +
                                       std::to_string(priorities[i]) + " at index " +
                                       std::to_string(i) + " (key " + std::to_string(keys[i]) +
                                       "); priorities are finite and >= 0");
      }
    }
    const KeysByShard by(shards_->size(), keys);
    std::vector<std::vector<double>> values(shards_->size());
    for (size_t s = 0; s < shards_->size(); ++s) {
      for (size_t i : by.places[s]) values[s].push_back(priorities[i]);
    }
    std::vector<PriorityUpdateResult> results(shards_->size());
    REPLAYDB_RETURN_IF_ERROR(shards_->Each([&](size_t s) -> Status {
      if (by.keys[s].empty()) return Status::OK();
      return shards_->tables[s]->UpdatePriorities(by.keys[s], values[s], &results[s]);
    }));
    if (result != nullptr) {
      *result = {};
      for (const PriorityUpdateResult& r : results) {
        result->updated += r.updated;
        result->skipped += r.skipped;
      }
      result->skipped += static_cast<int64_t>(by.foreign.size());
      for (size_t s = 0; s < shards_->size(); ++s) {
        if (!shards_->present(s)) result->skipped += static_cast<int64_t>(by.keys[s].size());
      }
    }
    return Status::OK();
  }

  Status Lookup(std::span<const ItemKey> keys, SampleBatch* out) override {
    if (out == nullptr) return Status::InvalidArgument("table " + Quoted(name()) + ": out is null");
    const auto B = static_cast<int64_t>(keys.size());
    if (B < 1 || B > kMaxBatchSize) {
      return Status::InvalidArgument("table " + Quoted(name()) + ": Lookup got " +
                                     std::to_string(B) + " keys; it takes between 1 and " +
                                     std::to_string(kMaxBatchSize));
    }
    const KeysByShard by(shards_->size(), keys);
    if (!by.foreign.empty()) {
      const ItemKey key = keys[by.foreign.front()];
      return Status::NotFound("table " + Quoted(name()) + ": key " + std::to_string(key) +
                              " (index " + std::to_string(by.foreign.front()) + ") names shard " +
                              std::to_string(ShardOfKey(key)) + "; the table has " +
                              std::to_string(shards_->size()));
    }
    for (size_t s = 0; s < shards_->size(); ++s) {
      if (!shards_->present(s) && !by.keys[s].empty()) {
        return shards_->Left(s, "key " + std::to_string(keys[by.places[s].front()]) + " (index " +
                                    std::to_string(by.places[s].front()) + ")");
      }
    }
    std::vector<SampleBatch> parts(shards_->size());
    REPLAYDB_RETURN_IF_ERROR(shards_->Each([&](size_t s) -> Status {
      if (by.keys[s].empty()) return Status::OK();
      return shards_->tables[s]->Lookup(by.keys[s], &parts[s]);
    }));
    REPLAYDB_RETURN_IF_ERROR(SizeBatch(shards_->spec, B, true, out));
    for (size_t s = 0; s < shards_->size(); ++s) {
      if (!by.keys[s].empty()) CopyRows(parts[s], by.places[s], out);
    }
    out->keys.assign(keys.begin(), keys.end());
    std::fill(out->probabilities.begin(), out->probabilities.end(), 0.0);
    out->weights.clear();
    return Status::OK();
  }

  // GPU calls through this host's memory (through_host.h): the sharded
  // host call, and copies to or from the caller's device arrays.
  Status SampleToDevice(int64_t batch_size, const SampleOptions& options,
                        const DeviceSampleOutput& out, void* stream) override {
    return SampleToDeviceThroughHost(*this, shards_->spec, batch_size, options, out, stream);
  }
  Status LookupToDevice(std::span<const ItemKey> keys, const DeviceSampleOutput& out,
                        void* stream) override {
    return LookupToDeviceThroughHost(*this, shards_->spec, keys, out, stream);
  }
  Result<std::unique_ptr<DeviceSampler>> NewDeviceSampler(
      const DeviceSamplerOptions& options) override {
    return DeviceSamplerThroughHost(shared_from_this(), shards_->spec, options);
  }
  Status UpdatePrioritiesFromDevice(const uint64_t* keys, const float* priorities, int64_t n,
                                    void* stream) override {
    return UpdatePrioritiesFromDeviceThroughHost(*this, keys, priorities, n, stream);
  }

  // Each shard keeps its own rate limiter (Reverb's sharding): this spec on
  // every shard.
  Status SetRateLimiter(const RateLimiterSpec& spec) override {
    return shards_->Each([&](size_t s) { return shards_->tables[s]->SetRateLimiter(spec); });
  }
  // The split of each batch over the shards draws from a generator seeded
  // with `seed`; shard s's draws with seed + s (shard 0's with `seed`).
  Status Seed(uint64_t seed) override {
    REPLAYDB_RETURN_IF_ERROR(
        shards_->Each([&](size_t s) { return shards_->tables[s]->Seed(seed + s); }));
    std::lock_guard<std::mutex> lock(rng_mu_);
    rng_.seed(seed);
    return Status::OK();
  }
  Status DeleteItems(std::span<const ItemKey> keys, int64_t* deleted) override {
    const KeysByShard by(shards_->size(), keys);
    std::vector<int64_t> counts(shards_->size(), 0);
    REPLAYDB_RETURN_IF_ERROR(shards_->Each([&](size_t s) -> Status {
      if (by.keys[s].empty()) return Status::OK();
      return shards_->tables[s]->DeleteItems(by.keys[s], &counts[s]);
    }));
    if (deleted != nullptr) {
      *deleted = 0;
      for (int64_t c : counts) *deleted += c;
    }
    return Status::OK();
  }
  Status Clear() override {
    return shards_->Each([&](size_t s) { return shards_->tables[s]->Clear(); });
  }

  Status Load(std::span<const uint64_t> trajectory_ids) override {
    std::vector<std::vector<uint64_t>> ids(shards_->size());
    for (uint64_t id : trajectory_ids) {
      const auto s = static_cast<size_t>(ShardOfTrajectory(id));
      if (s >= shards_->size()) {
        return Status::NotFound("table " + Quoted(name()) + ": trajectory " + std::to_string(id) +
                                " names shard " + std::to_string(s) + "; the table has " +
                                std::to_string(shards_->size()));
      }
      if (!shards_->present(s)) return shards_->Left(s, "trajectory " + std::to_string(id));
      ids[s].push_back(ShardLocalTrajectory(id));
    }
    return shards_->Each([&](size_t s) -> Status {
      if (ids[s].empty()) return Status::OK();
      return shards_->tables[s]->Load(ids[s]);
    });
  }
  Status LoadRange(uint64_t first, uint64_t last) override {
    return shards_->Each([&](size_t s) -> Status {
      uint64_t from = 0, to = 0;
      if (!LocalRange(s, first, last, &from, &to)) return Status::OK();
      return shards_->tables[s]->LoadRange(from, to);
    });
  }
  Status ColdTrajectories(uint64_t from, size_t limit, std::vector<uint64_t>* ids) const override {
    ids->clear();
    for (size_t s = 0; s < shards_->size(); ++s) {
      uint64_t lo = 0, hi = 0;
      if (!shards_->present(s)) continue;
      if (!LocalRange(s, from, std::numeric_limits<uint64_t>::max(), &lo, &hi)) continue;
      std::vector<uint64_t> part;
      REPLAYDB_RETURN_IF_ERROR(
          shards_->tables[s]
              ->ColdTrajectories(lo, limit == 0 ? 0 : limit - ids->size(), &part)
              .WithContext(shards_->Where(s)));
      for (uint64_t id : part) {
        REPLAYDB_RETURN_IF_ERROR(shards_->Tag(s, &id));
        ids->push_back(id);
      }
      if (limit != 0 && ids->size() >= limit) break;
    }
    return Status::OK();
  }
  Status ListTrajectories(const TrajectoryFilter& filter,
                          std::vector<TrajectoryInfo>* out) const override {
    out->clear();
    for (size_t s = 0; s < shards_->size(); ++s) {
      uint64_t lo = 0, hi = 0;
      if (!shards_->present(s)) continue;
      if (!LocalRange(s, filter.from, std::numeric_limits<uint64_t>::max(), &lo, &hi)) continue;
      TrajectoryFilter local = filter;
      local.from = lo;
      local.limit = filter.limit == 0 ? 0 : filter.limit - out->size();
      std::vector<TrajectoryInfo> part;
      REPLAYDB_RETURN_IF_ERROR(
          shards_->tables[s]->ListTrajectories(local, &part).WithContext(shards_->Where(s)));
      for (TrajectoryInfo& info : part) {
        REPLAYDB_RETURN_IF_ERROR(shards_->Tag(s, &info.id));
        out->push_back(info);
      }
      if (filter.limit != 0 && out->size() >= filter.limit) break;
    }
    return Status::OK();
  }
  Status ReadTrajectory(uint64_t id, int64_t first, int64_t count, TrajectorySteps* out) override {
    const auto s = static_cast<size_t>(ShardOfTrajectory(id));
    if (s >= shards_->size()) {
      return Status::NotFound("table " + Quoted(name()) + " has no trajectory " +
                              std::to_string(id) + ": it names shard " + std::to_string(s) +
                              ", and the table has " + std::to_string(shards_->size()));
    }
    if (!shards_->present(s)) return shards_->Left(s, "trajectory " + std::to_string(id));
    REPLAYDB_RETURN_IF_ERROR(shards_->tables[s]
                                 ->ReadTrajectory(ShardLocalTrajectory(id), first, count, out)
                                 .WithContext(shards_->Where(s)));
    return shards_->Tag(s, &out->info.id);
  }
  Status ItemPriorities(std::vector<ItemKey>* keys, std::vector<double>* priorities) override {
    std::vector<std::vector<ItemKey>> k(shards_->size());
    std::vector<std::vector<double>> p(shards_->size());
    REPLAYDB_RETURN_IF_ERROR(
        shards_->Each([&](size_t s) { return shards_->tables[s]->ItemPriorities(&k[s], &p[s]); }));
    keys->clear();
    priorities->clear();
    for (size_t s = 0; s < shards_->size(); ++s) {
      for (ItemKey key : k[s]) {
        REPLAYDB_RETURN_IF_ERROR(shards_->TagKey(s, &key));
        keys->push_back(key);
      }
      priorities->insert(priorities->end(), p[s].begin(), p[s].end());
    }
    return Status::OK();
  }

  // Counts summed over the shards; placement, device and the rate
  // limiter's spec are the first shard's (that is there),
  // max_priority_seen the largest.
  TableInfo Info() const override {
    std::vector<TableInfo> infos(shards_->size());
    shards_->fan_out->Run(shards_->size(), [&](size_t s) {
      if (shards_->present(s)) infos[s] = shards_->tables[s]->Info();
    });
    size_t first = 0;  // the first shard that is there (one is)
    while (!shards_->present(first)) ++first;
    TableInfo sum = infos[first];
    sum.name = name();
    for (size_t s = first + 1; s < infos.size(); ++s) {
      if (!shards_->present(s)) continue;
      const TableInfo& i = infos[s];
      for (auto field : {&TableInfo::num_steps,
                         &TableInfo::num_items,
                         &TableInfo::num_trajectories,
                         &TableInfo::num_open_trajectories,
                         &TableInfo::bytes_used,
                         &TableInfo::bytes_reserved,
                         &TableInfo::bytes_capacity,
                         &TableInfo::blocks_used,
                         &TableInfo::blocks_capacity,
                         &TableInfo::steps_inserted,
                         &TableInfo::items_inserted,
                         &TableInfo::items_sampled,
                         &TableInfo::items_removed,
                         &TableInfo::evicted_trajectories,
                         &TableInfo::evicted_items,
                         &TableInfo::priority_updates,
                         &TableInfo::priority_updates_skipped,
                         &TableInfo::cold_trajectories,
                         &TableInfo::cold_steps,
                         &TableInfo::cold_bytes,
                         &TableInfo::spilled_trajectories,
                         &TableInfo::spilled_bytes,
                         &TableInfo::loaded_trajectories,
                         &TableInfo::rotations,
                         &TableInfo::spill_queue}) {
        sum.*field += i.*field;
      }
      for (auto field :
           {&RateLimiterInfo::inserts, &RateLimiterInfo::samples, &RateLimiterInfo::deletes,
            &RateLimiterInfo::blocked_inserts, &RateLimiterInfo::blocked_samples}) {
        sum.rate_limiter.*field += i.rate_limiter.*field;
      }
      sum.max_priority_seen = std::max(sum.max_priority_seen, i.max_priority_seen);
    }
    return sum;
  }

  // The shards' masses added up (those that answered, where the
  // connection skips unavailable shards).
  Result<SamplingMass> Mass() override {
    std::vector<SamplingMass> masses;
    std::vector<bool> out_of_it;
    SamplingMass sum;
    REPLAYDB_RETURN_IF_ERROR(ShardMasses(&masses, &out_of_it, &sum));
    return sum;
  }

  void Close() override {
    for (const auto& t : shards_->tables) {
      if (t != nullptr) t->Close();
    }
  }

 private:
  // Draws of a heap, FIFO or LIFO table: each takes the top item of the
  // shard whose top is best, as one table holding every shard's items would
  // give: the highest priority (kMaxHeap) or lowest (kMinHeap), the oldest
  // (kFifo) or newest (kLifo) by insertion order (the shards' item clocks,
  // SampleBatch::insertion_order); a heap's ties go to the oldest, as one
  // heap's do, and the rest to the lower shard. A k-way merge: every
  // shard's top is looked at (a peek), then the best shard gives as many
  // draws as its top item has left (max_times_sampled less its times
  // sampled; all B where there is no limit), its new top is looked at, and
  // so on: two calls to one shard per distinct item of the batch. Draws
  // have probability 1, and weights (where asked) are 1, as a local
  // table's.
  Status SampleMerged(int64_t B, const SampleOptions& options, SampleBatch* out) {
    const TableSpec& spec = shards_->spec;
    const size_t S = shards_->size();
    const SelectorKind kind = spec.selector;
    const auto deadline = options.timeout == kWaitForever
                              ? std::chrono::steady_clock::time_point::max()
                              : std::chrono::steady_clock::now() + options.timeout;
    struct Top {
      bool has = false;  // the shard has an item to draw
      double priority = 0;
      uint64_t order = 0;  // its insertion order
      int64_t times_sampled = 0;
    };
    const auto better = [kind](const Top& a, const Top& b) {
      switch (kind) {
        case SelectorKind::kMaxHeap:
          return a.priority > b.priority || (a.priority == b.priority && a.order < b.order);
        case SelectorKind::kMinHeap:
          return a.priority < b.priority || (a.priority == b.priority && a.order < b.order);
        case SelectorKind::kFifo:
          return a.order < b.order;
        default:
          return a.order > b.order;  // kLifo
      }
    };
    const bool by_order = kind == SelectorKind::kFifo || kind == SelectorKind::kLifo;
    std::vector<Top> top(S);
    std::vector<bool> out_of_it(S, false);
    SampleOptions look;
    look.peek = true;
    look.gather = false;
    const auto peek = [&](size_t s) -> Status {
      SampleBatch one;
      top[s] = {};
      const Status st = shards_->tables[s]->Sample(1, look, &one);
      // A peek at an empty table fails so ("... has nothing to draw ..."):
      // the shard has no top.
      if (st.code() == Status::Code::kFailedPrecondition &&
          st.message().find("nothing to draw") != std::string::npos) {
        return Status::OK();
      }
      REPLAYDB_RETURN_IF_ERROR(st);
      // (A server of a build before insertion orders gives none: refused
      // for FIFO and LIFO; a heap's ties then go to the lower shard.)
      if (by_order && one.insertion_order.size() != 1) {
        return Status::FailedPrecondition(
            "table " + Quoted(name()) + ": its " + std::string(SelectorKindName(kind)) +
            " draws merge the shards' insertion orders, which this shard's server does not "
            "give (a replaydb from before 2026-11-30); upgrade it");
      }
      top[s] = {true, one.priorities[0],
                one.insertion_order.size() == 1 ? one.insertion_order[0] : 0,
                static_cast<int64_t>(one.times_sampled[0])};
      return Status::OK();
    };
    // A failed call to shard s: left out where allowed, else the error.
    const auto failed = [&](size_t s, const Status& st) -> Status {
      if (!shards_->LeaveOut(st)) return st.WithContext(shards_->Where(s));
      out_of_it[s] = true;
      top[s] = {};
      if (shards_->NoneLeft(out_of_it)) {
        return st.WithContext(shards_->Where(s)).WithContext("every shard is unavailable");
      }
      return Status::OK();
    };
    const auto peek_all = [&]() -> Status {
      const std::vector<Status> statuses =
          shards_->All([&](size_t s) -> Status { return out_of_it[s] ? Status::OK() : peek(s); });
      for (size_t s = 0; s < S; ++s) {
        if (!statuses[s].ok()) REPLAYDB_RETURN_IF_ERROR(failed(s, statuses[s]));
      }
      return Status::OK();
    };
    REPLAYDB_RETURN_IF_ERROR(SizeBatch(spec, B, options.gather, out));
    REPLAYDB_RETURN_IF_ERROR(peek_all());
    SampleOptions each = options;
    each.importance_beta = -1;
    int64_t filled = 0;
    while (filled < B) {
      size_t best = S;
      for (size_t s = 0; s < S; ++s) {
        if (top[s].has && (best == S || better(top[s], top[best]))) best = s;
      }
      if (best == S) {  // nothing to draw anywhere (now)
        REPLAYDB_RETURN_IF_ERROR(AwaitItems(
            options, deadline, out_of_it,
            ", " + std::to_string(filled) + " of " + std::to_string(B) + " drawn"));
        REPLAYDB_RETURN_IF_ERROR(peek_all());
        continue;
      }
      int64_t k = B - filled;
      if (!options.peek && spec.max_times_sampled > 0) {
        k = std::clamp<int64_t>(spec.max_times_sampled - top[best].times_sampled, 1, k);
      }
      SampleBatch part;
      const Status st = shards_->tables[best]->Sample(k, each, &part);
      if (!st.ok()) {
        REPLAYDB_RETURN_IF_ERROR(failed(best, st));
        continue;
      }
      std::vector<size_t> rows(static_cast<size_t>(k));
      std::iota(rows.begin(), rows.end(), static_cast<size_t>(filled));
      CopyRows(part, rows, out);
      for (size_t i = 0; i < rows.size(); ++i) {
        ItemKey key = part.keys[i];
        REPLAYDB_RETURN_IF_ERROR(shards_->TagKey(best, &key));
        out->keys[rows[i]] = key;
        out->probabilities[rows[i]] = part.probabilities[i];
      }
      filled += k;
      if (filled < B) {
        const Status again = peek(best);
        if (!again.ok()) REPLAYDB_RETURN_IF_ERROR(failed(best, again));
      }
    }
    if (options.importance_beta >= 0) {
      out->weights.assign(static_cast<size_t>(B), 1.0);
    } else {
      out->weights.clear();
    }
    return Status::OK();
  }

  // Every shard's mass, at once, into *masses, and their sum into *sum.
  // A shard left out (LeaveOut) gets mass 0 and out_of_it[s]; when every
  // shard is, the first one's error.
  Status ShardMasses(std::vector<SamplingMass>* masses, std::vector<bool>* out_of_it,
                     SamplingMass* sum) {
    masses->assign(shards_->size(), SamplingMass{});
    out_of_it->assign(shards_->size(), false);
    const std::vector<Status> statuses = shards_->All([&](size_t s) -> Status {
      Result<SamplingMass> m = shards_->tables[s]->Mass();
      if (!m.ok()) return m.status();
      (*masses)[s] = *m;
      return Status::OK();
    });
    Status first_out;
    for (size_t s = 0; s < shards_->size(); ++s) {
      if (statuses[s].ok()) continue;
      if (!shards_->LeaveOut(statuses[s])) return statuses[s].WithContext(shards_->Where(s));
      if (first_out.ok()) first_out = statuses[s].WithContext(shards_->Where(s));
      (*out_of_it)[s] = true;
    }
    if (shards_->NoneLeft(*out_of_it)) {
      return first_out.WithContext("every shard is unavailable");
    }
    *sum = Sum(*masses, *out_of_it);
    return Status::OK();
  }

  // The masses of the shards not out of it added up, the smallest priority
  // > 0 of any as the sum's smallest_priority.
  static SamplingMass Sum(const std::vector<SamplingMass>& masses,
                          const std::vector<bool>& out_of_it) {
    SamplingMass sum;
    for (size_t s = 0; s < masses.size(); ++s) {
      if (out_of_it[s]) continue;
      const SamplingMass& m = masses[s];
      sum.total += m.total;
      sum.items += m.items;
      if (m.smallest_priority > 0 &&
          (sum.smallest_priority == 0 || m.smallest_priority < sum.smallest_priority)) {
        sum.smallest_priority = m.smallest_priority;
      }
    }
    return sum;
  }

  // Where no shard has anything to draw: a peek fails at once; a sample
  // sleeps (10 ms at most) and returns OK to ask again, or, past its
  // deadline, DeadlineExceeded (`drawn`: what the message adds after the
  // wait, such as ", 3 of 8 drawn").
  Status AwaitItems(const SampleOptions& options, std::chrono::steady_clock::time_point deadline,
                    const std::vector<bool>& out_of_it, const std::string& drawn) const {
    const std::string count = std::to_string(shards_->size());
    if (options.peek) {
      return Status::FailedPrecondition("table " + Quoted(name()) +
                                        " has nothing to draw on any of its " + count + " shards" +
                                        LeftOut(out_of_it));
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return Status::DeadlineExceeded("table " + Quoted(name()) + ": nothing to draw on any of its " +
                                      count + " shards within " +
                                      std::to_string(options.timeout.count()) + " ms" + drawn +
                                      LeftOut(out_of_it));
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(10), deadline - now));
    return Status::OK();
  }

  // ", shards 1, 3 unavailable" where some were left out; else empty.
  static std::string LeftOut(const std::vector<bool>& out_of_it) {
    std::string list;
    for (size_t s = 0; s < out_of_it.size(); ++s) {
      if (out_of_it[s]) list += (list.empty() ? "" : ", ") + std::to_string(s);
    }
    return list.empty() ? "" : " (shards " + list + " unavailable, left out)";
  }

  // n_s ~ Multinomial(B, weight_s / total), as binomials in turn.
  std::vector<int64_t> Split(int64_t B, const std::vector<double>& weight, double total) {
    const size_t S = weight.size();
    std::vector<int64_t> n(S, 0);
    std::lock_guard<std::mutex> lock(rng_mu_);
    int64_t left = B;
    double left_weight = total;
    for (size_t s = 0; s < S && left > 0; ++s) {
      if (s + 1 == S || weight[s] >= left_weight) {
        n[s] = weight[s] > 0 ? left : 0;
      } else if (weight[s] > 0) {
        // libstdc++'s binomial calls lgamma, which writes glibc's global
        // signgam: one at a time in the process (found by TSan).
        static std::mutex lgamma_mu;
        std::lock_guard<std::mutex> one_at_a_time(lgamma_mu);
        n[s] = std::binomial_distribution<int64_t>(left, weight[s] / left_weight)(rng_);
      }
      left -= n[s];
      left_weight -= weight[s];
    }
    if (left > 0) {
      // Rounding left the last shards' weight at 0: the largest takes it.
      n[static_cast<size_t>(std::max_element(weight.begin(), weight.end()) - weight.begin())] +=
          left;
    }
    return n;
  }

  // The shards' weights laid end to end and cut into B strata, one point
  // drawn in each, counted by the shard it falls in.
  std::vector<int64_t> Strata(int64_t B, const std::vector<double>& weight, double total) {
    const size_t S = weight.size();
    std::vector<int64_t> n(S, 0);
    std::lock_guard<std::mutex> lock(rng_mu_);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<double> ends(S);  // where each shard's mass ends
    std::partial_sum(weight.begin(), weight.end(), ends.begin());
    size_t last = S - 1;  // the last shard with mass (rounding may put a point past it)
    while (last > 0 && weight[last] == 0) --last;
    for (int64_t b = 0; b < B; ++b) {
      const double point = (static_cast<double>(b) + unit(rng_)) / static_cast<double>(B) * total;
      const auto s =
          static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), point) - ends.begin());
      ++n[std::min(s, last)];
    }
    return n;
  }

  // Shard s's part of the table's ids [first, last], as its own ids; false
  // when it has none there.
  bool LocalRange(size_t s, uint64_t first, uint64_t last, uint64_t* lo, uint64_t* hi) const {
    const auto shard_first = static_cast<size_t>(ShardOfTrajectory(first));
    const auto shard_last = static_cast<size_t>(ShardOfTrajectory(last));
    if (s < shard_first || s > shard_last || first > last) return false;
    *lo = s == shard_first ? ShardLocalTrajectory(first) : 0;
    *hi = s == shard_last ? ShardLocalTrajectory(last) : kMaxShardTrajectoryId;
    return true;
  }

  // Importance weights over the whole table: (N * P(i))^-beta with N the
  // live items of every shard, divided by the largest any live item could
  // get (kBuffer: (p_min / p_i)^(exponent * beta) with p_min the smallest
  // priority > 0 of any shard) or the batch's largest (kBatch).
  Status Weights(const SampleOptions& options, int64_t items, bool by_priority, double smallest,
                 SampleBatch* out) const {
    const double beta = options.importance_beta;
    if (beta < 0) {
      out->weights.clear();
      return Status::OK();
    }
    const size_t B = out->keys.size();
    out->weights.assign(B, 1.0);
    if (options.weight_normalization == WeightNormalization::kBatch) {
      double largest = 0;
      for (size_t b = 0; b < B; ++b) {
        out->weights[b] = std::pow(static_cast<double>(items) * out->probabilities[b], -beta);
        largest = std::max(largest, out->weights[b]);
      }
      for (double& w : out->weights) w /= largest;
      return Status::OK();
    }
    if (!by_priority) return Status::OK();  // every item equally likely
    if (!(smallest > 0)) {
      return Status::FailedPrecondition(
          "table " + Quoted(name()) +
          ": a shard did not report its smallest priority (priorities on a GPU), which "
          "buffer-wide importance weights need; use WeightNormalization::kBatch");
    }
    const double exponent = shards_->spec.priority_exponent;
    for (size_t b = 0; b < B; ++b) {
      const double p = out->priorities[b];
      if (!(p > 0) || exponent == 0) continue;
      out->weights[b] =
          std::exp2(std::min(0.0, exponent * beta * (std::log2(smallest) - std::log2(p))));
    }
    return Status::OK();
  }

  std::shared_ptr<Shards> shards_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
};

}  // namespace

bool IsShardedAddress(const std::string& address) {
  const size_t plus = address.find('+');
  if (plus == std::string::npos) return false;
  const std::string_view next = std::string_view(address).substr(plus + 1);
  if (next == kShardLeft || next.substr(0, 2) == std::string(kShardLeft) + "+") return true;
  for (std::string_view scheme : {"ucx://", "etcd://", "file://"}) {
    if (next.substr(0, scheme.size()) == scheme) return true;
  }
  return false;
}

Result<std::unique_ptr<ShardedDB>> ShardedDB::Connect(const std::string& address,
                                                      const ConnectOptions& options) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t plus = address.find('+', start);
    parts.push_back(address.substr(start, plus == std::string::npos ? plus : plus - start));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  const std::string form =
      "; give the shards' addresses joined by '+' (ucx://HOST:PORT+ucx://HOST:PORT)";
  if (parts.size() > static_cast<size_t>(kMaxShards)) {
    return Status::InvalidArgument("address '" + address + "' names " +
                                   std::to_string(parts.size()) + " shards; at most " +
                                   std::to_string(kMaxShards));
  }
  std::set<std::string> seen;
  for (size_t s = 0; s < parts.size(); ++s) {
    if (parts[s].empty()) {
      return Status::InvalidArgument("address '" + address + "': shard " + std::to_string(s) +
                                     "'s address is empty" + form);
    }
    if (parts[s] != kShardLeft && !seen.insert(parts[s]).second) {
      return Status::InvalidArgument("address '" + address + "' names " + parts[s] +
                                     " twice; each shard is another database");
    }
  }
  std::vector<std::unique_ptr<DB>> shards;
  for (size_t s = 0; s < parts.size(); ++s) {
    if (parts[s] == kShardLeft) {
      shards.push_back(nullptr);  // a shard that left
      continue;
    }
    Result<std::unique_ptr<RemoteDB>> db = RemoteDB::Connect(parts[s], options);
    if (!db.ok()) return db.status().WithContext("connecting to " + ShardName(s, parts[s]));
    shards.push_back(std::move(db).value());
  }
  return Make(std::move(shards), address, options);
}

Result<std::unique_ptr<ShardedDB>> ShardedDB::Make(std::vector<std::unique_ptr<DB>> shards,
                                                   std::string address,
                                                   const ConnectOptions& options) {
  if (shards.empty() || shards.size() > static_cast<size_t>(kMaxShards)) {
    return Status::InvalidArgument("a sharded database of " + std::to_string(shards.size()) +
                                   " shards; it takes 1 to " + std::to_string(kMaxShards));
  }
  if (std::all_of(shards.begin(), shards.end(),
                  [](const std::unique_ptr<DB>& db) { return db == nullptr; })) {
    return Status::InvalidArgument("a sharded database (" + address +
                                   "): every shard has left; at least one must be there");
  }
  return std::unique_ptr<ShardedDB>(
      new ShardedDB(std::move(shards), std::move(address), options.skip_unavailable_shards));
}

ShardedDB::ShardedDB(std::vector<std::unique_ptr<DB>> shards, std::string address,
                     bool skip_unavailable)
    : shards_(std::move(shards)),
      address_(std::move(address)),
      skip_unavailable_(skip_unavailable),
      fan_out_(std::make_shared<ShardFanOut>(shards_.size() - 1)) {}

ShardedDB::~ShardedDB() = default;

namespace {

std::vector<std::string> ShardAddresses(const std::vector<std::unique_ptr<DB>>& shards) {
  std::vector<std::string> out;
  for (const auto& db : shards) out.push_back(db == nullptr ? kShardLeft : db->path());
  return out;
}

}  // namespace

Result<std::shared_ptr<Table>> ShardedDB::CreateTable(const TableSpec& spec) {
  // A vector table's lanes: the k-th of the P shards that are there gets
  // [k N / P, (k + 1) N / P), at least 2 each (a table of 1 lane is not a
  // vector table).
  size_t P = 0;
  for (const auto& db : shards_) P += db != nullptr ? 1 : 0;
  if (spec.lanes > 1 && spec.lanes < 2 * static_cast<int64_t>(P)) {
    return Status::InvalidArgument(
        "table " + Quoted(spec.name) + ": a vector table of " + std::to_string(spec.lanes) +
        " lanes over " + std::to_string(P) +
        " shards; each shard takes 2 or more, so lanes >= " + std::to_string(2 * P));
  }
  std::vector<std::shared_ptr<Table>> tables;
  for (size_t s = 0, k = 0; s < shards_.size(); ++s) {
    if (shards_[s] == nullptr) {
      tables.push_back(nullptr);
      continue;
    }
    TableSpec mine = spec;
    if (spec.lanes > 1) {
      const auto n = static_cast<int64_t>(P);
      mine.lanes =
          (static_cast<int64_t>(k) + 1) * spec.lanes / n - static_cast<int64_t>(k) * spec.lanes / n;
    }
    ++k;
    Result<std::shared_ptr<Table>> t = shards_[s]->CreateTable(mine);
    if (!t.ok()) {
      for (size_t made = 0; made < s; ++made) {
        if (shards_[made] != nullptr) (void)shards_[made]->DropTable(spec.name);
      }
      return t.status().WithContext("creating table " + Quoted(spec.name) + " on " +
                                    ShardName(s, shards_[s]->path()));
    }
    tables.push_back(std::move(t).value());
  }
  TableSpec first = tables[First()]->spec();
  first.lanes = spec.lanes;
  return std::shared_ptr<Table>(std::make_shared<ShardedTable>(
      std::make_shared<Shards>(spec.name, std::move(first), std::move(tables),
                               ShardAddresses(shards_), fan_out_, skip_unavailable_)));
}

Result<std::shared_ptr<Table>> ShardedDB::GetTable(std::string_view name) {
  std::vector<std::shared_ptr<Table>> tables;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (shards_[s] == nullptr) {
      tables.push_back(nullptr);
      continue;
    }
    Result<std::shared_ptr<Table>> t = shards_[s]->GetTable(name);
    if (!t.ok()) return t.status().WithContext(ShardName(s, shards_[s]->path()));
    tables.push_back(std::move(t).value());
  }
  // The same spec everywhere, but for a vector table's lanes (each shard
  // its own, all > 1; the table's their sum).
  const size_t f = First();
  TableSpec first = tables[f]->spec();
  int64_t lanes = 0;
  for (size_t s = f; s < tables.size(); ++s) {
    if (tables[s] == nullptr) continue;
    TableSpec other = tables[s]->spec();
    lanes += other.lanes;
    const bool both_vector = (other.lanes > 1) == (first.lanes > 1);
    other.lanes = first.lanes;
    if (!both_vector || !(other == first)) {
      return Status::FailedPrecondition("table " + Quoted(std::string(name)) + " differs between " +
                                        ShardName(f, shards_[f]->path()) + " and " +
                                        ShardName(s, shards_[s]->path()) +
                                        ": a sharded table has the same spec on every shard");
    }
  }
  if (first.lanes > 1) first.lanes = lanes;
  return std::shared_ptr<Table>(std::make_shared<ShardedTable>(
      std::make_shared<Shards>(std::string(name), std::move(first), std::move(tables),
                               ShardAddresses(shards_), fan_out_, skip_unavailable_)));
}

Status ShardedDB::DropTable(std::string_view name) {
  bool dropped = false;
  Status first;
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (shards_[s] == nullptr) continue;
    Status d = shards_[s]->DropTable(name);
    if (d.ok()) {
      dropped = true;
    } else if (d.code() != Status::Code::kNotFound && first.ok()) {
      first = d.WithContext(ShardName(s, shards_[s]->path()));
    }
  }
  if (!first.ok()) return first;
  if (!dropped) {
    return Status::NotFound("no shard of " + address_ + " has a table named " +
                            Quoted(std::string(name)));
  }
  return Status::OK();
}

std::vector<std::string> ShardedDB::ListTables() const {
  std::vector<std::string> names = shards_[First()]->ListTables();
  for (size_t s = First() + 1; s < shards_.size(); ++s) {
    if (shards_[s] == nullptr) continue;
    const std::vector<std::string> more = shards_[s]->ListTables();
    std::vector<std::string> both;
    std::set_intersection(names.begin(), names.end(), more.begin(), more.end(),
                          std::back_inserter(both));
    names = std::move(both);
  }
  return names;
}

Status ShardedDB::Checkpoint() {
  std::vector<Status> statuses(shards_.size());
  fan_out_->Run(shards_.size(), [&](size_t s) {
    if (shards_[s] != nullptr) statuses[s] = shards_[s]->Checkpoint();
  });
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (!statuses[s].ok()) return statuses[s].WithContext(ShardName(s, shards_[s]->path()));
  }
  return Status::OK();
}

size_t ShardedDB::First() const {
  size_t s = 0;
  while (shards_[s] == nullptr) ++s;  // Make checked that one is there
  return s;
}

bool ShardedDB::read_only() const {
  return std::any_of(shards_.begin(), shards_.end(), [](const std::unique_ptr<DB>& db) {
    return db != nullptr && db->read_only();
  });
}

Status ShardedDB::NotOnShards(const std::string& call) const {
  return Status::NotSupported(call + " of a sharded database (" + address_ +
                              "): run it on each shard (replaydb ADDR)");
}

Status ShardedDB::ExportTable(std::string_view, const std::string&, const LongOperationOptions&) {
  return NotOnShards("ExportTable");
}
Result<std::shared_ptr<Table>> ShardedDB::ImportTable(const std::string&, std::string_view,
                                                      std::string_view,
                                                      const LongOperationOptions&) {
  return NotOnShards("ImportTable");
}
Result<WalInfo> ShardedDB::Wal() const {
  return NotOnShards("Wal");
}
Result<VerifyReport> ShardedDB::Verify(const LongOperationOptions&) {
  return NotOnShards("Verify");
}
Status ShardedDB::Compact(const LongOperationOptions&) {
  return NotOnShards("Compact");
}

}  // namespace replaydb::rdma
