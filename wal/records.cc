// RecordBuilder and the payload decoders (wal/records.h).
#include "wal/records.h"

#include <flatbuffers/flatbuffers.h>

#include <cstring>
#include <string>

#include "wal/wal_generated.h"

namespace replaydb::wal {

namespace {

// Payloads are verified at this alignment (the widest scalar in wal.fbs);
// LogReader hands them out 16-byte aligned.
constexpr uintptr_t kPayloadAlignment = 8;

template <typename T>
flatbuffers::Offset<flatbuffers::Vector<T>> CreateVector(flatbuffers::FlatBufferBuilder& b,
                                                          std::span<const T> v) {
  return b.CreateVector(v.data(), v.size());
}

// The verifier checks the alignment of a vector's length, not of its
// elements, so 8-byte elements of a damaged (but verifying) payload may be
// misaligned: copy them out rather than load them in place.
template <typename T>
std::vector<T> ToVector(const flatbuffers::Vector<T>* v) {
  if (v == nullptr) return {};
  std::vector<T> out(v->size());
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  for (T& x : out) x = flatbuffers::EndianScalar(x);
  return out;
}

template <typename T>
size_t SizeOf(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

Status Bad(std::string_view type, std::string_view what) {
  std::string msg(type);
  msg += " record: ";
  msg += what;
  return Status::Corruption(std::move(msg));
}

// The verified root table of `payload`, or nullptr with *status set.
template <typename T>
const T* Root(std::span<const std::byte> payload, std::string_view type, Status* status) {
  if (reinterpret_cast<uintptr_t>(payload.data()) % kPayloadAlignment != 0) {
    *status = Status::InvalidArgument(std::string(type) +
                                      " record: payload is not 8-byte aligned");
    return nullptr;
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(payload.data());
  if (payload.size() < sizeof(flatbuffers::uoffset_t) ||
      payload.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    *status = Bad(type, "payload of " + std::to_string(payload.size()) +
                            " bytes is not a FlatBuffer");
    return nullptr;
  }
  flatbuffers::Verifier verifier(bytes, payload.size());
  if (!verifier.VerifyBuffer<T>(nullptr)) {
    *status = Bad(type, "payload fails FlatBuffers verification");
    return nullptr;
  }
  return flatbuffers::GetRoot<T>(bytes);
}

}  // namespace

struct RecordBuilder::Impl {
  flatbuffers::FlatBufferBuilder fbb{1024};

  void Start() {
    fbb.Clear();
    // Every scalar is stored, so a log never depends on schema defaults.
    fbb.ForceDefaults(true);
    // Pad the finished buffer to a multiple of 8 bytes, so payload() starts
    // 8-byte aligned (as Decode requires) whatever the table holds.
    fbb.TrackMinAlign(8);
  }
};

RecordBuilder::RecordBuilder() : impl_(std::make_unique<Impl>()) {}
RecordBuilder::~RecordBuilder() = default;

void RecordBuilder::CreateTable(const CreateTableRecord& r) {
  auto& b = impl_->fbb;
  impl_->Start();
  const auto spec = b.CreateVector(reinterpret_cast<const uint8_t*>(r.spec.data()), r.spec.size());
  b.Finish(fb::CreateCreateTable(b, r.table_id, spec));
}

void RecordBuilder::DropTable(const DropTableRecord& r) {
  auto& b = impl_->fbb;
  impl_->Start();
  b.Finish(fb::CreateDropTable(b, r.table_id));
}

std::byte* RecordBuilder::AppendSteps(uint32_t table_id, uint32_t step_bytes,
                                      std::span<const uint64_t> trajectory_ids,
                                      std::span<const int64_t> steps,
                                      std::span<const double> priorities, uint64_t writer_key,
                                      std::span<const uint64_t> writer_keys) {
  auto& b = impl_->fbb;
  impl_->Start();
  const size_t data_bytes = trajectory_ids.size() * size_t{step_bytes};
  // Finish may move the buffer, so the data's address is looked up in the
  // finished buffer rather than kept from CreateUninitializedVector.
  const auto ids = CreateVector(b, trajectory_ids);
  const auto st = CreateVector(b, steps);
  const auto pr = CreateVector(b, priorities);
  b.ForceVectorAlignment(data_bytes, 1, 16);
  uint8_t* unused = nullptr;
  const auto data = b.CreateUninitializedVector(data_bytes, &unused);
  const auto keys = writer_keys.empty() ? flatbuffers::Offset<flatbuffers::Vector<uint64_t>>()
                                        : CreateVector(b, writer_keys);
  // (CreateAppendSteps' order, so that a record without a writer key
  // keeps the bytes it had before the field.)
  fb::AppendStepsBuilder builder(b);
  if (writer_key != 0) builder.add_writer_key(writer_key);
  if (!writer_keys.empty()) builder.add_writer_keys(keys);
  builder.add_data(data);
  builder.add_priorities(pr);
  builder.add_steps(st);
  builder.add_trajectory_ids(ids);
  builder.add_step_bytes(step_bytes);
  builder.add_table_id(table_id);
  b.Finish(builder.Finish());
  auto* root = flatbuffers::GetMutableRoot<fb::AppendSteps>(b.GetBufferPointer());
  // data() of a just-built table is never null; the cast only drops const.
  return reinterpret_cast<std::byte*>(const_cast<uint8_t*>(root->data()->data()));
}

void RecordBuilder::EndTrajectory(const EndTrajectoryRecord& r) {
  auto& b = impl_->fbb;
  impl_->Start();
  b.Finish(fb::CreateEndTrajectory(b, r.table_id, r.trajectory_id, r.reason));
}

void RecordBuilder::UpdatePriorities(uint32_t table_id, std::span<const uint64_t> keys,
                                     std::span<const double> priorities) {
  auto& b = impl_->fbb;
  impl_->Start();
  const auto k = CreateVector(b, keys);
  const auto p = CreateVector(b, priorities);
  b.Finish(fb::CreateUpdatePriorities(b, table_id, k, p));
}

void RecordBuilder::RemoveItems(uint32_t table_id, std::span<const uint64_t> keys,
                                bool deleted) {
  auto& b = impl_->fbb;
  impl_->Start();
  const auto k = CreateVector(b, keys);
  // `deleted` only when true: records of sampled-away items keep the bytes
  // they had before the field (tests/wal/testdata; FORMAT.md).
  fb::RemoveItemsBuilder builder(b);
  builder.add_keys(k);
  builder.add_table_id(table_id);
  if (deleted) builder.add_deleted(true);
  b.Finish(builder.Finish());
}

void RecordBuilder::RemoveTrajectory(const RemoveTrajectoryRecord& r) {
  auto& b = impl_->fbb;
  impl_->Start();
  b.Finish(fb::CreateRemoveTrajectory(b, r.table_id, r.trajectory_id, r.evicted));
}

void RecordBuilder::ClearTable(const ClearTableRecord& r) {
  auto& b = impl_->fbb;
  impl_->Start();
  b.Finish(fb::CreateClearTable(b, r.table_id, r.below_trajectory_id));
}

void RecordBuilder::ItemClock(const ItemClockRecord& r) {
  auto& b = impl_->fbb;
  impl_->Start();
  b.Finish(fb::CreateItemClock(b, r.table_id, r.time_ns));
}

std::span<const std::byte> RecordBuilder::payload() const {
  return {reinterpret_cast<const std::byte*>(impl_->fbb.GetBufferPointer()),
          impl_->fbb.GetSize()};
}

Status Decode(std::span<const std::byte> payload, CreateTableRecord* out) {
  Status s;
  const auto* r = Root<fb::CreateTable>(payload, "CreateTable", &s);
  if (r == nullptr) return s;
  out->table_id = r->table_id();
  out->spec.clear();
  if (r->spec() != nullptr) {
    out->spec.assign(reinterpret_cast<const char*>(r->spec()->data()), r->spec()->size());
  }
  return Status::OK();
}

Status Decode(std::span<const std::byte> payload, DropTableRecord* out) {
  Status s;
  const auto* r = Root<fb::DropTable>(payload, "DropTable", &s);
  if (r == nullptr) return s;
  out->table_id = r->table_id();
  return Status::OK();
}

Status Decode(std::span<const std::byte> payload, AppendStepsRecord* out) {
  Status s;
  const auto* r = Root<fb::AppendSteps>(payload, "AppendSteps", &s);
  if (r == nullptr) return s;
  const size_t n = SizeOf(r->trajectory_ids());
  if (SizeOf(r->steps()) != n) {
    return Bad("AppendSteps", std::to_string(n) + " trajectory ids but " +
                                  std::to_string(SizeOf(r->steps())) + " steps");
  }
  const size_t np = SizeOf(r->priorities());
  if (np != 0 && np != n) {
    return Bad("AppendSteps",
               std::to_string(np) + " priorities for " + std::to_string(n) + " entries");
  }
  const size_t nk = SizeOf(r->writer_keys());
  if (nk != 0 && nk != n) {
    return Bad("AppendSteps",
               std::to_string(nk) + " writer keys for " + std::to_string(n) + " entries");
  }
  // n < 2^32 (a verified vector fits the buffer), so this cannot overflow.
  const uint64_t want = uint64_t{n} * r->step_bytes();
  const size_t have = SizeOf(r->data());
  if (have != want) {
    return Bad("AppendSteps", "data holds " + std::to_string(have) + " bytes, expected " +
                                  std::to_string(n) + " entries x " +
                                  std::to_string(r->step_bytes()) + " step bytes = " +
                                  std::to_string(want));
  }
  out->table_id = r->table_id();
  out->step_bytes = r->step_bytes();
  out->trajectory_ids = ToVector(r->trajectory_ids());
  out->steps = ToVector(r->steps());
  out->priorities = ToVector(r->priorities());
  out->data = have == 0 ? std::span<const std::byte>()
                        : std::span<const std::byte>(
                              reinterpret_cast<const std::byte*>(r->data()->data()), have);
  out->writer_key = r->writer_key();
  out->writer_keys = ToVector(r->writer_keys());
  return Status::OK();
}

namespace {

// The entries' id and step vectors of a verified AppendSteps payload, as
// bytes of `payload` that may be written; Corruption as Decode's when the
// payload does not verify or the two differ in length.
Status EntryFields(std::span<std::byte> payload, std::byte** ids, std::byte** steps, size_t* n) {
  Status s;
  const auto* r = Root<fb::AppendSteps>(payload, "AppendSteps", &s);
  if (r == nullptr) return s;
  *n = SizeOf(r->trajectory_ids());
  if (SizeOf(r->steps()) != *n) {
    return Bad("AppendSteps", std::to_string(*n) + " trajectory ids but " +
                                  std::to_string(SizeOf(r->steps())) + " steps");
  }
  if (*n == 0) return Status::OK();
  // The verified vectors lie inside `payload`: their bytes are its bytes.
  const auto in_payload = [&](const void* p) {
    return payload.data() + (static_cast<const std::byte*>(p) - payload.data());
  };
  *ids = in_payload(r->trajectory_ids()->Data());
  *steps = in_payload(r->steps()->Data());
  return Status::OK();
}

}  // namespace

Status FillAppendSteps(std::span<std::byte> payload, uint64_t trajectory_id,
                       int64_t first_step) {
  std::byte* ids = nullptr;
  std::byte* steps = nullptr;
  size_t n = 0;
  REPLAYDB_RETURN_IF_ERROR(EntryFields(payload, &ids, &steps, &n));
  const uint64_t id = flatbuffers::EndianScalar(trajectory_id);
  for (size_t i = 0; i < n; ++i) {
    const int64_t step = flatbuffers::EndianScalar(first_step + static_cast<int64_t>(i));
    std::memcpy(ids + i * sizeof(id), &id, sizeof(id));
    std::memcpy(steps + i * sizeof(step), &step, sizeof(step));
  }
  return Status::OK();
}

Status FillAppendSteps(std::span<std::byte> payload, std::span<const uint64_t> trajectory_ids,
                       std::span<const int64_t> step_numbers) {
  std::byte* ids = nullptr;
  std::byte* steps = nullptr;
  size_t n = 0;
  REPLAYDB_RETURN_IF_ERROR(EntryFields(payload, &ids, &steps, &n));
  if (trajectory_ids.size() != n || step_numbers.size() != n) {
    return Status::InvalidArgument("AppendSteps record of " + std::to_string(n) +
                                   " entries given " + std::to_string(trajectory_ids.size()) +
                                   " trajectory ids and " + std::to_string(step_numbers.size()) +
                                   " step numbers");
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = flatbuffers::EndianScalar(trajectory_ids[i]);
    const int64_t step = flatbuffers::EndianScalar(step_numbers[i]);
    std::memcpy(ids + i * sizeof(id), &id, sizeof(id));
    std::memcpy(steps + i * sizeof(step), &step, sizeof(step));
  }
  return Status::OK();
}

Status Decode(std::span<const std::byte> payload, EndTrajectoryRecord* out) {
  Status s;
  const auto* r = Root<fb::EndTrajectory>(payload, "EndTrajectory", &s);
  if (r == nullptr) return s;
  out->table_id = r->table_id();
  out->trajectory_id = r->trajectory_id();
  out->reason = r->reason();
  return Status::OK();
}

Status Decode(std::span<const std::byte> payload, UpdatePrioritiesRecord* out) {
  Status s;
  const auto* r = Root<fb::UpdatePriorities>(payload, "UpdatePriorities", &s);
  if (r == nullptr) return s;
  if (SizeOf(r->keys()) != SizeOf(r->priorities())) {
    return Bad("UpdatePriorities", std::to_string(SizeOf(r->keys())) + " keys but " +
                                       std::to_string(SizeOf(r->priorities())) + " priorities");
  }
  out->table_id = r->table_id();
  out->keys = ToVector(r->keys());
  out->priorities = ToVector(r->priorities());
  return Status::OK();
}

Status Decode(std::span<const std::byte> payload, RemoveItemsRecord* out) {
  Status s;
  const auto* r = Root<fb::RemoveItems>(payload, "RemoveItems", &s);
  if (r == nullptr) return s;
  out->table_id = r->table_id();
  out->keys = ToVector(r->keys());
  out->deleted = r->deleted();
  return Status::OK();
}

Status Decode(std::span<const std::byte> payload, RemoveTrajectoryRecord* out) {
  Status s;
  const auto* r = Root<fb::RemoveTrajectory>(payload, "RemoveTrajectory", &s);
  if (r == nullptr) return s;
  out->table_id = r->table_id();
  out->trajectory_id = r->trajectory_id();
  out->evicted = r->evicted();
  return Status::OK();
}

Status Decode(std::span<const std::byte> payload, ClearTableRecord* out) {
  Status s;
  const auto* r = Root<fb::ClearTable>(payload, "ClearTable", &s);
  if (r == nullptr) return s;
  out->table_id = r->table_id();
  out->below_trajectory_id = r->below_trajectory_id();
  return Status::OK();
}

Status Decode(std::span<const std::byte> payload, ItemClockRecord* out) {
  Status s;
  const auto* r = Root<fb::ItemClock>(payload, "ItemClock", &s);
  if (r == nullptr) return s;
  out->table_id = r->table_id();
  out->time_ns = r->time_ns();
  return Status::OK();
}

}  // namespace replaydb::wal
