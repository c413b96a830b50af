//===- Shape.cpp - Data movement kernels ----------------------------------===//
//
// Kernels that move or generate elements without arithmetic on them: Copy
// (what Reshape/Squeeze/Unsqueeze/Flatten lower to), Expand, Transpose,
// Concat, Split, Slice, Tile, Pad, Trilu, Fill (ConstantOfShape) and Range.
// Apart from Fill's and Pad's constant and Range, they are written once per
// element size, so they serve every dtype.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuLoops.h"
#include "kernels/ShapeKernels.h"

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

/// dst[i] = src[i] for i < n (disjoint); a loop rather than memcpy for the
/// short rows that transposes and slices copy.
template <typename U>
ZRT_HOT_LOOP void copyElements(const U *__restrict src, U *__restrict dst,
                               int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = src[i];
}

/// Bytes per parallel chunk for plain copies.
constexpr int64_t kCopyGrain = int64_t(1) << 20;

/// The CPU loops of the data movement kernels of ShapeKernels.h.
struct CpuShapeLoops : CpuLoops {
  static Status copyBytes(const KernelContext &ctx, void *dstData,
                          const void *srcData, uint64_t byteCount) {
    const int64_t bytes = int64_t(byteCount);
    const char *src = static_cast<const char *>(srcData);
    char *dst = static_cast<char *>(dstData);
    parallelRange(ctx, bytes, kCopyGrain, [&](int64_t b, int64_t e) {
      std::memcpy(dst + b, src + b, size_t(e - b));
    });
    return Status::ok();
  }

