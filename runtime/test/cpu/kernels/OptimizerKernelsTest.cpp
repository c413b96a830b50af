//===- OptimizerKernelsTest.cpp - AdamW, SGD and LrSchedule ---------------===//
//
// The optimizer kernels against independent double-precision re-derivations
// written here from the PyTorch and DeepSpeed definitions: several steps of
// AdamW (decoupled weight decay), Adam (L2), SGD with momentum, dampening,
// nesterov and weight decay, always with a gradient scale and updated in
// place as the compiler binds them (and out of place, with the same bits);
// the same bits at any thread count; and LrSchedule's four schedules at the
// first step, around the end of the warmup and past the last step.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"
#include "zrt/Kernel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

namespace {

using zrt::AttrMap;
using zrt::AttrValue;
using zrt::DType;
using zrt::KernelContext;
using zrt::TensorRef;
using ::testing::HasSubstr;

using zrt::test::contextWithThreads;

zrt::Status run(const std::string &op, const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, const AttrMap &attrs,
                const KernelContext &ctx = contextWithThreads(1)) {
  return zrt::test::runKernel(op, in, out, attrs, ctx);
}

TensorRef view(std::vector<float> &v) {
  return {v.data(), DType::F32, {int64_t(v.size())}};
}
TensorRef scalar(float &v) { return {&v, DType::F32, {}}; }
TensorRef scalar(int64_t &v) { return {&v, DType::I64, {}}; }

AttrValue f(double v) { return AttrValue{{}, {v}, ""}; }
AttrValue i(int64_t v) { return AttrValue{{v}, {}, ""}; }
AttrValue s(const std::string &v) { return AttrValue{{}, {}, v}; }

AttrMap attrs(std::vector<std::pair<std::string, AttrValue>> list) {
  AttrMap m;
  for (auto &kv : list)
    m.set(kv.first, kv.second);
  return m;
}

std::vector<float> randomFloats(size_t n, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

#define EXPECT_OK(expr)                                                        \
  do {                                                                         \
    zrt::Status s_ = (expr);                                                   \
    EXPECT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (0)

void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 double rel, double abs, const std::string &what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    ASSERT_NEAR(double(got[k]), want[k], abs + rel * std::fabs(want[k]))
        << what << " at " << k;
}

//===----------------------------------------------------------------------===//
// Adam / AdamW
//===----------------------------------------------------------------------===//

struct AdamConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
  bool decoupled = true;
  AttrMap attrMap() const {
    return attrs({{"beta1", f(beta1)},
                  {"beta2", f(beta2)},
                  {"eps", f(eps)},
                  {"weight_decay", f(weightDecay)},
                  {"decoupled", i(decoupled ? 1 : 0)}});
  }
};

/// One step of Adam(W) in double, from the algorithm in torch.optim.Adam's
/// and AdamW's documentation.
void adamReference(const AdamConfig &c, int64_t t, double lr, double scale,
                   std::vector<double> &p, const std::vector<float> &grad,
                   std::vector<double> &m, std::vector<double> &v) {
  for (size_t k = 0; k < p.size(); ++k) {
    double g = double(grad[k]) * scale;
    if (c.decoupled)
      p[k] -= lr * c.weightDecay * p[k];
    else
      g += c.weightDecay * p[k];
    m[k] = c.beta1 * m[k] + (1 - c.beta1) * g;
    v[k] = c.beta2 * v[k] + (1 - c.beta2) * g * g;
    // p -= lr * m_hat / (sqrt(v_hat) + eps) with eps added after dividing
    // sqrt(v) by sqrt(1 - beta2^t), as torch does.
    const double biasCorrection1 = 1 - std::pow(c.beta1, double(t));
    const double biasCorrection2 = 1 - std::pow(c.beta2, double(t));
    p[k] -= lr / biasCorrection1 * m[k] /
            (std::sqrt(v[k]) / std::sqrt(biasCorrection2) + c.eps);
  }
}

/// Runs `steps` steps of the kernel in place against the reference.
void checkAdam(const AdamConfig &c, size_t n, int steps) {
  std::vector<float> param = randomFloats(n, 1, -1.0f, 1.0f);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  std::vector<double> refP(param.begin(), param.end()), refM(n, 0), refV(n, 0);
  const AttrMap a = c.attrMap();
  for (int t = 1; t <= steps; ++t) {
    std::vector<float> grad = randomFloats(n, 100 + unsigned(t), -2.0f, 2.0f);
    // Some gradients are exactly zero (denominator = eps).
    grad[0] = 0.0f;
    float lr = 0.01f * float(t), scale = t % 2 ? 0.5f : 1.0f;
    int64_t step = t;
    // Out of place first (fresh copies), then in place: the same bits.
    std::vector<float> p2(n), m2(n), v2(n);
    EXPECT_OK(run("AdamW",
                  {view(param), view(grad), scalar(step), scalar(lr),
                   scalar(scale), view(m), view(v)},
                  {view(p2), view(m2), view(v2)}, a));
    EXPECT_OK(run("AdamW",
                  {view(param), view(grad), scalar(step), scalar(lr),
                   scalar(scale), view(m), view(v)},
                  {view(param), view(m), view(v)}, a));
    EXPECT_EQ(p2, param) << "step " << t;
    EXPECT_EQ(m2, m) << "step " << t;
    EXPECT_EQ(v2, v) << "step " << t;
    adamReference(c, t, double(lr), double(scale), refP, grad, refM, refV);
    expectClose(param, refP, 1e-5, 1e-6, "param, step " + std::to_string(t));
    expectClose(m, refM, 1e-5, 1e-7, "exp_avg, step " + std::to_string(t));
    expectClose(v, refV, 1e-5, 1e-9, "exp_avg_sq, step " + std::to_string(t));
  }
}

TEST(AdamW, DecoupledWeightDecayInPlaceSeveralSteps) {
  AdamConfig c;
  c.weightDecay = 0.1;
  checkAdam(c, 1000, 6);
}

TEST(AdamW, AdamWithL2WeightDecay) {
  AdamConfig c;
  c.decoupled = false;
  c.weightDecay = 0.05;
  c.beta2 = 0.99;
  checkAdam(c, 777, 5);
}

TEST(AdamW, NoWeightDecayAndASmallBeta1) {
  // beta1 = 0.3: lerp weight 0.7 takes ATen's other lerp formula.
  AdamConfig c;
  c.beta1 = 0.3;
  c.eps = 1e-6;
  checkAdam(c, 300, 4);
}

TEST(AdamW, FirstStepMovesEachWeightByAboutLr) {
  // At t = 1 from zero state, m/(sqrt(v)) after bias correction is sign(g):
  // every weight moves by lr (less eps's share) against its gradient.
  std::vector<float> param = {1.0f, -2.0f, 0.5f}, grad = {3.0f, -0.25f, 0.0f};
  std::vector<float> m(3, 0.0f), v(3, 0.0f);
  float lr = 0.1f, scale = 1.0f;
  int64_t step = 1;
  EXPECT_OK(run("AdamW",
                {view(param), view(grad), scalar(step), scalar(lr),
                 scalar(scale), view(m), view(v)},
                {view(param), view(m), view(v)}, AdamConfig().attrMap()));
  EXPECT_NEAR(param[0], 0.9f, 1e-6);
  EXPECT_NEAR(param[1], -1.9f, 1e-6);
  EXPECT_EQ(param[2], 0.5f); // zero gradient: no move
}

TEST(AdamW, RejectsBadOperands) {
  std::vector<float> p(4), g(4), m(4), v(4), short3(3);
  float lr = 0.1f, scale = 1.0f;
  int64_t step = 0;
  AttrMap a = AdamConfig().attrMap();
  zrt::Status st = run("AdamW",
                       {view(p), view(g), scalar(step), scalar(lr),
                        scalar(scale), view(m), view(v)},
                       {view(p), view(m), view(v)}, a);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("AdamW: step counter below 1 (got 0"));
  step = 1;
  st = run("AdamW",
           {view(p), view(short3), scalar(step), scalar(lr), scalar(scale),
            view(m), view(v)},
           {view(p), view(m), view(v)}, a);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("wrong size of grad"));
  st = run("AdamW", {view(p), view(g), scalar(step)}, {view(p)}, a);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("wrong number of inputs"));
  float stepAsFloat = 1.0f;
  st = run("AdamW",
           {view(p), view(g), scalar(stepAsFloat), scalar(lr), scalar(scale),
            view(m), view(v)},
           {view(p), view(m), view(v)}, a);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("wrong dtype of step (got f32, expected i64"));
}

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

