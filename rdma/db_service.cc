#include "rdma/db_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "engine/db/catalog.h"
#include "engine/db/db_impl.h"
#include "engine/rate_limiter/rate_limiter.h"
#include "engine/table/table_impl.h"
#include "engine/table/writers.h"
#include "rdma/remote_db.h"
#include "rdma/replica.h"
#include "rdma/shared_slabs.h"
#include "util/format.h"

namespace replaydb::rdma {
namespace {

namespace fb = wire::fb;
using Clock = std::chrono::steady_clock;

template <typename T>
void Put(std::string* out, const std::vector<T>& v) {
  if (!v.empty()) out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
bool Take(std::string_view* in, size_t n, std::vector<T>* v) {
  if (n > in->size() / sizeof(T)) return false;
  v->resize(n);
  if (n == 0) return true;  // (an empty vector's data() may be null: no memcpy)
  std::memcpy(v->data(), in->data(), n * sizeof(T));
  in->remove_prefix(n * sizeof(T));
  return true;
}

std::string Name(const flatbuffers::String* s) { return s == nullptr ? std::string() : s->str(); }

// Whether a request of `kind` changes what the database holds (refused to
// read-only tokens, and on replicas).
bool ChangesData(fb::Body kind) {
  switch (kind) {
    case fb::Body::NewWriter:
    case fb::Body::AppendStep:
    case fb::Body::EndTrajectory:
    case fb::Body::CreateTable:
    case fb::Body::DropTable:
    case fb::Body::Checkpoint:
    case fb::Body::UpdatePriorities:
    case fb::Body::SetRateLimiter:
    case fb::Body::SeedTable:
    case fb::Body::ClearTable:
    case fb::Body::DeleteItems:
    case fb::Body::LoadTrajectories:  // evicts (and spills) others
    case fb::Body::Promote:
    case fb::Body::Fence:
      return true;
    default:
      return false;
  }
}

// A payload of uint64s (keys or trajectory ids); InvalidArgument naming
// `what` when it is not whole ones.
template <typename T>
Status TakeIds(std::string_view in, const std::string& what, std::vector<T>* out) {
  static_assert(sizeof(T) == 8);
  if (in.size() % sizeof(T) != 0 || !Take(&in, in.size() / sizeof(T), out)) {
    return Status::InvalidArgument(what + ": " + std::to_string(in.size()) +
                                   " payload bytes are not whole 8-byte keys or ids");
  }
  return Status::OK();
}

}  // namespace

flatbuffers::Offset<fb::RateLimiter> EncodeLimiter(flatbuffers::FlatBufferBuilder& b,
                                                   const RateLimiterSpec& spec) {
  return fb::CreateRateLimiter(b, spec.samples_per_insert, spec.min_size_to_sample,
                               spec.min_diff, spec.max_diff);
}

RateLimiterSpec DecodeLimiter(const fb::RateLimiter& limiter) {
  RateLimiterSpec spec;
  spec.samples_per_insert = limiter.samples_per_insert();
  spec.min_size_to_sample = limiter.min_size_to_sample();
  spec.min_diff = limiter.min_diff();
  spec.max_diff = limiter.max_diff();
  return spec;
}

TableInfo DecodeInfo(const fb::Info& i, const std::string& name) {
  TableInfo o;
  o.name = name;
  o.num_steps = i.num_steps();
  o.num_items = i.num_items();
  o.num_trajectories = i.num_trajectories();
  o.num_open_trajectories = i.num_open_trajectories();
  o.placement = i.placement() == nullptr ? std::string() : i.placement()->str();
  o.device = i.device();
  o.bytes_used = i.bytes_used();
  o.bytes_reserved = i.bytes_reserved();
  o.bytes_capacity = i.bytes_capacity();
  o.blocks_used = i.blocks_used();
  o.blocks_capacity = i.blocks_capacity();
  o.steps_inserted = i.steps_inserted();
  o.items_inserted = i.items_inserted();
  o.items_sampled = i.items_sampled();
  o.items_removed = i.items_removed();
  o.evicted_trajectories = i.evicted_trajectories();
  o.evicted_items = i.evicted_items();
  o.priority_updates = i.priority_updates();
  o.priority_updates_skipped = i.priority_updates_skipped();
  o.max_priority_seen = i.max_priority_seen();
  if (i.limiter() != nullptr) o.rate_limiter.spec = DecodeLimiter(*i.limiter());
  o.rate_limiter.inserts = i.limiter_inserts();
  o.rate_limiter.samples = i.limiter_samples();
  o.rate_limiter.deletes = i.limiter_deletes();
  o.rate_limiter.blocked_inserts = i.limiter_blocked_inserts();
  o.rate_limiter.blocked_samples = i.limiter_blocked_samples();
  o.cold_trajectories = i.cold_trajectories();
  o.cold_steps = i.cold_steps();
  o.cold_bytes = i.cold_bytes();
  o.spilled_trajectories = i.spilled_trajectories();
  o.spilled_bytes = i.spilled_bytes();
  o.loaded_trajectories = i.loaded_trajectories();
  o.rotations = i.rotations();
  o.spill_queue = i.spill_queue();
  return o;
}

namespace {

flatbuffers::Offset<fb::Info> EncodeInfo(flatbuffers::FlatBufferBuilder& b, const TableInfo& i) {
  const auto placement = b.CreateString(i.placement);
  const auto limiter = EncodeLimiter(b, i.rate_limiter.spec);
  const RateLimiterInfo& l = i.rate_limiter;
  return fb::CreateInfo(
      b, i.num_steps, i.num_items, i.num_trajectories, i.num_open_trajectories, placement,
      i.device, i.bytes_used, i.bytes_reserved, i.bytes_capacity, i.blocks_used,
      i.blocks_capacity, i.steps_inserted, i.items_inserted, i.items_sampled, i.items_removed,
      i.evicted_trajectories, i.evicted_items, i.priority_updates, i.priority_updates_skipped,
      i.max_priority_seen, limiter, l.inserts, l.samples, l.deletes, l.blocked_inserts,
      l.blocked_samples, i.cold_trajectories, i.cold_steps, i.cold_bytes,
      i.spilled_trajectories, i.spilled_bytes, i.loaded_trajectories, i.rotations,
      i.spill_queue);
}

// A served Sample's options: its waits bounded by kMaxServedWait (none on
// the transport's worker).
Result<SampleOptions> ServedSampleOptions(const fb::Sample& q, const Request& r,
                                          const std::string& table) {
  SampleOptions o;
  o.timeout = kMaxServedWait;
  if (r.no_wait) {
    o.timeout = std::chrono::milliseconds(0);
  } else if (r.deadline != Clock::time_point::max()) {
    o.timeout = std::clamp(
        std::chrono::duration_cast<std::chrono::milliseconds>(r.deadline - Clock::now()),
        std::chrono::milliseconds(0), kMaxServedWait);
  }
  o.importance_beta = q.importance_beta();
  if (q.weight_normalization() > static_cast<uint8_t>(WeightNormalization::kBatch)) {
    return Status::InvalidArgument("sample of table '" + table + "': weight_normalization " +
                                   std::to_string(q.weight_normalization()) +
                                   " is not one of buffer (0), batch (1)");
  }
  o.weight_normalization = static_cast<WeightNormalization>(q.weight_normalization());
  o.stratified = q.stratified();
  o.peek = q.peek();
  o.gather = q.gather();
  return o;
}

// A Sampled header for `batch`.
std::string SampledHeader(flatbuffers::FlatBufferBuilder& b, const HeaderFields& f,
                          bool gathered, const SampleBatch& batch) {
  return EncodeHeader(
      b, f, fb::Body::Sampled,
      fb::CreateSampled(b, batch.batch_size, batch.sequence_length, !batch.weights.empty(),
                        gathered, 0, 0, 0, 0, 0, !batch.insertion_order.empty()));
}

// A Sampled reply: the items' fields as the payload, the columns sent from
// `batch` itself (held until sent).
Reply SampledReply(flatbuffers::FlatBufferBuilder& b, const HeaderFields& f, bool gathered,
                   std::shared_ptr<SampleBatch> batch) {
  Reply reply{SampledHeader(b, f, gathered, *batch), EncodeSampleItems(*batch), {}, nullptr};
  for (const Tensor& c : batch->columns) reply.parts.emplace_back(c.data(), c.size_bytes());
  reply.keep = std::move(batch);
  return reply;
}

// A Sampled reply whose columns are sent straight from the table's blocks
// (no gather on the server): the windows' runs and their padding, column by
// column, as pieces of the payload, the blocks held until it is sent.
Result<Reply> SampledFromBlocks(flatbuffers::FlatBufferBuilder& b, const HeaderFields& f,
                                engine::TableImpl& table, int64_t batch_size,
                                const SampleOptions& o, bool insertion_order) {
  struct Held {
    SampleBatch items;
    engine::InPlaceSample where;  // its pins keep the blocks
  };
  auto held = std::make_shared<Held>();
  REPLAYDB_RETURN_IF_ERROR(table.SampleInPlace(batch_size, o, &held->items, &held->where));
  if (!insertion_order) held->items.insertion_order.clear();
  static constexpr std::byte kZeros[64 << 10] = {};
  const auto zeros = [](size_t bytes, std::vector<std::span<const std::byte>>* parts) {
    for (; bytes > 0; bytes -= std::min(bytes, sizeof(kZeros))) {
      parts->emplace_back(kZeros, std::min(bytes, sizeof(kZeros)));
    }
  };
  const SampleBatch& items = held->items;
  const engine::InPlaceSample& where = held->where;
  const auto L = static_cast<uint64_t>(items.sequence_length);
  Reply reply{SampledHeader(b, f, /*gathered=*/true, items), EncodeSampleItems(items), {}, nullptr};
  reply.parts.reserve(where.column_offset.size() *
                      (where.segments.size() + static_cast<size_t>(items.batch_size)));
  for (size_t c = 0; c < where.column_offset.size(); ++c) {
    const uint64_t step = where.column_step_bytes[c];
    size_t next = 0;  // segments come window by window, each from step 0 on
    for (int64_t i = 0; i < items.batch_size; ++i) {
      uint64_t written = 0;
      for (; next < where.segments.size() && where.segments[next].item == i; ++next) {
        const engine::InPlaceSegment& g = where.segments[next];
        reply.parts.emplace_back(g.block + where.column_offset[c] + g.first_step * step,
                                 g.count * step);
        written = g.out_step + g.count;
      }
      zeros((L - written) * step, &reply.parts);
    }
  }
  reply.keep = std::move(held);
  return reply;
}

// The same for a small batch (served on the transport's worker): one
// contiguous payload, `batch` left to be used again.
Reply SmallSampledReply(flatbuffers::FlatBufferBuilder& b, const HeaderFields& f, bool gathered,
                        const SampleBatch& batch) {
  return Reply{SampledHeader(b, f, gathered, batch), EncodeSamplePayload(batch), {}, nullptr};
}

// TableOpened: `table`'s spec in the catalog's encoding.
Reply Opened(flatbuffers::FlatBufferBuilder& b, const HeaderFields& f, const Table& table) {
  const std::string spec = engine::EncodeCatalog(std::vector<TableSpec>{table.spec()});
  const auto bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(spec.data()), spec.size());
  return Reply{EncodeHeader(b, f, fb::Body::TableOpened, fb::CreateTableOpened(b, bytes)), ""};
}

Result<Reply> HandleTables(DB& db, BatchPool& batches, Request& r) {
  const fb::Header* h = r.message.header();
  HeaderFields f;
  f.request_id = h->request_id();
  f.table_id = h->table_id();
  flatbuffers::FlatBufferBuilder b(256);
  b.ForceDefaults(true);
  switch (h->body_type()) {
    case fb::Body::ListTables: {
      std::vector<flatbuffers::Offset<flatbuffers::String>> names;
      for (const std::string& n : db.ListTables()) names.push_back(b.CreateString(n));
      const auto v = b.CreateVector(names);
      return Reply{EncodeHeader(b, f, fb::Body::TableList, fb::CreateTableList(b, v)), ""};
    }
    case fb::Body::OpenTable: {
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(h->body_as_OpenTable()->name())));
      return Opened(b, f, *table);
    }
    case fb::Body::Sample: {
      const fb::Sample* q = h->body_as_Sample();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      REPLAYDB_ASSIGN_OR_RETURN(const SampleOptions o, ServedSampleOptions(*q, r, table->name()));
      // (Insertion orders go back where the client asks for them.)
      const bool order = q->insertion_order();
      if (r.no_wait) {  // small, on the transport's worker: one payload
        thread_local SampleBatch small;
        REPLAYDB_RETURN_IF_ERROR(table->Sample(q->batch_size(), o, &small));
        if (!order) small.insertion_order.clear();
        return SmallSampledReply(b, f, o.gather, small);
      }
      if (auto* impl = dynamic_cast<engine::TableImpl*>(table.get());
          o.gather && impl != nullptr && impl->samples_by_address()) {
        return SampledFromBlocks(b, f, *impl, q->batch_size(), o, order);
      }
      std::shared_ptr<SampleBatch> batch = batches.Take();
      REPLAYDB_RETURN_IF_ERROR(table->Sample(q->batch_size(), o, batch.get()));
      if (!order) batch->insertion_order.clear();
      return SampledReply(b, f, o.gather, std::move(batch));
    }
    case fb::Body::CreateTable: {
      const auto* bytes = h->body_as_CreateTable()->spec();
      std::vector<TableSpec> specs;
      REPLAYDB_RETURN_IF_ERROR(engine::DecodeCatalog(
          bytes == nullptr ? std::string_view()
                           : std::string_view(reinterpret_cast<const char*>(bytes->data()),
                                              bytes->size()),
          "a remote CreateTable", &specs));
      if (specs.size() != 1) {
        return Status::InvalidArgument("a remote CreateTable holds " +
                                       std::to_string(specs.size()) + " table specs, not 1");
      }
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.CreateTable(specs[0]));
      return Opened(b, f, *table);
    }
    case fb::Body::DropTable:
      REPLAYDB_RETURN_IF_ERROR(db.DropTable(Name(h->body_as_DropTable()->name())));
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    case fb::Body::Checkpoint:
      REPLAYDB_RETURN_IF_ERROR(db.Checkpoint());
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    case fb::Body::GetInfo: {
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(h->body_as_GetInfo()->table())));
      return Reply{EncodeHeader(b, f, fb::Body::Info, EncodeInfo(b, table->Info())), ""};
    }
    case fb::Body::GetMass: {
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(h->body_as_GetMass()->table())));
      REPLAYDB_ASSIGN_OR_RETURN(const SamplingMass mass, table->Mass());
      return Reply{
          EncodeHeader(b, f, fb::Body::MassRead,
                       fb::CreateMassRead(b, mass.total, mass.items, mass.smallest_priority)),
          ""};
    }
    case fb::Body::SetRateLimiter: {
      const fb::SetRateLimiter* q = h->body_as_SetRateLimiter();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      if (q->limiter() == nullptr) {
        return Status::InvalidArgument("a remote SetRateLimiter of table '" + table->name() +
                                       "' without its limiter");
      }
      REPLAYDB_RETURN_IF_ERROR(table->SetRateLimiter(DecodeLimiter(*q->limiter())));
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    }
    case fb::Body::Lookup: {
      const bool order = h->body_as_Lookup()->insertion_order();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(h->body_as_Lookup()->table())));
      std::string_view in = r.message.payload;
      std::vector<ItemKey> keys;
      if (in.size() % sizeof(ItemKey) != 0 || !Take(&in, in.size() / sizeof(ItemKey), &keys)) {
        return Status::InvalidArgument("a remote Lookup of table '" + table->name() + "': " +
                                       std::to_string(r.message.payload.size()) +
                                       " payload bytes are not whole 8-byte keys");
      }
      if (r.no_wait) {
        thread_local SampleBatch small;
        REPLAYDB_RETURN_IF_ERROR(table->Lookup(keys, &small));
        if (!order) small.insertion_order.clear();
        return SmallSampledReply(b, f, true, small);
      }
      std::shared_ptr<SampleBatch> batch = batches.Take();
      REPLAYDB_RETURN_IF_ERROR(table->Lookup(keys, batch.get()));
      if (!order) batch->insertion_order.clear();
      return SampledReply(b, f, true, std::move(batch));
    }
    case fb::Body::UpdatePriorities: {
      REPLAYDB_ASSIGN_OR_RETURN(auto table,
                                db.GetTable(Name(h->body_as_UpdatePriorities()->table())));
      std::string_view in = r.message.payload;
      const size_t n = in.size() / (sizeof(ItemKey) + sizeof(double));
      std::vector<ItemKey> keys;
      std::vector<double> priorities;
      if (in.size() % (sizeof(ItemKey) + sizeof(double)) != 0 || !Take(&in, n, &keys) ||
          !Take(&in, n, &priorities)) {
        return Status::InvalidArgument(
            "a remote UpdatePriorities of table '" + table->name() + "': " +
            std::to_string(r.message.payload.size()) +
            " payload bytes are not whole (8-byte key, 8-byte priority) pairs");
      }
      PriorityUpdateResult result;
      REPLAYDB_RETURN_IF_ERROR(table->UpdatePriorities(keys, priorities, &result));
      return Reply{EncodeHeader(b, f, fb::Body::PrioritiesUpdated,
                                fb::CreatePrioritiesUpdated(b, result.updated, result.skipped)),
                   ""};
    }
    case fb::Body::SeedTable: {
      const fb::SeedTable* q = h->body_as_SeedTable();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      REPLAYDB_RETURN_IF_ERROR(table->Seed(q->seed()));
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    }
    case fb::Body::ClearTable: {
      const fb::ClearTable* q = h->body_as_ClearTable();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      REPLAYDB_RETURN_IF_ERROR(table->Clear());
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    }
    case fb::Body::DeleteItems: {
      REPLAYDB_ASSIGN_OR_RETURN(auto table,
                                db.GetTable(Name(h->body_as_DeleteItems()->table())));
      std::vector<ItemKey> keys;
      REPLAYDB_RETURN_IF_ERROR(
          TakeIds(r.message.payload, "a remote DeleteItems of table '" + table->name() + "'",
                  &keys));
      int64_t deleted = 0;
      REPLAYDB_RETURN_IF_ERROR(table->DeleteItems(keys, &deleted));
      return Reply{
          EncodeHeader(b, f, fb::Body::ItemsDeleted, fb::CreateItemsDeleted(b, deleted)), ""};
    }
    case fb::Body::ItemPriorities: {
      REPLAYDB_ASSIGN_OR_RETURN(auto table,
                                db.GetTable(Name(h->body_as_ItemPriorities()->table())));
      std::vector<ItemKey> keys;
      std::vector<double> priorities;
      REPLAYDB_RETURN_IF_ERROR(table->ItemPriorities(&keys, &priorities));
      std::string payload;
      payload.reserve(keys.size() * (sizeof(ItemKey) + sizeof(double)));
      Put(&payload, keys);
      Put(&payload, priorities);
      const auto count = static_cast<int64_t>(keys.size());
      return Reply{EncodeHeader(b, f, fb::Body::ItemPrioritiesRead,
                                fb::CreateItemPrioritiesRead(b, count)),
                   std::move(payload)};
    }
    case fb::Body::LoadTrajectories: {
      const fb::LoadTrajectories* q = h->body_as_LoadTrajectories();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      if (q->range()) {
        REPLAYDB_RETURN_IF_ERROR(table->LoadRange(q->first(), q->last()));
      } else {
        std::vector<uint64_t> ids;
        REPLAYDB_RETURN_IF_ERROR(TakeIds(
            r.message.payload, "a remote Load of table '" + table->name() + "'", &ids));
        REPLAYDB_RETURN_IF_ERROR(table->Load(ids));
      }
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    }
    case fb::Body::ColdTrajectories: {
      const fb::ColdTrajectories* q = h->body_as_ColdTrajectories();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      std::vector<uint64_t> ids;
      REPLAYDB_RETURN_IF_ERROR(
          table->ColdTrajectories(q->from(), static_cast<size_t>(q->limit()), &ids));
      std::string payload;
      Put(&payload, ids);
      const auto count = static_cast<int64_t>(ids.size());
      return Reply{
          EncodeHeader(b, f, fb::Body::TrajectoryIds, fb::CreateTrajectoryIds(b, count)),
          std::move(payload)};
    }
    case fb::Body::ListTrajectories: {
      const fb::ListTrajectories* q = h->body_as_ListTrajectories();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      TrajectoryFilter filter;
      filter.from = q->from();
      filter.limit = static_cast<size_t>(q->limit());
      filter.min_length = q->min_length();
      filter.max_length = q->max_length();
      if (q->ended() < -1 || q->ended() > 1 || q->tier() < -1 ||
          q->tier() > static_cast<int8_t>(Tier::kCold)) {
        return Status::InvalidArgument(
            "a remote ListTrajectories of table '" + table->name() + "': ended " +
            std::to_string(q->ended()) + " and tier " + std::to_string(q->tier()) +
            " must each be -1 (any) or a value (ended 0 or 1; tier 0 hot, 1 cold)");
      }
      if (q->ended() >= 0) filter.ended = q->ended() == 1;
      if (q->tier() >= 0) filter.tier = static_cast<Tier>(q->tier());
      std::vector<TrajectoryInfo> rows;
      REPLAYDB_RETURN_IF_ERROR(table->ListTrajectories(filter, &rows));
      std::string payload;
      payload.reserve(rows.size() * kTrajectoryRowBytes);
      for (const TrajectoryInfo& t : rows) PutTrajectoryRow(&payload, t);
      const auto count = static_cast<int64_t>(rows.size());
      return Reply{
          EncodeHeader(b, f, fb::Body::TrajectoryList, fb::CreateTrajectoryList(b, count)),
          std::move(payload)};
    }
    case fb::Body::ReadTrajectory: {
      const fb::ReadTrajectory* q = h->body_as_ReadTrajectory();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      uint64_t id = q->id();
      if (q->writer_key() != 0) {
        const auto* impl = dynamic_cast<const engine::TableImpl*>(table.get());
        id = impl != nullptr ? impl->TrajectoryOfWriterKey(q->writer_key()) : 0;
        if (id == 0) {
          return Status::NotFound("table '" + table->name() + "': no trajectory of writer key " +
                                  std::to_string(q->writer_key()) + " here");
        }
      }
      TrajectorySteps steps;
      REPLAYDB_RETURN_IF_ERROR(table->ReadTrajectory(id, q->first(), q->count(), &steps));
      std::string payload;
      for (const Tensor& c : steps.columns) {
        if (c.size_bytes() == 0) continue;  // (no steps read: no buffer)
        payload.append(reinterpret_cast<const char*>(c.data()), c.size_bytes());
      }
      Put(&payload, steps.step_priorities);
      const TrajectoryInfo& t = steps.info;
      const auto read = static_cast<int64_t>(steps.step_priorities.size());
      return Reply{EncodeHeader(b, f, fb::Body::TrajectoryRead,
                                fb::CreateTrajectoryRead(
                                    b, t.id, t.length, t.live_items, t.ended,
                                    static_cast<uint8_t>(t.end_reason),
                                    static_cast<uint8_t>(t.tier), steps.first, read)),
                   std::move(payload)};
    }
    default:
      return Status::NotSupported(
          "this server does not serve requests of kind '" +
          std::string(fb::EnumNameBody(h->body_type())) + "'");
  }
}

}  // namespace

