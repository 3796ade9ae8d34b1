/* replaydb's C API: a plain C interface over the public C++ API
 * (include/replaydb/db.h, table.h), for bindings (the Python package in
 * python/ loads it through ctypes) and for C programs. Implemented in
 * capi/c.cc; shipped as the shared library libreplaydb.so with
 * replaydb.pc (pkg-config) and a CMake package (find_package(replaydb),
 * target replaydb::replaydb).
 *
 * Conventions, in the manner of LevelDB's and RocksDB's c.h:
 * - Every object is an opaque handle, created by a *_create / *_open / *_new
 *   call and given back by the matching *_destroy / *_close / *_release.
 *   Passing NULL to those is a no-op.
 * - A call that can fail returns an int status code (REPLAYDB_OK, 0, on
 *   success; otherwise one of the REPLAYDB_* codes below, the C++
 *   Status::Code) and takes `char** errptr` last. On failure *errptr is set
 *   to a malloc'ed message (a string that was there is freed first); free it
 *   with replaydb_free. On success *errptr is left alone. errptr may be NULL
 *   when the caller does not want the message. A handle out-parameter
 *   (`replaydb_db_t** db`, `replaydb_batch_t** batch`, ...) is set to NULL
 *   on failure. Checks only the C layer makes (NULL pointers, counts, enum
 *   names) fail with InvalidArgument naming the function and the argument,
 *   e.g. "replaydb_writer_append: step is NULL"; all other messages are the
 *   C++ Status message, which names the table, column and values.
 * - Strings and arrays the API returns are malloc'ed and belong to the
 *   caller (replaydb_free, replaydb_free_strings); pointers that accessors
 *   return (batch data, shapes, names) belong to the object and stay valid
 *   while it does.
 * - Strings passed in are copied; pointers passed in are only read during
 *   the call, except device inputs, which queued GPU work reads later (see
 *   replaydb_vector_writer_append_from_device).
 * - Device pointers and streams: a stream is a cudaStream_t passed as
 *   void* (NULL: the legacy default stream).
 *
 * Thread safety: databases, tables and batches may be used from any number
 * of threads at once. A writer, vector writer or sampler is used by one
 * thread at a time. Releasing handles is thread-safe.
 */
#ifndef REPLAYDB_C_H_
#define REPLAYDB_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define REPLAYDB_C_EXPORT __attribute__((visibility("default")))
#else
#define REPLAYDB_C_EXPORT
#endif

/* ---- status codes: the values of replaydb::Status::Code ---- */
enum {
  REPLAYDB_OK = 0,
  REPLAYDB_INVALID_ARGUMENT = 1,
  REPLAYDB_NOT_FOUND = 2,
  REPLAYDB_ALREADY_EXISTS = 3,
  REPLAYDB_RESOURCE_EXHAUSTED = 4,
  REPLAYDB_DEADLINE_EXCEEDED = 5,
  REPLAYDB_CANCELLED = 6,
  REPLAYDB_FAILED_PRECONDITION = 7,
  REPLAYDB_BUSY = 8,
  REPLAYDB_IO_ERROR = 9,
  REPLAYDB_CORRUPTION = 10,
  REPLAYDB_NOT_SUPPORTED = 11,
  REPLAYDB_INTERNAL = 12,
  REPLAYDB_UNAVAILABLE = 13,
};

/* ---- element types: the values of replaydb::DType ---- */
enum {
  REPLAYDB_BOOL = 0,
  REPLAYDB_U8 = 1,
  REPLAYDB_I8 = 2,
  REPLAYDB_I16 = 3,
  REPLAYDB_I32 = 4,
  REPLAYDB_I64 = 5,
  REPLAYDB_F16 = 6,
  REPLAYDB_BF16 = 7,
  REPLAYDB_F32 = 8,
  REPLAYDB_F64 = 9,
  /* Only in batch fields, never in columns. */
  REPLAYDB_U32 = 100,
  REPLAYDB_U64 = 101,
};

/* How a trajectory ended (replaydb::EndReason). */
enum { REPLAYDB_TERMINAL = 0, REPLAYDB_TRUNCATED = 1 };

/* Waits without end (timeouts are in milliseconds; negative = forever). */
#define REPLAYDB_WAIT_FOREVER (-1)

/* An item key is (trajectory id << REPLAYDB_ITEM_KEY_START_BITS) | start
 * step (replaydb::MakeItemKey). */
#define REPLAYDB_ITEM_KEY_START_BITS 24

/* Most dimensions a tensor or batch field has (columns: 6, plus batch and
 * sequence). */
#define REPLAYDB_MAX_DIMS 8

typedef struct replaydb_options_t replaydb_options_t;
typedef struct replaydb_db_t replaydb_db_t;
typedef struct replaydb_table_spec_t replaydb_table_spec_t;
typedef struct replaydb_table_t replaydb_table_t;
typedef struct replaydb_writer_t replaydb_writer_t;
typedef struct replaydb_vector_writer_t replaydb_vector_writer_t;
typedef struct replaydb_batch_t replaydb_batch_t;
typedef struct replaydb_sampler_t replaydb_sampler_t;