struct SgdConfig {
  double momentum = 0, dampening = 0, weightDecay = 0;
  bool nesterov = false;
  AttrMap attrMap() const {
    return attrs({{"momentum", f(momentum)},
                  {"dampening", f(dampening)},
                  {"weight_decay", f(weightDecay)},
                  {"nesterov", i(nesterov ? 1 : 0)}});
  }
};

/// One step of torch.optim.SGD in double (its documented algorithm).
void sgdReference(const SgdConfig &c, int64_t t, double lr, double scale,
                  std::vector<double> &p, const std::vector<float> &grad,
                  std::vector<double> &buf) {
  for (size_t k = 0; k < p.size(); ++k) {
    double g = double(grad[k]) * scale + c.weightDecay * p[k];
    if (c.momentum != 0) {
      buf[k] = t == 1 ? g : c.momentum * buf[k] + (1 - c.dampening) * g;
      g = c.nesterov ? g + c.momentum * buf[k] : buf[k];
    }
    p[k] -= lr * g;
  }
}

void checkSgd(const SgdConfig &c, size_t n, int steps) {
  std::vector<float> param = randomFloats(n, 7, -1.0f, 1.0f);
  // The buffer's contents before step 1 must not matter.
  std::vector<float> buf = randomFloats(n, 8, -9.0f, 9.0f);
  std::vector<double> refP(param.begin(), param.end()), refBuf(n, 0);
  const bool momentum = c.momentum != 0;
  for (int t = 1; t <= steps; ++t) {
    std::vector<float> grad = randomFloats(n, 200 + unsigned(t), -2.0f, 2.0f);
    float lr = 0.05f, scale = t % 2 ? 0.25f : 1.0f;
    int64_t step = t;
    std::vector<TensorRef> in = {view(param), view(grad), scalar(step),
                                 scalar(lr), scalar(scale)};
    std::vector<TensorRef> out = {view(param)};
    if (momentum) {
      in.push_back(view(buf));
      out.push_back(view(buf));
    }
    EXPECT_OK(run("SGD", in, out, c.attrMap()));
    sgdReference(c, t, double(lr), double(scale), refP, grad, refBuf);
    expectClose(param, refP, 1e-5, 1e-6, "param, step " + std::to_string(t));
    if (momentum)
      expectClose(buf, refBuf, 1e-5, 1e-6, "buffer, step " + std::to_string(t));
  }
}

