#include "rdma/db_service.h"

#include <cstring>
#include <utility>
#include <vector>

#include "engine/db/catalog.h"

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

Result<Reply> HandleTables(DB& db, Request& r) {
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
      const std::string spec = engine::EncodeCatalog(std::vector<TableSpec>{table->spec()});
      const auto bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(spec.data()), spec.size());
      return Reply{EncodeHeader(b, f, fb::Body::TableOpened, fb::CreateTableOpened(b, bytes)),
                   ""};
    }
    case fb::Body::Sample: {
      const fb::Sample* q = h->body_as_Sample();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      SampleOptions o;
      if (r.deadline != Clock::time_point::max()) {
        o.timeout = std::max(std::chrono::milliseconds(0),
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 r.deadline - Clock::now()));
      }
      o.importance_beta = q->importance_beta();
      if (q->weight_normalization() > static_cast<uint8_t>(WeightNormalization::kBatch)) {
        return Status::InvalidArgument("sample of table '" + table->name() +
                                       "': weight_normalization " +
                                       std::to_string(q->weight_normalization()) +
                                       " is not one of buffer (0), batch (1)");
      }
      o.weight_normalization = static_cast<WeightNormalization>(q->weight_normalization());
      o.stratified = q->stratified();
      o.peek = q->peek();
      SampleBatch batch;
      REPLAYDB_RETURN_IF_ERROR(table->Sample(q->batch_size(), o, &batch));
      std::string payload = EncodeSamplePayload(batch);
      return Reply{EncodeHeader(b, f, fb::Body::Sampled,
                                fb::CreateSampled(b, batch.batch_size, batch.sequence_length,
                                                  !batch.weights.empty())),
                   std::move(payload)};
    }
    case fb::Body::SeedTable: {
      const fb::SeedTable* q = h->body_as_SeedTable();
      REPLAYDB_ASSIGN_OR_RETURN(auto table, db.GetTable(Name(q->table())));
      REPLAYDB_RETURN_IF_ERROR(table->Seed(q->seed()));
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    }
    default:
      return Status::NotSupported(
          "this server does not serve requests of kind '" +
          std::string(fb::EnumNameBody(h->body_type())) + "'");
  }
}

}  // namespace

struct DbService::Writer {
  std::mutex mu;  // one call at a time (a client waits for each reply)
  std::shared_ptr<Table> table;
  std::unique_ptr<TrajectoryWriter> writer;
};

DbService::DbService(DB* db) : db_(db) {}
DbService::~DbService() = default;

void ServeWith(DbService* service, RpcServerOptions* options, RequestHandler* handler) {
  *handler = [service](Request& r) { return service->Handle(r); };
  options->on_disconnect = [service](ConnectionId c) { service->Disconnected(c); };
}

size_t DbService::open_writers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writers_.size();
}

void DbService::Disconnected(ConnectionId connection) {
  std::vector<std::shared_ptr<Writer>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = writers_.lower_bound({connection, 0});
    while (it != writers_.end() && it->first.first == connection) {
      gone.push_back(std::move(it->second));
      it = writers_.erase(it);
    }
  }
  // Destroyed here, each once no call holds it: an open trajectory ends
  // truncated, as a local writer's destructor ends it.
}

Result<Reply> DbService::Handle(Request& r) {
  switch (r.message.header()->body_type()) {
    case fb::Body::NewWriter:
    case fb::Body::AppendStep:
    case fb::Body::EndTrajectory:
    case fb::Body::CloseWriter:
      return HandleWriter(r);
    default:
      return HandleTables(*db_, r);
  }
}