struct DbService::Writer {
  std::mutex mu;  // one call at a time (its requests share a strand too)
  // The client's timeout for the rate limiter (kWaitForever: none); each
  // run of a request waits at most kMaxServedWait of it.
  std::chrono::milliseconds timeout{kWaitForever};
  // The epoch of its appends that failed last (0: none): the rest of that
  // epoch, sent ahead before the client knew, is refused (wire.fbs).
  uint32_t failed_epoch = 0;
  bool sync = false;  // its appends wait for the log's fsync
  engine::WriteAck ack;  // what its acknowledgments wait for
  std::shared_ptr<Table> table;
  std::unique_ptr<TrajectoryWriter> writer;  // one of the two
  std::unique_ptr<VectorWriter> vector;
  // The writer as the engine's, which takes its appends' log records.
  engine::RecordAppender* records = nullptr;
};

// A trajectory writer's append whose rows went straight into the hot tier
// (PlaceAppend): the record's bytes but its data's, and the placed steps,
// given up unless published (under the writer's mutex: Release then, or
// the destructor takes it).
struct DbService::PlacedAppend {
  std::shared_ptr<Writer> writer;
  engine::TrajectoryWriterImpl* engine_writer = nullptr;
  engine::PlacedSteps steps;
  std::unique_ptr<std::byte[]> record;  // 16-byte aligned (operator new[])
  size_t length = 0;