TEST(SGD, PlainWithWeightDecay) {
  SgdConfig c;
  c.weightDecay = 0.01;
  checkSgd(c, 500, 4);
}

TEST(SGD, MomentumWithDampening) {
  SgdConfig c;
  c.momentum = 0.9;
  c.dampening = 0.1;
  c.weightDecay = 0.001;
  checkSgd(c, 600, 6);
}

TEST(SGD, Nesterov) {
  SgdConfig c;
  c.momentum = 0.8;
  c.nesterov = true;
  checkSgd(c, 600, 6);
}

TEST(SGD, RejectsNesterovWithDampeningAndMissingBuffer) {
  std::vector<float> p(4), g(4);
  float lr = 0.1f, scale = 1.0f;
  int64_t step = 1;
  SgdConfig c;
  c.momentum = 0.9;
  c.dampening = 0.5;
  c.nesterov = true;
  zrt::Status st = run("SGD",
                       {view(p), view(g), scalar(step), scalar(lr),
                        scalar(scale), view(p)},
                       {view(p), view(p)}, c.attrMap());
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("nesterov needs a momentum and zero dampening"));
  c.nesterov = false;
  st = run("SGD", {view(p), view(g), scalar(step), scalar(lr), scalar(scale)},
           {view(p)}, c.attrMap());
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("SGD: wrong number of inputs (got 5, expected 6)"));
}

