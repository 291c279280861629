// Keras SGD: plain, with momentum, or Nesterov momentum.
#include <chorus/base/error.h>
#include <chorus/training/optimizer.h>

#include <cmath>
#include <string>
#include <vector>

#include "training/optimizer_host_view.h"

namespace chorus {

SGD::SGD(float learning_rate, float momentum, bool nesterov)
    : learning_rate_(learning_rate), momentum_(momentum), nesterov_(nesterov) {
  if (!std::isfinite(learning_rate)) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "SGD: learning_rate must be finite, got " + std::to_string(learning_rate));
  }
  if (!(momentum >= 0.0f && momentum <= 1.0f)) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "SGD: momentum must be in [0, 1], got " + std::to_string(momentum));
  }
}

std::vector<std::string> SGD::slot_names() const {
  if (momentum_ > 0.0f) return {"momentum"};
  return {};
}

void SGD::UpdateComponent(const Tensor& variable, const Tensor& gradient,
                          const std::vector<Tensor>& slots, int64_t /*step*/) {
  const internal::HostFloats w(variable);
  const internal::HostFloats g(gradient);
  const float lr = learning_rate_;
  const size_t n = w.size();
  if (slots.empty()) {
    for (size_t i = 0; i < n; ++i) w[i] -= lr * g[i];
    w.Commit();
    return;
  }
  const internal::HostFloats m(slots.at(0));
  for (size_t i = 0; i < n; ++i) {
    m[i] = momentum_ * m[i] - lr * g[i];
    w[i] += nesterov_ ? momentum_ * m[i] - lr * g[i] : m[i];
  }
  m.Commit();
  w.Commit();
}

}  // namespace chorus