  // REQUIRES: writer->mu held.
  void Release() {
    if (steps.trajectory != nullptr) engine_writer->AbandonPlaced(steps);
  }
  ~PlacedAppend() {
    if (steps.trajectory == nullptr) return;
    std::lock_guard<std::mutex> lock(writer->mu);
    Release();
  }
};

std::shared_ptr<SampleBatch> BatchPool::Take() {
  std::unique_ptr<SampleBatch> batch;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (!shared_->free.empty()) {
      batch = std::move(shared_->free.back());
      shared_->free.pop_back();
    }
  }
  if (!batch) batch = std::make_unique<SampleBatch>();
  std::weak_ptr<Shared> pool = shared_;
  return std::shared_ptr<SampleBatch>(batch.release(), [pool](SampleBatch* b) {
    std::unique_ptr<SampleBatch> back(b);
    if (auto shared = pool.lock()) {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (shared->free.size() < kKept) shared->free.push_back(std::move(back));
    }
  });
}

struct DbService::Lease {
  ConnectionId connection = 0;
  Clock::time_point expires;
  std::unique_ptr<engine::BlockPins> pins;
};

DbService::DbService(DB* db, InPlaceServing in_place)
    : impl_(dynamic_cast<engine::DBImpl*>(db)), db_(db), in_place_(std::move(in_place)) {}
DbService::~DbService() {
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    stop_shipping_ = true;
  }
  fetch_cv_.notify_all();
  if (shipper_.joinable()) shipper_.join();
  DropSnapshots("");
}
void DbService::SetDb(DB* db, InPlaceServing in_place) {
  in_place_ = std::move(in_place);
  impl_.store(dynamic_cast<engine::DBImpl*>(db), std::memory_order_relaxed);
  db_.store(db, std::memory_order_release);
}

Result<engine::DBImpl*> DbService::Engine(std::string_view what) const {
  engine::DBImpl* impl = impl_.load(std::memory_order_acquire);
  if (impl == nullptr) {
    return Status::NotSupported("this server's database " + std::string(what) +
                                " (it is not a local database)");
  }
  return impl;
}

size_t DbService::open_leases() const {
  std::lock_guard<std::mutex> lock(leases_mu_);
  return leases_.size();
}

std::vector<std::unique_ptr<DbService::Lease>> DbService::TakeLeasesLocked(
    const std::function<bool(const Lease&)>& which) {
  std::vector<std::unique_ptr<Lease>> taken;
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (which(*it->second)) {
      taken.push_back(std::move(it->second));
      it = leases_.erase(it);
    } else {
      ++it;
    }
  }
  lease_count_.store(leases_.size(), std::memory_order_relaxed);
  return taken;
}

void DbService::ExpireLeases() {
  if (lease_count_.load(std::memory_order_relaxed) == 0) return;
  std::vector<std::unique_ptr<Lease>> gone;  // unpinned outside the lock
  {
    std::lock_guard<std::mutex> lock(leases_mu_);
    const auto now = Clock::now();
    gone = TakeLeasesLocked([now](const Lease& l) { return l.expires <= now; });
  }
}

void DbService::ReleaseLeases(ConnectionId connection, const flatbuffers::Vector<uint64_t>* ids) {
  if (ids == nullptr || ids->size() == 0) return;
  std::vector<std::unique_ptr<Lease>> gone;
  {
    std::lock_guard<std::mutex> lock(leases_mu_);
    for (const uint64_t id : *ids) {
      auto it = leases_.find(id);
      // Only the connection's own (another's id is ignored).
      if (it == leases_.end() || it->second->connection != connection) continue;
      gone.push_back(std::move(it->second));
      leases_.erase(it);
    }
    lease_count_.store(leases_.size(), std::memory_order_relaxed);
  }
}

Result<Reply> DbService::HandleSlabKeys(Request& r) {
  const fb::Header* h = r.message.header();
  const fb::SlabKeys* q = h->body_as_SlabKeys();
  const std::string table_name = Name(q->table());
  if (!in_place_.slabs) {
    return Status::FailedPrecondition(
        "table '" + table_name +
        "': this server does not share its hot tiers (in-place samples need a database the "
        "server opened itself, Server::Open); samples come by message");
  }
  REPLAYDB_ASSIGN_OR_RETURN(const bool one_sided, in_place_.transport->OneSided(r.connection));
  const auto refuse = [&](const std::string& why) {
    const std::string line = "connection " + std::to_string(r.connection) + ": table '" +
                             table_name + "' sampled by message: " + why;
    if (in_place_.log) in_place_.log(line);
    return Status::FailedPrecondition(line);
  };
  if (!one_sided) {
    Result<std::string> lanes = in_place_.transport->Lanes(r.connection);
    return refuse("reads on this connection (over " +
                  (lanes.ok() ? *lanes : std::string("unknown transports")) +
                  ") would not be one-sided");
  }
  REPLAYDB_ASSIGN_OR_RETURN(auto table,
                            db_.load(std::memory_order_acquire)->GetTable(table_name));
  auto* impl = dynamic_cast<engine::TableImpl*>(table.get());
  if (impl == nullptr || !impl->samples_in_place()) {
    return refuse("its hot tier is not in shared memory (device memory, or a vector table)");
  }
  flatbuffers::FlatBufferBuilder b(1024);
  b.ForceDefaults(true);
  std::vector<flatbuffers::Offset<fb::SharedSlab>> slabs;
  for (const engine::SlabSpan& span : impl->Slabs(std::max<int64_t>(q->first(), 0))) {
    REPLAYDB_ASSIGN_OR_RETURN(const std::string key, in_place_.slabs->Key(span.data));
    const auto k = b.CreateVector(reinterpret_cast<const uint8_t*>(key.data()), key.size());
    slabs.push_back(fb::CreateSharedSlab(b, reinterpret_cast<uint64_t>(span.data), span.bytes, k));
  }
  const auto v = b.CreateVector(slabs);
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(leases_mu_);
    first = readers_.insert(r.connection).second;
  }
  if (first && in_place_.log) {
    in_place_.log("connection " + std::to_string(r.connection) + " reads table '" + table_name +
                  "' in place (" + std::to_string(slabs.size()) + " slabs so far)");
  }
  HeaderFields f;
  f.request_id = h->request_id();
  f.table_id = h->table_id();
  return Reply{EncodeHeader(b, f, fb::Body::SlabKeysRead, fb::CreateSlabKeysRead(b, v)), ""};
}

std::optional<Result<Reply>> DbService::SampleInPlace(Request& r) {
  const fb::Header* h = r.message.header();
  const fb::Sample* q = h->body_as_Sample();
  if (!q->in_place() || !q->gather() || !in_place_.slabs) return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(leases_mu_);
    if (readers_.count(r.connection) == 0) return std::nullopt;
  }
  Result<std::shared_ptr<Table>> table =
      db_.load(std::memory_order_acquire)->GetTable(Name(q->table()));
  if (!table.ok()) return table.status();
  auto* impl = dynamic_cast<engine::TableImpl*>(table->get());
  if (impl == nullptr || !impl->samples_in_place()) return std::nullopt;
  Result<SampleOptions> o = ServedSampleOptions(*q, r, impl->name());
  if (!o.ok()) return o.status();
  thread_local SampleBatch batch;
  thread_local engine::InPlaceSample where;
  if (Status s = impl->SampleInPlace(q->batch_size(), *o, &batch, &where); !s.ok()) return s;
  if (!q->insertion_order()) batch.insertion_order.clear();
  std::string payload = EncodeSampleItems(batch);
  payload.reserve(payload.size() + where.segments.size() * kSegmentRowBytes);
  for (const engine::InPlaceSegment& g : where.segments) {
    PutSegmentRow(&payload, {g.item, g.out_step, g.count, g.slab, g.block_offset, g.first_step});
  }
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(leases_mu_);
    id = next_lease_++;
    auto lease = std::make_unique<Lease>();
    lease->connection = r.connection;
    lease->expires = Clock::now() + in_place_.lease;
    lease->pins = std::move(where.pins);
    leases_.emplace(id, std::move(lease));
    lease_count_.store(leases_.size(), std::memory_order_relaxed);
  }
  flatbuffers::FlatBufferBuilder b(512);
  b.ForceDefaults(true);
  const auto offsets = b.CreateVector(where.column_offset);
  const auto step_bytes = b.CreateVector(where.column_step_bytes);
  HeaderFields f;
  f.request_id = h->request_id();
  f.table_id = h->table_id();
  return Reply{EncodeHeader(b, f, fb::Body::Sampled,
                            fb::CreateSampled(b, batch.batch_size, batch.sequence_length,
                                              !batch.weights.empty(), /*has_columns=*/false, id,
                                              in_place_.lease.count(),
                                              static_cast<int64_t>(where.segments.size()), offsets,
                                              step_bytes, !batch.insertion_order.empty())),
               std::move(payload)};
}

