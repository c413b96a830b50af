//===- SpatialKernels.cu - Conv, pools, BatchNormalization and Resize -----===//
//
// The CPU kernels' checks (kernels/KernelLayouts.h) with the GPU loops:
//
// - Conv: im2col (math::im2colValue, one thread per column entry) into
//   stream-ordered scratch, then cuBLAS over the groups (or, with one group,
//   over a chunk of images); a 1x1 convolution without stride or padding
//   multiplies X directly. Bias: one thread per output element.
// - ConvTranspose: cuBLAS col = W^T X per image and group, then col2im
//   gathering (math::col2imValue): one thread per output element sums its
//   taps in tap order onto the bias, as the CPU's col2im adds them (no
//   atomics).
// - MaxPool / AveragePool: math::PoolFn, one thread per output element (the
//   CPU's per-element code, the same bits).
// - BatchNormalization: one thread per channel computes the CPU's affine
//   map in double (math::batchNormCoefficients), then one thread per
//   element applies it (the same bits).
// - Resize: the taps computed on the host (kernels::prepareResize) are uploaded
//   to scratch; math::ResizeFn per output element (the same bits).
//
//===----------------------------------------------------------------------===//

#include "kernels/KernelLayouts.h"
#include "cuda/CudaLoops.cuh"
#include "math/SelectionMath.h"

#include <algorithm>
#include <vector>

