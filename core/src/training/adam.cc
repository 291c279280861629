// Keras Adam: bias-corrected first and second moments.
#include <chorus/base/error.h>
#include <chorus/training/optimizer.h>

#include <cmath>
#include <string>
#include <vector>

#include "training/optimizer_host_view.h"

namespace chorus {
namespace {

void RequireInRange(const char* name, float value, bool include_one) {
  const bool ok = value >= 0.0f && (include_one ? value <= 1.0f : value < 1.0f);
  if (!ok) {
    throw Error(CHORUS_INVALID_ARGUMENT, std::string("Adam: ") + name + " must be in [0, 1" +
                                             (include_one ? "]" : ")") + ", got " +
                                             std::to_string(value));
  }
}

// The update's sqrt and division bound it; Debian builds for baseline x86-64 (SSE2, 4 floats a
// vector), so the loop is also compiled for AVX2 and AVX-512 and the loader picks the widest the
// CPU has. No clone contracts to FMA (-ffp-contract=off for this file): every clone gives the
// same bits. Distinct tensors: restrict lets the loop vectorize.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void AdamLoop(float* __restrict wp, const float* __restrict gp, float* __restrict mp,
              float* __restrict vp, size_t n, float beta_1, float beta_2, float one_minus_b1,
              float one_minus_b2, float lr_t, float epsilon) {
  for (size_t i = 0; i < n; ++i) {
    mp[i] = beta_1 * mp[i] + one_minus_b1 * gp[i];
    vp[i] = beta_2 * vp[i] + one_minus_b2 * gp[i] * gp[i];
    wp[i] -= lr_t * mp[i] / (std::sqrt(vp[i]) + epsilon);
  }
}

}  // namespace

Adam::Adam(float learning_rate, float beta_1, float beta_2, float epsilon)
    : learning_rate_(learning_rate), beta_1_(beta_1), beta_2_(beta_2), epsilon_(epsilon) {
  if (!std::isfinite(learning_rate)) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "Adam: learning_rate must be finite, got " + std::to_string(learning_rate));
  }
  RequireInRange("beta_1", beta_1, false);
  RequireInRange("beta_2", beta_2, true);
  if (!(epsilon >= 0.0f) || !std::isfinite(epsilon)) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "Adam: epsilon must be finite and >= 0, got " + std::to_string(epsilon));
  }
}

std::vector<std::string> Adam::slot_names() const { return {"m", "v"}; }

void Adam::UpdateComponent(const Tensor& variable, const Tensor& gradient,
                           const std::vector<Tensor>& slots, int64_t step) {
  const double t = static_cast<double>(step);
  const double b1 = beta_1_, b2 = beta_2_;
  const float lr_t = static_cast<float>(learning_rate_ * std::sqrt(1.0 - std::pow(b2, t)) /
                                        (1.0 - std::pow(b1, t)));
  const float one_minus_b1 = static_cast<float>(1.0 - b1);
  const float one_minus_b2 = static_cast<float>(1.0 - b2);
  const internal::HostFloats w(variable);
  const internal::HostFloats g(gradient);
  const internal::HostFloats m(slots.at(0));
  const internal::HostFloats v(slots.at(1));
  AdamLoop(w.data(), g.data(), m.data(), v.data(), w.size(), beta_1_, beta_2_, one_minus_b1,
           one_minus_b2, lr_t, epsilon_);
  m.Commit();
  v.Commit();
  w.Commit();
}

}  // namespace chorus