PayloadPlaces DbService::PlaceAppend(ConnectionId from, const fb::Header& h, size_t length) {
  const fb::AppendStep* q = h.body_as_AppendStep();
  // (An append that says its first step may hold rows already stored:
  // it goes through the handler, which skips them.)
  if (q == nullptr || q->data_offset() == 0 || q->steps() <= 0 || q->data_offset() >= length ||
      q->first_step() >= 0) {
    return {};
  }
  std::shared_ptr<Writer> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = writers_.find({from, q->writer()});
    if (it != writers_.end()) w = it->second;
  }
  auto* engine_writer =
      w != nullptr ? dynamic_cast<engine::TrajectoryWriterImpl*>(w->writer.get()) : nullptr;
  if (engine_writer == nullptr) return {};
  // (A worker never waits: a writer busy elsewhere takes the copying path.)
  std::unique_lock<std::mutex> lock(w->mu, std::try_to_lock);
  if (!lock.owns_lock() || (q->epoch() != 0 && q->epoch() == w->failed_epoch)) return {};
  auto placed = std::make_shared<PlacedAppend>();
  placed->writer = w;
  placed->engine_writer = engine_writer;
  std::vector<std::span<std::byte>> rows;
  engine_writer->Place(q->steps(), &placed->steps, &rows);
  if (placed->steps.trajectory == nullptr) return {};
  size_t data = 0;
  for (const auto& piece : rows) data += piece.size();
  const size_t offset = q->data_offset();
  if (offset + data > length) {  // (the record cannot hold them: it fails whole)
    placed->Release();
    return {};
  }
  placed->record.reset(new std::byte[length]);  // never zeroed: its data's bytes stay unwritten
  placed->length = length;
  PayloadPlaces places;
  places.pieces.emplace_back(placed->record.get(), offset);
  places.pieces.insert(places.pieces.end(), rows.begin(), rows.end());
  if (offset + data < length) {
    places.pieces.emplace_back(placed->record.get() + offset + data, length - offset - data);
  }
  places.keep = std::move(placed);
  return places;
}

void ServeWith(DbService* service, RpcServerOptions* options, RequestHandler* handler) {
  *handler = [service](Request& r) { return service->Handle(r); };
  options->place_request = [service](ConnectionId from, const fb::Header& h, size_t length) {
    return service->PlaceAppend(from, h, length);
  };
  options->try_inline = [service](Request& r) { return service->TryInline(r); };
  // A writer's appends and ends run in the order they came: appends are
  // sent ahead. (CloseWriter does not wait behind them: a client closes a
  // writer once its appends are acknowledged, or gives up on them.)
  options->strand_of = [](const fb::Header& h) -> uint64_t {
    switch (h.body_type()) {
      case fb::Body::AppendStep: return h.body_as_AppendStep()->writer();
      case fb::Body::EndTrajectory: return h.body_as_EndTrajectory()->writer();
      default: return 0;
    }
  };
  options->on_disconnect = [service](ConnectionId c) { service->Disconnected(c); };
}

size_t DbService::open_writers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writers_.size();
}

void DbService::Disconnected(ConnectionId connection) {
  std::vector<std::unique_ptr<Lease>> leases;  // unpinned outside the lock
  {
    std::lock_guard<std::mutex> lock(leases_mu_);
    readers_.erase(connection);
    leases = TakeLeasesLocked([connection](const Lease& l) { return l.connection == connection; });
  }
  std::vector<std::shared_ptr<Writer>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone_.insert(connection);
    auto it = writers_.lower_bound({connection, 0});
    while (it != writers_.end() && it->first.first == connection) {
      gone.push_back(std::move(it->second));
      it = writers_.erase(it);
    }
  }
  // Destroyed here, each once no call holds it: an open trajectory ends
  // truncated, as a local writer's destructor ends it.
}

std::optional<Result<Reply>> DbService::TryInline(Request& r) {
  if (db_.load(std::memory_order_acquire) == nullptr) return Handle(r);  // Unavailable
  const fb::Header* h = r.message.header();
  // Whether `items` windows of table `name` stay within kInlineBytes.
  const auto small = [&](const flatbuffers::String* name, uint64_t items) -> Result<bool> {
    REPLAYDB_ASSIGN_OR_RETURN(auto table,
                            db_.load(std::memory_order_acquire)->GetTable(Name(name)));
    const TableSpec& spec = table->spec();
    uint64_t row = 0;
    for (const ColumnSpec& c : spec.columns) row += c.step_bytes();
    const uint64_t window = row * static_cast<uint64_t>(std::max<int64_t>(spec.sequence_length, 1));
    return items <= kInlineKeys && (window == 0 || items <= kInlineBytes / window);
  };
  switch (h->body_type()) {
    case fb::Body::ListTables:
    case fb::Body::OpenTable:
    case fb::Body::GetInfo:
    case fb::Body::GetMass:
      return Handle(r);
    case fb::Body::UpdatePriorities:
      if (r.message.payload.size() > kInlineKeys * (sizeof(ItemKey) + sizeof(double))) {
        return std::nullopt;
      }
      return Handle(r);
    case fb::Body::Lookup: {
      Result<bool> fits =
          small(h->body_as_Lookup()->table(), r.message.payload.size() / sizeof(ItemKey));
      if (!fits.ok()) return fits.status();
      if (!*fits) return std::nullopt;
      return Handle(r);
    }
    case fb::Body::AppendStep:
    case fb::Body::EndTrajectory: {
      // A trajectory writer's (RpcServer runs it here only when none of the
      // writer's requests is queued or running), when it takes no waiting:
      // the engine is told not to wait, and one that would goes on in the
      // writer's strand with what it did so far (Request::progress).
      if (r.message.payload.size() > kInlineAppendBytes) return std::nullopt;
      const uint64_t id = h->body_type() == fb::Body::AppendStep
                              ? h->body_as_AppendStep()->writer()
                              : h->body_as_EndTrajectory()->writer();
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = writers_.find({r.connection, id});
        if (it == writers_.end() || it->second->vector || it->second->sync) return std::nullopt;
      }
      engine::ScopedNoWait no_wait;
      Result<Reply> reply = Handle(r);
      if (r.requeue) {
        r.requeue = false;
        return std::nullopt;
      }
      return reply;
    }
    case fb::Body::FetchLog: {
      // A replica's read: here when the log holds at most kInlineBytes
      // past its place (none: it is noted, which acknowledges the writers
      // waiting for it, and the reply deferred); on the executor otherwise.
      engine::DBImpl* impl = impl_.load(std::memory_order_acquire);
      const fb::FetchLog* q = h->body_as_FetchLog();
      if (impl == nullptr) return std::nullopt;
      const wal::LogPosition end = impl->LogEnd();
      if (q->segment() != end.segment || q->offset() > end.offset ||
          end.offset - q->offset() > kInlineBytes) {
        return std::nullopt;
      }
      return HandleFetchLog(*impl, r);
    }
    case fb::Body::Sample: {
      // Small batches only (a large gather would hold the worker), and only
      // when the rate limiter lets it through at once.
      const fb::Sample* q = h->body_as_Sample();
      // (In place, the reply is small whatever the batch.)
      Result<bool> fits =
          q->in_place() ? Result<bool>(true)
                        : small(q->table(),
                                static_cast<uint64_t>(std::max<int64_t>(q->batch_size(), 0)));
      if (!fits.ok()) return fits.status();
      if (!*fits) return std::nullopt;
      Result<Reply> reply = Handle(r);
      if (!reply.ok() && reply.status().code() == Status::Code::kDeadlineExceeded) {
        return std::nullopt;  // it waits, on the executor
      }
      return reply;
    }
    default:
      return std::nullopt;
  }
}

Result<Reply> DbService::Handle(Request& r) {
  DB* db = db_.load(std::memory_order_acquire);
  if (db == nullptr) {
    return Status::Unavailable("the server is still opening its database; try again");
  }
  ExpireLeases();
  const fb::Body kind = r.message.header()->body_type();
  if (r.read_only && ChangesData(kind)) {
    return Status::FailedPrecondition(std::string("this connection's token is a read-only one: ") +
                                      fb::EnumNameBody(kind) +
                                      " refused (reads, samples and lookups are served)");
  }
  // (A replica's own checkpoints, loads and sampling seeds are its own; so
  // are a fenced primary's.)
  if (ChangesData(kind) && kind != fb::Body::Checkpoint && kind != fb::Body::LoadTrajectories &&
      kind != fb::Body::SeedTable && kind != fb::Body::Promote && kind != fb::Body::Fence) {
    if (is_replica_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(role_mu_);
      if (!replica_of_.empty()) {
        return Status::FailedPrecondition("this server is a read replica of " + replica_of_ + ": " +
                                          fb::EnumNameBody(kind) +
                                          " refused (writes go to the primary; reads, samples "
                                          "and lookups are served here)");
      }
    }
    REPLAYDB_RETURN_IF_ERROR(
        LeaseStatus().WithContext(fb::EnumNameBody(kind) + std::string(" refused")));
    if (engine::DBImpl* impl = impl_.load(std::memory_order_acquire);
        impl != nullptr && impl->fenced()) {
      uint64_t epoch = 0;
      const std::string by = impl->fenced_by(&epoch);
      return impl->FencedStatus(epoch, by).WithContext(fb::EnumNameBody(kind) +
                                                       std::string(" refused"));
    }
  }
  switch (kind) {
    case fb::Body::FetchLog:
      return HandleFetchLog(*db, r);
    case fb::Body::GetReplication:
      return HandleGetReplication(*db, r);
    case fb::Body::GetSnapshot:
      return HandleGetSnapshot(*db, r);
    case fb::Body::ReadSnapshot:
      return HandleReadSnapshot(*db, r);
    case fb::Body::Promote:
      return HandlePromote(r);
    case fb::Body::Fence:
      return HandleFence(r);
    case fb::Body::NewWriter:
    case fb::Body::AppendStep:
    case fb::Body::EndTrajectory:
    case fb::Body::CloseWriter:
      return HandleWriter(r);
    case fb::Body::SlabKeys:
      return HandleSlabKeys(r);
    case fb::Body::Sample: {
      ReleaseLeases(r.connection, r.message.header()->body_as_Sample()->release());
      std::optional<Result<Reply>> in_place = SampleInPlace(r);
      if (in_place) return std::move(*in_place);
      return HandleTables(*db, *batches_, r);
    }
    default:
      return HandleTables(*db, *batches_, r);
  }
}