TEST(Optimizers, SameBitsAtAnyThreadCount) {
  const size_t n = 300007; // several chunks and a partial block
  const std::vector<float> param0 = randomFloats(n, 11, -1.0f, 1.0f);
  std::vector<float> grad = randomFloats(n, 12, -1.0f, 1.0f);
  std::vector<float> firstAdam, firstSgd;
  for (int threads : {1, 3, 8}) {
    KernelContext ctx = contextWithThreads(threads);
    std::vector<float> p = param0, m(n, 0.0f), v(n, 0.0f), buf(n, 0.0f);
    float lr = 0.003f, scale = 0.7f;
    for (int64_t t = 1; t <= 3; ++t) {
      int64_t step = t;
      AdamConfig c;
      c.weightDecay = 0.01;
      EXPECT_OK(run("AdamW",
                    {view(p), view(grad), scalar(step), scalar(lr),
                     scalar(scale), view(m), view(v)},
                    {view(p), view(m), view(v)}, c.attrMap(), ctx));
    }
    std::vector<float> q = param0;
    for (int64_t t = 1; t <= 3; ++t) {
      int64_t step = t;
      SgdConfig c;
      c.momentum = 0.9;
      EXPECT_OK(run("SGD",
                    {view(q), view(grad), scalar(step), scalar(lr),
                     scalar(scale), view(buf)},
                    {view(q), view(buf)}, c.attrMap(), ctx));
    }
    if (threads == 1) {
      firstAdam = p;
      firstSgd = q;
    } else {
      EXPECT_TRUE(p == firstAdam) << "AdamW differs at " << threads << " threads";
      EXPECT_TRUE(q == firstSgd) << "SGD differs at " << threads << " threads";
    }
  }
}

//===----------------------------------------------------------------------===//
// LrSchedule
//===----------------------------------------------------------------------===//

float schedule(const AttrMap &a, int64_t t) {
  int64_t step = t;
  float lr = -1.0f;
  zrt::Status st = run("LrSchedule", {scalar(step)}, {scalar(lr)}, a);
  EXPECT_TRUE(st.isOk()) << st.message();
  return lr;
}

/// DeepSpeed's lr_schedules.py, re-derived: the engine builds the scheduler
/// (get_lr() at last_batch_iteration -1) and steps it after every optimizer
/// step, so optimizer step t uses last_batch_iteration t - 2.
struct DeepSpeedSchedule {
  std::string type;
  double minLr = 0, maxLr = 0.001, baseLr = 0.1, warmupMinRatio = 0,
         cosMinRatio = 0.0001;
  int64_t warmupSteps = 1000, totalSteps = 0;
  std::string warmupType = "log";

