//===- Optimizer.cpp - Optimizer steps and learning-rate schedules --------===//
//
// The kernels a training program ends each step with (docs/kernels.md,
// "Training"): AdamW/Adam and SGD update a parameter and its optimizer state
// elementwise, and LrSchedule turns the step counter into the step's learning
// rate with DeepSpeed's schedules.
//
// The updates follow PyTorch's single-tensor implementations
// (torch/optim/adam.py `_single_tensor_adam`, torch/optim/sgd.py
// `_single_tensor_sgd`) operation by operation in f32, with the scalars
// rounded to f32 where ATen rounds them, and a fused multiply-add exactly
// where ATen's vectorised CPU kernels use one (lerp_, and add_/add with
// alpha); this file is compiled with -ffp-contract=off so that the compiler
// adds no others. The host-side scalars (bias corrections, step size) are
// computed in double like the Python code. Results are therefore the same at
// any thread count and on any x86-64 clone of the loops.
//
// Every output may be the same buffer as an input (the compiler updates the
// parameter and the state in place): the loops read a block of every input
// before writing that block of any output.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <cmath>

namespace zrt {
namespace cpu {
namespace {

/// Like ZRT_HOT_LOOP, with FMA in the vector clones: std::fma is a single
/// instruction there (the default clone calls the C library's fmaf, which
/// gives the same result).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&         \
    defined(__linux__)
#define ZRT_OPTIMIZER_LOOP                                                     \
  __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define ZRT_OPTIMIZER_LOOP
#endif

/// Elements per block: the inputs of a block are copied to the stack before
/// its outputs are written, which makes in-place updates safe.
constexpr int64_t kBlock = 512;

/// An attribute given as a float or an int (the compiler may write either).
double numberAttr(const AttrMap &attrs, const std::string &name, double dflt) {
  if (!attrs.has(name))
    return dflt;
  std::vector<int64_t> ints = attrs.getInts(name);
  if (!ints.empty())
    return double(ints[0]);
  return attrs.getFloat(name, dflt);
}

Status checkScalar(const char *op, const char *operand, const TensorRef &t,
                   DType dtype) {
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
Status readStep(const char *op, const TensorRef &t, int64_t &step) {
  ZRT_RETURN_IF_ERROR(checkScalar(op, "step", t, DType::I64));
  step = t.as<int64_t>()[0];
  if (step < 1)
    return kernelError(op, "step counter below 1", std::to_string(step),
                       "t >= 1: the counter is incremented before the "
                       "optimizer reads it");
  return Status::ok();
}

Status readFloatScalar(const char *op, const char *operand, const TensorRef &t,
                       float &value) {
  ZRT_RETURN_IF_ERROR(checkScalar(op, operand, t, DType::F32));
  value = t.as<float>()[0];
  return Status::ok();
}

/// Checks an f32 tensor operand of `n` elements.
Status checkVector(const char *op, const char *operand, const TensorRef &t,
                   int64_t n) {
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
// AdamW / Adam
//===----------------------------------------------------------------------===//

/// The f32 scalars of one Adam step, rounded where ATen rounds them.
struct AdamScalars {
  float gradScale;   ///< clip_grad_norm_'s coefficient
  bool decayParam;   ///< AdamW: param *= paramDecay first
  float paramDecay;  ///< f32(1 - lr * weight_decay)
  bool l2;           ///< Adam: g += weight_decay * param
  float weightDecay; ///< f32(weight_decay)
  bool smallWeight;  ///< lerp weight below 0.5 (ATen's two formulas)
  float lerpWeight;  ///< f32(1 - beta1)
  float beta2;       ///< f32(beta2)
  float oneMinusBeta2;
  float biasCorrection2Sqrt; ///< f32((1 - beta2^t) ** 0.5)
  float eps;
  float negStepSize; ///< f32(-lr / (1 - beta1^t))
};

/// One block of the update, in place on the (stack) copies.
ZRT_OPTIMIZER_LOOP
void adamBlock(const AdamScalars &s, float *__restrict param,
               const float *__restrict grad, float *__restrict expAvg,
               float *__restrict expAvgSq, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float p = param[i];
    float g = grad[i] * s.gradScale; // clip_grad_norm_: grad.mul_(coef)
    if (s.decayParam)
      p = p * s.paramDecay; // param.mul_(1 - lr * weight_decay)
    if (s.l2)
      g = std::fma(p, s.weightDecay, g); // grad.add(param, alpha=wd)
    // exp_avg.lerp_(grad, 1 - beta1): ATen's lerp_vec.
    const float m = expAvg[i];
    const float diff = g - m;
    const float mNew = s.smallWeight
                           ? std::fma(s.lerpWeight, diff, m)
                           : std::fma(s.lerpWeight - 1.0f, diff, g);
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    float v = expAvgSq[i] * s.beta2;
    v = v + s.oneMinusBeta2 * g * g;
    // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    const float denom = std::sqrt(v) / s.biasCorrection2Sqrt + s.eps;
    // param.addcdiv_(exp_avg, denom, value=-step_size)
    param[i] = p + s.negStepSize * mNew / denom;
    expAvg[i] = mNew;
    expAvgSq[i] = v;
  }
}

/// AdamW(param, grad, step, lr, grad_scale, exp_avg, exp_avg_sq)
///   -> param', exp_avg', exp_avg_sq'.
Status adamWKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "AdamW";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 7, 7, 3, 3));
  const int64_t n = in[0].numel();
  const char *names[] = {"param", "grad", nullptr, nullptr, nullptr,
                         "exp_avg", "exp_avg_sq"};
  for (size_t i : {0, 1, 5, 6})
    ZRT_RETURN_IF_ERROR(checkVector(op, names[i], in[i], n));
  ZRT_RETURN_IF_ERROR(checkVector(op, "param'", out[0], n));
  ZRT_RETURN_IF_ERROR(checkVector(op, "exp_avg'", out[1], n));
  ZRT_RETURN_IF_ERROR(checkVector(op, "exp_avg_sq'", out[2], n));
  int64_t step = 0;
  float lr = 0, gradScale = 0;
  ZRT_RETURN_IF_ERROR(readStep(op, in[2], step));
  ZRT_RETURN_IF_ERROR(readFloatScalar(op, "lr", in[3], lr));
  ZRT_RETURN_IF_ERROR(readFloatScalar(op, "grad_scale", in[4], gradScale));

