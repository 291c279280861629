#include "cnn.h"

#include <chorus/base/error.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <dnnl.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

namespace fashion_mnist {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

constexpr int64_t kImageSide = 28;
constexpr int64_t kConv1Channels = 32;
constexpr int64_t kPool1Side = 13;  // (28 - 2) / 2
constexpr int64_t kConv2Channels = 64;
constexpr int64_t kPool2Side = 5;                                    // floor((13 - 2) / 2)
constexpr int64_t kFlat = kPool2Side * kPool2Side * kConv2Channels;  // 1600
constexpr int64_t kHidden = 64;
constexpr int64_t kClasses = 10;
constexpr size_t kNumParameters = 8;
// Parameter indices, in CnnParameters() order.
enum Parameter : size_t {
  kConv1W,
  kConv1B,
  kConv2W,
  kConv2B,
  kDense1W,
  kDense1B,
  kDense2W,
  kDense2B
};
// Plans kept per CnnCompute: a data set's epoch has a full batch size and a last one.
constexpr size_t kMaxPlans = 4;

memory::desc Desc(const memory::dims& dims, Tag tag) { return memory::desc(dims, kF32, tag); }

// A primitive and its arguments, run in order on the stream.
struct Step {
  dnnl::primitive primitive;
  std::unordered_map<int, memory> args;
};

// One tensor in the layouts the primitives ask for: the first memory holds its values, the others
// are reorders of it, appended to a step list the first time a layout is asked for.
class Layouts {
 public:
  Layouts() = default;
  explicit Layouts(memory home) { versions_.push_back(std::move(home)); }
  const memory& home() const { return versions_.front(); }
  memory In(const memory::desc& wanted, const dnnl::engine& engine, std::vector<Step>& steps) {
    for (const memory& version : versions_) {
      if (version.get_desc() == wanted) return version;
    }
    memory converted(wanted, engine);
    steps.push_back(
        {dnnl::reorder(home(), converted), {{DNNL_ARG_FROM, home()}, {DNNL_ARG_TO, converted}}});
    versions_.push_back(converted);
    return converted;
  }

 private:
  std::vector<memory> versions_;
};

// Everything one batch size needs: primitives in order and the memories between them. The
// caller's arrays (images, weights, gradients) are bound to `images`, `weights` and `gradients`
// before each run; every other memory belongs to the plan.
struct Plan {
  int64_t n = 0;
  uint64_t last_use = 0;
  memory images;
  std::vector<memory> weights;
  std::vector<memory> gradients;
  memory logits;    // [n, 10], plain
  memory d_logits;  // [n, 10], plain
  std::vector<Step> forward;
  std::vector<Step> backward;
  memory scratchpad;  // one buffer shared by the steps, which run one after another
};

// A Conv2D(3x3, valid, relu) + MaxPooling2D(2x2) block's forward primitives and memories.
struct ConvBlock {
  dnnl::convolution_forward::primitive_desc conv_pd;
  dnnl::pooling_forward::primitive_desc pool_pd;
  memory::desc src_any, kernel_any, bias, dst_any;  // for the backward descriptors
  memory activation;                                // relu(conv(src)), the pooling's input
  memory workspace;                                 // where each window's maximum was
  Layouts pooled;
};

// A Dense layer's forward primitive and output.
struct DenseLayer {
  dnnl::inner_product_forward::primitive_desc pd;
  memory::desc kernel_any, bias;
  bool relu;
  memory dst;  // after the relu, if any
};

// Builds a Plan. Primitives use user-managed scratchpads, collected into one buffer at the end.
class PlanBuilder {
 public:
  PlanBuilder(const dnnl::engine& engine, int64_t n) : engine_(engine), n_(n) {
    attr_.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    relu_attr_.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::post_ops relu;
    relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    relu_attr_.set_post_ops(relu);
  }