/* A view of caller memory: one tensor of `dtype` and shape dims[0..ndim),
 * C order, `nbytes` bytes at `data`. */
typedef struct {
  int dtype;
  int ndim;
  const int64_t* dims;
  const void* data;
  size_t nbytes;
} replaydb_tensor_t;

/* ---- memory, version, GPUs ---- */

REPLAYDB_C_EXPORT void replaydb_free(void* p);
/* Frees an array of `n` strings and the array. */
REPLAYDB_C_EXPORT void replaydb_free_strings(char** strings, size_t n);
/* "0.1.0"; static storage. */
REPLAYDB_C_EXPORT const char* replaydb_version(void);
/* Sets the calling thread's interrupt check (replaydb/interrupt.h): while a
 * call of this thread waits (for the rate limiter, or for hot-tier blocks),
 * it runs check(arg) every 100 ms; a nonzero result stops the wait and the
 * call fails with REPLAYDB_CANCELLED, "interrupted" in its message (what a vector
 * writer's append did before the wait stays done). NULL clears it; other
 * threads are unaffected. The Python package sets one that runs Python's
 * signal handlers, so that Ctrl-C reaches any wait. */
REPLAYDB_C_EXPORT void replaydb_set_interrupt_check(int (*check)(void* arg), void* arg);
/* Name of a status code ("NotFound") or dtype ("f32"); static storage, or
 * "invalid". */
REPLAYDB_C_EXPORT const char* replaydb_code_name(int code);
REPLAYDB_C_EXPORT const char* replaydb_dtype_name(int dtype);
/* Bytes per element; 0 for an unknown dtype. */
REPLAYDB_C_EXPORT size_t replaydb_dtype_size(int dtype);
/* The dtype named `name` ("f32", "u8", ...), or -1. */
REPLAYDB_C_EXPORT int replaydb_dtype_from_name(const char* name);
/* CUDA devices this process can use (0 without a GPU or CUDA build). */
REPLAYDB_C_EXPORT int replaydb_cuda_device_count(void);
/* Makes the work queued on stream `waiting` from now on wait, on the device,
 * for the work queued on stream `on` so far; does not wait on the host
 * (replaydb::StreamWait). For handing a device batch to a consumer that reads
 * it on another stream. NotSupported without CUDA. */
REPLAYDB_C_EXPORT int replaydb_stream_wait(void* waiting, void* on, char** errptr);

/* ---- database options (replaydb::DBOptions); defaults as documented
 * there ---- */

REPLAYDB_C_EXPORT replaydb_options_t* replaydb_options_create(void);
REPLAYDB_C_EXPORT void replaydb_options_destroy(replaydb_options_t* options);
REPLAYDB_C_EXPORT void replaydb_options_set_create_if_missing(replaydb_options_t* o, int v);
REPLAYDB_C_EXPORT void replaydb_options_set_error_if_exists(replaydb_options_t* o, int v);
REPLAYDB_C_EXPORT void replaydb_options_set_wal_enabled(replaydb_options_t* o, int v);
/* "none", "batch" or "always". */
REPLAYDB_C_EXPORT int replaydb_options_set_wal_sync(replaydb_options_t* options,
                                                    const char* mode, char** errptr);
/* Automatic checkpoints: every `seconds` (0 or less: off), every
 * `wal_bytes` of log (0: off), and on close. */
REPLAYDB_C_EXPORT void replaydb_options_set_checkpoint(replaydb_options_t* o, int64_t seconds,
                                                       uint64_t wal_bytes, int on_close);

/* ---- databases (replaydb::DB) ---- */

/* `options` may be NULL (defaults). */
REPLAYDB_C_EXPORT int replaydb_open(const replaydb_options_t* options, const char* path,
                                    replaydb_db_t** db, char** errptr);
REPLAYDB_C_EXPORT int replaydb_open_read_only(const char* path, replaydb_db_t** db,
                                              char** errptr);
/* A database that `replaydb serve` hosts at `address` (ucx://HOST:PORT, or
 * the primary of a cluster: etcd://HOST:PORT/CLUSTER, file://PATH;
 * replaydb::DB::Connect): the same calls, each run on the server; those a
 * remote database does not serve yet fail with REPLAYDB_NOT_SUPPORTED.
 * `client_name` (may be NULL) names this client in the server's log;
 * `token_file` (may be NULL) holds the token a server may require;
 * `connect_timeout_ms` <= 0: the default (10 s). REPLAYDB_UNAVAILABLE when
 * nothing answers; REPLAYDB_FAILED_PRECONDITION when the server refuses
 * the client (no token, a wrong one). */
