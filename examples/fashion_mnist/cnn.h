// The TensorFlow tutorial's convolutional classifier as a pure compute class over oneDNN:
// Conv2D(32, 3x3, relu) → MaxPool 2x2 → Conv2D(64, 3x3, relu) → MaxPool 2x2 → Flatten →
// Dense(64, relu) → Dense(10) logits, softmax cross-entropy per example, Keras L2 on the kernels.
// Weights live with the caller in Keras's layouts (conv kernels HWIO, dense kernels [in, out]);
// CnnCompute runs one replica's forward and backward passes on them.
#ifndef CHORUS_EXAMPLES_FASHION_MNIST_CNN_H_
#define CHORUS_EXAMPLES_FASHION_MNIST_CNN_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace fashion_mnist {

struct CnnConfig {
  float l2 = 1e-5f;   // Keras l2(): l2 * sum(kernel^2), for each of the four kernels
  uint64_t seed = 1;  // Glorot-uniform initialisation of the kernels
};

struct ParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool is_kernel;  // kernels are regularised and Glorot-initialised; biases start at zero
};

// The 8 parameters in order, Keras names and shapes: conv2d/kernel [3,3,1,32], conv2d/bias [32],
// conv2d_1/kernel [3,3,32,64], conv2d_1/bias [64], dense/kernel [1600,64], dense/bias [64],
// dense_1/kernel [64,10], dense_1/bias [10]. Row r of dense/kernel is the flattened [5,5,64]
// feature map's (h, w, c) with r = (h * 5 + w) * 64 + c, as Keras flattens channels-last maps.
const std::vector<ParameterSpec>& CnnParameters();
// Glorot-uniform kernels (drawn in parameter order from std::mt19937_64(seed)), zero biases.
std::vector<std::vector<float>> CnnInitialValues(const CnnConfig& config);

struct CnnOutputs {
  std::vector<float> per_example_loss;  // [n] softmax cross-entropy
  std::vector<float> logits;            // [n, 10]
  float regularization_loss = 0;        // l2 * sum of the squared kernels
};

// One per thread that calls it (a replica); not thread-safe itself. Primitives are built once per
// batch size and kept for the next calls of that size.
class CnnCompute {
 public:
  // threads: OpenMP threads for this caller's oneDNN work; 0 = hardware_concurrency. Keep the
  // replicas' threads together within the free cores: libgomp's barriers spin, and with a thread
  // descheduled a batch took 20-100x longer here (OMP_WAIT_POLICY=passive softens that).
  explicit CnnCompute(const CnnConfig& config, int threads = 0);
  ~CnnCompute();
  CnnCompute(CnnCompute&&) noexcept;
  CnnCompute& operator=(CnnCompute&&) noexcept;

  const CnnConfig& config() const;

  // weights: 8 host arrays in CnnParameters() order. images: n x 784 floats (28x28x1, row-major).
  // labels: n in [0, 10). Throws chorus::Error(CHORUS_INVALID_ARGUMENT) for a label out of range
  // or n < 0.
  CnnOutputs Forward(std::span<const float* const> weights, const float* images,
                     const int32_t* labels, int64_t n);
  // Forward + backward. gradients (resized to 8 arrays of the parameters' sizes) receive
  // d/dw [loss_scale * sum_i per_example_loss_i + regularization_scale * regularization_loss].
  // (loss_scale = 1/global_batch and regularization_scale = 1/num_replicas give
  // tf.nn.compute_average_loss + tf.nn.scale_regularization_loss.)
  CnnOutputs ForwardBackward(std::span<const float* const> weights, const float* images,
                             const int32_t* labels, int64_t n, double loss_scale,
                             double regularization_scale,
                             std::vector<std::vector<float>>& gradients);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fashion_mnist

#endif  // CHORUS_EXAMPLES_FASHION_MNIST_CNN_H_