  std::unique_ptr<Plan> Build() {
    auto plan = std::make_unique<Plan>();
    Plan& p = *plan;
    p.n = n_;
    // The caller's arrays, in Keras layouts. A 28x28x1 image is the same bytes in nhwc and nchw.
    p.images = memory(Desc({n_, 1, kImageSide, kImageSide}, Tag::nhwc), engine_, nullptr);
    const std::vector<memory::desc> user_descs = {
        Desc({kConv1Channels, 1, 3, 3}, Tag::hwio),
        Desc({kConv1Channels}, Tag::a),
        Desc({kConv2Channels, kConv1Channels, 3, 3}, Tag::hwio),
        Desc({kConv2Channels}, Tag::a),
        Desc({kHidden, kFlat}, Tag::io),
        Desc({kHidden}, Tag::a),
        Desc({kClasses, kHidden}, Tag::io),
        Desc({kClasses}, Tag::a)};
    for (const memory::desc& desc : user_descs) {
      p.weights.emplace_back(desc, engine_, nullptr);
      p.gradients.emplace_back(desc, engine_, nullptr);
    }
    std::vector<Layouts> weights;
    for (const memory& w : p.weights) weights.emplace_back(w);
    Layouts images(p.images);

    // Forward.
    std::vector<Step>& f = p.forward;
    ConvBlock conv1 =
        ForwardConv(images, kImageSide, 1, kConv1Channels, weights[kConv1W], p.weights[kConv1B], f);
    ConvBlock conv2 = ForwardConv(conv1.pooled, kPool1Side, kConv1Channels, kConv2Channels,
                                  weights[kConv2W], p.weights[kConv2B], f);
    // Flatten: the [n, 64, 5, 5] map in nhwc is [n, 1600] in Keras's (h, w, c) order.
    const memory::desc flat_desc = Desc({n_, kFlat}, Tag::nc);
    const memory::desc unflat_desc = Desc({n_, kConv2Channels, kPool2Side, kPool2Side}, Tag::nhwc);
    const memory flat(flat_desc, engine_,
                      conv2.pooled.In(unflat_desc, engine_, f).get_data_handle());
    const DenseLayer dense1 =
        ForwardDense(flat, kFlat, kHidden, true, weights[kDense1W], p.weights[kDense1B], f);
    const DenseLayer dense2 = ForwardDense(dense1.dst, kHidden, kClasses, false, weights[kDense2W],
                                           p.weights[kDense2B], f);
    p.logits = dense2.dst;

    // Backward.
    std::vector<Step>& b = p.backward;
    p.d_logits = New(p.logits.get_desc());
    const memory d_h1 = BackwardDense(dense2, dense1.dst, p.d_logits, weights[kDense2W],
                                      p.gradients[kDense2W], p.gradients[kDense2B], b);
    const memory d_flat = BackwardDense(dense1, flat, d_h1, weights[kDense1W],
                                        p.gradients[kDense1W], p.gradients[kDense1B], b);
    Layouts d_pooled2(memory(unflat_desc, engine_, d_flat.get_data_handle()));
    std::optional<Layouts> d_pooled1 =
        BackwardConv(conv2, conv1.pooled, d_pooled2, weights[kConv2W], p.gradients[kConv2W],
                     p.gradients[kConv2B], true, b);
    BackwardConv(conv1, images, *d_pooled1, weights[kConv1W], p.gradients[kConv1W],
                 p.gradients[kConv1B], false, b);  // the images need no gradient

    // One scratchpad for every step that asked for one.
    if (scratchpad_bytes_ > 0) {
      p.scratchpad = New(memory::desc({static_cast<memory::dim>(scratchpad_bytes_)},
                                      memory::data_type::u8, Tag::a));
      for (std::vector<Step>* steps : {&p.forward, &p.backward}) {
        for (Step& step : *steps) {
          if (step.args.count(DNNL_ARG_SCRATCHPAD) != 0) {
            step.args[DNNL_ARG_SCRATCHPAD] = p.scratchpad;
          }
        }
      }
    }
    return plan;
  }

 private:
  static constexpr dnnl::prop_kind kTraining = dnnl::prop_kind::forward_training;
  static constexpr dnnl::algorithm kConv = dnnl::algorithm::convolution_direct;
  static constexpr dnnl::algorithm kMaxPool = dnnl::algorithm::pooling_max;

  static memory::desc Any(const memory::dims& dims) { return Desc(dims, Tag::any); }
  memory New(const memory::desc& desc) const { return memory(desc, engine_); }