REPLAYDB_C_EXPORT int replaydb_connect(const char* address, const char* client_name,
                                       const char* token_file, int64_t connect_timeout_ms,
                                       replaydb_db_t** db, char** errptr);
/* replaydb_connect with every replaydb::ConnectOptions field: options made
 * by replaydb_connect_options_create (the defaults; NULL: the defaults too),
 * set by the setters below. Values out of range (a timeout <= 0, a
 * negative heartbeat) come back as REPLAYDB_INVALID_ARGUMENT naming the
 * option. */
typedef struct replaydb_connect_options_t replaydb_connect_options_t;
REPLAYDB_C_EXPORT replaydb_connect_options_t* replaydb_connect_options_create(void);
REPLAYDB_C_EXPORT void replaydb_connect_options_destroy(replaydb_connect_options_t* options);
/* NULL: the default ("replaydb client"; no token). */
REPLAYDB_C_EXPORT void replaydb_connect_options_set_client_name(replaydb_connect_options_t* o,
                                                                const char* name);
REPLAYDB_C_EXPORT void replaydb_connect_options_set_token_file(replaydb_connect_options_t* o,
                                                               const char* path);
REPLAYDB_C_EXPORT void replaydb_connect_options_set_connect_timeout_ms(
    replaydb_connect_options_t* o, int64_t ms);
REPLAYDB_C_EXPORT void replaydb_connect_options_set_call_timeout_ms(replaydb_connect_options_t* o,
                                                                    int64_t ms);
/* 0: none (the server's must be 0 too). */
REPLAYDB_C_EXPORT void replaydb_connect_options_set_heartbeat_ms(replaydb_connect_options_t* o,
                                                                 int64_t ms);
/* Samples read in place where reads are one-sided (0: always by message),
 * and the smallest sample so read, in bytes. */
REPLAYDB_C_EXPORT void replaydb_connect_options_set_read_in_place(replaydb_connect_options_t* o,
                                                                  int v, uint64_t min_bytes);
/* A sharded database ("A+B", docs/sharding.md) only: nonzero makes a sample
 * leave out the shards that are unavailable and draw from the others
 * (ConnectOptions::skip_unavailable_shards). Default 0. */
REPLAYDB_C_EXPORT void replaydb_connect_options_set_skip_unavailable_shards(
    replaydb_connect_options_t* o, int v);
REPLAYDB_C_EXPORT int replaydb_connect_with_options(const char* address,
                                                    const replaydb_connect_options_t* options,
                                                    replaydb_db_t** db, char** errptr);
/* Closes the database (waiters on its tables get Cancelled; open table
 * handles then fail with FailedPrecondition, except replaydb_table_info,
 * replaydb_table_name and replaydb_table_get_spec, which still answer with
 * the table's last state). Safe while tables, writers and batches are
 * alive: they keep what they need, and batches stay readable. */
REPLAYDB_C_EXPORT void replaydb_close(replaydb_db_t* db);
REPLAYDB_C_EXPORT int replaydb_checkpoint(replaydb_db_t* db, char** errptr);
/* Names of all tables, sorted: *names gets `*count` strings
 * (replaydb_free_strings; *names is NULL when there are none). */
REPLAYDB_C_EXPORT int replaydb_list_tables(replaydb_db_t* db, char*** names, size_t* count,
                                           char** errptr);
REPLAYDB_C_EXPORT int replaydb_drop_table(replaydb_db_t* db, const char* name, char** errptr);
/* DB::ExportTable: table `name` into a new database created in `dir`. */
REPLAYDB_C_EXPORT int replaydb_export_table(replaydb_db_t* db, const char* name, const char* dir,
                                            char** errptr);
/* DB::ImportTable: table `source_table` of the database in `source_dir`
 * (opened read-only) as new table `name` (NULL or "": the source's name);
 * *table gets it (replaydb_table_release). */
REPLAYDB_C_EXPORT int replaydb_import_table(replaydb_db_t* db, const char* source_dir,
                                            const char* source_table, const char* name,
                                            replaydb_table_t** table, char** errptr);
REPLAYDB_C_EXPORT const char* replaydb_db_path(const replaydb_db_t* db);
REPLAYDB_C_EXPORT int replaydb_db_read_only(const replaydb_db_t* db);

/* ---- table specs (replaydb::TableSpec); defaults as documented there.
 * Setters taking a name return InvalidArgument for an unknown one; the
 * spec as a whole is checked by replaydb_create_table. ---- */

/* A spec with the C++ defaults; `name` NULL is taken as "" (which
 * replaydb_create_table then rejects). */
REPLAYDB_C_EXPORT replaydb_table_spec_t* replaydb_table_spec_create(const char* name);
REPLAYDB_C_EXPORT void replaydb_table_spec_destroy(replaydb_table_spec_t* spec);
/* A column of `dtype` (REPLAYDB_BOOL..REPLAYDB_F64) with per-step shape
 * dims[0..ndim) (ndim 0: scalar; at most 6, so that a batch field
 * [B, L, shape...] fits REPLAYDB_MAX_DIMS). The names of a batch's own
 * arrays (keys, probabilities, weights, mask, priorities, times_sampled)
 * are refused, so that every field of a batch stays reachable by name. */