namespace {

Reply LogRecordsReply(uint64_t request_id, wal::LogChunk chunk, uint64_t epoch) {
  HeaderFields f;
  f.request_id = request_id;
  flatbuffers::FlatBufferBuilder b(128);
  b.ForceDefaults(true);
  return Reply{
      EncodeHeader(b, f, fb::Body::LogRecords,
                   fb::CreateLogRecords(b, chunk.next.segment, chunk.next.offset, chunk.count,
                                        chunk.end.segment, chunk.end.offset, epoch)),
      std::move(chunk.records)};
}

}  // namespace

Result<Reply> DbService::HandleFetchLog(DB& db, Request& r) {
  auto* impl = dynamic_cast<engine::DBImpl*>(&db);
  if (impl == nullptr) return Status::NotSupported("this server's database ships no log");
  const fb::Header* h = r.message.header();
  const fb::FetchLog* q = h->body_as_FetchLog();
  constexpr uint64_t kMaxChunk = 64 << 20;
  PendingFetch f;
  f.request_id = h->request_id();
  f.replica = Name(q->replica());
  f.from = wal::LogPosition{q->segment(), q->offset()};
  f.saved_segment = q->saved_segment();
  f.max_bytes = static_cast<size_t>(std::clamp<uint64_t>(q->max_bytes(), 1, kMaxChunk));
  // A replica that reads the log is done with its snapshot.
  if (snapshot_count_.load(std::memory_order_relaxed) > 0) DropSnapshots(f.replica);
  REPLAYDB_ASSIGN_OR_RETURN(wal::LogChunk chunk, impl->ReadLog(f.replica, f.from, f.saved_segment,
                                                               f.max_bytes, Clock::time_point{}));
  if (chunk.count > 0 || q->wait_ms() == 0)
    return LogRecordsReply(f.request_id, std::move(chunk), impl->epoch());
  // Nothing new: answered once records come (PumpFetches), or empty once
  // its wait passes (bounded, as every served wait: the replica asks again).
  const auto wait =
      std::min<std::chrono::milliseconds>(std::chrono::milliseconds(q->wait_ms()), kMaxServedWait);
  f.until = std::min(r.deadline, Clock::now() + wait);
  f.respond = r.Defer();
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    fetches_.push_back(std::move(f));
    pending_fetches_.store(fetches_.size(), std::memory_order_release);
    if (!shipper_.joinable() && !stop_shipping_) {
      shipper_ = std::thread([this, impl] { ShipLoop(impl); });
    }
  }
  fetch_cv_.notify_all();
  // (Records appended since the read above, whose appender saw no read
  // pending, go now.)
  PumpFetches(*impl);
  return Reply{};  // (not sent: deferred)
}

void DbService::PumpFetches(engine::DBImpl& db) {
  if (pending_fetches_.load(std::memory_order_acquire) == 0) return;
  const wal::LogPosition end = db.LogEnd();
  const auto now = Clock::now();
  std::vector<PendingFetch> ready;
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    for (auto it = fetches_.begin(); it != fetches_.end();) {
      if (it->from < end || it->until <= now) {
        ready.push_back(std::move(*it));
        it = fetches_.erase(it);
      } else {
        ++it;
      }
    }
    pending_fetches_.store(fetches_.size(), std::memory_order_release);
  }
  for (PendingFetch& f : ready) {
    Result<wal::LogChunk> chunk =
        db.ReadLog(f.replica, f.from, f.saved_segment, f.max_bytes, Clock::time_point{});
    if (chunk.ok()) {
      f.respond(LogRecordsReply(f.request_id, std::move(*chunk), db.epoch()));
    } else {
      f.respond(chunk.status());
    }
  }
}

void DbService::ShipLoop(engine::DBImpl* db) {
  // A record appended wakes it at once (LogWriter::WaitPast); a read's wait
  // passing, within kTick.
  constexpr std::chrono::milliseconds kTick{20};
  while (true) {
    {
      std::unique_lock<std::mutex> lock(fetch_mu_);
      fetch_cv_.wait(lock, [&] { return stop_shipping_ || !fetches_.empty(); });
      if (stop_shipping_) return;
    }
    const wal::LogPosition end = db->LogEnd();
    (void)db->WaitForLogPast(end, Clock::now() + kTick);
    PumpFetches(*db);
  }
}

Result<Reply> DbService::HandleGetSnapshot(DB& db, Request& r) {
  namespace fs = std::filesystem;
  REPLAYDB_ASSIGN_OR_RETURN(engine::DBImpl * impl, Engine("makes no snapshots"));
  const fb::Header* h = r.message.header();
  std::string replica = Name(h->body_as_GetSnapshot()->replica());
  std::replace(replica.begin(), replica.end(), '\n', ' ');
  DropSnapshots(replica);  // (one asked for again: the last try failed)
  const std::string base = db.path() + "/snapshots";
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(snapshots_mu_);
    if (snapshots_.size() >= kMaxSnapshots) {
      return Status::Unavailable(std::to_string(snapshots_.size()) +
                                 " new replicas are copying snapshots of " + db.path() +
                                 " now; try again once one is done");
    }
    if (next_snapshot_ == 1) {
      std::error_code ec;
      fs::remove_all(base, ec);  // copies a closed server left
    }
    id = next_snapshot_++;
    Snapshot& made = snapshots_[id];
    made.replica = replica;
    made.dir = base + "/" + std::to_string(id);
    snapshot_count_.store(snapshots_.size(), std::memory_order_relaxed);
  }
  const std::string dir = base + "/" + std::to_string(id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  Result<wal::LogPosition> from =
      ec ? Result<wal::LogPosition>(Status::IOError("cannot make " + dir + ": " + ec.message()))
         : impl->MakeSnapshot(replica, dir);
  std::map<std::string, uint64_t> files;
  if (from.ok()) {
    for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
      if (entry.is_regular_file(ec)) {
        files[fs::relative(entry.path(), dir, ec).string()] = entry.file_size(ec);
      }
    }
    if (ec) from = Status::IOError("listing the snapshot " + dir + ": " + ec.message());
  }
  {
    std::lock_guard<std::mutex> lock(snapshots_mu_);
    auto it = snapshots_.find(id);
    if (it != snapshots_.end() && from.ok()) {
      it->second.segment = from->segment;
      it->second.files = files;
    }
  }
  if (!from.ok()) {
    DropSnapshots(replica);
    return from.status();
  }
  HeaderFields f;
  f.request_id = h->request_id();
  flatbuffers::FlatBufferBuilder b(256);
  b.ForceDefaults(true);
  std::vector<flatbuffers::Offset<fb::SnapshotFile>> list;
  for (const auto& [name, size] : files) {
    list.push_back(fb::CreateSnapshotFile(b, b.CreateString(name), size));
  }
  const auto vec = b.CreateVector(list);
  return Reply{EncodeHeader(b, f, fb::Body::SnapshotMade,
                            fb::CreateSnapshotMade(b, id, from->segment, from->offset, vec)),
               ""};
}

Result<Reply> DbService::HandleReadSnapshot(DB& db, Request& r) {
  REPLAYDB_ASSIGN_OR_RETURN(engine::DBImpl * impl, Engine("makes no snapshots"));
  const fb::Header* h = r.message.header();
  const fb::ReadSnapshot* q = h->body_as_ReadSnapshot();
  const std::string file = Name(q->file());
  std::string path;
  uint64_t size = 0;
  {
    std::lock_guard<std::mutex> lock(snapshots_mu_);
    auto it = snapshots_.find(q->id());
    if (it == snapshots_.end()) {
      return Status::NotFound("snapshot " + std::to_string(q->id()) + " of " + db.path() +
                              " is gone (it was read to its end, or the server restarted): "
                              "ask for another (GetSnapshot)");
    }
    auto f = it->second.files.find(file);
    if (f == it->second.files.end()) {
      return Status::NotFound("snapshot " + std::to_string(q->id()) + " of " + db.path() +
                              " has no file " + util::Quoted(file));
    }
    path = it->second.dir + "/" + file;
    size = f->second;
    // Its log stays for as long as it is read.
    impl->replica_set()->Hold(it->second.replica, it->second.segment);
  }
  constexpr uint64_t kMaxChunk = 64 << 20;
  const uint64_t offset = std::min(q->offset(), size);
  const uint64_t n = std::min({size - offset, std::clamp<uint64_t>(q->max_bytes(), 1, kMaxChunk)});
  std::string bytes(n, '\0');
  if (n > 0) {
    std::unique_ptr<SequentialFile> file;
    REPLAYDB_RETURN_IF_ERROR(Env::Default()->NewSequentialFile(path, &file));
    REPLAYDB_RETURN_IF_ERROR(file->Skip(offset));
    std::string_view got;
    REPLAYDB_RETURN_IF_ERROR(file->Read(n, &got, bytes.data()));
    if (got.size() != n) {
      return Status::IOError("reading " + path + " at " + std::to_string(offset) + ": it ends " +
                             std::to_string(n - got.size()) + " bytes early");
    }
    if (got.data() != bytes.data()) bytes.assign(got);
  }
  HeaderFields f;
  f.request_id = h->request_id();
  flatbuffers::FlatBufferBuilder b(64);
  return Reply{EncodeHeader(b, f, fb::Body::SnapshotBytes, fb::CreateSnapshotBytes(b)),
               std::move(bytes)};
}

void DbService::DropSnapshots(const std::string& replica) {
  std::vector<std::string> dirs;
  {
    std::lock_guard<std::mutex> lock(snapshots_mu_);
    for (auto it = snapshots_.begin(); it != snapshots_.end();) {
      if (replica.empty() || it->second.replica == replica) {
        dirs.push_back(it->second.dir);
        it = snapshots_.erase(it);
      } else {
        ++it;
      }
    }
    snapshot_count_.store(snapshots_.size(), std::memory_order_relaxed);
  }
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // (best effort: the next server's first removes it)
  }
}

Result<Reply> DbService::HandleGetReplication(DB& db, Request& r) {
  REPLAYDB_ASSIGN_OR_RETURN(ReplicationInfo info, db.Replication());
  std::unique_lock<std::mutex> role_lock(role_mu_);
  if (follower_ != nullptr) {
    const ReplicaState state = follower_->state();
    info.role = "replica";
    info.primary = replica_of_;
    info.segment = state.position.segment;
    info.offset = state.position.offset;
    info.primary_segment = state.primary_end.segment;
    info.primary_offset = state.primary_end.offset;
    info.connected = state.connected;
    info.last_error = state.last_error;
  }
  role_lock.unlock();
  HeaderFields f;
  f.request_id = r.message.header()->request_id();
  flatbuffers::FlatBufferBuilder b(256);
  b.ForceDefaults(true);
  std::vector<flatbuffers::Offset<fb::ReplicaRead>> replicas;
  for (const ReplicaProgress& p : info.replicas) {
    replicas.push_back(fb::CreateReplicaRead(b, b.CreateString(p.name), p.segment,
                                             p.seconds_since_read, p.applied_segment,
                                             p.applied_offset, p.lag_seconds, p.in_sync));
  }
  const auto role = b.CreateString(info.role);
  const auto primary = b.CreateString(info.primary);
  const auto error = b.CreateString(info.last_error);
  const auto list = b.CreateVector(replicas);
  const auto fenced_by = b.CreateString(info.fenced_by);
  return Reply{EncodeHeader(b, f, fb::Body::ReplicationState,
                            fb::CreateReplicationState(b, role, primary, info.segment, info.offset,
                                                       info.primary_segment, info.primary_offset,
                                                       info.connected, error, list, info.epoch,
                                                       fenced_by, info.fenced_epoch)),
               ""};
}