  ConvBlock ForwardConv(Layouts& src, int64_t side, int64_t in_channels, int64_t out_channels,
                        Layouts& kernel, const memory& bias, std::vector<Step>& steps) {
    const int64_t out_side = side - 2, pooled_side = out_side / 2;
    ConvBlock block;
    block.src_any = Any({n_, in_channels, side, side});
    block.kernel_any = Any({out_channels, in_channels, 3, 3});
    block.bias = bias.get_desc();
    block.dst_any = Any({n_, out_channels, out_side, out_side});
    block.conv_pd = dnnl::convolution_forward::primitive_desc(
        {kTraining, kConv, block.src_any, block.kernel_any, block.bias, block.dst_any, kUnit, kZero,
         kZero},
        relu_attr_, engine_);
    block.activation = New(block.conv_pd.dst_desc());
    Add(steps, block.conv_pd, dnnl::convolution_forward(block.conv_pd),
        {{DNNL_ARG_SRC, src.In(block.conv_pd.src_desc(), engine_, steps)},
         {DNNL_ARG_WEIGHTS, kernel.In(block.conv_pd.weights_desc(), engine_, steps)},
         {DNNL_ARG_BIAS, bias},
         {DNNL_ARG_DST, block.activation}});
    block.pool_pd = dnnl::pooling_forward::primitive_desc(
        {kTraining, kMaxPool, block.activation.get_desc(),
         Any({n_, out_channels, pooled_side, pooled_side}), kPool, kPool, kZero, kZero},
        attr_, engine_);
    block.workspace = New(block.pool_pd.workspace_desc());
    block.pooled = Layouts(New(block.pool_pd.dst_desc()));
    Add(steps, block.pool_pd, dnnl::pooling_forward(block.pool_pd),
        {{DNNL_ARG_SRC, block.activation},
         {DNNL_ARG_DST, block.pooled.home()},
         {DNNL_ARG_WORKSPACE, block.workspace}});
    return block;
  }

  // The block's weight gradients from d(pooled output), and d(src) when `data_gradient`.
  std::optional<Layouts> BackwardConv(const ConvBlock& block, Layouts& src, Layouts& d_pooled,
                                      Layouts& kernel, const memory& d_kernel, const memory& d_bias,
                                      bool data_gradient, std::vector<Step>& steps) {
    // The relu is applied before the pooling, but its backward step runs on the pooled map, 4x
    // smaller: pooling's backward step routes each gradient to its window's maximum, whose relu
    // output is the pooled value, so masking by (pooled value > 0) before it is the same as
    // masking by (relu output > 0) after.
    const memory& pooled = block.pooled.home();
    const memory d_pooled_masked =
        ReluBackward(steps, pooled, d_pooled.In(pooled.get_desc(), engine_, steps));
    dnnl::pooling_backward::primitive_desc pool_pd(
        {kMaxPool, block.activation.get_desc(), pooled.get_desc(), kPool, kPool, kZero, kZero},
        attr_, engine_, block.pool_pd);
    Layouts d_conv(New(pool_pd.diff_src_desc()));
    Add(steps, pool_pd, dnnl::pooling_backward(pool_pd),
        {{DNNL_ARG_DIFF_DST, d_pooled_masked},
         {DNNL_ARG_WORKSPACE, block.workspace},
         {DNNL_ARG_DIFF_SRC, d_conv.home()}});

    dnnl::convolution_backward_weights::primitive_desc weights_pd(
        {kConv, block.src_any, block.kernel_any, block.bias, block.dst_any, kUnit, kZero, kZero},
        attr_, engine_, block.conv_pd);
    AddWeightGradient(steps, weights_pd, dnnl::convolution_backward_weights(weights_pd),
                      {{DNNL_ARG_SRC, src.In(weights_pd.src_desc(), engine_, steps)},
                       {DNNL_ARG_DIFF_DST, d_conv.In(weights_pd.diff_dst_desc(), engine_, steps)},
                       {DNNL_ARG_DIFF_BIAS, d_bias}},
                      weights_pd.diff_weights_desc(), d_kernel);
    if (!data_gradient) return std::nullopt;
    dnnl::convolution_backward_data::primitive_desc data_pd(
        {kConv, block.src_any, block.kernel_any, block.dst_any, kUnit, kZero, kZero}, attr_,
        engine_, block.conv_pd);
    Layouts d_src(New(data_pd.diff_src_desc()));
    Add(steps, data_pd, dnnl::convolution_backward_data(data_pd),
        {{DNNL_ARG_DIFF_DST, d_conv.In(data_pd.diff_dst_desc(), engine_, steps)},
         {DNNL_ARG_WEIGHTS, kernel.In(data_pd.weights_desc(), engine_, steps)},
         {DNNL_ARG_DIFF_SRC, d_src.home()}});
    return d_src;
  }

