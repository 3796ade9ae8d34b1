// replaydb quick start: a table of transitions, one writer, one sample.
#include <cstdio>
#include <vector>

#include "replaydb/db.h"

using namespace replaydb;

int main(int argc, char** argv) {
  auto db = DB::Open({}, argc > 1 ? argv[1] : "/tmp/quickstart-db");
  if (!db.ok()) return std::puts(db.status().ToString().c_str()), 1;

  TableSpec spec;
  spec.name = "transitions";
  spec.columns = {{"obs", DType::kF32, {4}}, {"action", DType::kI32, {}}};
  spec.capacity_steps = 100'000;
  spec.sequence_length = 2;  // items are windows of two consecutive steps
  (void)(*db)->DropTable(spec.name);  // start afresh on every run
  auto table = (*db)->CreateTable(spec);
  if (!table.ok()) return std::puts(table.status().ToString().c_str()), 1;

  auto writer = (*table)->NewWriter();
  if (!writer.ok()) return std::puts(writer.status().ToString().c_str()), 1;
  for (int t = 0; t < 10; ++t) {
    std::vector<float> obs = {1.0f * t, 2.0f, 3.0f, 4.0f};
    int action = t % 3;
    const ConstTensor step[] = {{DType::kF32, {4}, obs.data(), sizeof(float) * 4},
                                {DType::kI32, {}, &action, sizeof(int)}};
    Status s = (*writer)->Append(step);
    if (!s.ok()) return std::puts(s.ToString().c_str()), 1;
  }
  (void)(*writer)->End(EndReason::kTerminal);

  auto batch = (*table)->Sample(/*batch_size=*/4);
  if (!batch.ok()) return std::puts(batch.status().ToString().c_str()), 1;
  const float* obs = batch->columns[0].data_as<float>();  // [4, 2, 4]
  for (int b = 0; b < 4; ++b) {
    std::printf("item %d: trajectory %llu, steps %lld..%lld, obs[0] = %.0f, %.0f\n", b,
                static_cast<unsigned long long>(ItemKeyTrajectory(batch->keys[b])),
                static_cast<long long>(ItemKeyStart(batch->keys[b])),
                static_cast<long long>(ItemKeyStart(batch->keys[b]) + 1), obs[b * 8],
                obs[b * 8 + 4]);
  }
  return 0;
}