Result<Reply> DbService::HandlePromote(Request& r) {
  REPLAYDB_ASSIGN_OR_RETURN(engine::DBImpl * impl, Engine("cannot be promoted"));
  const fb::Header* h = r.message.header();
  const bool old_primary_dead = h->body_as_Promote()->old_primary_dead();
  std::lock_guard<std::mutex> promoting(promote_mu_);
  std::string primary;
  Replica* follower = nullptr;
  if (Status s = ReplicaRole(*impl, &primary, &follower); !s.ok()) {
    return Status::FailedPrecondition(s.message() + ": there is nothing to promote");
  }
  const uint64_t epoch = impl->epoch() + 1;
  const auto log = [&](const std::string& line) {
    if (in_place_.log) in_place_.log(line);
  };
  // The old primary is fenced first: from then on it acknowledges nothing,
  // and what it acknowledged lies before the end it answers with.
  bool fenced = false;
  wal::LogPosition end;
  {
    std::string host;
    uint16_t port = 0;
    REPLAYDB_RETURN_IF_ERROR(ParseAddress(primary, &host, &port));
    RpcClientOptions o;
    o.client_name = "promotion of " + address_;
    o.connect_timeout = std::chrono::milliseconds(2000);
    Result<std::unique_ptr<RpcClient>> client = RpcClient::Connect(host, port, o);
    if (client.ok()) {
      Result<Message> m = (*client)->Call(
          [&](const HeaderFields& hf) {
            flatbuffers::FlatBufferBuilder b(128);
            b.ForceDefaults(true);
            const auto me = b.CreateString(address_);
            return EncodeHeader(b, hf, fb::Body::Fence, fb::CreateFence(b, epoch, me));
          },
          "", std::chrono::seconds(10));
      if (!m.ok()) return m.status().WithContext("fencing the old primary " + primary);
      const fb::Fenced* got = m->header()->body_as_Fenced();
      if (got == nullptr) {
        return Status::Corruption(primary + " answered a Fence with a " +
                                  fb::EnumNameBody(m->header()->body_type()));
      }
      end = wal::LogPosition{got->segment(), got->offset()};
      fenced = true;
      log("promotion to epoch " + std::to_string(epoch) + ": fenced " + primary +
          " (its log ends at segment " + std::to_string(end.segment) + ", offset " +
          std::to_string(end.offset) + ")");
    } else if (!old_primary_dead) {
      return Status::Unavailable(
          "not promoted: the old primary " + primary + " cannot be reached to fence it (" +
          client.status().message() +
          "); it may be cut off and still taking writes. Promote once it is known dead "
          "(replaydb promote --old-primary-dead, PromoteOptions::old_primary_dead)");
    } else {
      log("promotion to epoch " + std::to_string(epoch) + ": the old primary " + primary +
          " cannot be reached (" + client.status().message() + "); it is taken as dead");
    }
  }
  // Everything the old primary logged is applied here before it goes.
  if (fenced) {
    constexpr std::chrono::seconds kCatchUp{30};
    const auto until = Clock::now() + kCatchUp;
    while (follower->state().position < end && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const wal::LogPosition at = follower->state().position;
    if (at < end) {
      return Status::Unavailable(
          "not promoted: this replica applied its primary's log to segment " +
          std::to_string(at.segment) + ", offset " + std::to_string(at.offset) + " within " +
          std::to_string(kCatchUp.count()) + " s, short of its end (segment " +
          std::to_string(end.segment) + ", offset " + std::to_string(end.offset) + "); " + primary +
          " stays fenced: promote again (" + follower->state().last_error + ")");
    }
  }
  REPLAYDB_ASSIGN_OR_RETURN(const wal::LogPosition began,
                            TakeOverLocked(*impl, epoch, primary, follower));
  HeaderFields f;
  f.request_id = h->request_id();
  flatbuffers::FlatBufferBuilder b(64);
  b.ForceDefaults(true);
  return Reply{EncodeHeader(b, f, fb::Body::Promoted,
                            fb::CreatePromoted(b, epoch, began.segment, began.offset, fenced)),
               ""};
}

Result<wal::LogPosition> DbService::TakeOver(uint64_t epoch) {
  REPLAYDB_ASSIGN_OR_RETURN(engine::DBImpl * impl, Engine("cannot be promoted"));
  std::lock_guard<std::mutex> promoting(promote_mu_);
  std::string primary;
  Replica* follower = nullptr;
  REPLAYDB_RETURN_IF_ERROR(ReplicaRole(*impl, &primary, &follower));
  return TakeOverLocked(*impl, epoch, primary, follower);
}

Status DbService::ReplicaRole(const engine::DBImpl& impl, std::string* primary,
                              Replica** follower) const {
  {
    std::lock_guard<std::mutex> lock(role_mu_);
    *primary = replica_of_;
    *follower = follower_;
  }
  if (primary->empty() || *follower == nullptr) {
    return Status::FailedPrecondition("this server is a primary (epoch " +
                                      std::to_string(impl.epoch()) + "), not a read replica");
  }
  return Status::OK();
}

Result<wal::LogPosition> DbService::TakeOverLocked(engine::DBImpl& impl, uint64_t epoch,
                                                   const std::string& primary, Replica* follower) {
  follower->Stop();
  REPLAYDB_ASSIGN_OR_RETURN(const wal::LogPosition began, impl.BecomePrimary(epoch));
  {
    std::lock_guard<std::mutex> lock(role_mu_);
    replica_of_.clear();
    follower_ = nullptr;
    is_replica_.store(false, std::memory_order_release);
  }
  if (in_place_.log) {
    in_place_.log("promoted: the primary of epoch " + std::to_string(epoch) +
                  " (it was a read replica of " + primary + ")");
  }
  return began;
}

void DbService::SetLease(std::chrono::steady_clock::time_point until, std::chrono::milliseconds ttl,
                         std::chrono::milliseconds margin) {
  lease_ttl_ms_.store(ttl.count(), std::memory_order_relaxed);
  lease_margin_ms_.store(margin.count(), std::memory_order_relaxed);
  lease_until_ns_.store(until.time_since_epoch().count(), std::memory_order_release);
}

Status DbService::LeaseStatus() const {
  const int64_t until = lease_until_ns_.load(std::memory_order_acquire);
  if (until == kNoLease) return Status::OK();
  const int64_t now = Clock::now().time_since_epoch().count();
  if (now < until) return Status::OK();
  if (until == 0) {
    return Status::Unavailable(
        "this server is not (yet) the primary its coordinator elected: it acknowledges no "
        "writes; try again, or find the primary through the coordinator");
  }
  const int64_t margin = lease_margin_ms_.load(std::memory_order_relaxed);
  const int64_t ttl = lease_ttl_ms_.load(std::memory_order_relaxed);
  return Status::Unavailable(
      "this primary's session with its coordinator was last renewed " +
      std::to_string((now - until) / 1000000 + ttl - margin) + " ms ago (TTL " +
      std::to_string(ttl) + " ms, less a margin of " + std::to_string(margin) +
      " ms): it acknowledges no writes until it renews it, since another node may be elected "
      "meanwhile; try again, or find the primary through the coordinator");
}

Result<Reply> DbService::HandleFence(Request& r) {
  REPLAYDB_ASSIGN_OR_RETURN(engine::DBImpl * impl, Engine("cannot be fenced"));
  const fb::Header* h = r.message.header();
  const fb::Fence* q = h->body_as_Fence();
  if (is_replica_.load(std::memory_order_acquire)) {
    return Status::FailedPrecondition(
        "this server is a read replica, not a primary: only a primary is fenced");
  }
  const std::string by = Name(q->primary());
  REPLAYDB_ASSIGN_OR_RETURN(const wal::LogPosition end, impl->Fence(q->epoch(), by));
  if (in_place_.log) {
    in_place_.log("fenced: epoch " + std::to_string(q->epoch()) + "'s primary is " + by +
                  "; writes are refused from now on");
  }
  HeaderFields f;
  f.request_id = h->request_id();
  flatbuffers::FlatBufferBuilder b(64);
  b.ForceDefaults(true);
  return Reply{EncodeHeader(b, f, fb::Body::Fenced, fb::CreateFenced(b, end.segment, end.offset)),
               ""};
}

Result<Reply> DbService::HandleWriter(Request& r) {
  const fb::Header* h = r.message.header();
  HeaderFields f;
  f.request_id = h->request_id();
  f.table_id = h->table_id();
  flatbuffers::FlatBufferBuilder b(128);
  b.ForceDefaults(true);
  if (h->body_type() == fb::Body::NewWriter) {
    const fb::NewWriter* q = h->body_as_NewWriter();
    REPLAYDB_ASSIGN_OR_RETURN(auto table,
                              db_.load(std::memory_order_acquire)->GetTable(Name(q->table())));
    WriterOptions o;
    // Each call waits at most kMaxServedWait here; the client sends it again
    // until its own timeout passes.
    // (A vector writer's waits are not cut: its failures are per
    // environment, and the client could not send only the missing rows.)
    o.timeout = q->timeout_ms() < 0 ? kWaitForever : std::chrono::milliseconds(q->timeout_ms());
    if (q->envs() == 0) o.timeout = o.timeout.count() < 0 ? kMaxServedWait
                                                          : std::min(o.timeout, kMaxServedWait);
    o.sync = q->sync();
    o.acks = Acks{static_cast<AckMode>(q->acks()), q->ack_replicas()};
    REPLAYDB_RETURN_IF_ERROR(
        ValidateAcks(o.acks, "table '" + table->name() + "': a remote writer's options"));
    auto w = std::make_shared<Writer>();
    w->timeout = q->timeout_ms() < 0 ? kWaitForever : std::chrono::milliseconds(q->timeout_ms());
    // Its acknowledgments: the log's sync by the engine's writer, the
    // replicas' here (AckWhenReplicated), not holding a thread meanwhile.
    w->ack = engine::ResolveAck(table->spec(), o);
    o.sync = w->ack.sync;
    o.acks = Acks{AckMode::kNone, 0};
    // (Where the log never syncs, a sync writer's appends wait for nothing
    // here: they may run on a transport's worker.)
    const auto* impl = dynamic_cast<const engine::DBImpl*>(db_.load(std::memory_order_acquire));
    w->sync = w->ack.sync && !(impl != nullptr && impl->log_never_syncs());
    engine::TableImpl::Adopted resumed;
    // A resuming vector writer's environments (WriterOpened's envs_*).
    std::vector<uint8_t> envs_resumed, envs_reason;
    std::vector<uint64_t> envs_id;
    std::vector<int64_t> envs_steps;
    if (q->envs() == 0) {
      REPLAYDB_ASSIGN_OR_RETURN(w->writer, table->NewWriter(o));
      if (q->resume_key() != 0) {
        // A writer back after a failover: its trajectory, where this
        // server has it (the records' writer key, or its id).
        auto* engine_writer = dynamic_cast<engine::TrajectoryWriterImpl*>(w->writer.get());
        if (engine_writer == nullptr) {
          return Status::Internal("table '" + table->name() + "': its writers cannot resume");
        }
        REPLAYDB_ASSIGN_OR_RETURN(resumed,
                                  engine_writer->Resume(q->resume_key(), q->resume_trajectory()));
      }
    } else {
      REPLAYDB_ASSIGN_OR_RETURN(w->vector, table->NewVectorWriter(q->envs(), o));
      const size_t keys = q->resume_keys() == nullptr ? 0 : q->resume_keys()->size();
      if (keys != 0) {
        // A vector writer back after a failover: each environment's
        // trajectory (a vector table's: the segment), where this server
        // has it.
        auto* engine_writer = dynamic_cast<engine::ResumableVectorWriter*>(w->vector.get());
        if (engine_writer == nullptr) {
          return Status::Internal("table '" + table->name() +
                                  "': its vector writers cannot resume");
        }
        const size_t ids =
            q->resume_trajectories() == nullptr ? 0 : q->resume_trajectories()->size();
        if (keys != engine_writer->resumable() || ids != keys) {
          return Status::InvalidArgument(
              "table '" + table->name() + "': a vector writer of " + std::to_string(q->envs()) +
              " environments resumes with " + std::to_string(keys) + " keys and " +
              std::to_string(ids) + " trajectory ids (one each " +
              (table->spec().lanes > 1 ? std::string("for its segment of the vector table")
                                       : std::string("per environment")) +
              ")");
        }
        for (size_t e = 0; e < keys; ++e) {
          Result<engine::TableImpl::Adopted> adopted =
              engine_writer->Resume(e, q->resume_keys()->Get(e), q->resume_trajectories()->Get(e));
          if (!adopted.ok()) {
            // Those taken over already are orphans again, not ended with
            // this writer.
            engine_writer->GiveBack();
            return adopted.status().WithContext("environment " + std::to_string(e));
          }
          const engine::TableImpl::Adopted& a = *adopted;
          envs_resumed.push_back(static_cast<uint8_t>(a.state));
          envs_id.push_back(a.trajectory_id);
          envs_steps.push_back(a.num_steps);
          envs_reason.push_back(static_cast<uint8_t>(a.end_reason));
        }
      }
    }
    // The served database is a local one: its writers are the engine's,
    // which take a remote writer's log records.
    w->records = w->writer ? dynamic_cast<engine::RecordAppender*>(w->writer.get())
                           : dynamic_cast<engine::RecordAppender*>(w->vector.get());
    if (w->records == nullptr) {
      return Status::Internal("table '" + table->name() + "': its writers do not take log records");
    }
    const uint32_t table_id = w->records->table_id();
    w->table = std::move(table);
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (gone_.count(r.connection) > 0) {
        // The connection ended while this ran: the writer goes now (its
        // destructor runs outside the lock, below).
        id = 0;
      } else {
        id = next_writer_++;
        writers_[{r.connection, id}] = w;
      }
    }
    if (id == 0) {
      // (A resuming vector writer's trajectories stay orphans for its next
      // try, not ended with this one.)
      if (auto* v = dynamic_cast<engine::ResumableVectorWriter*>(w->vector.get()); v != nullptr) {
        v->GiveBack();
      }
      return Status::Unavailable("connection " + std::to_string(r.connection) +
                                 " ended while its writer was being opened");
    }
    // (Absent, not empty, where no vector writer resumed.)
    const auto vec = [&b](const auto& v) {
      return v.empty() ? decltype(b.CreateVector(v)){} : b.CreateVector(v);
    };
    const auto er = vec(envs_resumed);
    const auto ei = vec(envs_id);
    const auto es = vec(envs_steps);
    const auto ee = vec(envs_reason);
    return Reply{EncodeHeader(b, f, fb::Body::WriterOpened,
                              fb::CreateWriterOpened(
                                  b, id, table_id, static_cast<uint8_t>(resumed.state),
                                  resumed.trajectory_id, resumed.num_steps,
                                  static_cast<uint8_t>(resumed.end_reason), er, ei, es, ee)),
                 ""};
  }
  uint64_t id = 0;
  switch (h->body_type()) {
    case fb::Body::AppendStep: id = h->body_as_AppendStep()->writer(); break;
    case fb::Body::EndTrajectory: id = h->body_as_EndTrajectory()->writer(); break;
    default: id = h->body_as_CloseWriter()->writer(); break;
  }
  std::shared_ptr<Writer> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = writers_.find({r.connection, id});
    if (it != writers_.end()) {
      w = it->second;
      if (h->body_type() == fb::Body::CloseWriter) writers_.erase(it);
    }
  }
  if (!w) {
    return Status::NotFound("this connection has no writer " + std::to_string(id));
  }
  if (h->body_type() == fb::Body::CloseWriter) {
    // Gone from the map; destroyed with the last hold (after a call of its
    // still running, which waits at most kMaxServedWait).
    return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
  }
  if (h->body_type() == fb::Body::AppendStep && r.progress == 0) {
    // Nothing stored without the replicas to acknowledge it (the engine's
    // check: its writer here waits for no replica).
    if (const auto* t = dynamic_cast<const engine::TableImpl*>(w->table.get())) {
      REPLAYDB_RETURN_IF_ERROR(t->CheckAck(w->ack));
    }
  }
  Result<Reply> reply = HandleWriterCall(r, w, id);
  engine::DBImpl* impl = impl_.load(std::memory_order_acquire);
  if (impl == nullptr) return reply;
  // What it logged goes to the replicas waiting for records, from here.
  PumpFetches(*impl);
  if (!reply.ok() || r.requeue) return reply;
  return AckWhenReplicated(r, w, *impl, std::move(*reply));
}