  static Status transpose(const KernelContext &ctx, std::vector<int64_t> dims,
                          std::vector<int64_t> strides, const TensorRef &x,
                          const TensorRef &y) {
    const size_t elementSize = dtypeSize(x.dtype);
    if (dims.empty() || strides.back() == 1) {
      // Whole rows are contiguous in the input: copy them.
      if (dims.empty()) {
        dims.push_back(1);
        strides.push_back(1);
      }
      const int64_t rowLen = dims.back();
      const int64_t rows = y.numel() / rowLen;
      dispatchBySize(elementSize, [&](auto tag) {
        using U = typename decltype(tag)::type;
        const U *src = x.as<U>();
        U *dst = y.as<U>();
        parallelRange(
            ctx, rows, rowGrain(rowLen, kElementGrain),
            [&](int64_t b, int64_t e) {
              forEachRow(dims, strides, b, e, [&](int64_t r, int64_t offset) {
                copyElements(src + offset, dst + r * rowLen, rowLen);
              });
            });
      });
      return Status::ok();
    }
    // Tiles of the plane (q: the dim contiguous in the input, last: the dim
    // contiguous in the output); every other dim indexes whole planes.
    const size_t last = dims.size() - 1;
    size_t q = 0;
    while (strides[q] != 1)
      ++q;
    const std::vector<int64_t> outStrides = contiguousStrides(dims);
    std::vector<size_t> others;
    for (size_t d = 0; d < last; ++d)
      if (d != q)
        others.push_back(d);
    int64_t planes = 1;
    for (size_t d : others)
      planes *= dims[d];
    constexpr int64_t kTile = 32;
    const int64_t qTiles = (dims[q] + kTile - 1) / kTile;
    dispatchBySize(elementSize, [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U *src = x.as<U>();
      U *dst = y.as<U>();
      const int64_t lastLen = dims[last], lastStride = strides[last];
      const int64_t qOutStride = outStrides[q];
      parallelRange(ctx, planes * qTiles,
                    rowGrain(kTile * lastLen, kElementGrain),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t task = begin; task < end; ++task) {
                        int64_t plane = task / qTiles;
                        const int64_t qBegin = (task % qTiles) * kTile;
                        const int64_t qEnd = std::min(dims[q], qBegin + kTile);
                        int64_t inBase = 0, outBase = 0;
                        for (size_t k = others.size(); k-- > 0;) {
                          const size_t d = others[k];
                          const int64_t i = plane % dims[d];
                          plane /= dims[d];
                          inBase += i * strides[d];
                          outBase += i * outStrides[d];
                        }
                        for (int64_t lb = 0; lb < lastLen; lb += kTile) {
                          const int64_t le = std::min(lastLen, lb + kTile);
                          for (int64_t iq = qBegin; iq < qEnd; ++iq) {
                            const U *s = src + inBase + iq;
                            U *o = dst + outBase + iq * qOutStride;
                            for (int64_t il = lb; il < le; ++il)
                              o[il] = s[il * lastStride];
                          }
                        }
                      }
                    });
    });
    return Status::ok();
  }

  template <bool ToWhole>
  static Status
  concatOrSplit(const KernelContext &ctx, const std::vector<TensorRef> &parts,
                const TensorRef &whole, int64_t axis, int64_t outer,
                int64_t innerBytes, int64_t wholeRow,
                const std::vector<int64_t> &partOffset) {
    char *wholeData = static_cast<char *>(whole.data);
    parallelRange(ctx, outer, rowGrain(wholeRow, kCopyGrain / 8),
                  [&](int64_t b, int64_t e) {
                    for (int64_t o = b; o < e; ++o)
                      for (size_t i = 0; i < parts.size(); ++i) {
                        const int64_t bytes =
                            parts[i].shape[size_t(axis)] * innerBytes;
                        char *w = wholeData + o * wholeRow + partOffset[i];
                        char *p =
                            static_cast<char *>(parts[i].data) + o * bytes;
                        if (bytes == 0)
                          continue;
                        if (ToWhole)
                          std::memcpy(w, p, size_t(bytes));
                        else
                          std::memcpy(p, w, size_t(bytes));
                      }
                  });
    return Status::ok();
  }

  static Status slice(const KernelContext &ctx,
                      const std::vector<int64_t> &strides, int64_t base,
                      const TensorRef &x, const TensorRef &y) {
    const int64_t rowLen = y.shape.back(), rowStride = strides.back();
    const int64_t rows = y.numel() / rowLen;
    dispatchBySize(dtypeSize(x.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U *src = x.as<U>() + base;
      U *dst = y.as<U>();
      parallelRange(ctx, rows, rowGrain(rowLen, kElementGrain),
                    [&](int64_t b, int64_t e) {
                      forEachRow(y.shape, strides, b, e,
                                 [&](int64_t r, int64_t offset) {
                                   const U *s = src + offset;
                                   U *o = dst + r * rowLen;
                                   if (rowStride == 1)
                                     copyElements(s, o, rowLen);
                                   else
                                     for (int64_t i = 0; i < rowLen; ++i)
                                       o[i] = s[i * rowStride];
                                 });
                    });
    });
    return Status::ok();
  }

  static Status fillElements(const KernelContext &ctx, void *data, size_t es,
                             uint64_t bits, int64_t count) {
    char *dst = static_cast<char *>(data);
    parallelRange(ctx, count, kCopyGrain / 8, [&](int64_t b, int64_t e) {
      cpu::fillElements(dst + size_t(b) * es, es, bits, e - b);
    });
    return Status::ok();
  }

  static Status tile(const KernelContext &ctx, const TensorRef &x,
                     const TensorRef &y) {
    const size_t rank = x.shape.size();
    const std::vector<int64_t> inStrides = contiguousStrides(x.shape);
    const int64_t inRow = x.shape.back(), outRow = y.shape.back();
    const int64_t rows = y.numel() / outRow;
    dispatchBySize(dtypeSize(x.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U *src = x.as<U>();
      U *dst = y.as<U>();
      parallelRange(
          ctx, rows, rowGrain(outRow, kElementGrain),
          [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
              int64_t off = 0, rest = r;
              for (size_t d = rank - 1; d-- > 0;) {
                off += (rest % y.shape[d] % x.shape[d]) * inStrides[d];
                rest /= y.shape[d];
              }
              U *o = dst + r * outRow;
              for (int64_t i = 0; i < outRow; i += inRow)
                std::memcpy(o + i, src + off, size_t(inRow) * sizeof(U));
            }
          });
    });
    return Status::ok();
  }

  static Status trilu(const KernelContext &ctx, bool upper, int64_t k,
                      int64_t rowsPerMatrix, int64_t cols, int64_t rows,
                      const TensorRef &x, const TensorRef &y) {
    const size_t es = dtypeSize(x.dtype);
    const char *src = static_cast<const char *>(x.data);
    char *dst = static_cast<char *>(y.data);
    parallelRange(ctx, rows, rowGrain(cols, kElementGrain),
                  [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r) {
                      const int64_t i = r % rowsPerMatrix;
                      // Kept columns [keepBegin, keepEnd).
                      int64_t keepBegin, keepEnd;
                      math::triluKept(i, k, cols, upper, keepBegin, keepEnd);
                      const size_t rowStart = size_t(r * cols) * es;
                      if (src != dst && keepEnd > keepBegin)
                        std::memcpy(dst + rowStart + size_t(keepBegin) * es,
                                    src + rowStart + size_t(keepBegin) * es,
                                    size_t(keepEnd - keepBegin) * es);
                      std::memset(dst + rowStart, 0, size_t(keepBegin) * es);
                      std::memset(dst + rowStart + size_t(keepEnd) * es, 0,
                                  size_t(cols - keepEnd) * es);
                    }
                  });
    return Status::ok();
  }

  static Status pad(const KernelContext &ctx,
                    const std::vector<std::vector<int64_t>> &maps,
                    uint64_t fill, const TensorRef &x, const TensorRef &y) {
    const size_t rank = x.shape.size();
    // Runs of the last dim: (output start, length, input start or -1).
    struct Run {
      int64_t outStart, length, inStart;
    };
    std::vector<Run> runs;
    for (int64_t o = 0; o < y.shape.back(); ++o) {
      const int64_t src = maps.back()[size_t(o)];
      if (!runs.empty()) {
        Run &r = runs.back();
        if ((src < 0 && r.inStart < 0) ||
            (src >= 0 && r.inStart >= 0 && src == r.inStart + r.length)) {
          ++r.length;
          continue;
        }
      }
      runs.push_back({o, 1, src});
    }
    const std::vector<int64_t> inStrides = contiguousStrides(x.shape);
    const int64_t rowLen = y.shape.back();
    const int64_t rows = y.numel() / rowLen;
    dispatchBySize(dtypeSize(x.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      U value;
      std::memcpy(&value, &fill, sizeof(U));
      const U *src = x.as<U>();
      U *dst = y.as<U>();
      parallelRange(ctx, rows, rowGrain(rowLen, kElementGrain),
                    [&](int64_t b, int64_t e) {
                      for (int64_t r = b; r < e; ++r) {
                        U *o = dst + r * rowLen;
                        int64_t off = 0, rest = r;
                        bool constantRow = false;
                        for (size_t d = rank - 1; d-- > 0;) {
                          const int64_t m = maps[d][size_t(rest % y.shape[d])];
                          rest /= y.shape[d];
                          constantRow |= m < 0;
                          off += m * inStrides[d];
                        }
                        if (constantRow) {
                          std::fill(o, o + rowLen, value);
                          continue;
                        }
                        for (const Run &run : runs) {
                          if (run.inStart < 0)
                            std::fill(o + run.outStart,
                                      o + run.outStart + run.length, value);
                          else
                            std::memcpy(o + run.outStart,
                                        src + off + run.inStart,
                                        size_t(run.length) * sizeof(U));
                        }
                      }
                    });
    });
    return Status::ok();
  }
};

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Concat, Split
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Slice
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Tile
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Trilu, Fill, Range
//===----------------------------------------------------------------------===//

} // namespace

void registerShapeKernels(KernelTable &table) {
  shape::addShapeKernels<CpuShapeLoops>(table);
}

} // namespace cpu
} // namespace zrt
