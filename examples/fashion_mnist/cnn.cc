#include "cnn.h"

#include <chorus/base/error.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <dnnl.hpp>
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
constexpr int64_t kConv1Side = 26;  // 28 - 3 + 1
constexpr int64_t kPool1Side = 13;
constexpr int64_t kConv2Channels = 64;
constexpr int64_t kConv2Side = 11;                                   // 13 - 3 + 1
constexpr int64_t kPool2Side = 5;                                    // floor(11 / 2)
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
    plan->n = n_;
    Plan& p = *plan;
    const memory::dims unit = {1, 1}, zero = {0, 0}, pool = {2, 2};
    const algorithm_t conv = dnnl::algorithm::convolution_direct;
    const dnnl::prop_kind training = dnnl::prop_kind::forward_training;
    auto any = [](const memory::dims& dims) { return Desc(dims, Tag::any); };

    // The caller's arrays, in Keras layouts. A 28x28x1 image is the same bytes in nhwc and nchw.
    p.images = memory(Desc({n_, 1, kImageSide, kImageSide}, Tag::nhwc), engine_, nullptr);
    const memory::desc conv1_w_user = Desc({kConv1Channels, 1, 3, 3}, Tag::hwio);
    const memory::desc conv2_w_user = Desc({kConv2Channels, kConv1Channels, 3, 3}, Tag::hwio);
    const memory::desc dense1_w_user = Desc({kHidden, kFlat}, Tag::io);
    const memory::desc dense2_w_user = Desc({kClasses, kHidden}, Tag::io);
    const std::vector<memory::desc> user_descs = {conv1_w_user,  Desc({kConv1Channels}, Tag::a),
                                                  conv2_w_user,  Desc({kConv2Channels}, Tag::a),
                                                  dense1_w_user, Desc({kHidden}, Tag::a),
                                                  dense2_w_user, Desc({kClasses}, Tag::a)};
    for (const memory::desc& desc : user_descs) {
      p.weights.emplace_back(desc, engine_, nullptr);
      p.gradients.emplace_back(desc, engine_, nullptr);
    }
    std::vector<Layouts> weights;
    for (const memory& w : p.weights) weights.emplace_back(w);
    Layouts images(p.images);

    // ---- Forward ----
    // conv2d + relu.
    const memory::dims conv1_dst_dims = {n_, kConv1Channels, kConv1Side, kConv1Side};
    dnnl::convolution_forward::primitive_desc conv1_pd(
        {training, conv, any({n_, 1, kImageSide, kImageSide}), any({kConv1Channels, 1, 3, 3}),
         Desc({kConv1Channels}, Tag::a), any(conv1_dst_dims), unit, zero, zero},
        relu_attr_, engine_);
    const memory conv1_src = images.In(conv1_pd.src_desc(), engine_, p.forward);
    const memory a1 = New(conv1_pd.dst_desc());
    Add(p.forward, conv1_pd, dnnl::convolution_forward(conv1_pd),
        {{DNNL_ARG_SRC, conv1_src},
         {DNNL_ARG_WEIGHTS, weights[kConv1W].In(conv1_pd.weights_desc(), engine_, p.forward)},
         {DNNL_ARG_BIAS, p.weights[kConv1B]},
         {DNNL_ARG_DST, a1}});
    // max_pooling2d.
    const memory::dims pool1_dims = {n_, kConv1Channels, kPool1Side, kPool1Side};
    dnnl::pooling_forward::primitive_desc pool1_pd(
        {training, dnnl::algorithm::pooling_max, a1.get_desc(), any(pool1_dims), pool, pool, zero,
         zero},
        attr_, engine_);
    const memory pool1_ws = New(pool1_pd.workspace_desc());
    Layouts p1(New(pool1_pd.dst_desc()));
    Add(p.forward, pool1_pd, dnnl::pooling_forward(pool1_pd),
        {{DNNL_ARG_SRC, a1}, {DNNL_ARG_DST, p1.home()}, {DNNL_ARG_WORKSPACE, pool1_ws}});
    // conv2d_1 + relu.
    const memory::dims conv2_dst_dims = {n_, kConv2Channels, kConv2Side, kConv2Side};
    dnnl::convolution_forward::primitive_desc conv2_pd(
        {training, conv, any(pool1_dims), any({kConv2Channels, kConv1Channels, 3, 3}),
         Desc({kConv2Channels}, Tag::a), any(conv2_dst_dims), unit, zero, zero},
        relu_attr_, engine_);
    const memory conv2_src = p1.In(conv2_pd.src_desc(), engine_, p.forward);
    const memory a2 = New(conv2_pd.dst_desc());
    Add(p.forward, conv2_pd, dnnl::convolution_forward(conv2_pd),
        {{DNNL_ARG_SRC, conv2_src},
         {DNNL_ARG_WEIGHTS, weights[kConv2W].In(conv2_pd.weights_desc(), engine_, p.forward)},
         {DNNL_ARG_BIAS, p.weights[kConv2B]},
         {DNNL_ARG_DST, a2}});
    // max_pooling2d_1.
    const memory::dims pool2_dims = {n_, kConv2Channels, kPool2Side, kPool2Side};
    dnnl::pooling_forward::primitive_desc pool2_pd(
        {training, dnnl::algorithm::pooling_max, a2.get_desc(), any(pool2_dims), pool, pool, zero,
         zero},
        attr_, engine_);
    const memory pool2_ws = New(pool2_pd.workspace_desc());
    const memory p2 = New(pool2_pd.dst_desc());
    Add(p.forward, pool2_pd, dnnl::pooling_forward(pool2_pd),
        {{DNNL_ARG_SRC, a2}, {DNNL_ARG_DST, p2}, {DNNL_ARG_WORKSPACE, pool2_ws}});
    // flatten: the map in nhwc is [n, 1600] in Keras's (h, w, c) order.
    const memory flat = New(Desc({n_, kFlat}, Tag::nc));
    const memory flat_nhwc(Desc(pool2_dims, Tag::nhwc), engine_, flat.get_data_handle());
    Reorder(p.forward, p2, flat_nhwc);
    // dense + relu.
    dnnl::inner_product_forward::primitive_desc dense1_pd(
        {training, flat.get_desc(), any({kHidden, kFlat}), Desc({kHidden}, Tag::a),
         Desc({n_, kHidden}, Tag::nc)},
        relu_attr_, engine_);
    const memory h1 = New(dense1_pd.dst_desc());
    Add(p.forward, dense1_pd, dnnl::inner_product_forward(dense1_pd),
        {{DNNL_ARG_SRC, flat},
         {DNNL_ARG_WEIGHTS, weights[kDense1W].In(dense1_pd.weights_desc(), engine_, p.forward)},
         {DNNL_ARG_BIAS, p.weights[kDense1B]},
         {DNNL_ARG_DST, h1}});
    // dense_1: logits.
    dnnl::inner_product_forward::primitive_desc dense2_pd(
        {training, h1.get_desc(), any({kClasses, kHidden}), Desc({kClasses}, Tag::a),
         Desc({n_, kClasses}, Tag::nc)},
        attr_, engine_);
    p.logits = New(dense2_pd.dst_desc());
    Add(p.forward, dense2_pd, dnnl::inner_product_forward(dense2_pd),
        {{DNNL_ARG_SRC, h1},
         {DNNL_ARG_WEIGHTS, weights[kDense2W].In(dense2_pd.weights_desc(), engine_, p.forward)},
         {DNNL_ARG_BIAS, p.weights[kDense2B]},
         {DNNL_ARG_DST, p.logits}});

    // ---- Backward ----
    p.d_logits = New(p.logits.get_desc());
    std::vector<Step>& b = p.backward;
    // dense_1.
    dnnl::inner_product_backward_weights::primitive_desc dense2_bw_pd(
        {h1.get_desc(), any({kClasses, kHidden}), Desc({kClasses}, Tag::a), p.d_logits.get_desc()},
        attr_, engine_, dense2_pd);
    AddWeightGradient(b, dense2_bw_pd, dnnl::inner_product_backward_weights(dense2_bw_pd),
                      {{DNNL_ARG_SRC, h1},
                       {DNNL_ARG_DIFF_DST, p.d_logits},
                       {DNNL_ARG_DIFF_BIAS, p.gradients[kDense2B]}},
                      dense2_bw_pd.diff_weights_desc(), p.gradients[kDense2W]);
    dnnl::inner_product_backward_data::primitive_desc dense2_bd_pd(
        {h1.get_desc(), any({kClasses, kHidden}), p.d_logits.get_desc()}, attr_, engine_,
        dense2_pd);
    const memory d_h1 = New(dense2_bd_pd.diff_src_desc());
    Add(b, dense2_bd_pd, dnnl::inner_product_backward_data(dense2_bd_pd),
        {{DNNL_ARG_DIFF_DST, p.d_logits},
         {DNNL_ARG_WEIGHTS, weights[kDense2W].In(dense2_bd_pd.weights_desc(), engine_, b)},
         {DNNL_ARG_DIFF_SRC, d_h1}});
    // dense's relu, then dense.
    const memory d_z1 = ReluBackward(b, h1, d_h1);
    dnnl::inner_product_backward_weights::primitive_desc dense1_bw_pd(
        {flat.get_desc(), any({kHidden, kFlat}), Desc({kHidden}, Tag::a), d_z1.get_desc()}, attr_,
        engine_, dense1_pd);
    AddWeightGradient(b, dense1_bw_pd, dnnl::inner_product_backward_weights(dense1_bw_pd),
                      {{DNNL_ARG_SRC, flat},
                       {DNNL_ARG_DIFF_DST, d_z1},
                       {DNNL_ARG_DIFF_BIAS, p.gradients[kDense1B]}},
                      dense1_bw_pd.diff_weights_desc(), p.gradients[kDense1W]);
    dnnl::inner_product_backward_data::primitive_desc dense1_bd_pd(
        {flat.get_desc(), any({kHidden, kFlat}), d_z1.get_desc()}, attr_, engine_, dense1_pd);
    const memory d_flat = New(flat.get_desc());
    Add(b, dense1_bd_pd, dnnl::inner_product_backward_data(dense1_bd_pd),
        {{DNNL_ARG_DIFF_DST, d_z1},
         {DNNL_ARG_WEIGHTS, weights[kDense1W].In(dense1_bd_pd.weights_desc(), engine_, b)},
         {DNNL_ARG_DIFF_SRC, d_flat}});
    // conv2d_1's relu, through max_pooling2d_1 (unflattened). The relu is applied before the
    // pooling, but its backward step runs on the pooled map, 4x smaller: pooling's backward step
    // routes each gradient to its window's maximum, whose relu output is the pooled value, so
    // masking by (pooled value > 0) before it is the same as masking by (relu output > 0) after.
    const memory d_flat_masked = ReluBackward(b, flat, d_flat);
    Layouts d_p2(memory(flat_nhwc.get_desc(), engine_, d_flat_masked.get_data_handle()));
    dnnl::pooling_backward::primitive_desc pool2_bw_pd(
        {dnnl::algorithm::pooling_max, a2.get_desc(), p2.get_desc(), pool, pool, zero, zero}, attr_,
        engine_, pool2_pd);
    Layouts d_c2(New(pool2_bw_pd.diff_src_desc()));
    Add(b, pool2_bw_pd, dnnl::pooling_backward(pool2_bw_pd),
        {{DNNL_ARG_DIFF_DST, d_p2.In(pool2_bw_pd.diff_dst_desc(), engine_, b)},
         {DNNL_ARG_WORKSPACE, pool2_ws},
         {DNNL_ARG_DIFF_SRC, d_c2.home()}});
    // conv2d_1.
    dnnl::convolution_backward_weights::primitive_desc conv2_bw_pd(
        {conv, any(pool1_dims), any({kConv2Channels, kConv1Channels, 3, 3}),
         Desc({kConv2Channels}, Tag::a), any(conv2_dst_dims), unit, zero, zero},
        attr_, engine_, conv2_pd);
    AddWeightGradient(b, conv2_bw_pd, dnnl::convolution_backward_weights(conv2_bw_pd),
                      {{DNNL_ARG_SRC, p1.In(conv2_bw_pd.src_desc(), engine_, b)},
                       {DNNL_ARG_DIFF_DST, d_c2.In(conv2_bw_pd.diff_dst_desc(), engine_, b)},
                       {DNNL_ARG_DIFF_BIAS, p.gradients[kConv2B]}},
                      conv2_bw_pd.diff_weights_desc(), p.gradients[kConv2W]);
    dnnl::convolution_backward_data::primitive_desc conv2_bd_pd(
        {conv, any(pool1_dims), any({kConv2Channels, kConv1Channels, 3, 3}), any(conv2_dst_dims),
         unit, zero, zero},
        attr_, engine_, conv2_pd);
    Layouts d_p1(New(conv2_bd_pd.diff_src_desc()));
    Add(b, conv2_bd_pd, dnnl::convolution_backward_data(conv2_bd_pd),
        {{DNNL_ARG_DIFF_DST, d_c2.In(conv2_bd_pd.diff_dst_desc(), engine_, b)},
         {DNNL_ARG_WEIGHTS, weights[kConv2W].In(conv2_bd_pd.weights_desc(), engine_, b)},
         {DNNL_ARG_DIFF_SRC, d_p1.home()}});
    // conv2d's relu through max_pooling2d, the same way.
    const memory d_p1_masked =
        ReluBackward(b, p1.home(), d_p1.In(p1.home().get_desc(), engine_, b));
    dnnl::pooling_backward::primitive_desc pool1_bw_pd(
        {dnnl::algorithm::pooling_max, a1.get_desc(), p1.home().get_desc(), pool, pool, zero, zero},
        attr_, engine_, pool1_pd);
    Layouts d_c1(New(pool1_bw_pd.diff_src_desc()));
    Add(b, pool1_bw_pd, dnnl::pooling_backward(pool1_bw_pd),
        {{DNNL_ARG_DIFF_DST, d_p1_masked},
         {DNNL_ARG_WORKSPACE, pool1_ws},
         {DNNL_ARG_DIFF_SRC, d_c1.home()}});
    // conv2d's weights (the images need no gradient).
    dnnl::convolution_backward_weights::primitive_desc conv1_bw_pd(
        {conv, any({n_, 1, kImageSide, kImageSide}), any({kConv1Channels, 1, 3, 3}),
         Desc({kConv1Channels}, Tag::a), any(conv1_dst_dims), unit, zero, zero},
        attr_, engine_, conv1_pd);
    AddWeightGradient(b, conv1_bw_pd, dnnl::convolution_backward_weights(conv1_bw_pd),
                      {{DNNL_ARG_SRC, images.In(conv1_bw_pd.src_desc(), engine_, b)},
                       {DNNL_ARG_DIFF_DST, d_c1.In(conv1_bw_pd.diff_dst_desc(), engine_, b)},
                       {DNNL_ARG_DIFF_BIAS, p.gradients[kConv1B]}},
                      conv1_bw_pd.diff_weights_desc(), p.gradients[kConv1W]);

    // One scratchpad for every step that asked for one.
    if (scratchpad_bytes_ > 0) {
      p.scratchpad = New(memory::desc({static_cast<memory::dim>(scratchpad_bytes_)},
                                      memory::data_type::u8, Tag::a));
      for (std::vector<Step>* steps : {&p.forward, &p.backward}) {
        for (Step& step : *steps) {
          if (step.args.count(DNNL_ARG_SCRATCHPAD) != 0)
            step.args[DNNL_ARG_SCRATCHPAD] = p.scratchpad;
        }
      }
    }
    return plan;
  }

 private:
  using algorithm_t = dnnl::algorithm;

  memory New(const memory::desc& desc) const { return memory(desc, engine_); }

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

  void Reorder(std::vector<Step>& steps, const memory& from, const memory& to) {
    steps.push_back({dnnl::reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}});
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
    if (!direct) Reorder(steps, target, user);
  }

  // d(relu output) → d(relu input), from the relu's output `dst`.
  memory ReluBackward(std::vector<Step>& steps, const memory& dst, const memory& d_dst) {
    const algorithm_t relu = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc hint(
        {dnnl::prop_kind::forward_training, relu, dst.get_desc(), 0.0f, 0.0f}, attr_, engine_);
    dnnl::eltwise_backward::primitive_desc pd({relu, d_dst.get_desc(), dst.get_desc(), 0.0f, 0.0f},
                                              attr_, engine_, hint);
    const memory d_src = New(pd.diff_src_desc());
    Add(steps, pd, dnnl::eltwise_backward(pd),
        {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, d_dst}, {DNNL_ARG_DIFF_SRC, d_src}});
    return d_src;
  }

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
