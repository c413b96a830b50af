//===- OptimizerKernels.h - AdamW and SGD, any backend ----------*- C++ -*-===//
//
// The host code of the AdamW, SGD and LrSchedule kernels (docs/kernels.md,
// "Training"):
// operand checks, attributes and the f32 scalars of the step (computed in
// double like PyTorch's Python code), written once as templates over a Loops
// policy with read() (one element of operand data to the host: the step, lr
// and grad_scale scalars) and
//   adam(ctx, AdamScalars, param, grad, exp_avg, exp_avg_sq,
//        param', exp_avg', exp_avg_sq', n)
//   sgd(ctx, SgdScalars, param, grad, buffer, param', buffer', n)
// CpuOptimizerLoops (Optimizer.cpp) and cuda::CudaOptimizerLoops
// (cuda/OptimizerKernels.cu) run the element updates of
// math/OptimizerMath.h. LrSchedule is host arithmetic on the step; its
// result goes to the device with write().
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_OPTIMIZERKERNELS_H
#define ZRT_KERNELS_OPTIMIZERKERNELS_H

#include "kernels/KernelSupport.h"
#include "math/OptimizerMath.h"

#include <cmath>

namespace zrt {
namespace kernels {
namespace optimizer {

/// An attribute given as a float or an int (the compiler may write either).
inline double numberAttr(const AttrMap &attrs, const std::string &name,
                         double dflt) {
  if (!attrs.has(name))
    return dflt;
  std::vector<int64_t> ints = attrs.getInts(name);
  if (!ints.empty())
    return double(ints[0]);
  return attrs.getFloat(name, dflt);
}

inline Status checkScalar(const char *op, const char *operand,
                          const TensorRef &t, DType dtype) {
  if (t.dtype != dtype)
    return kernelError(op, std::string("wrong dtype of ") + operand,
                       dtypeName(t.dtype),
                       std::string(dtypeName(dtype)) + " scalar");
  if (t.numel() != 1)
    return kernelError(op, std::string("wrong shape of ") + operand,
                       "[" + shapeString(t.shape) + "]", "a scalar");
  return Status::ok();
}

/// The step t (an i64 scalar, >= 1: the number of this optimizer step).
template <typename Loops>
Status readStep(const char *op, const TensorRef &t, int64_t &step) {
  ZRT_RETURN_IF_ERROR(checkScalar(op, "step", t, DType::I64));
  ZRT_RETURN_IF_ERROR(Loops::read(t.as<int64_t>(), step));
  if (step < 1)
    return kernelError(op, "step counter below 1", std::to_string(step),
                       "t >= 1: the counter is incremented before the "
                       "optimizer reads it");
  return Status::ok();
}

template <typename Loops>
Status readFloatScalar(const char *op, const char *operand, const TensorRef &t,
                       float &value) {
  ZRT_RETURN_IF_ERROR(checkScalar(op, operand, t, DType::F32));
  return Loops::read(t.as<float>(), value);
}

/// Checks an f32 tensor operand of `n` elements.
inline Status checkVector(const char *op, const char *operand,
                          const TensorRef &t, int64_t n) {
  if (t.dtype != DType::F32)
    return dtypeError(op, operand, t.dtype, TypeList<float>{});
  if (t.numel() != n)
    return kernelError(op, std::string("wrong size of ") + operand,
                       std::to_string(t.numel()) + " elements [" +
                           shapeString(t.shape) + "]",
                       std::to_string(n) + " elements, as param");
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// DeepSpeed's OneCycle (lr, and Adam's beta1 with cycle_momentum)
//===----------------------------------------------------------------------===//

/// OneCycle's cycle: the two step sizes and the decay step after it. Its
/// scheduler step k (DeepSpeed's last_batch_iteration) runs the t-th
/// optimizer step for k = t - 2, as in lrScheduleKernel.
struct OneCycle {
  double first = 2000, second = 2000, decayStep = 0;
  /// Stairs per half (DeepSpeed 0.19's cycle_*_stair_count; 0: continuous).
  int64_t firstStairs = 0, secondStairs = 0;

  static OneCycle of(const AttrMap &attrs) {
    OneCycle c;
    c.first = numberAttr(attrs, "cycle_first_step_size", 2000);
    c.second = numberAttr(attrs, "cycle_second_step_size", c.first);
    c.decayStep = numberAttr(attrs, "decay_step_size", 0);
    c.firstStairs = int64_t(numberAttr(attrs, "cycle_first_stair_count", 0));
    c.secondStairs = int64_t(
        numberAttr(attrs, "cycle_second_stair_count", double(c.firstStairs)));
    return c;
  }
  double total() const { return first + second; }
  /// The cycle's height at scheduler step k (k < total()): 0 at the ends,
  /// 1 at the peak, from (k + 1) as DeepSpeed's _get_scale_factor; with
  /// stairs, floored to the stair of the half's integer position (as
  /// DeepSpeed 0.19, not from the float height, which may land just under
  /// a stair).
  double scale(int64_t k) const {
    const double ratio = first / total();
    const double iteration = double(k + 1);
    const double cycle = std::floor(1 + iteration / total());
    const double x = 1. + iteration / total() - cycle;
    const bool rising = x <= ratio;
    const int64_t stairs = rising ? firstStairs : secondStairs;
    if (stairs <= 0)
      return rising ? x / ratio : (x - 1) / (ratio - 1);
    const double position = std::fmod(iteration, total());
    const double stair = position <= first
                             ? position * double(stairs) / first
                             : (total() - position) * double(stairs) / second;
    return std::floor(stair) / double(stairs);
  }
  /// Steps after the cycle, at scheduler step k >= total().
  double decayed(int64_t k) const { return double(k) - total() + 1; }

  /// The learning rate of step k: cycle_min_lr before the first scheduler
  /// step, up to cycle_max_lr and back over the cycle, then cycle_min_lr
  /// divided by (1 + decay_lr_rate * steps after it / decay_step_size).
  double lr(const AttrMap &attrs, int64_t k) const {
    const double minLr = numberAttr(attrs, "cycle_min_lr", 0);
    const double maxLr = numberAttr(attrs, "cycle_max_lr", 0);
    const double rate = numberAttr(attrs, "decay_lr_rate", 0);
    if (k < 0)
      return minLr;
    if (double(k) < total())
      return minLr + (maxLr - minLr) * scale(k);
    if (decayStep == 0 || rate == 0)
      return minLr;
    return minLr / (1 + rate * (decayed(k) / decayStep));
  }
  /// The momentum (Adam's beta1) of step k: cycle_min_mom first, down from
  /// cycle_max_mom as the lr rises, then cycle_max_mom times (1 +
  /// decay_mom_rate * steps after it / decay_step_size).
  double momentum(const AttrMap &attrs, int64_t k) const {
    const double minMom = numberAttr(attrs, "cycle_min_mom", 0.8);
    const double maxMom = numberAttr(attrs, "cycle_max_mom", 0.9);
    const double rate = numberAttr(attrs, "decay_mom_rate", 0);
    if (k < 0)
      return minMom;
    if (double(k) < total())
      return maxMom - (maxMom - minMom) * scale(k);
    if (decayStep == 0 || rate == 0)
      return maxMom;
    return maxMom * (1 + rate * (decayed(k) / decayStep));
  }
};

//===----------------------------------------------------------------------===//
// AdamW / Adam
//===----------------------------------------------------------------------===//

/// AdamW(param, grad, step, lr, grad_scale, exp_avg, exp_avg_sq)
///   -> param', exp_avg', exp_avg_sq'.
template <typename Loops>
Status adamWKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "AdamW";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 7, 7, 3, 3));
  const int64_t n = in[0].numel();
  const char *names[] = {"param", "grad",    nullptr,     nullptr,
                         nullptr, "exp_avg", "exp_avg_sq"};
  for (size_t i : {0, 1, 5, 6})
    ZRT_RETURN_IF_ERROR(checkVector(op, names[i], in[i], n));
  ZRT_RETURN_IF_ERROR(checkVector(op, "param'", out[0], n));
  ZRT_RETURN_IF_ERROR(checkVector(op, "exp_avg'", out[1], n));
  ZRT_RETURN_IF_ERROR(checkVector(op, "exp_avg_sq'", out[2], n));
  int64_t step = 0;
  float lr = 0, gradScale = 0;
  ZRT_RETURN_IF_ERROR(readStep<Loops>(op, in[2], step));
  ZRT_RETURN_IF_ERROR(readFloatScalar<Loops>(op, "lr", in[3], lr));
  ZRT_RETURN_IF_ERROR(
      readFloatScalar<Loops>(op, "grad_scale", in[4], gradScale));

