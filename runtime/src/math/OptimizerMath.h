//===- OptimizerMath.h - AdamW / Adam / SGD element updates -----*- C++ -*-===//
//
// The per-element updates of the AdamW and SGD kernels (docs/kernels.md,
// "Training"), PyTorch's single-tensor implementations operation by
// operation in f32 with a fused multiply-add exactly where ATen uses one.
// Shared by the CPU kernels (cpu/kernels/Optimizer.cpp, compiled with
// -ffp-contract=off) and the CUDA kernels (cuda/OptimizerKernels.cu, compiled
// with --fmad=false), so the compilers add no other FMAs and both backends
// give the same bits. The f32 scalars are computed once on the host
// (kernels/OptimizerKernels.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MATH_OPTIMIZERMATH_H
#define ZRT_MATH_OPTIMIZERMATH_H

#include "math/Bits.h"

#include <cmath>
#include <cstdint>

namespace zrt {
namespace math {

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

/// One element of the Adam update: p, m, v in place, g the gradient.
ZRT_HD inline void adamElement(const AdamScalars &s, float &param, float grad,
                               float &expAvg, float &expAvgSq) {
  float p = param;
  float g = grad * s.gradScale; // clip_grad_norm_: grad.mul_(coef)
  if (s.decayParam)
    p = p * s.paramDecay; // param.mul_(1 - lr * weight_decay)
  if (s.l2)
    g = std::fma(p, s.weightDecay, g); // grad.add(param, alpha=wd)
  // exp_avg.lerp_(grad, 1 - beta1): ATen's lerp_vec.
  const float m = expAvg;
  const float diff = g - m;
  const float mNew = s.smallWeight ? std::fma(s.lerpWeight, diff, m)
                                   : std::fma(s.lerpWeight - 1.0f, diff, g);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  float v = expAvgSq * s.beta2;
  v = v + s.oneMinusBeta2 * g * g;
  // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
  const float denom = std::sqrt(v) / s.biasCorrection2Sqrt + s.eps;
  // param.addcdiv_(exp_avg, denom, value=-step_size)
  param = p + s.negStepSize * mNew / denom;
  expAvg = mNew;
  expAvgSq = v;
}

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

/// One element of the SGD update: param and (with momentum) buffer in place.
ZRT_HD inline void sgdElement(const SgdScalars &s, float &param, float grad,
                              float &buffer) {
  const float p = param;
  float g = grad * s.gradScale;
  if (s.hasWeightDecay)
    g = std::fma(p, s.weightDecay, g); // grad.add(param, alpha=wd)
  if (s.hasMomentum) {
    // buf = clone(grad) at the first step, else
    // buf.mul_(momentum).add_(grad, alpha=1 - dampening)
    const float buf =
        s.firstStep ? g : std::fma(g, s.oneMinusDampening, buffer * s.momentum);
    buffer = buf;
    // nesterov: grad.add(buf, alpha=momentum), else grad = buf
    g = s.nesterov ? std::fma(buf, s.momentum, g) : buf;
  }
  param = std::fma(g, s.negLr, p); // param.add_(grad, alpha=-lr)
}

} // namespace math
} // namespace zrt

#endif // ZRT_MATH_OPTIMIZERMATH_H