Result<Reply> DbService::AckWhenReplicated(Request& r, const std::shared_ptr<Writer>& w,
                                           engine::DBImpl& db, Reply reply) {
  wal::ReplicaSet* replicas = db.replica_set();
  const engine::WriteAck& ack = w->ack;
  const bool throttle = ack.max_lag.count() > 0 && replicas->Lagging(ack.max_lag);
  if (ack.replicas == 0 && !throttle) return reply;
  // What the reply acknowledges is in the log before its end now.
  const wal::LogPosition end = db.LogEnd();
  // (Not engine::DeadlineAfter: on a transport's worker, ScopedNoWait
  // makes that now.)
  const auto until = w->timeout.count() < 0 ? Clock::time_point::max() : Clock::now() + w->timeout;
  const std::string table = w->table->name();
  const int k = ack.replicas;
  auto held = std::make_shared<Reply>(std::move(reply));
  Request::Responder respond = r.Defer();
  // The reply once replicated (after the lag, when lagging); a failure
  // ends the writer's epoch, as a failed append does (its appends sent
  // after it, and not yet stored, are refused).
  const std::weak_ptr<Writer> weak = w;
  const uint32_t epoch = r.message.header()->body_type() == fb::Body::AppendStep
                             ? r.message.header()->body_as_AppendStep()->epoch()
                             : 0;
  auto answer = [held, respond, weak, epoch](const Status& s) {
    if (!s.ok() && epoch != 0) {
      if (std::shared_ptr<Writer> writer = weak.lock()) {
        std::lock_guard<std::mutex> lock(writer->mu);
        writer->failed_epoch = epoch;
      }
    }
    respond(s.ok() ? Result<Reply>(std::move(*held)) : Result<Reply>(s));
  };
  auto replicated = [replicas, end, k, until, table, answer](const Status& s) {
    if (!s.ok() || k == 0) return answer(s);
    replicas->WhenReplicated(end, k, until, table, answer);
  };
  if (throttle) {
    replicas->WhenCaughtUp(ack.max_lag, until, table, replicated);
  } else {
    replicated(Status::OK());
  }
  return Reply{};  // (not sent: deferred)
}