  // OneCycle's cycle_momentum: beta1 of this step from the cycle.
  const std::string beta1Schedule = attrs.getString("beta1_schedule", "");
  if (!beta1Schedule.empty() && beta1Schedule != "OneCycle")
    return kernelError(op, "bad attribute beta1_schedule", "\"" + beta1Schedule + "\"",
                       "\"OneCycle\" or none");
  // A schedule resumed at last_batch_iteration L (not -1) leaves the
  // optimizer's own betas for the first step, then cycles from L + 1.
  const int64_t resumed =
      int64_t(numberAttr(attrs, "last_batch_iteration", -1));
  const bool first = resumed != -1 && step == 1 && !beta1Schedule.empty();
  const double beta1 =
      beta1Schedule.empty() ? numberAttr(attrs, "beta1", 0.9)
      : first               ? numberAttr(attrs, "first_beta1", 0.9)
              : OneCycle::of(attrs).momentum(attrs, step - 1 + resumed);
  const double beta2 = first ? numberAttr(attrs, "first_beta2", 0.999)
                             : numberAttr(attrs, "beta2", 0.999);
  // bias_correction 0 (DeepSpeed's FusedAdam option): the moments as they are.
  const bool biasCorrected = numberAttr(attrs, "bias_correction", 1) != 0;
  const double eps = numberAttr(attrs, "eps", 1e-8);
  const double weightDecay = numberAttr(attrs, "weight_decay", 0.0);
  const bool decoupled = numberAttr(attrs, "decoupled", 1) != 0;
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return kernelError(op, "bad betas",
                       std::to_string(beta1) + ", " + std::to_string(beta2),
                       "each in [0, 1)");