  DenseLayer ForwardDense(const memory& src, int64_t inputs, int64_t outputs, bool relu,
                          Layouts& kernel, const memory& bias, std::vector<Step>& steps) {
    DenseLayer layer;
    layer.kernel_any = Any({outputs, inputs});
    layer.bias = bias.get_desc();
    layer.relu = relu;
    layer.pd = dnnl::inner_product_forward::primitive_desc(
        {kTraining, src.get_desc(), layer.kernel_any, layer.bias, Desc({n_, outputs}, Tag::nc)},
        relu ? relu_attr_ : attr_, engine_);
    layer.dst = New(layer.pd.dst_desc());
    Add(steps, layer.pd, dnnl::inner_product_forward(layer.pd),
        {{DNNL_ARG_SRC, src},
         {DNNL_ARG_WEIGHTS, kernel.In(layer.pd.weights_desc(), engine_, steps)},
         {DNNL_ARG_BIAS, bias},
         {DNNL_ARG_DST, layer.dst}});
    return layer;
  }

  // The layer's weight gradients from d(layer output); returns d(src), in src's layout.
  memory BackwardDense(const DenseLayer& layer, const memory& src, const memory& d_dst,
                       Layouts& kernel, const memory& d_kernel, const memory& d_bias,
                       std::vector<Step>& steps) {
    const memory d_pre = layer.relu ? ReluBackward(steps, layer.dst, d_dst) : d_dst;
    dnnl::inner_product_backward_weights::primitive_desc weights_pd(
        {src.get_desc(), layer.kernel_any, layer.bias, d_pre.get_desc()}, attr_, engine_, layer.pd);
    AddWeightGradient(
        steps, weights_pd, dnnl::inner_product_backward_weights(weights_pd),
        {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, d_pre}, {DNNL_ARG_DIFF_BIAS, d_bias}},
        weights_pd.diff_weights_desc(), d_kernel);
    dnnl::inner_product_backward_data::primitive_desc data_pd(
        {src.get_desc(), layer.kernel_any, d_pre.get_desc()}, attr_, engine_, layer.pd);
    const memory d_src = New(src.get_desc());
    Add(steps, data_pd, dnnl::inner_product_backward_data(data_pd),
        {{DNNL_ARG_DIFF_DST, d_pre},
         {DNNL_ARG_WEIGHTS, kernel.In(data_pd.weights_desc(), engine_, steps)},
         {DNNL_ARG_DIFF_SRC, d_src}});
    return d_src;
  }

  // Appends a step; one that needs a scratchpad gets a placeholder filled in by Build().
  void Add(std::vector<Step>& steps, const dnnl::primitive_desc_base& pd, dnnl::primitive primitive,
           std::unordered_map<int, memory> args) {
    const size_t bytes = pd.scratchpad_desc().get_size();
    if (bytes > 0) {
      scratchpad_bytes_ = std::max(scratchpad_bytes_, bytes);
      args[DNNL_ARG_SCRATCHPAD] = memory();
    }
    steps.push_back({std::move(primitive), std::move(args)});
  }

  // A weights-gradient step writing into the caller's array, through a reorder when the
  // primitive's layout is not Keras's.
  void AddWeightGradient(std::vector<Step>& steps, const dnnl::primitive_desc_base& pd,
                         dnnl::primitive primitive, std::unordered_map<int, memory> args,
                         const memory::desc& produced, const memory& user) {
    const bool direct = produced == user.get_desc();
    const memory target = direct ? user : New(produced);
    args[DNNL_ARG_DIFF_WEIGHTS] = target;
    Add(steps, pd, std::move(primitive), std::move(args));
    if (!direct) {
      steps.push_back(
          {dnnl::reorder(target, user), {{DNNL_ARG_FROM, target}, {DNNL_ARG_TO, user}}});
    }
  }

  // d(relu output) → d(relu input), from the relu's output `dst` (same layout as d_dst).
  memory ReluBackward(std::vector<Step>& steps, const memory& dst, const memory& d_dst) {
    const dnnl::algorithm relu = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc hint({kTraining, relu, dst.get_desc(), 0.0f, 0.0f}, attr_,
                                               engine_);
    dnnl::eltwise_backward::primitive_desc pd({relu, d_dst.get_desc(), dst.get_desc(), 0.0f, 0.0f},
                                              attr_, engine_, hint);
    const memory d_src = New(pd.diff_src_desc());
    Add(steps, pd, dnnl::eltwise_backward(pd),
        {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, d_dst}, {DNNL_ARG_DIFF_SRC, d_src}});
    return d_src;
  }

  const memory::dims kUnit = {1, 1}, kZero = {0, 0}, kPool = {2, 2};
  const dnnl::engine& engine_;
  const int64_t n_;
  dnnl::primitive_attr attr_;
  dnnl::primitive_attr relu_attr_;  // with a fused relu
  size_t scratchpad_bytes_ = 0;
};

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

}  // namespace