namespace zrt {
namespace cuda {
namespace {

/// Most bytes of im2col / col2im scratch one launch group uses (at least one
/// image's worth).
constexpr int64_t kConvScratchBytes = int64_t(256) << 20;

//===----------------------------------------------------------------------===//
// Conv, ConvTranspose
//===----------------------------------------------------------------------===//

/// col[image][group][row][column] for `images` images from `x0`.
template <typename T> struct Im2colFn {
  math::Window g;
  const T *x0;
  T *col;
  int64_t groups, channelsPerGroup, rows, inChannels;
  ZRT_HD void operator()(int64_t e) const {
    const int64_t column = e % g.outSize;
    int64_t r = e / g.outSize;
    const int64_t row = r % rows;
    r /= rows;
    const int64_t grp = r % groups, image = r / groups;
    const T *xg = x0 + (image * inChannels + grp * channelsPerGroup) * g.inSize;
    col[e] = math::im2colValue(g, xg, row, column);
  }
};

/// y[i] += bias[channel of i] over [images, channels, size].
template <typename T> struct AddBiasFn {
  const T *bias;
  T *y;
  int64_t channels, size;
  ZRT_HD void operator()(int64_t i) const {
    y[i] = T(y[i] + bias[(i / size) % channels]);
  }
};

/// y[i] = value.
template <typename T> struct FillFn {
  T *y;
  const T *bias; ///< per channel, or null: zero
  int64_t channels, size;
  ZRT_HD void operator()(int64_t i) const {
    y[i] = bias ? bias[(i / size) % channels] : T(0);
  }
};

/// ConvTranspose's output element i of [images, M, outSize] from col
/// [images, M, K, inSize].
template <typename T> struct Col2imFn {
  math::Window g;
  const T *col, *bias;
  T *y;
  int64_t channels;
  ZRT_HD void operator()(int64_t i) const {
    const int64_t o = i % g.outSize, plane = i / g.outSize;
    const T start = bias ? bias[plane % channels] : T(0);
    y[i] =
        math::col2imValue(g, col + plane * g.kernelSize * g.inSize, o, start);
  }
};

/// Scratch for the column matrices (im2col / col2im) of `chunk` images at a
/// time, `colImage` elements each: as many images as fit in
/// kConvScratchBytes, at least one.
template <typename T>
Status colScratch(int64_t batch, int64_t colImage, int64_t &chunk,
                  std::shared_ptr<void> &scratch) {
  chunk = std::max<int64_t>(
      1, std::min<int64_t>(batch, kConvScratchBytes /
                                      std::max<int64_t>(colImage * int64_t(sizeof(T)), 1)));
  return CudaLoops::allocate(uint64_t(chunk * colImage) * sizeof(T), scratch);
}

template <typename T>
Status convForward(const KernelContext &ctx, const kernels::ConvGeometry &g,
                   const T *x, const T *w, const T *bias, T *y) {
  const char *op = "Conv";
  const int64_t G = g.group, cg = g.inChannels / G, mg = g.outChannels / G;
  const int64_t rows = cg * g.kernelSize;
  if (g.batch == 0 || g.outChannels == 0 || g.outSize == 0)
    return Status::ok();
  const math::Window win = g.window();
  const int64_t yImage = g.outChannels * g.outSize;
  if (rows == 0) {
    ZRT_RETURN_IF_ERROR(
        CudaLoops::forEach(ctx, g.batch * yImage, 0,
                           FillFn<T>{y, bias, g.outChannels, g.outSize}));
    return Status::ok();
  }
  if (!fitsBlas({mg, g.outSize, rows, G, g.batch}))
    return Status::error(std::string(op) +
                         ": sizes too large for cuBLAS (int dims)");
  bool pointwise = g.kernelSize == 1;
  for (size_t d = 0; d < g.in.size(); ++d)
    pointwise &= g.strides[d] == 1 && g.padBegin[d] == 0 && g.out[d] == g.in[d];
  const int64_t xImage = g.inChannels * g.inSize;
  if (pointwise) {
    // Y_n,g [mg, outSize] = W_g [mg, cg] X_n,g [cg, inSize].
    if (G == 1)
      ZRT_RETURN_IF_ERROR(blasGemm<T>(false, false, mg, g.outSize, rows, T(1),
                                      w, x, T(0), y, g.batch, 0, xImage,
                                      yImage));
    else
      for (int64_t n = 0; n < g.batch; ++n)
        ZRT_RETURN_IF_ERROR(blasGemm<T>(
            false, false, mg, g.outSize, rows, T(1), w, x + n * xImage, T(0),
            y + n * yImage, G, mg * rows, cg * g.inSize, mg * g.outSize));
  } else {
    const int64_t colImage = G * rows * g.outSize;
    int64_t chunk = 0;
    std::shared_ptr<void> scratch;
    ZRT_RETURN_IF_ERROR(colScratch<T>(g.batch, colImage, chunk, scratch));
    T *col = static_cast<T *>(scratch.get());
    for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
      const int64_t count = std::min(chunk, g.batch - n0);
      ZRT_RETURN_IF_ERROR(CudaLoops::forEach(
          ctx, count * colImage, 0,
          Im2colFn<T>{win, x + n0 * xImage, col, G, cg, rows, g.inChannels}));
      if (G == 1) {
        ZRT_RETURN_IF_ERROR(blasGemm<T>(false, false, mg, g.outSize, rows, T(1),
                                        w, col, T(0), y + n0 * yImage, count, 0,
                                        rows * g.outSize, yImage));
      } else {
        for (int64_t n = 0; n < count; ++n)
          ZRT_RETURN_IF_ERROR(blasGemm<T>(false, false, mg, g.outSize, rows,
                                          T(1), w, col + n * colImage, T(0),
                                          y + (n0 + n) * yImage, G, mg * rows,
                                          rows * g.outSize, mg * g.outSize));
      }
    }
  }
  if (bias)
    ZRT_RETURN_IF_ERROR(
        CudaLoops::forEach(ctx, g.batch * yImage, 0,
                           AddBiasFn<T>{bias, y, g.outChannels, g.outSize}));
  return Status::ok();
}

template <typename T>
Status convTransposeForward(const KernelContext &ctx,
                            const kernels::ConvGeometry &g, const T *x, const T *w,
                            const T *bias, T *y) {
  const char *op = "ConvTranspose";
  const int64_t G = g.group, cg = g.inChannels / G, mg = g.outChannels / G;
  if (g.batch == 0 || g.outChannels == 0)
    return Status::ok();
  const int64_t yImage = g.outChannels * g.outSize;
  const int64_t rows = mg * g.kernelSize; // col rows per group
  if (cg == 0 || g.inSize == 0 || rows == 0)
    return CudaLoops::forEach(ctx, g.batch * yImage, 0,
                              FillFn<T>{y, bias, g.outChannels, g.outSize});
  if (!fitsBlas({rows, g.inSize, cg, G, g.batch}))
    return Status::error(std::string(op) +
                         ": sizes too large for cuBLAS (int dims)");
  const math::Window win = g.window();
  const int64_t xImage = g.inChannels * g.inSize;
  const int64_t colImage = G * rows * g.inSize;
  int64_t chunk = 0;
  std::shared_ptr<void> scratch;
  ZRT_RETURN_IF_ERROR(colScratch<T>(g.batch, colImage, chunk, scratch));
  T *col = static_cast<T *>(scratch.get());
  for (int64_t n0 = 0; n0 < g.batch; n0 += chunk) {
    const int64_t count = std::min(chunk, g.batch - n0);
    // col_n,g [mg * K, inSize] = W_g^T X_n,g with W_g [cg, mg * K].
    if (G == 1) {
      ZRT_RETURN_IF_ERROR(blasGemm<T>(true, false, rows, g.inSize, cg, T(1), w,
                                      x + n0 * xImage, T(0), col, count, 0,
                                      xImage, colImage));
    } else {
      for (int64_t n = 0; n < count; ++n)
        ZRT_RETURN_IF_ERROR(blasGemm<T>(true, false, rows, g.inSize, cg, T(1),
                                        w, x + (n0 + n) * xImage, T(0),
                                        col + n * colImage, G, cg * rows,
                                        cg * g.inSize, rows * g.inSize));
    }
    ZRT_RETURN_IF_ERROR(CudaLoops::forEach(
        ctx, count * yImage, 0,
        Col2imFn<T>{win, col, bias, y + n0 * yImage, g.outChannels}));
  }
  return Status::ok();
}

template <bool Transposed>
Status convKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  const char *op = Transposed ? "ConvTranspose" : "Conv";
  kernels::ConvGeometry g;
  ZRT_RETURN_IF_ERROR(kernels::prepareConv(op, ins, outs, attrs, Transposed, g));
  const TensorRef &x = ins[0], &w = ins[1], &y = outs[0];
  const bool hasBias = kernels::hasOperand(ins, 2);
  Status status;
  kernels::dispatchType(kernels::FloatTypes{}, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *bias = hasBias ? ins[2].as<T>() : nullptr;
    if constexpr (Transposed)
      status = convTransposeForward<T>(ctx, g, x.as<T>(), w.as<T>(), bias,
                                       y.as<T>());
    else
      status = convForward<T>(ctx, g, x.as<T>(), w.as<T>(), bias, y.as<T>());
  });
  return status;
}