REPLAYDB_C_EXPORT int replaydb_table_spec_add_column(replaydb_table_spec_t* spec,
                                                     const char* name, int dtype, int ndim,
                                                     const int64_t* dims, char** errptr);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_capacity_steps(replaydb_table_spec_t* s,
                                                              int64_t v);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_capacity_bytes(replaydb_table_spec_t* s,
                                                              int64_t v);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_block_steps(replaydb_table_spec_t* s, int64_t v);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_sequence_length(replaydb_table_spec_t* s,
                                                               int64_t v);
/* "none" or "tail". */
REPLAYDB_C_EXPORT int replaydb_table_spec_set_padding(replaydb_table_spec_t* spec,
                                                      const char* padding, char** errptr);
/* "uniform", "fifo", "lifo", "prioritized", "min_heap", "max_heap". */
REPLAYDB_C_EXPORT int replaydb_table_spec_set_selector(replaydb_table_spec_t* spec,
                                                       const char* selector, char** errptr);
/* "oldest_first" or "lowest_priority". */
REPLAYDB_C_EXPORT int replaydb_table_spec_set_eviction(replaydb_table_spec_t* spec,
                                                       const char* eviction, char** errptr);
/* "item", "window_max" or "window_mean". */
REPLAYDB_C_EXPORT int replaydb_table_spec_set_step_priority(replaydb_table_spec_t* spec,
                                                            const char* step_priority,
                                                            char** errptr);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_priority_exponent(replaydb_table_spec_t* s,
                                                                 double v);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_priority_device(replaydb_table_spec_t* s,
                                                               int32_t device);
/* "host", "device:N" or "auto". */
REPLAYDB_C_EXPORT int replaydb_table_spec_set_placement(replaydb_table_spec_t* spec,
                                                        const char* placement, char** errptr);
/* "default", "on" or "off". */
REPLAYDB_C_EXPORT int replaydb_table_spec_set_logging(replaydb_table_spec_t* spec,
                                                      const char* logging, char** errptr);
/* What writers' appends wait for (TableSpec::acks, docs/replication.md):
 * "none", "leader", "leader_durable" or "replicated(K)"; and how far behind
 * a replica may fall before appends wait for it (TableSpec::max_lag_ms). */
REPLAYDB_C_EXPORT int replaydb_table_spec_set_acks(replaydb_table_spec_t* spec, const char* acks,
                                                   char** errptr);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_max_lag_ms(replaydb_table_spec_t* s,
                                                          int64_t max_lag_ms);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_max_times_sampled(replaydb_table_spec_t* s,
                                                                 int64_t v);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_spill(replaydb_table_spec_t* s, int v);
REPLAYDB_C_EXPORT void replaydb_table_spec_set_rotation(replaydb_table_spec_t* s,
                                                        double fraction, int64_t every_samples);
/* TableSpec::lanes: > 1 makes a vector table of that many environments
   (docs/vector_tables.md). */
REPLAYDB_C_EXPORT void replaydb_table_spec_set_lanes(replaydb_table_spec_t* s, int64_t lanes);
/* replaydb::RateLimiterSpec's four fields. */
REPLAYDB_C_EXPORT void replaydb_table_spec_set_rate_limiter(replaydb_table_spec_t* s,
                                                            double samples_per_insert,
                                                            int64_t min_size_to_sample,
                                                            double min_diff, double max_diff);
/* The spec as JSON text (replaydb_free): every field above by its C++
 * name, enums by the names the setters take, columns as
 * [{"name", "dtype", "shape"}], the rate limiter as an object of its four
 * fields; numbers that are not finite as null; names that are not valid
 * UTF-8 with U+FFFD in place of the invalid bytes. NULL for a NULL spec. */
REPLAYDB_C_EXPORT char* replaydb_table_spec_json(const replaydb_table_spec_t* s);

/* ---- tables (replaydb::Table) ---- */

/* The handle keeps the table object alive; release it when done. */
REPLAYDB_C_EXPORT int replaydb_create_table(replaydb_db_t* db, const replaydb_table_spec_t* spec,
                                            replaydb_table_t** table, char** errptr);
REPLAYDB_C_EXPORT int replaydb_get_table(replaydb_db_t* db, const char* name,
                                         replaydb_table_t** table, char** errptr);
REPLAYDB_C_EXPORT void replaydb_table_release(replaydb_table_t* table);
/* The table's current spec (a copy: replaydb_table_spec_destroy). */
REPLAYDB_C_EXPORT replaydb_table_spec_t* replaydb_table_get_spec(replaydb_table_t* table);
REPLAYDB_C_EXPORT const char* replaydb_table_name(const replaydb_table_t* table);