  const double beta1 = numberAttr(attrs, "beta1", 0.9);
  const double beta2 = numberAttr(attrs, "beta2", 0.999);
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
  const double biasCorrection1 = 1 - std::pow(beta1, t);
  const double biasCorrection2 = 1 - std::pow(beta2, t);
  const double stepSize = lrValue / biasCorrection1;
  const double biasCorrection2Sqrt = std::pow(biasCorrection2, 0.5);
  AdamScalars s;
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

  const float *param = in[0].as<float>(), *grad = in[1].as<float>(),
              *expAvg = in[5].as<float>(), *expAvgSq = in[6].as<float>();
  float *paramOut = out[0].as<float>(), *expAvgOut = out[1].as<float>(),
        *expAvgSqOut = out[2].as<float>();
  parallelRange(ctx, n, kElementGrain, [&](int64_t begin, int64_t end) {
    float p[kBlock], g[kBlock], m[kBlock], v[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t len = std::min(kBlock, end - b);
      const size_t bytes = size_t(len) * sizeof(float);
      std::memcpy(p, param + b, bytes);
      std::memcpy(g, grad + b, bytes);
      std::memcpy(m, expAvg + b, bytes);
      std::memcpy(v, expAvgSq + b, bytes);
      adamBlock(s, p, g, m, v, len);
      std::memcpy(paramOut + b, p, bytes);
      std::memcpy(expAvgOut + b, m, bytes);
      std::memcpy(expAvgSqOut + b, v, bytes);
    }
  });
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// SGD
//===----------------------------------------------------------------------===//

struct SgdScalars {
  float gradScale;
  bool hasWeightDecay;
  float weightDecay;
  bool hasMomentum;
  bool firstStep; ///< t == 1: the momentum buffer starts as a copy of d_p
  float momentum;
  float oneMinusDampening;
  bool nesterov;
  float negLr;
};

ZRT_OPTIMIZER_LOOP
void sgdBlock(const SgdScalars &s, float *__restrict param,
              const float *__restrict grad, float *__restrict buffer,
              int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float p = param[i];
    float g = grad[i] * s.gradScale;
    if (s.hasWeightDecay)
      g = std::fma(p, s.weightDecay, g); // grad.add(param, alpha=wd)
    if (s.hasMomentum) {
      // buf = clone(grad) at the first step, else
      // buf.mul_(momentum).add_(grad, alpha=1 - dampening)
      const float buf =
          s.firstStep ? g
                      : std::fma(g, s.oneMinusDampening, buffer[i] * s.momentum);
      buffer[i] = buf;
      // nesterov: grad.add(buf, alpha=momentum), else grad = buf
      g = s.nesterov ? std::fma(buf, s.momentum, g) : buf;
    }
    param[i] = std::fma(g, s.negLr, p); // param.add_(grad, alpha=-lr)
  }
}

/// SGD(param, grad, step, lr, grad_scale[, momentum_buffer])
///   -> param'[, momentum_buffer'].
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
                       "momentum " + std::to_string(momentum) +
                           ", dampening " + std::to_string(dampening),
                       "momentum > 0, dampening 0 (as torch.optim.SGD)");
  const size_t operands = hasMomentum ? 6 : 5;
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, operands, operands,
                                 operands - 4, operands - 4));
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
  ZRT_RETURN_IF_ERROR(readStep(op, in[2], step));
  ZRT_RETURN_IF_ERROR(readFloatScalar(op, "lr", in[3], lr));
  ZRT_RETURN_IF_ERROR(readFloatScalar(op, "grad_scale", in[4], gradScale));

  SgdScalars s;
  s.gradScale = gradScale;
  s.hasWeightDecay = weightDecay != 0;
  s.weightDecay = float(weightDecay);
  s.hasMomentum = hasMomentum;
  s.firstStep = step == 1;
  s.momentum = float(momentum);
  s.oneMinusDampening = float(1 - dampening);
  s.nesterov = nesterov;
  s.negLr = float(-double(lr));

  const float *param = in[0].as<float>(), *grad = in[1].as<float>();
  const float *buffer = hasMomentum ? in[5].as<float>() : nullptr;
  float *paramOut = out[0].as<float>();
  float *bufferOut = hasMomentum ? out[1].as<float>() : nullptr;
  parallelRange(ctx, n, kElementGrain, [&](int64_t begin, int64_t end) {
    float p[kBlock], g[kBlock], buf[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t len = std::min(kBlock, end - b);
      const size_t bytes = size_t(len) * sizeof(float);
      std::memcpy(p, param + b, bytes);
      std::memcpy(g, grad + b, bytes);
      if (hasMomentum && !s.firstStep)
        std::memcpy(buf, buffer + b, bytes);
      sgdBlock(s, p, g, buf, len);
      std::memcpy(paramOut + b, p, bytes);
      if (hasMomentum)
        std::memcpy(bufferOut + b, buf, bytes);
    }
  });
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// LrSchedule
//===----------------------------------------------------------------------===//

