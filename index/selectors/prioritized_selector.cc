#include "index/selectors/prioritized_selector.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace replaydb::index {

namespace {

// Powers of two past this make a leaf 0 or clamp it anyway; keeps ldexp's
// int argument and the scale's arithmetic far from overflow.
constexpr int64_t kFarExponent = 4096;
// A log2 mass beyond this (an exponent near the double range) is clamped.
constexpr double kMaxLog2 = 0x1p60;

}  // namespace

PrioritizedSelector::PrioritizedSelector(double exponent) : exponent_(exponent) {
  assert(std::isfinite(exponent) && exponent >= 0 &&
         "PrioritizedSelector: exponent must be finite and >= 0");
}

void PrioritizedSelector::PowerOf(double p, double* mantissa, int64_t* exponent2) const {
  // Where p^exponent is a normal double, pow's (one rounding).
  const double direct = exponent_ == 1 ? p : std::pow(p, exponent_);
  if (direct >= std::numeric_limits<double>::min() && std::isfinite(direct)) {
    int j = 0;
    *mantissa = std::frexp(direct, &j);
    *exponent2 = j;
    return;
  }
  int e = 0;
  const double m = std::frexp(p, &e);  // p = m * 2^e, m in [0.5, 1)
  if (exponent_ == 1) {
    *mantissa = m;
    *exponent2 = e;
    return;
  }
  double mant;
  double whole;
  if (exponent_ < 1000) {
    // m^exponent >= 2^-1000 is a normal double: p^exponent =
    // m^exponent * 2^frac * 2^whole with e * exponent = whole + frac.
    const double x = exponent_ * static_cast<double>(e);
    whole = std::floor(x);
    mant = std::pow(m, exponent_) * std::exp2(x - whole);
  } else {
    // m^exponent could underflow: through the logarithm.
    const double lg = std::clamp(exponent_ * (static_cast<double>(e) + std::log2(m)), -kMaxLog2,
                                 kMaxLog2);
    whole = std::floor(lg);
    mant = std::exp2(lg - whole);
  }
  int j = 0;
  *mantissa = std::frexp(mant, &j);
  *exponent2 = static_cast<int64_t>(whole) + j;
}

double PrioritizedSelector::MassAt(double priority, int64_t scale) const {
  assert(std::isfinite(priority) && priority >= 0 &&
         "PrioritizedSelector: priority must be finite and >= 0");
  // Not pow(0, 0) == 1: priority 0 is never drawn, whatever the exponent.
  if (!(priority > 0)) return 0.0;
  double mantissa = 0.5;
  int64_t exponent2 = 1;  // exponent 0: mass 1
  if (exponent_ != 0) PowerOf(priority, &mantissa, &exponent2);
  return ScaledMass(mantissa, exponent2, scale);
}

double PrioritizedSelector::ScaledMass(double mantissa, int64_t exponent2, int64_t scale) {
  const int64_t shift = std::clamp(exponent2 - scale, -kFarExponent, kFarExponent);
  return std::ldexp(mantissa, static_cast<int>(shift));
}

double PrioritizedSelector::Mass(double priority) const { return MassAt(priority, scale_); }

void PrioritizedSelector::Rescale() {
  double largest = 0;
  for (size_t s = 0; s < priorities_.size(); ++s) {
    const double p = priorities_.Get(s);
    if (p != MinTree::kEmpty) largest = std::max(largest, p);
  }
  if (!(largest > 0)) return;  // nothing drawable by mass: leaves are all 0
  double mantissa = 0.5;
  int64_t exponent2 = 1;
  if (exponent_ != 0) PowerOf(largest, &mantissa, &exponent2);
  // The largest leaf: mantissa * 2^(kTargetExponent + 1), in
  // [2^kTargetExponent, 2^(kTargetExponent + 1)).
  scale_ = exponent2 - (kTargetExponent + 1);
  tree_.Reassign([this](size_t s) {
    const double p = priorities_.Get(s);
    return p == MinTree::kEmpty ? 0.0 : MassAt(p, scale_);
  });
}

void PrioritizedSelector::RescaleIfLow() {
  if (positive_ > 0 && tree_.Total() < 1.0) Rescale();
}

void PrioritizedSelector::SetSlot(size_t slot, double old_priority, double p) {
  assert(std::isfinite(p) && p >= 0 && "PrioritizedSelector: priority must be finite and >= 0");
  if (old_priority > 0) --positive_;
  if (p > 0) ++positive_;
  priorities_.Set(slot, p > 0 ? p : MinTree::kEmpty);
  double mass = 0;
  if (p > 0 && exponent_ != 0) {
    double mantissa;
    int64_t exponent2;
    PowerOf(p, &mantissa, &exponent2);  // once: the check and the leaf share it
    if (exponent2 - scale_ > kMaxExponent) {
      if (slot >= tree_.size()) tree_.Resize(slot + 1);
      Rescale();  // recomputes this slot's leaf too
      return;
    }
    mass = ScaledMass(mantissa, exponent2, scale_);
  } else {
    mass = MassAt(p, scale_);
  }
  tree_.Set(slot, mass);
  RescaleIfLow();
}