/* Spec accessors (also on replaydb_table_get_spec's copy). A column index
 * past the last gives NULL, -1 (dtype, ndim) or NULL (dims). */
REPLAYDB_C_EXPORT size_t replaydb_table_spec_num_columns(const replaydb_table_spec_t* s);
REPLAYDB_C_EXPORT const char* replaydb_table_spec_column_name(const replaydb_table_spec_t* s,
                                                              size_t i);
REPLAYDB_C_EXPORT int replaydb_table_spec_column_dtype(const replaydb_table_spec_t* s, size_t i);
REPLAYDB_C_EXPORT int replaydb_table_spec_column_ndim(const replaydb_table_spec_t* s, size_t i);
REPLAYDB_C_EXPORT const int64_t* replaydb_table_spec_column_dims(const replaydb_table_spec_t* s,
                                                                 size_t i);
REPLAYDB_C_EXPORT int64_t replaydb_table_spec_sequence_length(const replaydb_table_spec_t* s);

/* replaydb::TableInfo. */
typedef struct {
  int64_t num_steps;
  int64_t num_items;
  int64_t num_trajectories;
  int64_t num_open_trajectories;
  char placement[32];
  int32_t device;
  int64_t bytes_used;
  int64_t bytes_reserved;
  int64_t bytes_capacity;
  int64_t blocks_used;
  int64_t blocks_capacity;
  int64_t steps_inserted;
  int64_t items_inserted;
  int64_t items_sampled;
  int64_t items_removed;
  int64_t evicted_trajectories;
  int64_t evicted_items;
  int64_t priority_updates;
  int64_t priority_updates_skipped;
  double max_priority_seen;
  int64_t rate_limiter_inserts;
  int64_t rate_limiter_samples;
  int64_t rate_limiter_deletes;
  int64_t rate_limiter_blocked_inserts;
  int64_t rate_limiter_blocked_samples;
  int64_t cold_trajectories;
  int64_t cold_steps;
  int64_t cold_bytes;
  int64_t spilled_trajectories;
  int64_t spilled_bytes;
  int64_t loaded_trajectories;
  int64_t rotations;
  int64_t spill_queue;
} replaydb_table_info_t;

REPLAYDB_C_EXPORT int replaydb_table_info(replaydb_table_t* table, replaydb_table_info_t* info,
                                          char** errptr);
/* Table::Mass: the table's sampling mass (sum of priority^exponent over its
 * live items; the item count for a uniform table) into *total and its live
 * items into *items, for sampling several tables (shards) as one.
 * NotSupported for FIFO, LIFO and heap tables; a vector table's counts an
 * item per environment. */
REPLAYDB_C_EXPORT int replaydb_table_mass(replaydb_table_t* table, double* total, int64_t* items,
                                          char** errptr);
/* Table::DeleteItems: the live items of keys[0..n) deleted, durably; others
 * skipped. *deleted (may be NULL) gets how many were. */
REPLAYDB_C_EXPORT int replaydb_table_delete_items(replaydb_table_t* table, const uint64_t* keys,
                                                  size_t n, int64_t* deleted, char** errptr);
/* Table::Clear: every trajectory and item leaves the table, as one logged
 * change; the rate limiter starts afresh; handles and writers stay usable. */
REPLAYDB_C_EXPORT int replaydb_table_clear(replaydb_table_t* table, char** errptr);
/* Table::Seed: the same contents, seed and calls give the same draws. */
REPLAYDB_C_EXPORT int replaydb_table_seed(replaydb_table_t* table, uint64_t seed, char** errptr);
REPLAYDB_C_EXPORT int replaydb_table_set_rate_limiter(replaydb_table_t* table,
                                                      double samples_per_insert,
                                                      int64_t min_size_to_sample,
                                                      double min_diff, double max_diff,
                                                      char** errptr);
/* Brings cold trajectories back into the hot tier (Table::Load). */
REPLAYDB_C_EXPORT int replaydb_table_load(replaydb_table_t* table, const uint64_t* ids,
                                          size_t n, char** errptr);
/* Sets priorities (Table::UpdatePriorities); `updated` and `skipped` may be
 * NULL. */
REPLAYDB_C_EXPORT int replaydb_table_update_priorities(replaydb_table_t* table,
                                                       const uint64_t* keys,
                                                       const double* priorities, size_t n,
                                                       int64_t* updated, int64_t* skipped,
                                                       char** errptr);
/* Table::UpdatePrioritiesFromDevice: keys and priorities in device memory. */
REPLAYDB_C_EXPORT int replaydb_table_update_priorities_from_device(
    replaydb_table_t* table, const uint64_t* device_keys, const float* device_priorities,
    int64_t n, void* stream, char** errptr);
/* Wakes every blocked writer and sampler with Cancelled (Table::Close). */
REPLAYDB_C_EXPORT void replaydb_table_close(replaydb_table_t* table);

