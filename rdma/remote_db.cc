#include "rdma/remote_db.h"

#include <charconv>

#include "engine/db/catalog.h"
#include "rdma/db_service.h"

namespace replaydb::rdma {
namespace {

namespace fb = wire::fb;

// The reply's body, checked to be of `kind`.
Status ExpectBody(const Message& m, fb::Body kind, const std::string& what) {
  if (m.header()->body_type() != kind) {
    return Status::Corruption(what + ": the server answered with a body of kind '" +
                              std::string(fb::EnumNameBody(m.header()->body_type())) +
                              "', not '" + fb::EnumNameBody(kind) + "'");
  }
  return Status::OK();
}

}  // namespace

Status ParseAddress(const std::string& address, std::string* host, uint16_t* port) {
  std::string rest = address;
  const std::string scheme = "ucx://";
  if (rest.rfind(scheme, 0) == 0) rest = rest.substr(scheme.size());
  const size_t colon = rest.rfind(':');
  unsigned value = 0;
  const char* end = rest.data() + rest.size();
  if (colon == std::string::npos || colon == 0 ||
      std::from_chars(rest.data() + colon + 1, end, value).ptr != end || value == 0 ||
      value > 65535) {
    return Status::InvalidArgument("address '" + address +
                                   "' is not ucx://HOST:PORT (a port from 1 to 65535)");
  }
  *host = rest.substr(0, colon);
  *port = static_cast<uint16_t>(value);
  return Status::OK();
}

Result<std::unique_ptr<RemoteDB>> RemoteDB::Connect(const std::string& address,
                                                   const RemoteOptions& options) {
  std::string host;
  uint16_t port = 0;
  REPLAYDB_RETURN_IF_ERROR(ParseAddress(address, &host, &port));
  RpcClientOptions o;
  o.client_name = options.client_name;
  o.connect_timeout = options.connect_timeout;
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<RpcClient> client, RpcClient::Connect(host, port, o));
  return std::unique_ptr<RemoteDB>(
      new RemoteDB(std::shared_ptr<RpcClient>(std::move(client)), address, options));
}

Result<std::vector<std::string>> RemoteDB::ListTables() {
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, client_->Call(
                     [](const HeaderFields& f) {
                       flatbuffers::FlatBufferBuilder b(64);
                       b.ForceDefaults(true);
                       return EncodeHeader(b, f, fb::Body::ListTables, fb::CreateListTables(b));
                     },
                     "", options_.call_timeout));
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::TableList, "listing the tables of " + address_));
  std::vector<std::string> names;
  if (const auto* v = m.header()->body_as_TableList()->names()) {
    for (const auto* n : *v) names.push_back(n->str());
  }
  return names;
}

Result<std::shared_ptr<RemoteTable>> RemoteDB::GetTable(const std::string& name) {
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, client_->Call(
                     [&](const HeaderFields& f) {
                       flatbuffers::FlatBufferBuilder b(128);
                       b.ForceDefaults(true);
                       const auto n = b.CreateString(name);
                       return EncodeHeader(b, f, fb::Body::OpenTable, fb::CreateOpenTable(b, n));
                     },
                     "", options_.call_timeout));
  const std::string what = "opening table '" + name + "' of " + address_;
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::TableOpened, what));
  const auto* spec = m.header()->body_as_TableOpened()->spec();
  std::vector<TableSpec> tables;
  REPLAYDB_RETURN_IF_ERROR(engine::DecodeCatalog(
      spec == nullptr ? std::string_view()
                      : std::string_view(reinterpret_cast<const char*>(spec->data()), spec->size()),
      what, &tables));
  if (tables.size() != 1) return Status::Corruption(what + ": the reply holds no one table spec");
  return std::shared_ptr<RemoteTable>(new RemoteTable(client_, std::move(tables[0])));
}

Status RemoteTable::Sample(int64_t batch_size, const SampleOptions& options, SampleBatch* out) {
  if (!options.gather) {
    return Status::NotSupported("table '" + name() + "': a remote sample always gathers "
                                "(gather = false is not served)");
  }
  // The reply may take the rate limiter's wait and then the transfer.
  const std::chrono::milliseconds wait =
      options.timeout.count() < 0 ? std::chrono::milliseconds(-1)
                                  : options.timeout + std::chrono::milliseconds(30000);
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m,
      client_->Call(
          [&](const HeaderFields& f) {
            flatbuffers::FlatBufferBuilder b(128);
            b.ForceDefaults(true);
            const auto t = b.CreateString(name());
            HeaderFields g = f;
            g.timeout_ms = options.timeout.count() < 0 ? -1 : options.timeout.count();
            return EncodeHeader(
                b, g, fb::Body::Sample,
                fb::CreateSample(b, t, batch_size, options.importance_beta,
                                 static_cast<uint8_t>(options.weight_normalization),
                                 options.stratified, options.peek));
          },
          "", wait));
  const std::string what = "sample of table '" + name() + "' from " + client_->address();
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::Sampled, what));
  const fb::Sampled* s = m.header()->body_as_Sampled();
  return DecodeSamplePayload(m.payload, spec_, s->batch_size(), s->sequence_length(),
                             s->has_weights(), client_->address(), out);
}

