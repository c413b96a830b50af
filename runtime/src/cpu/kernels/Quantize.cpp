//===- Quantize.cpp - Blockwise symmetric int8/int4 quantization ----------===//
//
// ZeRO++'s quantized collectives (qwZ: weights all-gathered as int8/int4;
// qgZ: gradients reduce-scattered through an all-to-all of quantized blocks)
// move a tensor as signed integers plus one f32 scale per block of `block`
// elements. Quantize produces the two buffers, Dequantize turns them back
// into f32 (docs/kernels.md, "Quantization"). A tensor may be `chunks`
// independent pieces, each with bytes and scales of its own, so that one
// instruction quantizes every destination's block of an all-to-all.
//
// The work is cut into units of whole blocks that start at an even element of
// their chunk (two blocks when int4 blocks have an odd length), so no two
// units share a packed int4 byte, and each unit's result depends on its own
// elements only: the same bits at any thread count.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "kernels/KernelSupport.h"
#include "kernels/QuantizeLayout.h"
#include "math/QuantizeMath.h"

#include <atomic>

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

using Layout = QuantizeLayout;



/// Calls fn(chunk, firstBlock, endBlock, firstElement, endElement, staging)
/// for every unit of work, in parallel; elements count from the chunk's
/// start. int4 kernels stage a unit's values unpacked in `staging`, which
/// has room for one element more than a unit.
template <typename Fn>
void forEachUnit(const KernelContext &ctx, const Layout &l, Fn &&fn) {
  parallelRange(ctx, l.chunks * l.unitsPerChunk,
                rowGrain(l.unitElements(), kElementGrain),
                [&](int64_t begin, int64_t end) {
                  std::vector<int8_t> staging(
                      l.bits == 4 ? size_t(l.unitElements() + 1) : 0);
                  for (int64_t u = begin; u < end; ++u) {
                    const int64_t c = u / l.unitsPerChunk;
                    const int64_t b0 = (u % l.unitsPerChunk) * l.blocksPerUnit;
                    const int64_t b1 =
                        std::min(l.blocksPerChunk, b0 + l.blocksPerUnit);
                    fn(c, b0, b1, b0 * l.block, std::min(l.m, b1 * l.block),
                       staging.data());
                  }
                });
}

/// The largest |x| of n values as f32 bits (integer compares order the bits
/// of non-negative floats); at least qmath::kNonFiniteBits when one is inf or
/// NaN.
ZRT_HOT_LOOP uint32_t maxAbsBits(const float *x, int64_t n) {
  uint32_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = qmath::absBits(x[i]);
    best = bits > best ? bits : best;
  }
  return best;
}

/// q = clamp(nearbyint(x / scale), -qmax, qmax) for a nonzero scale.
ZRT_HOT_LOOP void quantizeRun(const float *x, int64_t n, double scale,
                              double qmax, int8_t *q) {
  const float *__restrict src = x;
  int8_t *__restrict dst = q;
  for (int64_t i = 0; i < n; ++i)
    dst[i] = qmath::quantizeNonzero(src[i], scale, qmax);
}

/// y = f32(q * scale) (the product is exact in double), saturated to the
/// largest finite f32: 127 times the scale of a block holding FLT_MAX
/// rounds up to inf.
ZRT_HOT_LOOP void dequantizeRun(const int8_t *q, int64_t n, double scale,
                                float *y) {
  const int8_t *__restrict src = q;
  float *__restrict dst = y;
  for (int64_t i = 0; i < n; ++i)
    dst[i] = qmath::dequantizeValue(src[i], scale);
}

/// Two's-complement nibbles: q[2j] low, q[2j+1] high.
ZRT_HOT_LOOP void packNibbles(const int8_t *q, int64_t bytes, uint8_t *out) {
  const int8_t *__restrict src = q;
  uint8_t *__restrict dst = out;
  for (int64_t j = 0; j < bytes; ++j)
    dst[j] = qmath::packNibbles(src[2 * j], src[2 * j + 1]);
}