/* ---- writers ---- */

/* timeout_ms: how long Append and End may wait (REPLAYDB_WAIT_FOREVER);
 * sync: wait for the log record to be durable (WriterOptions::sync). */
REPLAYDB_C_EXPORT int replaydb_table_new_writer(replaydb_table_t* table, int64_t timeout_ms,
                                                int sync, replaydb_writer_t** writer,
                                                char** errptr);
/* replaydb_table_new_writer with WriterOptions::acks: NULL or "table" for
 * the table's, else as replaydb_table_spec_set_acks takes. */
REPLAYDB_C_EXPORT int replaydb_table_new_writer_with_acks(replaydb_table_t* table,
                                                          int64_t timeout_ms, int sync,
                                                          const char* acks,
                                                          replaydb_writer_t** writer,
                                                          char** errptr);
/* Ends an open trajectory as truncated. */
REPLAYDB_C_EXPORT void replaydb_writer_destroy(replaydb_writer_t* writer);
/* One step: one tensor per column in schema order, each of the column's
 * dtype and shape. `priority` may be NULL. */
REPLAYDB_C_EXPORT int replaydb_writer_append(replaydb_writer_t* writer,
                                             const replaydb_tensor_t* step, size_t num_columns,
                                             const double* priority, char** errptr);
/* n steps: each tensor [n, column shape...]; `priorities` NULL or n values. */
REPLAYDB_C_EXPORT int replaydb_writer_append_many(replaydb_writer_t* writer,
                                                  const replaydb_tensor_t* steps,
                                                  size_t num_columns, const double* priorities,
                                                  size_t num_priorities, char** errptr);
REPLAYDB_C_EXPORT int replaydb_writer_end(replaydb_writer_t* writer, int reason, char** errptr);
/* 0 before the current trajectory's first step. */
REPLAYDB_C_EXPORT uint64_t replaydb_writer_trajectory_id(const replaydb_writer_t* writer);
REPLAYDB_C_EXPORT int64_t replaydb_writer_num_steps(const replaydb_writer_t* writer);

/* timeout_ms and sync as for replaydb_table_new_writer; threads: how many
 * threads an append splits its work over the environments between
 * (WriterOptions::threads: 0 automatic, 1 the caller's alone, at most 64). */
REPLAYDB_C_EXPORT int replaydb_table_new_vector_writer(replaydb_table_t* table, size_t num_envs,
                                                       int64_t timeout_ms, int sync, int threads,
                                                       replaydb_vector_writer_t** writer,
                                                       char** errptr);
REPLAYDB_C_EXPORT void replaydb_vector_writer_destroy(replaydb_vector_writer_t* writer);
/* One step per environment: each tensor [num_envs, column shape...] in host
 * memory; `priorities` NULL or num_envs values. */
REPLAYDB_C_EXPORT int replaydb_vector_writer_append(replaydb_vector_writer_t* writer,
                                                    const replaydb_tensor_t* steps,
                                                    size_t num_columns, const double* priorities,
                                                    size_t num_priorities, char** errptr);
/* The same from device memory of the table's GPU (a GPU simulator's
 * arrays); `stream` orders the read after the work that produced them.
 * Returns once the work is queued: the inputs must stay allocated until
 * the work queued on `stream` reaches it (memory freed through a stream-
 * ordered allocator on `stream` is safe). */
REPLAYDB_C_EXPORT int replaydb_vector_writer_append_from_device(
    replaydb_vector_writer_t* writer, const replaydb_tensor_t* steps, size_t num_columns,
    void* stream, const double* priorities, size_t num_priorities, char** errptr);
REPLAYDB_C_EXPORT int replaydb_vector_writer_end(replaydb_vector_writer_t* writer, size_t env,
                                                 int reason, char** errptr);
/* replaydb_vector_writer_end for each of envs[0..num_envs_given) (a
 * simulator's done environments) with one hold of the table's lock and one
 * log sync. Repeats are no-ops; an environment out of range fails the call
 * before anything ends; one environment's error does not stop the others
 * (the first is reported, naming the environment). */
REPLAYDB_C_EXPORT int replaydb_vector_writer_end_many(replaydb_vector_writer_t* writer,
                                                      const size_t* envs, size_t num_envs_given,
                                                      int reason, char** errptr);
REPLAYDB_C_EXPORT size_t replaydb_vector_writer_num_envs(const replaydb_vector_writer_t* writer);
/* 0 before env's first step, and for env >= num_envs. */
REPLAYDB_C_EXPORT uint64_t replaydb_vector_writer_trajectory_id(
    const replaydb_vector_writer_t* writer, size_t env);

/* ---- samples ---- */

/* replaydb::SampleOptions. */
/* replaydb::WeightNormalization: what importance weights are divided by. */
#define REPLAYDB_WEIGHTS_BUFFER 0 /* the largest any live item could get (PER's) */
#define REPLAYDB_WEIGHTS_BATCH 1  /* the batch's largest */