Result<Reply> DbService::HandleWriter(Request& r) {
  const fb::Header* h = r.message.header();
  HeaderFields f;
  f.request_id = h->request_id();
  f.table_id = h->table_id();
  flatbuffers::FlatBufferBuilder b(128);
  b.ForceDefaults(true);
  if (h->body_type() == fb::Body::NewWriter) {
    REPLAYDB_ASSIGN_OR_RETURN(auto table, db_->GetTable(Name(h->body_as_NewWriter()->table())));
    auto w = std::make_shared<Writer>();
    REPLAYDB_ASSIGN_OR_RETURN(w->writer, table->NewWriter());
    w->table = std::move(table);
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = next_writer_++;
      writers_[{r.connection, id}] = std::move(w);
    }
    return Reply{EncodeHeader(b, f, fb::Body::WriterOpened, fb::CreateWriterOpened(b, id)), ""};
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
  std::lock_guard<std::mutex> lock(w->mu);
  switch (h->body_type()) {
    case fb::Body::AppendStep: {
      const fb::AppendStep* q = h->body_as_AppendStep();
      const TableSpec spec = w->table->spec();
      size_t want = 0;
      for (const ColumnSpec& c : spec.columns) want += c.step_bytes();
      const std::string& payload = r.message.payload;
      if (payload.size() != want) {
        return Status::InvalidArgument("table '" + spec.name + "': a remote step of " +
                                       std::to_string(payload.size()) + " bytes; its columns " +
                                       "take " + std::to_string(want));
      }
      std::vector<ConstTensor> step;
      size_t at = 0;
      for (const ColumnSpec& c : spec.columns) {
        step.push_back({c.dtype, c.shape, reinterpret_cast<const std::byte*>(payload.data() + at),
                        c.step_bytes()});
        at += c.step_bytes();
      }
      REPLAYDB_RETURN_IF_ERROR(w->writer->Append(
          step, q->has_priority() ? std::optional<double>(q->priority()) : std::nullopt));
      return Reply{EncodeHeader(b, f, fb::Body::Appended,
                                fb::CreateAppended(b, w->writer->trajectory_id(),
                                                   w->writer->num_steps())),
                   ""};
    }
    case fb::Body::EndTrajectory: {
      const uint8_t reason = h->body_as_EndTrajectory()->reason();
      REPLAYDB_RETURN_IF_ERROR(w->writer->End(static_cast<EndReason>(reason)));
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
    }
    default:  // CloseWriter: gone from the map; destroyed with the last hold
      return Reply{EncodeHeader(b, f, fb::Body::Done, fb::CreateDone(b)), ""};
  }
}

std::string EncodeSamplePayload(const SampleBatch& batch) {
  size_t bytes = batch.keys.size() * (8 + 8 + 8 + 4) + batch.weights.size() * 8 +
                 batch.mask.size();
  for (const Tensor& c : batch.columns) bytes += c.size_bytes();
  std::string out;
  out.reserve(bytes);
  Put(&out, batch.keys);
  Put(&out, batch.probabilities);
  Put(&out, batch.priorities);
  Put(&out, batch.weights);
  Put(&out, batch.times_sampled);
  Put(&out, batch.mask);
  for (const Tensor& c : batch.columns) {
    if (c.size_bytes() > 0) out.append(reinterpret_cast<const char*>(c.data()), c.size_bytes());
  }
  return out;
}

Status DecodeSamplePayload(std::string_view payload, const TableSpec& spec, int64_t batch_size,
                           int64_t sequence_length, bool has_weights, const std::string& from,
                           SampleBatch* out) {
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
  b.batch_size = batch_size;
  b.sequence_length = sequence_length;
  if (!Take(&in, n, &b.keys) || !Take(&in, n, &b.probabilities) ||
      !Take(&in, n, &b.priorities) || !Take(&in, has_weights ? n : 0, &b.weights) ||
      !Take(&in, n, &b.times_sampled) ||
      !Take(&in, n * static_cast<size_t>(sequence_length), &b.mask)) {
    return bad("too short for the items' keys, probabilities, priorities and mask");
  }
  b.columns.resize(spec.columns.size());
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    const ColumnSpec& col = spec.columns[c];
    std::vector<int64_t> dims = {batch_size, sequence_length};
    for (const int64_t d : col.shape.dims()) dims.push_back(d);
    // (n * L is at most the payload's size: the mask was there.)
    size_t bytes = 0;
    if (__builtin_mul_overflow(n * static_cast<size_t>(sequence_length), col.step_bytes(),
                               &bytes) ||
        bytes > in.size()) {
      return bad("too short for column '" + col.name + "'");
    }
    b.columns[c].Reset(col.dtype, Shape::FromSpan(dims));
    if (bytes > 0) std::memcpy(b.columns[c].data(), in.data(), bytes);
    in.remove_prefix(bytes);
  }
  if (!in.empty()) return bad(std::to_string(in.size()) + " bytes more than the batch holds");
  *out = std::move(b);
  return Status::OK();
}

}  // namespace replaydb::rdma