  double warmupFraction(int64_t k, int64_t w) const {
    return warmupType == "linear" ? double(k) / double(w)
                                  : std::log(double(k + 1)) / std::log(double(w));
  }
  double lrAtStep(int64_t t) const {
    const int64_t k = t - 2;
    const int64_t w = std::max<int64_t>(2, warmupSteps);
    if (type == "WarmupCosineLR") {
      if (k < 0)
        return 0.0;
      double ratio;
      if (k < w) {
        ratio = warmupMinRatio + warmupFraction(k, w) * (1 - warmupMinRatio);
      } else {
        // DeepSpeed 0.19 clamps the progress at 1 (the floor past the end).
        const double progress =
            std::min(1.0, double(k - w + 1) /
                              double(std::max<int64_t>(1, totalSteps - w)));
        ratio = std::max(0.0, cosMinRatio + (1 - cosMinRatio) *
                                                (1 + std::cos(3.141592653589793 * progress)) / 2);
      }
      return baseLr * ratio;
    }
    if (k < 0)
      return minLr;
    double gamma;
    if (k < w)
      gamma = warmupFraction(k, w);
    else if (type == "WarmupLR")
      gamma = 1;
    else
      gamma = std::max(0.0, double(totalSteps - k) /
                                double(std::max<int64_t>(1, totalSteps - w)));
    return minLr + (maxLr - minLr) * gamma;
  }
  AttrMap attrMap() const {
    return attrs({{"type", s(type)},
                  {"warmup_min_lr", f(minLr)},
                  {"warmup_max_lr", f(maxLr)},
                  {"lr", f(baseLr)},
                  {"warmup_min_ratio", f(warmupMinRatio)},
                  {"cos_min_ratio", f(cosMinRatio)},
                  {"warmup_num_steps", i(warmupSteps)},
                  {"total_num_steps", i(totalSteps)},
                  {"warmup_type", s(warmupType)}});
  }
};

void checkSchedule(const DeepSpeedSchedule &d,
                   const std::vector<int64_t> &steps) {
  for (int64_t t : steps)
    EXPECT_FLOAT_EQ(schedule(d.attrMap(), t), float(d.lrAtStep(t)))
        << d.type << " " << d.warmupType << " at step " << t;
}

TEST(LrSchedule, Constant) {
  AttrMap a = attrs({{"type", s("constant")}, {"lr", f(3e-4)}});
  for (int64_t t : {1, 2, 1000})
    EXPECT_EQ(schedule(a, t), 3e-4f);
}

TEST(LrSchedule, WarmupLRLogAndLinear) {
  DeepSpeedSchedule d;
  d.type = "WarmupLR";
  d.minLr = 1e-5;
  d.maxLr = 1e-3;
  d.warmupSteps = 10;
  // Steps 1 and 2 both run at warmup_min_lr; step 12 is the first at max.
  EXPECT_FLOAT_EQ(schedule(d.attrMap(), 1), 1e-5f);
  EXPECT_FLOAT_EQ(schedule(d.attrMap(), 2), 1e-5f);
  EXPECT_FLOAT_EQ(schedule(d.attrMap(), 12), 1e-3f);
  checkSchedule(d, {1, 2, 3, 5, 10, 11, 12, 13, 500});
  d.warmupType = "linear";
  EXPECT_FLOAT_EQ(schedule(d.attrMap(), 7), float(1e-5 + (1e-3 - 1e-5) * 0.5));
  checkSchedule(d, {1, 2, 3, 7, 11, 12, 13, 500});
  d.warmupSteps = 1; // DeepSpeed raises it to 2
  checkSchedule(d, {1, 2, 3, 4});
}

TEST(LrSchedule, WarmupDecayLR) {
  DeepSpeedSchedule d;
  d.type = "WarmupDecayLR";
  d.minLr = 0.0;
  d.maxLr = 0.01;
  d.warmupSteps = 4;
  d.totalSteps = 20;
  checkSchedule(d, {1, 2, 3, 4, 5, 6, 7, 12, 21, 22, 23, 40});
  EXPECT_EQ(schedule(d.attrMap(), 22), 0.0f); // past the last step: 0
  d.warmupType = "linear";
  d.minLr = 1e-4;
  checkSchedule(d, {1, 2, 3, 5, 6, 7, 21, 22, 30});
}