namespace {

template <typename Build>
std::function<std::string(const HeaderFields&)> Encoder(fb::Body kind, Build build) {
  return [kind, build](const HeaderFields& f) {
    flatbuffers::FlatBufferBuilder b(128);
    b.ForceDefaults(true);
    return EncodeHeader(b, f, kind, build(b));
  };
}

constexpr std::chrono::milliseconds kWriterCallTimeout{60000};

}  // namespace

Result<std::unique_ptr<RemoteWriter>> RemoteTable::NewWriter() {
  const std::string table = name();
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, client_->Call(Encoder(fb::Body::NewWriter,
                                       [&](flatbuffers::FlatBufferBuilder& b) {
                                         return fb::CreateNewWriter(b, b.CreateString(table));
                                       }),
                               "", kWriterCallTimeout));
  REPLAYDB_RETURN_IF_ERROR(
      ExpectBody(m, fb::Body::WriterOpened, "a writer of table '" + table + "'"));
  return std::unique_ptr<RemoteWriter>(
      new RemoteWriter(client_, &spec_, m.header()->body_as_WriterOpened()->writer()));
}

RemoteWriter::~RemoteWriter() {
  const uint64_t id = id_;
  // Best effort: a connection that is gone has ended the writer already.
  (void)client_->Call(Encoder(fb::Body::CloseWriter,
                              [id](flatbuffers::FlatBufferBuilder& b) {
                                return fb::CreateCloseWriter(b, id);
                              }),
                      "", std::chrono::milliseconds(10000));
}

Status RemoteWriter::Append(std::span<const ConstTensor> step, std::optional<double> priority) {
  const TableSpec& spec = *spec_;
  if (step.size() != spec.columns.size()) {
    return Status::InvalidArgument("table '" + spec.name + "': step has " +
                                   std::to_string(step.size()) + " tensors, the table " +
                                   std::to_string(spec.columns.size()) + " columns");
  }
  step_.clear();
  for (size_t c = 0; c < step.size(); ++c) {
    const ColumnSpec& col = spec.columns[c];
    if (step[c].dtype != col.dtype || !(step[c].shape == col.shape) ||
        step[c].size_bytes != col.step_bytes()) {
      return Status::InvalidArgument("table '" + spec.name + "': step, column '" + col.name +
                                     "' expects dtype " + std::string(DTypeName(col.dtype)) +
                                     " and shape " + col.shape.ToString() + ", got " +
                                     std::string(DTypeName(step[c].dtype)) + " " +
                                     step[c].shape.ToString());
    }
    if (step[c].size_bytes > 0) {
      step_.append(static_cast<const char*>(step[c].data), step[c].size_bytes);
    }
  }
  const uint64_t id = id_;
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, client_->Call(Encoder(fb::Body::AppendStep,
                                       [&](flatbuffers::FlatBufferBuilder& b) {
                                         return fb::CreateAppendStep(b, id, priority.has_value(),
                                                                     priority.value_or(0));
                                       }),
                               step_, kWriterCallTimeout));
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::Appended, "an append to '" + spec.name + "'"));
  trajectory_id_ = m.header()->body_as_Appended()->trajectory_id();
  num_steps_ = m.header()->body_as_Appended()->num_steps();
  return Status::OK();
}

Status RemoteWriter::End(EndReason reason) {
  const uint64_t id = id_;
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, client_->Call(Encoder(fb::Body::EndTrajectory,
                                       [&](flatbuffers::FlatBufferBuilder& b) {
                                         return fb::CreateEndTrajectory(
                                             b, id, static_cast<uint8_t>(reason));
                                       }),
                               "", kWriterCallTimeout));
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::Done, "ending a trajectory of '" +
                                                            spec_->name + "'"));
  num_steps_ = 0;
  return Status::OK();
}

Status RemoteTable::Seed(uint64_t seed) {
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, client_->Call(
                     [&](const HeaderFields& f) {
                       flatbuffers::FlatBufferBuilder b(128);
                       b.ForceDefaults(true);
                       const auto t = b.CreateString(name());
                       return EncodeHeader(b, f, fb::Body::SeedTable,
                                           fb::CreateSeedTable(b, t, seed));
                     },
                     "", std::chrono::milliseconds(60000)));
  return ExpectBody(m, fb::Body::Done, "seeding table '" + name() + "'");
}

}  // namespace replaydb::rdma