Result<Reply> DbService::HandleWriterCall(Request& r, const std::shared_ptr<Writer>& w,
                                          uint64_t id) {
  const fb::Header* h = r.message.header();
  HeaderFields f;
  f.request_id = h->request_id();
  f.table_id = h->table_id();
  flatbuffers::FlatBufferBuilder b(128);
  b.ForceDefaults(true);
  std::lock_guard<std::mutex> lock(w->mu);
  // Rows placed straight in the hot tier (PlaceAppend): published below,
  // or given up when the handler returns (under the writer's mutex).
  const std::shared_ptr<PlacedAppend> placed = std::static_pointer_cast<PlacedAppend>(r.placed);
  struct GiveUp {
    PlacedAppend* p;
    ~GiveUp() {
      if (p != nullptr) p->Release();
    }
  } give_up{placed.get()};
  switch (h->body_type()) {
    case fb::Body::AppendStep: {
      const fb::AppendStep* q = h->body_as_AppendStep();
      // The payload is the rows' log record (a trajectory writer's rows
      // [progress, n) still to go: earlier runs took the rest). Decoding
      // needs it 8-byte aligned, as a string's heap buffer is; a copy
      // otherwise.
      std::string& payload = r.message.payload;
      std::span<std::byte> record(reinterpret_cast<std::byte*>(payload.data()), payload.size());
      std::vector<uint64_t> aligned;
      if (reinterpret_cast<uintptr_t>(payload.data()) % alignof(uint64_t) != 0) {
        aligned.resize((payload.size() + 7) / 8);
        std::memcpy(aligned.data(), payload.data(), payload.size());
        record = {reinterpret_cast<std::byte*>(aligned.data()), payload.size()};
      }
      int64_t appended = 0;
      if (w->vector) {
        auto* engine_writer = dynamic_cast<engine::VectorWriterImpl*>(w->vector.get());
        const bool rows = q->steps() != 0 || !payload.empty();  // (none: the state only)
        if (rows && q->envs_first_step() == nullptr) {
          REPLAYDB_RETURN_IF_ERROR(w->records->AppendRecord(record, 0, &appended));
        } else if (rows) {
          // Sent again after a failover: environments that hold it skip it.
          if (engine_writer == nullptr) {
            return Status::InvalidArgument("writer " + std::to_string(id) +
                                           ": a resent step to a vector table");
          }
          const std::vector<int64_t> first(q->envs_first_step()->begin(),
                                           q->envs_first_step()->end());
          REPLAYDB_RETURN_IF_ERROR(engine_writer->AppendRecordFrom(record, first));
        }
        const size_t n = w->vector->num_envs();
        const auto* resumable = dynamic_cast<engine::ResumableVectorWriter*>(w->vector.get());
        std::vector<uint64_t> ids(n);
        std::vector<int64_t> steps(n);
        for (size_t e = 0; e < n; ++e) {
          ids[e] = w->vector->trajectory_id(e);
          steps[e] = resumable != nullptr ? resumable->open_steps(e) : 0;
        }
        const auto v = b.CreateVector(ids);
        const auto s = b.CreateVector(steps);
        return Reply{EncodeHeader(b, f, fb::Body::Appended, fb::CreateAppended(b, 0, 0, v, -1, s)),
                     ""};
      }
      const auto state = [&](int64_t rows_taken) {
        return Reply{EncodeHeader(b, f, fb::Body::Appended,
                                  fb::CreateAppended(b, w->writer->trajectory_id(),
                                                     w->writer->num_steps(), 0, rows_taken)),
                     ""};
      };
      if (q->epoch() != 0 && q->epoch() == w->failed_epoch) {
        return Status::FailedPrecondition("writer " + std::to_string(id) + ": an earlier append of epoch " +
                               std::to_string(q->epoch()) + " failed; this one was dropped");
      }
      if (q->steps() == 0) return state(-1);  // the writer's state only
      if (q->first_step() >= 0 && r.progress == 0) {
        // Sent again after a failover (or said by a writer that may):
        // the rows the trajectory holds already are skipped, once.
        const int64_t holds = w->writer->num_steps();
        if (q->first_step() > holds) {
          w->failed_epoch = q->epoch();
          return Status::FailedPrecondition(
              "writer " + std::to_string(id) + ": its append starts at step " +
              std::to_string(q->first_step()) + " of trajectory " +
              std::to_string(w->writer->trajectory_id()) + ", which holds " +
              std::to_string(holds) + " steps here: steps " + std::to_string(holds) + " to " +
              std::to_string(q->first_step() - 1) + " are not on this server");
        }
        if (holds - q->first_step() >= q->steps()) return state(-1);  // all there
        r.progress = holds - q->first_step();
      }
      if (placed != nullptr) {
        const Status s = placed->engine_writer->CommitPlaced(
            placed->steps, {placed->record.get(), placed->length}, q->data_offset());
        if (!s.ok()) {
          if (q->epoch() != 0) w->failed_epoch = q->epoch();
          return s;
        }
        placed_appends_.fetch_add(1, std::memory_order_relaxed);
        return state(-1);
      }
      const Status s = w->records->AppendRecord(record, r.progress, &appended);
      if (s.code() == Status::Code::kDeadlineExceeded) {
        // The rows before the one the rate limiter held stay.
        r.progress += appended;
        if (r.no_wait) {  // tried on the transport's worker: the rest waits elsewhere
          r.requeue = true;
          return s;
        }
        // Wait again later (the thread goes to other requests meanwhile):
        // an append sent ahead without bound, others for the writer's
        // timeout from their first run.
        const auto now = Clock::now();
        if (now < r.deadline &&
            (q->ahead() || w->timeout.count() < 0 || now < r.started + w->timeout)) {
          r.requeue = true;
          return s;
        }
        if (r.progress > 0) return state(r.progress);
      }
      if (!s.ok()) {
        if (q->epoch() != 0) w->failed_epoch = q->epoch();
        return s;
      }
      return state(-1);
    }
    case fb::Body::EndTrajectory: {
      const fb::EndTrajectory* q = h->body_as_EndTrajectory();
      const auto reason = static_cast<EndReason>(q->reason());
      if (w->vector) {
        std::vector<size_t> envs;
        if (q->envs() != nullptr) envs.assign(q->envs()->begin(), q->envs()->end());
        REPLAYDB_RETURN_IF_ERROR(w->vector->EndMany(envs, reason));
      } else {
        const Status s = w->writer->End(reason);
        if (s.code() == Status::Code::kDeadlineExceeded && r.no_wait) {
          r.requeue = true;
        } else if (s.code() == Status::Code::kDeadlineExceeded) {
          // Padded items the rate limiter holds: End again later makes
          // the ones still missing, within the writer's timeout.
          const auto now = Clock::now();
          if (now < r.deadline && (w->timeout.count() < 0 || now < r.started + w->timeout)) {
            r.requeue = true;
          }
        }
        REPLAYDB_RETURN_IF_ERROR(s);
      }
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    }
    default:
      return Status::Internal("writer request of kind '" +
                              std::string(fb::EnumNameBody(h->body_type())) + "'");
  }
}

std::string EncodeSampleItems(const SampleBatch& batch) {
  std::string out;
  out.reserve(batch.keys.size() * (8 + 8 + 8 + 4) + batch.weights.size() * 8 + batch.mask.size() +
              batch.insertion_order.size() * 8);
  Put(&out, batch.keys);
  Put(&out, batch.probabilities);
  Put(&out, batch.priorities);
  Put(&out, batch.weights);
  Put(&out, batch.times_sampled);
  Put(&out, batch.mask);
  Put(&out, batch.insertion_order);
  return out;
}

std::string EncodeSamplePayload(const SampleBatch& batch) {
  std::string out = EncodeSampleItems(batch);
  for (const Tensor& c : batch.columns) {
    if (c.size_bytes() > 0) out.append(reinterpret_cast<const char*>(c.data()), c.size_bytes());
  }
  return out;
}

size_t SampleItemsBytes(int64_t batch_size, int64_t sequence_length, bool has_weights,
                        bool has_insertion_order) {
  const auto n = static_cast<size_t>(std::max<int64_t>(batch_size, 0));
  return n * (sizeof(ItemKey) + 8 + 8 + (has_weights ? 8 : 0) + 4 + (has_insertion_order ? 8 : 0)) +
         n * static_cast<size_t>(std::max<int64_t>(sequence_length, 0));
}

bool DecodeSampleItems(std::string_view* in, int64_t batch_size, int64_t sequence_length,
                       bool has_weights, bool has_insertion_order, SampleBatch* b) {
  const auto n = static_cast<size_t>(batch_size);
  b->batch_size = batch_size;
  b->sequence_length = sequence_length;
  return Take(in, n, &b->keys) && Take(in, n, &b->probabilities) && Take(in, n, &b->priorities) &&
         Take(in, has_weights ? n : 0, &b->weights) && Take(in, n, &b->times_sampled) &&
         Take(in, n * static_cast<size_t>(sequence_length), &b->mask) &&
         Take(in, has_insertion_order ? n : 0, &b->insertion_order);
}

Status DecodeSamplePayload(std::string_view payload, const TableSpec& spec, int64_t batch_size,
                           int64_t sequence_length, bool has_weights, bool has_columns,
                           bool has_insertion_order, const std::string& from, SampleBatch* out) {
  const auto bad = [&](const std::string& what) {
    return Status::Corruption("sample of table '" + spec.name + "' from " + from + ": " + what +
                              " (payload of " + std::to_string(payload.size()) + " bytes, " +
                              std::to_string(batch_size) + " items of " +
                              std::to_string(sequence_length) + " steps)");
  };
  if (batch_size < 0 || sequence_length < 0 || batch_size > (int64_t{1} << 32) ||
      sequence_length > (int64_t{1} << 32)) {
    return bad("the batch's sizes are out of range");
  }
  const auto n = static_cast<size_t>(batch_size);
  std::string_view in = payload;
  SampleBatch b;
  if (!DecodeSampleItems(&in, batch_size, sequence_length, has_weights, has_insertion_order, &b)) {
    return bad("too short for the items' keys, probabilities, priorities and mask");
  }
  // The columns' sizes first; then their bytes, into `out`'s buffers where
  // they are the right size already (a learner's batch, sampled again).
  const size_t columns = has_columns ? spec.columns.size() : 0;
  std::vector<size_t> sizes(columns);
  size_t total = 0;
  for (size_t c = 0; c < columns; ++c) {
    // (n * L is at most the payload's size: the mask was there.)
    if (__builtin_mul_overflow(n * static_cast<size_t>(sequence_length),
                               spec.columns[c].step_bytes(), &sizes[c]) ||
        sizes[c] > in.size() - total) {
      return bad("too short for column '" + spec.columns[c].name + "'");
    }
    total += sizes[c];
  }
  if (in.size() != total) {
    return bad(std::to_string(in.size() - total) + " bytes more than the batch holds");
  }
  b.columns = std::move(out->columns);
  if (has_columns) {
    ShapeSampleColumns(spec, batch_size, sequence_length, &b.columns);
  } else {
    b.columns.clear();
  }
  for (size_t c = 0; c < columns; ++c) {
    if (sizes[c] > 0) std::memcpy(b.columns[c].data(), in.data(), sizes[c]);
    in.remove_prefix(sizes[c]);
  }
  *out = std::move(b);
  return Status::OK();
}

void PutSegmentRow(std::string* out, const SegmentRow& row) {
  char bytes[kSegmentRowBytes];
  std::memcpy(bytes, &row.item, 4);
  std::memcpy(bytes + 4, &row.out_step, 4);
  std::memcpy(bytes + 8, &row.count, 4);
  std::memcpy(bytes + 12, &row.slab, 4);
  std::memcpy(bytes + 16, &row.block_offset, 8);
  std::memcpy(bytes + 24, &row.first_step, 8);
  out->append(bytes, sizeof(bytes));
}

bool TakeSegmentRow(std::string_view* in, SegmentRow* row) {
  if (in->size() < kSegmentRowBytes) return false;
  const char* p = in->data();
  std::memcpy(&row->item, p, 4);
  std::memcpy(&row->out_step, p + 4, 4);
  std::memcpy(&row->count, p + 8, 4);
  std::memcpy(&row->slab, p + 12, 4);
  std::memcpy(&row->block_offset, p + 16, 8);
  std::memcpy(&row->first_step, p + 24, 8);
  in->remove_prefix(kSegmentRowBytes);
  return true;
}

void PutTrajectoryRow(std::string* out, const TrajectoryInfo& t) {
  char row[kTrajectoryRowBytes] = {};
  const int64_t length = t.length, live = t.live_items;
  std::memcpy(row, &t.id, 8);
  std::memcpy(row + 8, &length, 8);
  std::memcpy(row + 16, &live, 8);
  row[24] = t.ended ? 1 : 0;
  row[25] = static_cast<char>(t.end_reason);
  row[26] = static_cast<char>(t.tier);
  out->append(row, sizeof(row));
}

bool TakeTrajectoryRow(std::string_view* in, TrajectoryInfo* t) {
  if (in->size() < kTrajectoryRowBytes) return false;
  const auto* row = reinterpret_cast<const uint8_t*>(in->data());
  std::memcpy(&t->id, row, 8);
  std::memcpy(&t->length, row + 8, 8);
  std::memcpy(&t->live_items, row + 16, 8);
  if (row[24] > 1 || row[25] > static_cast<uint8_t>(EndReason::kTruncated) ||
      row[26] > static_cast<uint8_t>(Tier::kCold) || t->length < 0 || t->live_items < 0) {
    return false;
  }
  t->ended = row[24] == 1;
  t->end_reason = static_cast<EndReason>(row[25]);
  t->tier = static_cast<Tier>(row[26]);
  in->remove_prefix(kTrajectoryRowBytes);
  return true;
}

void ShapeSampleColumns(const TableSpec& spec, int64_t batch_size, int64_t sequence_length,
                        std::vector<Tensor>* columns) {
  columns->resize(spec.columns.size());
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    const ColumnSpec& col = spec.columns[c];
    std::vector<int64_t> dims = {batch_size, sequence_length};
    for (const int64_t d : col.shape.dims()) dims.push_back(d);
    (*columns)[c].Reset(col.dtype, Shape::FromSpan(dims));
  }
}

}  // namespace replaydb::rdma