  // The host side of _single_tensor_adam, in double like Python.
  const double t = double(step);
  const double lrValue = double(lr);
  const double biasCorrection1 = biasCorrected ? 1 - std::pow(beta1, t) : 1.0;
  const double biasCorrection2 = biasCorrected ? 1 - std::pow(beta2, t) : 1.0;
  const double stepSize = lrValue / biasCorrection1;
  const double biasCorrection2Sqrt = std::pow(biasCorrection2, 0.5);
  math::AdamScalars s;
  s.gradScale = gradScale;
  s.decayParam = weightDecay != 0 && decoupled;
  s.paramDecay = float(1 - lrValue * weightDecay);
  s.l2 = weightDecay != 0 && !decoupled;
  s.weightDecay = float(weightDecay);
  s.lerpWeight = float(1 - beta1);
  s.smallWeight = std::fabs(s.lerpWeight) < 0.5f;
  s.beta2 = float(beta2);
  s.oneMinusBeta2 = float(1 - beta2);
  s.biasCorrection2Sqrt = float(biasCorrection2Sqrt);
  s.eps = float(eps);
  s.negStepSize = float(-stepSize);

  return Loops::adam(ctx, s, in[0].as<float>(), in[1].as<float>(),
                     in[5].as<float>(), in[6].as<float>(), out[0].as<float>(),
                     out[1].as<float>(), out[2].as<float>(), n);
}

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

/// SGD(param, grad, step, lr, grad_scale[, momentum_buffer])
///   -> param'[, momentum_buffer'].
template <typename Loops>
Status sgdKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "SGD";
  const double momentum = numberAttr(attrs, "momentum", 0.0);
  const double dampening = numberAttr(attrs, "dampening", 0.0);
  const double weightDecay = numberAttr(attrs, "weight_decay", 0.0);
  const bool nesterov = numberAttr(attrs, "nesterov", 0) != 0;
  const bool hasMomentum = momentum != 0;
  if (nesterov && (momentum <= 0 || dampening != 0))
    return kernelError(op, "nesterov needs a momentum and zero dampening",
                       "momentum " + std::to_string(momentum) + ", dampening " +
                           std::to_string(dampening),
                       "momentum > 0, dampening 0 (as torch.optim.SGD)");
  const size_t operands = hasMomentum ? 6 : 5;
  ZRT_RETURN_IF_ERROR(
      checkArity(op, in, out, operands, operands, operands - 4, operands - 4));
  const int64_t n = in[0].numel();
  ZRT_RETURN_IF_ERROR(checkVector(op, "param", in[0], n));
  ZRT_RETURN_IF_ERROR(checkVector(op, "grad", in[1], n));
  ZRT_RETURN_IF_ERROR(checkVector(op, "param'", out[0], n));
  if (hasMomentum) {
    ZRT_RETURN_IF_ERROR(checkVector(op, "momentum_buffer", in[5], n));
    ZRT_RETURN_IF_ERROR(checkVector(op, "momentum_buffer'", out[1], n));
  }
  int64_t step = 0;
  float lr = 0, gradScale = 0;
  ZRT_RETURN_IF_ERROR(readStep<Loops>(op, in[2], step));
  ZRT_RETURN_IF_ERROR(readFloatScalar<Loops>(op, "lr", in[3], lr));
  ZRT_RETURN_IF_ERROR(
      readFloatScalar<Loops>(op, "grad_scale", in[4], gradScale));