typedef struct {
  int64_t timeout_ms;      /* default REPLAYDB_WAIT_FOREVER */
  double importance_beta;  /* default -1: no weights */
  int stratified;          /* default 0 */
  int gather;              /* default 1 */
  int peek;                /* default 0 */
  int weight_normalization; /* REPLAYDB_WEIGHTS_*; default REPLAYDB_WEIGHTS_BUFFER */
} replaydb_sample_options_t;

REPLAYDB_C_EXPORT void replaydb_sample_options_init(replaydb_sample_options_t* options);

/* Draws batch_size items into a batch in host memory (Table::Sample).
 * `options` may be NULL (defaults). */
REPLAYDB_C_EXPORT int replaydb_table_sample(replaydb_table_t* table, int64_t batch_size,
                                            const replaydb_sample_options_t* options,
                                            replaydb_batch_t** batch, char** errptr);
/* Reads the items `keys` into a host batch (Table::Lookup). */
REPLAYDB_C_EXPORT int replaydb_table_lookup(replaydb_table_t* table, const uint64_t* keys,
                                            size_t n, replaydb_batch_t** batch, char** errptr);
/* Draws batch_size items into a batch in the memory of the table's GPU
 * (Table::SampleToDevice), ordered on `stream`, without waiting for it.
 * The buffers come from a pool the table handle keeps: releasing the batch
 * gives them back for a later sample on the same stream (so work queued on
 * that stream before the release is done with them first). A table without
 * a GPU (replaydb_table_info's device -1) fails with FailedPrecondition. */
REPLAYDB_C_EXPORT int replaydb_table_sample_to_device(replaydb_table_t* table,
                                                      int64_t batch_size,
                                                      const replaydb_sample_options_t* options,
                                                      void* stream, replaydb_batch_t** batch,
                                                      char** errptr);
/* Table::SampleToDevice into caller buffers of the table's GPU: `columns`
 * one pointer per column ([batch_size, L, shape...]; num_columns must be
 * the table's) or NULL for none (num_columns 0); `keys` and `probabilities`
 * are required, `weights` (unless importance_beta >= 0) and `mask` may be
 * NULL. */
REPLAYDB_C_EXPORT int replaydb_table_sample_into(replaydb_table_t* table, int64_t batch_size,
                                                 const replaydb_sample_options_t* options,
                                                 void* const* columns, size_t num_columns,
                                                 uint64_t* keys, float* probabilities,
                                                 float* weights, uint8_t* mask, void* stream,
                                                 char** errptr);

/* One destination of replaydb_table_sample_runs: `rows` rows into these
 * device buffers, as replaydb_table_sample_into's (`columns` NULL for none,
 * `mask` may be NULL; no weights); `wait_event`, a cudaEvent_t or NULL, is
 * waited for on the device before the run's writes. */
typedef struct replaydb_sample_run {
  int64_t rows;
  void* const* columns;
  uint64_t* keys;
  float* probabilities;
  uint8_t* mask;
  void* wait_event;
} replaydb_sample_run_t;

/* replaydb_table_sample_into for several destinations in one call, in
 * order, on `stream` (replaydb.distributed draws a rank's own rows and the
 * rows each other rank asked for with it): each run draws its own `rows`
 * items as a call of its own would; runs of 0 rows are skipped.
 * num_columns: the table's, or 0 where no run gathers columns. Stops at the
 * first run that fails, its message starting "run R: "; the runs before it
 * were drawn. `record_event` (a cudaEvent_t of the stream's GPU, or NULL) is
 * recorded on `stream` at the end whether or not a run failed, so that
 * whoever waits for it is not left waiting on an older record. */
REPLAYDB_C_EXPORT int replaydb_table_sample_runs(replaydb_table_t* table,
                                                 const replaydb_sample_run_t* runs,
                                                 size_t num_runs,
                                                 const replaydb_sample_options_t* options,
                                                 size_t num_columns, void* record_event,
                                                 void* stream, char** errptr);

/* One copy of replaydb_copy_regions. */
typedef struct replaydb_copy_region {
  void* dst;
  const void* src;
  size_t bytes;
} replaydb_copy_region_t;

/* On `stream` (a cudaStream_t), in one call: waits on the device for each
 * of `wait_events` (cudaEvent_t), queues each copy (memory the stream's GPU
 * can address: its own, a peer's, pinned host), then records `record_event`
 * (or not, when NULL) whether or not a copy was refused. */
REPLAYDB_C_EXPORT int replaydb_copy_regions(const replaydb_copy_region_t* copies,
                                            size_t num_copies, void* const* wait_events,
                                            size_t num_wait_events, void* record_event,
                                            void* stream, char** errptr);

