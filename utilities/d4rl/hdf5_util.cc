// The process-wide libhdf5 lock, the error-printing guard and the error
// stack as text.
#include "utilities/d4rl/hdf5_util.h"

#include <utility>
#include <vector>

namespace replaydb::engine {

std::mutex& Hdf5Mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

Hdf5Guard::Hdf5Guard() : lock_(Hdf5Mutex()) {
  H5Eget_auto2(H5E_DEFAULT, &saved_func_, &saved_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Hdf5Guard::~Hdf5Guard() {
  H5Eset_auto2(H5E_DEFAULT, saved_func_, saved_data_);
}

namespace {

herr_t CollectError(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  auto* descs = static_cast<std::vector<std::string>*>(data);
  if (err->desc != nullptr && err->desc[0] != '\0') descs->push_back(err->desc);
  return 0;
}

herr_t FindMinor(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  auto* wanted = static_cast<std::pair<hid_t, bool>*>(data);
  if (err->min_num == wanted->first) wanted->second = true;
  return 0;
}

}  // namespace

bool Hdf5ErrorHas(hid_t minor) {
  std::pair<hid_t, bool> wanted(minor, false);
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, FindMinor, &wanted);
  return wanted.second;
}

std::string Hdf5ErrorText() {
  std::vector<std::string> descs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, CollectError, &descs);
  if (descs.empty()) return "";
  if (descs.size() == 1 || descs.front() == descs.back()) return descs.front();
  return descs.front() + " (" + descs.back() + ")";
}

}  // namespace replaydb::engine
