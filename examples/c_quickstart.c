/* replaydb from C: a table of transitions, one writer, one sample.
 * cc c_quickstart.c $(pkg-config --cflags --libs replaydb) -o c_quickstart */
#include <stdint.h>
#include <stdio.h>

#include "replaydb/c.h"

/* Prints what failed and why, and frees the message. */
static int fail(const char* what, char* err) {
  fprintf(stderr, "%s: %s\n", what, err != NULL ? err : "(no message)");
  replaydb_free(err);
  return 1;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "/tmp/c-quickstart-db";
  char* err = NULL;
  replaydb_db_t* db = NULL;
  if (replaydb_open(NULL, path, &db, &err) != REPLAYDB_OK) return fail("open", err);

  const int64_t obs_dims[1] = {4};
  replaydb_table_spec_t* spec = replaydb_table_spec_create("transitions");
  if (replaydb_table_spec_add_column(spec, "obs", REPLAYDB_F32, 1, obs_dims, &err) != 0 ||
      replaydb_table_spec_add_column(spec, "action", REPLAYDB_I32, 0, NULL, &err) != 0) {
    return fail("add_column", err);
  }
  replaydb_table_spec_set_capacity_steps(spec, 100000);
  replaydb_table_spec_set_sequence_length(spec, 2); /* items: two consecutive steps */
  replaydb_drop_table(db, "transitions", NULL);     /* start afresh on every run */
  replaydb_table_t* table = NULL;
  const int created = replaydb_create_table(db, spec, &table, &err);
  replaydb_table_spec_destroy(spec);
  if (created != REPLAYDB_OK) return fail("create_table", err);

  replaydb_writer_t* writer = NULL;
  if (replaydb_table_new_writer(table, REPLAYDB_WAIT_FOREVER, 0, &writer, &err) != 0) {
    return fail("new_writer", err);
  }
  for (int t = 0; t < 10; ++t) {
    const float obs[4] = {1.0f * t, 2.0f, 3.0f, 4.0f};
    const int32_t action = t % 3;
    const replaydb_tensor_t step[2] = {{REPLAYDB_F32, 1, obs_dims, obs, sizeof obs},
                                       {REPLAYDB_I32, 0, NULL, &action, sizeof action}};
    if (replaydb_writer_append(writer, step, 2, NULL, &err) != 0) return fail("append", err);
  }
  if (replaydb_writer_end(writer, REPLAYDB_TERMINAL, &err) != 0) return fail("end", err);
  replaydb_writer_destroy(writer);

  replaydb_batch_t* batch = NULL;
  if (replaydb_table_sample(table, 4, NULL, &batch, &err) != 0) return fail("sample", err);
  replaydb_array_t obs, keys;
  if (replaydb_batch_field(batch, "obs", &obs, &err) != 0 ||
      replaydb_batch_field(batch, "keys", &keys, &err) != 0) {
    return fail("batch_field", err);
  }
  const float* o = obs.data; /* [4, 2, 4]: item, step, value */
  const uint64_t* k = keys.data;
  for (int b = 0; b < 4; ++b) {
    const uint64_t start = k[b] & ((UINT64_C(1) << REPLAYDB_ITEM_KEY_START_BITS) - 1);
    printf("item %d: trajectory %llu, steps %llu..%llu, obs[0] = %.0f, %.0f\n", b,
           (unsigned long long)(k[b] >> REPLAYDB_ITEM_KEY_START_BITS), (unsigned long long)start,
           (unsigned long long)start + 1, o[b * 8], o[b * 8 + 4]);
  }
  printf("sampled %lld items\n", (long long)replaydb_batch_size(batch));
  replaydb_batch_release(batch);
  replaydb_table_release(table);
  replaydb_close(db);
  return 0;
}