//===----------------------------------------------------------------------===//
// MaxPool, AveragePool
//===----------------------------------------------------------------------===//

template <bool Max>
Status poolKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  kernels::PoolLayout l;
  ZRT_RETURN_IF_ERROR(kernels::preparePool(Max, ins, outs, attrs, l));
  const TensorRef &x = ins[0], &y = outs[0];
  Status status;
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    status = CudaLoops::forEach(
        ctx, l.planes * l.window.outSize, 0,
        math::PoolFn<T, Max>{l.window, x.as<T>(), y.as<T>(), l.includePad});
  };
  if constexpr (Max)
    kernels::dispatchType(kernels::NumericTypes{}, x.dtype, run);
  else
    kernels::dispatchType(kernels::FloatTypes{}, x.dtype, run);
  return status;
}

Status maxPoolGradKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                         const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  kernels::PoolLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareMaxPoolGrad(ins, outs, attrs, l));
  const TensorRef &dy = ins[0], &x = ins[1], &dx = outs[0];
  Status status;
  // One thread per [N, C] plane: overlapping windows add in output order.
  kernels::dispatchType(kernels::FloatTypes{}, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    status = CudaLoops::forEach(
        ctx, l.planes, 0, math::MaxPoolGradFn<T>{l.window, x.as<T>(), dy.as<T>(), dx.as<T>()});
  });
  return status;
}

//===----------------------------------------------------------------------===//
// BatchNormalization
//===----------------------------------------------------------------------===//

template <typename T> struct BatchNormCoefficientsFn {
  const T *scale, *bias, *mean, *var;
  double epsilon;
  T *a, *b;
  ZRT_HD void operator()(int64_t c) const {
    math::batchNormCoefficients(scale[c], bias[c], mean[c], var[c], epsilon,
                                a[c], b[c]);
  }
};

