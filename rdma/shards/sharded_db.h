// Sharded tables (docs/sharding.md): one table over S databases, each a
// shard (a served database, a cluster's primary, or in tests a local one),
// behind the same DB and Table interfaces. DB::Connect("A+B+C") returns
// one; shard s is the s-th address.
//
// Ids: a shard's own trajectory ids stay below 2^32 (kMaxShardTrajectoryId),
// and the table's id of shard s's trajectory t is (s << 32) | t, so an item
// key names its shard in its top 8 bits and routes without a lookup. Shard
// 0's ids are its own: a table that was never sharded keeps its keys as
// shard 0 of a sharded one.
//
// Writers send whole trajectories to one shard, round-robin; a vector
// writer gives each shard a contiguous block of its environments. Samples
// are drawn with exact global probabilities: the shards' sampling masses
// M_s (Table::Mass) in one parallel round, n_s ~ Multinomial(B, M_s / sum M),
// then n_s draws from each shard in a second parallel round, whose
// probabilities and importance weights are made the table's.
//
// Thread safety: as DB and Table; writers as local ones.
#ifndef REPLAYDB_RDMA_SHARDS_SHARDED_DB_H_
#define REPLAYDB_RDMA_SHARDS_SHARDED_DB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/table.h"

namespace replaydb::rdma {

class ShardFanOut;

// At most this many shards: a key's top kShardBits bits name its shard.
inline constexpr int kShardBits = 8;
inline constexpr int kMaxShards = 1 << kShardBits;
// Bits of a shard's own trajectory ids: ids of a shard stay below 2^32.
inline constexpr int kShardTrajectoryBits = 32;
inline constexpr uint64_t kMaxShardTrajectoryId = (uint64_t{1} << kShardTrajectoryBits) - 1;

// The sharded table's id of shard `shard`'s trajectory `id`, and back.
inline constexpr uint64_t ShardedTrajectoryId(int shard, uint64_t id) {
  return (static_cast<uint64_t>(shard) << kShardTrajectoryBits) | id;
}
inline constexpr int ShardOfTrajectory(uint64_t id) {
  return static_cast<int>(id >> kShardTrajectoryBits);
}
inline constexpr uint64_t ShardLocalTrajectory(uint64_t id) {
  return id & kMaxShardTrajectoryId;
}
// The same for item keys ((trajectory << kItemKeyStartBits) | start).
inline constexpr int kShardKeyShift = kShardTrajectoryBits + kItemKeyStartBits;
inline constexpr ItemKey ShardedItemKey(int shard, ItemKey key) {
  return (static_cast<uint64_t>(shard) << kShardKeyShift) | key;
}
inline constexpr int ShardOfKey(ItemKey key) {
  return static_cast<int>(key >> kShardKeyShift);
}
inline constexpr ItemKey ShardLocalKey(ItemKey key) {
  return key & ((uint64_t{1} << kShardKeyShift) - 1);
}

// A shard's place in an address once it has left ("A+-+C": shard 1 left).
// Its keys and ids then name no shard; the others keep theirs.
inline constexpr const char* kShardLeft = "-";

// Whether `address` names shards ("A+B", each part an address DB::Connect
// takes, or kShardLeft).
bool IsShardedAddress(const std::string& address);

// A database whose tables span its shards.
class ShardedDB final : public DB {
 public:
  // Connects to each shard of "A+B+...": at least two, at most kMaxShards,
  // no address twice (InvalidArgument naming the address otherwise); a
  // shard that cannot be reached fails the call, naming it. A part "-"
  // (kShardLeft) keeps the place of a shard that left.
  static Result<std::unique_ptr<ShardedDB>> Connect(const std::string& address,
                                                    const ConnectOptions& options = {});
  // Over databases already open, shard s = shards[s] (null: a shard that
  // left); `address` is what path() returns. InvalidArgument for none, more
  // than kMaxShards or only null ones. `options`: its
  // skip_unavailable_shards.
  static Result<std::unique_ptr<ShardedDB>> Make(std::vector<std::unique_ptr<DB>> shards,
                                                 std::string address,
                                                 const ConnectOptions& options = {});
  ~ShardedDB() override;

  // Creates the table on every shard (dropping it again from those that
  // made it when one fails). A vector table's lanes are spread over the
  // shards (at least 2 each: InvalidArgument otherwise).
  Result<std::shared_ptr<Table>> CreateTable(const TableSpec& spec) override;
  // The table of every shard, which must have the same spec
  // (FailedPrecondition naming the shard and both specs otherwise); NotFound
  // naming the shard that lacks it.
  Result<std::shared_ptr<Table>> GetTable(std::string_view name) override;
  // Drops it from every shard that has it; NotFound when none has.
  Status DropTable(std::string_view name) override;
  // Tables every shard has, sorted.
  std::vector<std::string> ListTables() const override;
  const std::string& path() const override { return address_; }
  // Every shard's, at once.
  Status Checkpoint() override;
  RecoveryInfo recovery_info() const override { return {}; }
  // Whether any shard grants reads only.
  bool read_only() const override;
  // Maintenance and datasets run on each shard (replaydb ADDR): NotSupported.
  Status ExportTable(std::string_view table, const std::string& dir,
                     const LongOperationOptions& options) override;
  Result<std::shared_ptr<Table>> ImportTable(const std::string& source_dir,
                                             std::string_view source_table, std::string_view name,
                                             const LongOperationOptions& options) override;
  Result<WalInfo> Wal() const override;
  Result<VerifyReport> Verify(const LongOperationOptions& options) override;
  Status Compact(const LongOperationOptions& options) override;

  size_t num_shards() const { return shards_.size(); }
  DB& shard(size_t s) { return *shards_[s]; }

 private:
  ShardedDB(std::vector<std::unique_ptr<DB>> shards, std::string address, bool skip_unavailable);
  Status NotOnShards(const std::string& call) const;
  // The first shard that is there.
  size_t First() const;
  std::vector<std::unique_ptr<DB>> shards_;
  std::string address_;
  bool skip_unavailable_;
  // Threads that call the shards at once, shared by the database's tables
  // and writers (S - 1 of them; a caller runs a part of its call too).
  std::shared_ptr<ShardFanOut> fan_out_;
};

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_SHARDS_SHARDED_DB_H_
