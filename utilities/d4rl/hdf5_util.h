// What every user of libhdf5's C API in replaydb shares: one process-wide
// lock, owning handles, and libhdf5's error stack as text.
//
// Thread safety: libhdf5 is not guaranteed to be thread-safe (Debian's serial
// build happens to be configured thread-safe, other builds are not), so every
// libhdf5 call in replaydb, its closing of handles included, is made with
// Hdf5Mutex() held, normally through an Hdf5Guard. Code outside replaydb that
// calls libhdf5 in the same process is not covered by this lock.
//
// This header includes <hdf5.h>; only .cc files (and tests) linked against
// HDF5 include it. Headers of the library keep libhdf5 out of their
// interface (see utilities/d4rl/d4rl_hdf5.h).
#ifndef REPLAYDB_UTILITIES_D4RL_HDF5_UTIL_H_
#define REPLAYDB_UTILITIES_D4RL_HDF5_UTIL_H_

#include <hdf5.h>

#include <mutex>
#include <string>

namespace replaydb::engine {

// The lock around every libhdf5 call in the process. Never destroyed.
std::mutex& Hdf5Mutex();

// Holds Hdf5Mutex() and turns off libhdf5's printing of its error stack to
// stderr for its lifetime (the previous handler is restored on destruction),
// so that failures reach the caller only as a Status. Not reentrant: a thread
// that holds one must not make another.
class Hdf5Guard {
 public:
  Hdf5Guard();
  ~Hdf5Guard();
  Hdf5Guard(const Hdf5Guard&) = delete;
  Hdf5Guard& operator=(const Hdf5Guard&) = delete;

 private:
  std::lock_guard<std::mutex> lock_;
  H5E_auto2_t saved_func_ = nullptr;
  void* saved_data_ = nullptr;
};

// An owned libhdf5 identifier (file, group, dataset, dataspace, datatype,
// property list), closed with the function it was given. Movable, not
// copyable. A negative id (a failed call) is held as "none".
// REQUIRES: Hdf5Mutex() is held whenever a valid Hid is destroyed, reset or
// assigned to.
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);

  Hid() = default;
  Hid(hid_t id, Closer close) : id_(id), close_(close) {}
  ~Hid() { Reset(); }
  Hid(Hid&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Hid& operator=(Hid&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = other.id_;
      close_ = other.close_;
      other.id_ = -1;
    }
    return *this;
  }
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;

  bool valid() const { return id_ >= 0; }
  hid_t get() const { return id_; }
  // Gives up ownership: returns the id and holds none.
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }
  // Closes the id, if any; the close's own failure is ignored.
  void Reset() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// The current thread's libhdf5 error stack as one line, outermost and
// innermost error: "unable to open file (file signature not found)"; "" when
// the stack is empty. Call it right after the failing call, before any other
// libhdf5 API call clears the stack. REQUIRES: Hdf5Mutex() held.
std::string Hdf5ErrorText();

// Whether the current thread's libhdf5 error stack holds an error with minor
// code `minor` (e.g. H5E_CANTLOCKFILE). REQUIRES: Hdf5Mutex() held.
bool Hdf5ErrorHas(hid_t minor);

}  // namespace replaydb::engine

#endif  // REPLAYDB_UTILITIES_D4RL_HDF5_UTIL_H_