const std::vector<ParameterSpec>& CnnParameters() {
  static const std::vector<ParameterSpec> parameters = {
      {"conv2d/kernel", {3, 3, 1, kConv1Channels}, true},
      {"conv2d/bias", {kConv1Channels}, false},
      {"conv2d_1/kernel", {3, 3, kConv1Channels, kConv2Channels}, true},
      {"conv2d_1/bias", {kConv2Channels}, false},
      {"dense/kernel", {kFlat, kHidden}, true},
      {"dense/bias", {kHidden}, false},
      {"dense_1/kernel", {kHidden, kClasses}, true},
      {"dense_1/bias", {kClasses}, false},
  };
  return parameters;
}

std::vector<std::vector<float>> CnnInitialValues(const CnnConfig& config) {
  std::mt19937_64 rng(config.seed);
  std::vector<std::vector<float>> values;
  for (const ParameterSpec& spec : CnnParameters()) {
    std::vector<float>& v = values.emplace_back(static_cast<size_t>(Elements(spec.shape)), 0.0f);
    if (!spec.is_kernel) continue;
    // Keras's fans: the receptive field (all but the last two dims) times in or out channels.
    const int64_t receptive =
        Elements(std::vector<int64_t>(spec.shape.begin(), spec.shape.end() - 2));
    const int64_t fan_in = receptive * spec.shape[spec.shape.size() - 2];
    const int64_t fan_out = receptive * spec.shape.back();
    const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    for (float& x : v) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      x = static_cast<float>((2 * u - 1) * limit);
    }
  }
  return values;
}

struct CnnCompute::Impl {
  Impl(const CnnConfig& config, int threads) : config(config), threads(threads) {}

  CnnConfig config;
  int threads;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<std::unique_ptr<Plan>> plans;
  uint64_t calls = 0;

  Plan& PlanFor(int64_t n) {
    ++calls;
    for (const auto& plan : plans) {
      if (plan->n == n) {
        plan->last_use = calls;
        return *plan;
      }
    }
    if (plans.size() >= kMaxPlans) {
      plans.erase(std::min_element(plans.begin(), plans.end(), [](const auto& a, const auto& b) {
        return a->last_use < b->last_use;
      }));
    }
    plans.push_back(PlanBuilder(engine, n).Build());
    plans.back()->last_use = calls;
    return *plans.back();
  }

  void Run(const std::vector<Step>& steps) {
    for (const Step& step : steps) step.primitive.execute(stream, step.args);
    stream.wait();
  }

  CnnOutputs Compute(std::span<const float* const> weights, const float* images,
                     const int32_t* labels, int64_t n, bool backward, double loss_scale,
                     double regularization_scale, std::vector<std::vector<float>>* gradients);
};

CnnCompute::CnnCompute(const CnnConfig& config, int threads)
    : impl_(std::make_unique<Impl>(
          config, threads > 0
                      ? threads
                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency())))) {}
CnnCompute::~CnnCompute() = default;
CnnCompute::CnnCompute(CnnCompute&&) noexcept = default;
CnnCompute& CnnCompute::operator=(CnnCompute&&) noexcept = default;

const CnnConfig& CnnCompute::config() const { return impl_->config; }

CnnOutputs CnnCompute::Forward(std::span<const float* const> weights, const float* images,
                               const int32_t* labels, int64_t n) {
  return impl_->Compute(weights, images, labels, n, false, 0, 0, nullptr);
}

CnnOutputs CnnCompute::ForwardBackward(std::span<const float* const> weights, const float* images,
                                       const int32_t* labels, int64_t n, double loss_scale,
                                       double regularization_scale,
                                       std::vector<std::vector<float>>& gradients) {
  return impl_->Compute(weights, images, labels, n, true, loss_scale, regularization_scale,
                        &gradients);
}

