//===- KernelLayouts.h - Host checks shared with CUDA -----------*- C++ -*-===//
//
// The host side of the kernels whose loops differ between the backends but
// whose operand checks, attributes and layouts do not: Conv /
// ConvTranspose, MaxPool / AveragePool, BatchNormalization, Resize, TopK,
// OneHot, FusedElementwise, MatMul and Gemm. Each prepare* function checks
// the operands exactly as the CPU kernel always did (the same error texts,
// in the same order, dtype checks included) and returns what the loops
// need; the CPU kernels (cpu/kernels/*.cpp) and the CUDA ones
// (cuda/SpatialKernels.cu, SelectionKernels.cu, FusedKernels.cu,
// MatMulKernels.cu, CudaBackend.cpp) both call them, so the two backends
// reject the same operands with the same text. The per-element math is
// math/WindowMath.h, ResizeMath.h, SelectionMath.h and FusedMath.h.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_KERNELLAYOUTS_H
#define ZRT_KERNELS_KERNELLAYOUTS_H

#include "kernels/KernelSupport.h"
#include "math/ResizeMath.h"
#include "math/WindowMath.h"

#include <string>
#include <vector>

namespace zrt {
namespace kernels {

//===----------------------------------------------------------------------===//
// Conv, ConvTranspose (Conv.cpp)
//===----------------------------------------------------------------------===//

/// Shapes and attributes of one Conv / ConvTranspose, checked.
struct ConvGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, group = 1;
  std::vector<int64_t> in, kernel, out, strides, dilations, padBegin;
  int64_t inSize = 1, kernelSize = 1, outSize = 1;

  /// The same geometry by value (pads at the end are not needed).
  math::Window window() const;
};

/// Checks Conv (transposed = false) or ConvTranspose; X's dtype included
/// (f32 or f64).
Status prepareConv(const char *op, const std::vector<TensorRef> &ins,
                   const std::vector<TensorRef> &outs, const AttrMap &attrs,
                   bool transposed, ConvGeometry &g);

//===----------------------------------------------------------------------===//
// MaxPool, AveragePool (Pool.cpp)
//===----------------------------------------------------------------------===//

struct PoolLayout {
  math::Window window;
  int64_t planes = 0; ///< N * C
  bool includePad = false;
};

/// Checks MaxPool (numeric) or AveragePool (f32, f64).
Status preparePool(bool max, const std::vector<TensorRef> &ins,
                   const std::vector<TensorRef> &outs, const AttrMap &attrs,
                   PoolLayout &l);

/// Checks MaxPoolGrad(dY, X) -> dX (f32, f64): dY of MaxPool's shape for X.
Status prepareMaxPoolGrad(const std::vector<TensorRef> &ins,
                          const std::vector<TensorRef> &outs, const AttrMap &attrs,
                          PoolLayout &l);

//===----------------------------------------------------------------------===//
// BatchNormalization (Normalization.cpp)
//===----------------------------------------------------------------------===//

struct BatchNormLayout {
  int64_t channels = 0, inner = 1; ///< inner: product of dims [2, rank)
  double epsilon = 1e-5;
};

/// Checks BatchNormalization (X [N, C, ...], four [C] parameters, f32/f64).
Status prepareBatchNorm(const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out, const AttrMap &attrs,
                        BatchNormLayout &l);

//===----------------------------------------------------------------------===//
// Resize (Resize.cpp)
//===----------------------------------------------------------------------===//

/// The taps of every output coordinate along one dim: output coordinate o
/// reads input indices index[o * width + j] with weight[o * width + j];
/// `outside[o]` marks tf_crop_and_resize extrapolation.
struct DimTaps {
  int64_t width = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<char> outside;
};

struct ResizeLayout {
  std::vector<DimTaps> taps;
  /// Everything but the tap pointers, which view() fills.
  math::ResizeView base;
  /// base with the pointers at `taps` (host memory).
  math::ResizeView view() const;
};

/// Checks Resize and computes its taps (X's dtype: numeric, f32/f64 unless
/// nearest).
Status prepareResize(const std::vector<TensorRef> &ins,
                     const std::vector<TensorRef> &outs, const AttrMap &attrs,
                     ResizeLayout &l);

//===----------------------------------------------------------------------===//
// TopK, OneHot (Selection.cpp)
//===----------------------------------------------------------------------===//

struct TopKLayout {
  AxisSplit split;
  int64_t k = 0;
  bool largest = true;
};

/// Checks TopK (numeric X, i64 Indices).
Status prepareTopK(const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs,
                   TopKLayout &l);

struct OneHotLayout {
  const TensorRef *indices = nullptr, *values = nullptr;
  int64_t outer = 1, depth = 1, inner = 1;
};

/// Checks OneHot (numeric indices, values of Y's dtype).
Status prepareOneHot(const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &attrs,
                     OneHotLayout &l);

//===----------------------------------------------------------------------===//
// FusedElementwise (Fused.cpp)
//===----------------------------------------------------------------------===//

struct FusedOp {
  int64_t code = 0, a = 0, b = 0;
  /// The type the op's result is rounded to before a later op reads it
  /// (F16, BF16; F32: not rounded), as a kernel of that output type stores
  /// it. The last op's result is the output, stored in the output's type.
  DType round = DType::F32;
};

/// A checked FusedElementwise program: operand refs are inputs (0 <= ref <
/// inputs), earlier results (inputs + k for op k) or constants (-1 - c).
/// Each op's type comes from `op_types` (per op: 0 f32, 1 f16, 2 bf16; a
/// group that mixes types, its Casts opcode kFusedCast), or `round_to`
/// (every op "f16" or "bf16"), else f32.
struct FusedProgram {
  std::vector<FusedOp> ops;
  std::vector<float> constants;
  /// Each input broadcast to the output's shape (one-input plans).
  std::vector<BroadcastPlan> plans;
};

/// Checks FusedElementwise (the ops and their operands; operands f32, or
/// also f16 / bf16 where `halfOperands`: the CPU kernel widens and rounds
/// them itself, CUDA's trampoline does it for its kernel).
Status prepareFused(const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs,
                    FusedProgram &p, bool halfOperands);

//===----------------------------------------------------------------------===//
// MatMul, Gemm (MatMul.cpp)
//===----------------------------------------------------------------------===//

struct MatMulLayout {
  int64_t m = 0, n = 0, k = 0;
  std::vector<int64_t> aBatch, bBatch, batch;
  /// A's and B's batch dims broadcast to the output's.
  BroadcastPlan plan;
};

/// The element types of MatMul and Gemm: the numeric ones, and f16 / bf16
/// as their bits (uint16_t) computing in f32 (runPackedProducts,
/// runBf16PairProducts).
using ProductTypes =
    TypeList<float, double, int32_t, int64_t, int8_t, uint8_t, Float16, BFloat16>;

/// Checks MatMul (numeric, numpy rules; f16 and bf16 too with `halfTypes`,
/// which the CPU kernels compute in f32).
Status prepareMatMul(const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, MatMulLayout &l,
                     bool halfTypes = false);

struct GemmLayout {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  bool hasC = false; ///< C present and beta != 0 (else beta is 0)
};

/// Checks Gemm (numeric, 2-D A and B, C broadcast to Y: its dtype is checked
/// here, its shape by the broadcast copy; f16 and bf16 with `halfTypes`).
Status prepareGemm(const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs,
                   GemmLayout &l, bool halfTypes = false);

} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_KERNELLAYOUTS_H