  math::SgdScalars s;
  s.gradScale = gradScale;
  s.hasWeightDecay = weightDecay != 0;
  s.weightDecay = float(weightDecay);
  s.hasMomentum = hasMomentum;
  s.firstStep = step == 1;
  s.momentum = float(momentum);
  s.oneMinusDampening = float(1 - dampening);
  s.nesterov = nesterov;
  s.negLr = float(-double(lr));

  return Loops::sgd(ctx, s, in[0].as<float>(), in[1].as<float>(),
                    hasMomentum ? in[5].as<float>() : nullptr,
                    out[0].as<float>(),
                    hasMomentum ? out[1].as<float>() : nullptr, n);
}

//===----------------------------------------------------------------------===//
// LrSchedule
//===----------------------------------------------------------------------===//

/// Python's math.pi.
constexpr double kPi = 3.141592653589793;

/// DeepSpeed's warmup fraction at last_batch_iteration k < warmup steps W.
inline double warmupGamma(const std::string &type, int64_t k, int64_t warmup) {
  if (type == "linear")
    return double(k) / double(warmup);
  return (1.0 / std::log(double(warmup))) * std::log(double(k + 1));
}

/// LrSchedule(step) -> lr: the learning rate DeepSpeed's engine uses for its
/// t-th optimizer step. The engine sets the scheduler's lr when it is built
/// (last_batch_iteration = -1) and calls lr_scheduler.step() after every
/// optimizer step, so step t runs with last_batch_iteration k = t - 2. Built
/// with last_batch_iteration L (attribute; not -1), the scheduler leaves the
/// optimizer's lr (attribute lr) for the first step and step t runs with
/// k = L + t - 1.
template <typename Loops>
Status lrScheduleKernel(const KernelContext &, const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out,
                        const AttrMap &attrs) {
  const char *op = "LrSchedule";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 1, 1));
  int64_t step = 0;
  ZRT_RETURN_IF_ERROR(readStep<Loops>(op, in[0], step));
  ZRT_RETURN_IF_ERROR(checkScalar(op, "lr", out[0], DType::F32));
  const std::string type = attrs.getString("type", "constant");
  const std::string warmupType = attrs.getString("warmup_type", "log");
  if (warmupType != "log" && warmupType != "linear")
    return kernelError(op, "bad attribute warmup_type",
                       "\"" + warmupType + "\"", "\"log\" or \"linear\"");
  const int64_t resumed =
      int64_t(numberAttr(attrs, "last_batch_iteration", -1));
  if (resumed != -1 && step == 1) {
    if (!attrs.has("lr"))
      return kernelError(
          op, "missing attribute lr", "none",
          "the optimizer's lr, for the first step of a resumed schedule");
    return Loops::write(out[0].as<float>(), float(numberAttr(attrs, "lr", 0)));
  }
  const int64_t k = step - 1 + resumed; // last_batch_iteration
  // DeepSpeed raises warmup_num_steps to at least 2 (log(1) would be 0).
  const int64_t warmup = std::max<int64_t>(
      2, int64_t(numberAttr(attrs, "warmup_num_steps", 1000)));
  double lr = 0;
  if (type == "constant") {
    if (!attrs.has("lr"))
      return kernelError(op, "missing attribute lr", "none",
                         "the constant learning rate");
    lr = numberAttr(attrs, "lr", 0);
  } else if (type == "WarmupLR" || type == "WarmupDecayLR") {
    const double minLr = numberAttr(attrs, "warmup_min_lr", 0.0);
    const double maxLr = numberAttr(attrs, "warmup_max_lr", 0.001);
    const double deltaLr = maxLr - minLr;
    const bool decay = type == "WarmupDecayLR";
    if (decay && !attrs.has("total_num_steps"))
      return kernelError(op, "missing attribute total_num_steps", "none",
                         "WarmupDecayLR's total number of steps");
    const int64_t total = int64_t(numberAttr(attrs, "total_num_steps", 0));
    if (decay && total < 0)
      return kernelError(op, "total_num_steps is \"auto\" (-1)", std::to_string(total),
                         "the run's steps, which zero-run sets before the first step");
    double gamma;
    if (k < 0)
      gamma = 0; // get_lr() before the first scheduler step: min_lrs
    else if (k < warmup)
      gamma = warmupGamma(warmupType, k, warmup);
    else if (!decay)
      gamma = 1.0;
    else
      gamma = std::max(0.0, double(total - k) /
                                std::max(1.0, double(total - warmup)));
    lr = minLr + deltaLr * gamma;
  } else if (type == "WarmupCosineLR") {
    if (!attrs.has("total_num_steps") || !attrs.has("lr"))
      return kernelError(op, "missing attribute total_num_steps or lr", "none",
                         "WarmupCosineLR's total number of steps and the "
                         "optimizer's base lr");
    const int64_t total = int64_t(numberAttr(attrs, "total_num_steps", 0));
    if (total < 0)
      return kernelError(op, "total_num_steps is \"auto\" (-1)", std::to_string(total),
                         "the run's steps, which zero-run sets before the first step");
    const double baseLr = numberAttr(attrs, "lr", 0);
    const double warmupMinRatio = numberAttr(attrs, "warmup_min_ratio", 0.0);
    const double cosMinRatio = numberAttr(attrs, "cos_min_ratio", 0.0001);
    double ratio;
    if (k < 0) {
      ratio = 0; // get_lr() before the first scheduler step: [0.0]
    } else if (k < warmup) {
      ratio = warmupGamma(warmupType, k, warmup);
      ratio = warmupMinRatio + ratio * (1.0 - warmupMinRatio);
    } else {
      // As DeepSpeed 0.19: the cosine's progress clamped to [0, 1], so past
      // total_num_steps (or with no decay window, total <= warmup) the
      // ratio stays at cos_min_ratio instead of climbing back.
      const int64_t realLastStep = k - warmup + 1;
      const int64_t realTotalSteps = std::max<int64_t>(1, total - warmup);
      const double progress =
          std::min(1.0, double(realLastStep) / double(realTotalSteps));
      ratio = (1 + std::cos(kPi * progress)) / 2;
      ratio = std::max(0.0, cosMinRatio + (1.0 - cosMinRatio) * ratio);
    }
    lr = k < 0 ? 0.0 : baseLr * ratio;
  } else if (type == "LRRangeTest") {
    // min_lr before the first scheduler step, then min_lr * (1 + rate *
    // interval), the interval (k + 1) / step_size (floored: staircase).
    const double minLr = numberAttr(attrs, "lr_range_test_min_lr", 1e-3);
    const double stepSize = numberAttr(attrs, "lr_range_test_step_size", 2000);
    const double rate = numberAttr(attrs, "lr_range_test_step_rate", 1.0);
    const bool staircase = numberAttr(attrs, "lr_range_test_staircase", 0) != 0;
    if (!(stepSize > 0))
      return kernelError(op, "bad lr_range_test_step_size", std::to_string(stepSize), "> 0");
    if (k < 0) {
      lr = minLr;
    } else {
      double interval = double(k + 1) / stepSize;
      if (staircase)
        interval = std::floor(interval);
      lr = minLr * (1 + rate * interval);
    }
  } else if (type == "OneCycle") {
    const OneCycle cycle = OneCycle::of(attrs);
    if (!(cycle.first > 0) || cycle.second < 0)
      return kernelError(op, "bad OneCycle step sizes",
                         std::to_string(cycle.first) + ", " + std::to_string(cycle.second),
                         "cycle_first_step_size > 0, cycle_second_step_size >= 0");
    lr = cycle.lr(attrs, k);
  } else {
    return kernelError(op, "bad attribute type", "\"" + type + "\"",
                       "\"constant\", \"WarmupLR\", \"WarmupDecayLR\", "
                       "\"WarmupCosineLR\", \"OneCycle\" or \"LRRangeTest\"");
  }
  return Loops::write(out[0].as<float>(), float(lr));
}

/// Registers AdamW, SGD and LrSchedule with the loops of one backend.
template <typename Loops> void addOptimizerKernels(KernelTable &table) {
  table.add("AdamW", adamWKernel<Loops>);
  table.add("SGD", sgdKernel<Loops>);
  table.add("LrSchedule", lrScheduleKernel<Loops>);
}

} // namespace optimizer
} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_OPTIMIZERKERNELS_H