CnnOutputs CnnCompute::Impl::Compute(std::span<const float* const> weights, const float* images,
                                     const int32_t* labels, int64_t n, bool backward,
                                     double loss_scale, double regularization_scale,
                                     std::vector<std::vector<float>>* gradients) {
  const std::vector<ParameterSpec>& specs = CnnParameters();
  if (n < 0) {
    throw chorus::Error(CHORUS_INVALID_ARGUMENT, "CnnCompute: a batch of " + std::to_string(n) +
                                                     " examples; pass a count n >= 0");
  }
  if (weights.size() != kNumParameters) {
    throw chorus::Error(CHORUS_INVALID_ARGUMENT,
                        "CnnCompute: " + std::to_string(weights.size()) +
                            " weight arrays; pass the 8 of CnnParameters(), in its order");
  }
  for (size_t k = 0; k < kNumParameters; ++k) {
    if (weights[k] == nullptr) {
      throw chorus::Error(CHORUS_INVALID_ARGUMENT,
                          "CnnCompute: weight array " + specs[k].name + " is null");
    }
  }
  if (n > 0 && (images == nullptr || labels == nullptr)) {
    throw chorus::Error(
        CHORUS_INVALID_ARGUMENT,
        "CnnCompute: images or labels are null for a batch of " + std::to_string(n) + " examples");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= kClasses) {
      throw chorus::Error(CHORUS_INVALID_ARGUMENT,
                          "CnnCompute: label " + std::to_string(labels[i]) + " of example " +
                              std::to_string(i) + " is not a class in [0, " +
                              std::to_string(kClasses) + ")");
    }
  }

  CnnOutputs out;
  double squared_kernels = 0;
  for (size_t k = 0; k < kNumParameters; ++k) {
    if (!specs[k].is_kernel) continue;
    const int64_t size = Elements(specs[k].shape);
    for (int64_t i = 0; i < size; ++i) squared_kernels += double{weights[k][i]} * weights[k][i];
  }
  out.regularization_loss = static_cast<float>(config.l2 * squared_kernels);

  if (backward) {
    gradients->resize(kNumParameters);
    for (size_t k = 0; k < kNumParameters; ++k) {
      (*gradients)[k].resize(static_cast<size_t>(Elements(specs[k].shape)));
    }
  }
  if (n > 0) {
    // oneDNN's OpenMP regions take the calling thread's thread count.
    omp_set_num_threads(threads);
    Plan& plan = PlanFor(n);
    plan.images.set_data_handle(const_cast<float*>(images));
    for (size_t k = 0; k < kNumParameters; ++k) {
      plan.weights[k].set_data_handle(const_cast<float*>(weights[k]));
    }
    Run(plan.forward);

    const auto* logits = static_cast<const float*>(plan.logits.get_data_handle());
    auto* d_logits = static_cast<float*>(plan.d_logits.get_data_handle());
    out.logits.assign(logits, logits + n * kClasses);
    out.per_example_loss.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const float* z = logits + i * kClasses;
      const double peak = *std::max_element(z, z + kClasses);
      double total = 0;
      for (int64_t c = 0; c < kClasses; ++c) total += std::exp(double{z[c]} - peak);
      const double log_total = std::log(total);
      out.per_example_loss[static_cast<size_t>(i)] =
          static_cast<float>(log_total - (double{z[labels[i]]} - peak));
      for (int64_t c = 0; c < kClasses; ++c) {
        const double probability = std::exp(double{z[c]} - peak - log_total);
        d_logits[i * kClasses + c] =
            static_cast<float>(loss_scale * (probability - (c == labels[i] ? 1.0 : 0.0)));
      }
    }
    if (backward) {
      for (size_t k = 0; k < kNumParameters; ++k) {
        plan.gradients[k].set_data_handle((*gradients)[k].data());
      }
      Run(plan.backward);
    }
  } else if (backward) {
    for (std::vector<float>& g : *gradients) std::fill(g.begin(), g.end(), 0.0f);
  }

  if (backward) {
    // d/dw of regularization_scale * l2 * sum(w^2).
    const double decay = 2.0 * regularization_scale * static_cast<double>(config.l2);
    for (size_t k = 0; k < kNumParameters; ++k) {
      if (!specs[k].is_kernel) continue;
      std::vector<float>& g = (*gradients)[k];
      for (size_t i = 0; i < g.size(); ++i) {
        g[i] = static_cast<float>(g[i] + decay * weights[k][i]);
      }
    }
  }
  return out;
}

}  // namespace fashion_mnist