/* The finish of a batch made of runs of rows from several shards
 * (replaydb.distributed), on `stream` of GPU `device`, in one launch: for
 * row b of run r (rows[r] consecutive rows, runs in order, num_runs <= 64),
 * probabilities[b] = local_probabilities[b] * shares[r] (float64) and
 * shards[b] = run_shards[r]. */
REPLAYDB_C_EXPORT int replaydb_label_batch_runs(int device, size_t num_runs, const int64_t* rows,
                                                const int64_t* run_shards,
                                                const double* shares,
                                                const float* local_probabilities,
                                                double* probabilities, int64_t* shards,
                                                void* stream, char** errptr);

/* A sampler that keeps `in_flight` batches gathered ahead on the table's
 * GPU (Table::NewDeviceSampler). */
REPLAYDB_C_EXPORT int replaydb_table_new_sampler(replaydb_table_t* table, int64_t batch_size,
                                                 int in_flight,
                                                 const replaydb_sample_options_t* options,
                                                 replaydb_sampler_t** sampler, char** errptr);
/* Batches still held stay valid: the sampler ends once the last is released. */
REPLAYDB_C_EXPORT void replaydb_sampler_destroy(replaydb_sampler_t* sampler);
/* The oldest gathered batch; `stream` (the consumer's) waits for its gather
 * on the device. Releasing the batch hands its buffers back to the sampler
 * once the work queued on `stream` by then is done. */
REPLAYDB_C_EXPORT int replaydb_sampler_next(replaydb_sampler_t* sampler, void* stream,
                                            int64_t timeout_ms, replaydb_batch_t** batch,
                                            char** errptr);

/* ---- batches: reference-counted; created with one reference ---- */

REPLAYDB_C_EXPORT void replaydb_batch_retain(replaydb_batch_t* batch);
REPLAYDB_C_EXPORT void replaydb_batch_release(replaydb_batch_t* batch);
REPLAYDB_C_EXPORT int64_t replaydb_batch_size(const replaydb_batch_t* batch);
REPLAYDB_C_EXPORT int64_t replaydb_batch_sequence_length(const replaydb_batch_t* batch);
/* -1: host memory; N: memory of CUDA device N. */
REPLAYDB_C_EXPORT int replaydb_batch_device(const replaydb_batch_t* batch);

/* One array of a batch. Fields: one per table column by its name
 * ([B, L, shape...], the column's dtype), and
 *   "keys"          [B] u64
 *   "probabilities" [B] f64 on the host, f32 on a device
 *   "weights"       [B] as probabilities; absent without importance_beta
 *   "mask"          [B, L] u8 (bool values)
 *   "priorities"    [B] f64, host batches only
 *   "times_sampled" [B] u32, host batches only
 * Absent fields (and columns of a batch drawn with gather = 0) report
 * NotFound. A table column named like one of the arrays above (possible
 * only for tables made through the C++ API) hides it: the name gives the
 * column. A column of more than 6 dims (likewise) does not fit
 * REPLAYDB_MAX_DIMS: it reports NotSupported and is not listed. Field data
 * stays valid while the batch holds a reference. */
typedef struct {
  void* data;
  int dtype;
  int ndim;
  int64_t dims[REPLAYDB_MAX_DIMS];
  size_t nbytes;
  int device; /* -1: host */
} replaydb_array_t;

REPLAYDB_C_EXPORT int replaydb_batch_field(const replaydb_batch_t* batch, const char* name,
                                           replaydb_array_t* out, char** errptr);
/* Names of the batch's fields, in the order above (replaydb_free_strings). */
REPLAYDB_C_EXPORT int replaydb_batch_field_names(const replaydb_batch_t* batch, char*** names,
                                                 size_t* count, char** errptr);

/* DLPack: *managed_tensor gets a DLManagedTensor (dlpack.h's unversioned
 * struct, C order, no strides) over batch field `name`, host (kDLCPU) or
 * device (kDLCUDA) memory. It holds a reference to the batch, which its
 * deleter gives back; a consumer calls the deleter exactly once. Errors as
 * replaydb_batch_field's. */
REPLAYDB_C_EXPORT int replaydb_batch_dlpack(replaydb_batch_t* batch, const char* name,
                                            void** managed_tensor, char** errptr);
/* A destructor for Python capsules named "dltensor" over such tensors
 * (PyCapsule_New(tensor, "dltensor", replaydb_dlpack_capsule_destructor)):
 * calls the tensor's deleter when no consumer took the capsule (a consumer
 * renames it "used_dltensor" and calls the deleter itself). It uses the
 * PyCapsule functions of the Python running in this process; without one it
 * does nothing. For Python bindings (python/). */
REPLAYDB_C_EXPORT void replaydb_dlpack_capsule_destructor(void* capsule);

/* Batches (and their buffers) alive in this process: for tests that check
 * that consumers give them back. */
REPLAYDB_C_EXPORT int64_t replaydb_live_batches(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* REPLAYDB_C_H_ */