/// The inverse of packNibbles.
ZRT_HOT_LOOP void unpackNibbles(const uint8_t *in, int64_t bytes, int8_t *q) {
  const uint8_t *__restrict src = in;
  int8_t *__restrict dst = q;
  for (int64_t j = 0; j < bytes; ++j) {
    dst[2 * j] = qmath::lowNibble(src[j]);
    dst[2 * j + 1] = qmath::highNibble(src[j]);
  }
}

Status quantizeKernel(const KernelContext &ctx,
                      const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out, const AttrMap &attrs) {
  Layout l;
  ZRT_RETURN_IF_ERROR(prepareQuantize(in, out, attrs, l));
  const int64_t n = in[0].numel();
  const float *x = in[0].as<float>();
  auto *data = static_cast<uint8_t *>(out[0].data);
  float *scales = out[1].as<float>();

  // The lowest index of a non-finite element; n when there is none.
  std::atomic<int64_t> firstBad{n};
  forEachUnit(
      ctx, l,
      [&](int64_t c, int64_t b0, int64_t b1, int64_t e0, int64_t e1,
          int8_t *staging) {
        const float *xc = x + c * l.m;
        uint8_t *bytes = data + c * l.bytesPerChunk;
        int8_t *q =
            l.bits == 8 ? reinterpret_cast<int8_t *>(bytes) + e0 : staging;
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t s0 = b * l.block, s1 = std::min(l.m, s0 + l.block);
          const uint32_t maxBits = maxAbsBits(xc + s0, s1 - s0);
          if (qmath::nonFinite(maxBits)) {
            int64_t bad = s0;
            while (std::isfinite(xc[bad]))
              ++bad;
            bad += c * l.m;
            int64_t seen = firstBad.load();
            while (bad < seen && !firstBad.compare_exchange_weak(seen, bad)) {
            }
            continue;
          }
          const float scale = qmath::blockScale(maxBits, l.qmax);
          scales[c * l.blocksPerChunk + b] = scale;
          if (scale == 0.0f)
            std::memset(q + (s0 - e0), 0, size_t(s1 - s0));
          else
            quantizeRun(xc + s0, s1 - s0, scale, l.qmax, q + (s0 - e0));
        }
        if (l.bits == 4) {
          q[e1 - e0] = 0; // the high nibble of an odd chunk's last byte
          packNibbles(q, (e1 - e0 + 1) / 2, bytes + e0 / 2);
        }
      });

  const int64_t bad = firstBad.load();
  if (bad < n)
    return quantizeNonFiniteError(l, bad, x[bad]);
  return Status::ok();
}

Status dequantizeKernel(const KernelContext &ctx,
                        const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out,
                        const AttrMap &attrs) {
  Layout l;
  ZRT_RETURN_IF_ERROR(prepareDequantize(in, out, attrs, l));
  const auto *data = static_cast<const uint8_t *>(in[0].data);
  const float *scales = in[1].as<float>();
  float *y = out[0].as<float>();

  forEachUnit(
      ctx, l,
      [&](int64_t c, int64_t b0, int64_t b1, int64_t e0, int64_t e1,
          int8_t *staging) {
        const uint8_t *bytes = data + c * l.bytesPerChunk;
        const int8_t *q = reinterpret_cast<const int8_t *>(bytes) + e0;
        if (l.bits == 4) {
          unpackNibbles(bytes + e0 / 2, (e1 - e0 + 1) / 2, staging);
          q = staging;
        }
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t s0 = b * l.block, s1 = std::min(l.m, s0 + l.block);
          dequantizeRun(q + (s0 - e0), s1 - s0,
                        scales[c * l.blocksPerChunk + b], y + c * l.m + s0);
        }
      });
  return Status::ok();
}

} // namespace

void registerQuantizeKernels(KernelTable &table) {
  table.add("Quantize", quantizeKernel);
  table.add("Dequantize", dequantizeKernel);
}

} // namespace cpu
} // namespace zrt