/// Python's math.pi.
constexpr double kPi = 3.141592653589793;

/// DeepSpeed's warmup fraction at last_batch_iteration k < warmup steps W.
double warmupGamma(const std::string &type, int64_t k, int64_t warmup) {
  if (type == "linear")
    return double(k) / double(warmup);
  return (1.0 / std::log(double(warmup))) * std::log(double(k + 1));
}

/// LrSchedule(step) -> lr: the learning rate DeepSpeed's engine uses for its
/// t-th optimizer step. The engine sets the scheduler's lr when it is built
/// (last_batch_iteration = -1) and calls lr_scheduler.step() after every
/// optimizer step, so step t runs with last_batch_iteration k = t - 2.
Status lrScheduleKernel(const KernelContext &, const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out,
                        const AttrMap &attrs) {
  const char *op = "LrSchedule";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 1, 1));
  int64_t step = 0;
  ZRT_RETURN_IF_ERROR(readStep(op, in[0], step));
  ZRT_RETURN_IF_ERROR(checkScalar(op, "lr", out[0], DType::F32));
  const std::string type = attrs.getString("type", "constant");
  const std::string warmupType = attrs.getString("warmup_type", "log");
  if (warmupType != "log" && warmupType != "linear")
    return kernelError(op, "bad attribute warmup_type", "\"" + warmupType + "\"",
                       "\"log\" or \"linear\"");
  const int64_t k = step - 2; // last_batch_iteration
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
      const int64_t realLastStep = k - warmup + 1;
      const int64_t realTotalSteps = total - warmup;
      if (realTotalSteps == 0)
        return kernelError(op, "total_num_steps equals warmup_num_steps",
                           std::to_string(total),
                           "more steps than the warmup (DeepSpeed divides by "
                           "their difference)");
      ratio = (1 + std::cos(kPi * double(realLastStep) /
                            double(realTotalSteps))) /
              2;
      ratio = std::max(0.0, cosMinRatio + (1.0 - cosMinRatio) * ratio);
    }
    lr = k < 0 ? 0.0 : baseLr * ratio;
  } else {
    return kernelError(op, "bad attribute type", "\"" + type + "\"",
                       "\"constant\", \"WarmupLR\", \"WarmupDecayLR\" or "
                       "\"WarmupCosineLR\"");
  }
  out[0].as<float>()[0] = float(lr);
  return Status::ok();
}

} // namespace

void registerOptimizerKernels(KernelTable &table) {
  table.add("AdamW", adamWKernel);
  table.add("SGD", sgdKernel);
  table.add("LrSchedule", lrScheduleKernel);
}

} // namespace cpu
} // namespace zrt