void PrioritizedSelector::Insert(const ItemRef& item) {
  size_t slot;
  if (free_slots_.empty()) {
    slot = slot_keys_.size();
  } else {
    slot = free_slots_.back();
  }
  const auto [it, inserted] = slots_.try_emplace(item.key, slot);
  assert(inserted && "PrioritizedSelector::Insert: key already present");
  if (!inserted) return;
  if (free_slots_.empty()) {
    slot_keys_.push_back(item.key);
  } else {
    free_slots_.pop_back();
    slot_keys_[slot] = item.key;
  }
  if (place_.size() <= slot) place_.resize(slot + 1);
  place_[slot] = occupied_.size();
  occupied_.push_back(slot);
  SetSlot(slot, 0.0, item.priority);
}

void PrioritizedSelector::Remove(const ItemRef& item) {
  const auto it = slots_.find(item.key);
  assert(it != slots_.end() && "PrioritizedSelector::Remove: key not present");
  if (it == slots_.end()) return;
  const size_t slot = it->second;
  const double old = priorities_.Get(slot);
  SetSlot(slot, old == MinTree::kEmpty ? 0.0 : old, 0.0);
  free_slots_.push_back(slot);
  slots_.erase(it);
  const size_t place = place_[slot];
  const size_t last = occupied_.back();
  occupied_[place] = last;
  place_[last] = place;
  occupied_.pop_back();
}

void PrioritizedSelector::Update(const ItemRef& item, double new_priority) {
  const auto it = slots_.find(item.key);
  assert(it != slots_.end() && "PrioritizedSelector::Update: key not present");
  if (it == slots_.end()) return;
  const double old = priorities_.Get(it->second);
  SetSlot(it->second, old == MinTree::kEmpty ? 0.0 : old, new_priority);
}

Selection PrioritizedSelector::Select(util::Random& rng, Stratum stratum) const {
  assert(!slots_.empty() && "PrioritizedSelector::Select on an empty selector");
  assert(stratum.count >= 1 && stratum.index >= 0 && stratum.index < stratum.count &&
         "PrioritizedSelector::Select: stratum out of range");
  if (slots_.empty()) return {ItemKey{0}, 0.0};  // a broken REQUIRES (asserted above)
  const double total = tree_.Total();
  if (positive_ == 0 || !(total > 0)) {
    // Every priority is 0: uniformly among the live items.
    const size_t n = occupied_.size();
    size_t i;
    if (stratum.count == 1) {
      i = static_cast<size_t>(rng.Uniform(n));
    } else {
      const double f = (static_cast<double>(stratum.index) + rng.NextDouble()) / static_cast<double>(stratum.count);
      i = std::min(n - 1, static_cast<size_t>(std::max(0.0, f) * static_cast<double>(n)));
    }
    return {slot_keys_[occupied_[i]], 1.0 / static_cast<double>(n)};
  }
  const double u = rng.NextDouble();
  double target;
  if (stratum.count == 1) {
    target = u * total;
  } else {
    target = (static_cast<double>(stratum.index) + u) / static_cast<double>(stratum.count) * total;
  }
  // Find clamps a target that rounding puts at or past the total.
  const size_t slot = tree_.Find(target);
  return {slot_keys_[slot], tree_.Get(slot) / total};
}

void PrioritizedSelector::SelectMany(util::Random& rng, bool stratified,
                                     std::span<Selection> out) const {
  const double total = tree_.Total();
  const size_t n = out.size();
  if (slots_.empty() || positive_ == 0 || !(total > 0) || n < 2) {
    Selector::SelectMany(rng, stratified, out);
    return;
  }
  std::vector<double> targets(n);
  for (size_t b = 0; b < n; ++b) {
    const double u = rng.NextDouble();
    targets[b] = stratified ? (static_cast<double>(b) + u) / static_cast<double>(n) * total
                            : u * total;
  }
  std::vector<size_t> slots(n);
  tree_.FindMany(targets, slots);
  for (const size_t slot : slots) __builtin_prefetch(&slot_keys_[slot]);
  for (size_t b = 0; b < n; ++b) out[b] = {slot_keys_[slots[b]], tree_.Get(slots[b]) / total};
}

double PrioritizedSelector::Log2MinProbabilityRatio(double priority) const {
  if (positive_ == 0 || exponent_ == 0 || !(priority > 0)) return 0;
  // P_min / P = (p_min / p)^exponent, in log space.
  const double ratio = exponent_ * (std::log2(priorities_.Min()) - std::log2(priority));
  return std::min(0.0, ratio);
}

}  // namespace replaydb::index