TEST(LrSchedule, WarmupCosineLR) {
  DeepSpeedSchedule d;
  d.type = "WarmupCosineLR";
  d.baseLr = 0.02;
  d.warmupSteps = 5;
  d.totalSteps = 25;
  d.warmupMinRatio = 0.1;
  EXPECT_EQ(schedule(d.attrMap(), 1), 0.0f); // DeepSpeed's get_lr() is [0.0]
  checkSchedule(d, {1, 2, 3, 6, 7, 8, 15, 26, 27, 28, 60});
  d.warmupType = "linear";
  d.cosMinRatio = 0.05;
  checkSchedule(d, {1, 2, 4, 6, 7, 8, 20, 27, 100});
  // Past total_num_steps the lr stays at cos_min_ratio x lr (DeepSpeed 0.19;
  // 0.18's unclamped cosine climbed back toward the peak).
  for (int64_t t : {27, 28, 40, 47, 100})
    EXPECT_FLOAT_EQ(schedule(d.attrMap(), t), float(0.02 * 0.05))
        << "step " << t;
  // No decay window (total_num_steps = warmup_num_steps): the floor right
  // after the warmup.
  d.totalSteps = 5;
  checkSchedule(d, {1, 2, 6, 7, 8, 30});
  EXPECT_FLOAT_EQ(schedule(d.attrMap(), 7), float(0.02 * 0.05));
}

TEST(LrSchedule, OneCycleStairs) {
  // cycle_first_step_size = cycle_second_step_size = 4 in 2 stairs each:
  // DeepSpeed 0.19's _get_scale_factor floors (k + 1) % 8 x 2 / 4 (rising)
  // or (8 - (k + 1) % 8) x 2 / 4 (falling) to halves, so the lr is flat in
  // pairs of steps: steps t = k + 2 = 2..9 run 0, .5, .5, 1, .5, .5, 0, 0 of
  // the way from cycle_min_lr 0.1 to cycle_max_lr 0.5.
  AttrMap a = attrs({{"type", s("OneCycle")},
                     {"cycle_min_lr", f(0.1)},
                     {"cycle_max_lr", f(0.5)},
                     {"cycle_first_step_size", f(4)},
                     {"cycle_second_step_size", f(4)},
                     {"cycle_first_stair_count", i(2)},
                     {"cycle_second_stair_count", i(2)}});
  const float want[] = {0.1f, 0.3f, 0.3f, 0.5f, 0.3f, 0.3f, 0.1f, 0.1f};
  for (int64_t t = 2; t <= 9; ++t)
    EXPECT_FLOAT_EQ(schedule(a, t), want[t - 2]) << "step " << t;
  // Without stairs the same cycle is continuous: a quarter of the way at t = 2.
  AttrMap smooth = attrs({{"type", s("OneCycle")},
                          {"cycle_min_lr", f(0.1)},
                          {"cycle_max_lr", f(0.5)},
                          {"cycle_first_step_size", f(4)},
                          {"cycle_second_step_size", f(4)}});
  EXPECT_FLOAT_EQ(schedule(smooth, 2), 0.2f);
}

TEST(LrSchedule, RejectsBadAttributes) {
  int64_t step = 1;
  float lr = 0;
  auto error = [&](const AttrMap &a) {
    zrt::Status st = run("LrSchedule", {scalar(step)}, {scalar(lr)}, a);
    EXPECT_FALSE(st.isOk());
    return st.message();
  };
  EXPECT_THAT(error(attrs({{"type", s("CyclicLR")}})),
              HasSubstr("LrSchedule: bad attribute type (got \"CyclicLR\""));
  EXPECT_THAT(error(attrs({{"type", s("WarmupLR")}, {"warmup_type", s("exp")}})),
              HasSubstr("bad attribute warmup_type"));
  EXPECT_THAT(error(attrs({{"type", s("constant")}})),
              HasSubstr("missing attribute lr"));
  EXPECT_THAT(error(attrs({{"type", s("WarmupDecayLR")}})),
              HasSubstr("missing attribute total_num_steps"));
  step = 0;
  EXPECT_THAT(error(attrs({{"type", s("constant")}, {"lr", f(0.1)}})),
              HasSubstr("step counter below 1"));
}

} // namespace