template <typename T> struct BatchNormApplyFn {
  const T *x, *a, *b;
  T *y;
  int64_t channels, inner;
  ZRT_HD void operator()(int64_t i) const {
    const int64_t c = (i / inner) % channels;
    y[i] = math::batchNormValue(x[i], a[c], b[c]);
  }
};

Status batchNormKernel(const KernelContext &ctx,
                       const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out,
                       const AttrMap &attrs) {
  kernels::BatchNormLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareBatchNorm(in, out, attrs, l));
  const TensorRef &x = in[0], &y = out[0];
  Status status;
  kernels::dispatchType(kernels::FloatTypes{}, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (l.channels == 0)
      return;
    std::shared_ptr<void> scratch;
    status = CudaLoops::allocate(uint64_t(2 * l.channels) * sizeof(T), scratch);
    if (!status.isOk())
      return;
    T *a = static_cast<T *>(scratch.get()), *b = a + l.channels;
    status = CudaLoops::forEach(
        ctx, l.channels, 0,
        BatchNormCoefficientsFn<T>{in[1].as<T>(), in[2].as<T>(), in[3].as<T>(),
                                   in[4].as<T>(), l.epsilon, a, b});
    if (status.isOk())
      status = CudaLoops::forEach(
          ctx, x.numel(), 0,
          BatchNormApplyFn<T>{x.as<T>(), a, b, y.as<T>(), l.channels,
                              std::max<int64_t>(l.inner, 1)});
  });
  return status;
}

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

/// Uploads `count` elements of host `src` to `dst` (pageable: returns once
/// staged).
Status upload(cudaStream_t stream, void *dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return Status::ok();
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream),
               "Resize: cudaMemcpyAsync");
}

Status resizeKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                    const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  kernels::ResizeLayout l;
  ZRT_RETURN_IF_ERROR(kernels::prepareResize(ins, outs, attrs, l));
  const TensorRef &x = ins[0], &y = outs[0];
  cudaStream_t stream;
  ZRT_RETURN_IF_ERROR(streamFor("Resize", stream));
  if (y.numel() == 0)
    return Status::ok();
  // All dims' taps in one scratch buffer: indices, weights, then flags.
  size_t taps = 0, coords = 0;
  for (const kernels::DimTaps &t : l.taps) {
    taps += t.index.size();
    coords += t.outside.size();
  }
  const size_t indexBytes = taps * sizeof(int64_t);
  const size_t weightBytes = taps * sizeof(double);
  std::shared_ptr<void> scratch;
  ZRT_RETURN_IF_ERROR(
      CudaLoops::allocate(indexBytes + weightBytes + coords, scratch));
  auto *base = static_cast<char *>(scratch.get());
  auto *index = reinterpret_cast<int64_t *>(base);
  auto *weight = reinterpret_cast<double *>(base + indexBytes);
  char *outside = base + indexBytes + weightBytes;
  math::ResizeView view = l.base;
  for (int d = 0; d < view.rank; ++d) {
    const kernels::DimTaps &t = l.taps[size_t(d)];
    ZRT_RETURN_IF_ERROR(upload(stream, index, t.index.data(),
                               t.index.size() * sizeof(int64_t)));
    ZRT_RETURN_IF_ERROR(upload(stream, weight, t.weight.data(),
                               t.weight.size() * sizeof(double)));
    ZRT_RETURN_IF_ERROR(
        upload(stream, outside, t.outside.data(), t.outside.size()));
    view.index[d] = index;
    view.weight[d] = weight;
    view.outside[d] = outside;
    index += t.index.size();
    weight += t.weight.size();
    outside += t.outside.size();
  }
  Status status;
  kernels::dispatchType(kernels::NumericTypes{}, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    status = CudaLoops::forEach(ctx, y.numel(), 0,
                                math::ResizeFn<T>{view, x.as<T>(), y.as<T>()});
  });
  return status;
}

} // namespace

void registerCudaSpatialKernels(KernelTable &table) {
  table.add("Conv", convKernel<false>);
  table.add("ConvTranspose", convKernel<true>);
  table.add("MaxPool", poolKernel<true>);
  table.add("AveragePool", poolKernel<false>);
  table.add("MaxPoolGrad", maxPoolGradKernel);
  table.add("BatchNormalization", batchNormKernel);
  table.add("Resize", resizeKernel);
}

} // namespace cuda
} // namespace zrt
