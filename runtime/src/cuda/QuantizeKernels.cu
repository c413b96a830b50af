//===- QuantizeKernels.cu - Blockwise int8/int4 quantization on the GPU ---===//
//
// The CUDA versions of the CPU kernels in cpu/kernels/Quantize.cpp, with the
// same arithmetic (math/QuantizeMath.h), hence the same bits.
//
// Quantize: one CUDA block per unit of work, a unit being one quantization
// block, or two when int4 blocks have an odd length (so every unit starts at
// an even element of its chunk and packs whole bytes on its own). The threads
// reduce max|x| (as f32 bits) of each block in shared memory, thread 0 writes
// the scale, then each thread quantizes elements (int8) or pairs of elements
// into one byte (int4). A non-finite element lowers *firstBad (atomicMin)
// and its unit writes no bytes.
//
// Dequantize: one thread per byte (an element for int8, two for int4).
//
//===----------------------------------------------------------------------===//

#include "cuda/QuantizeKernels.h"

namespace zrt {
namespace cuda {
namespace {

constexpr int kThreads = 256;     // a power of two (the tree reduction)
constexpr int64_t kMaxGrid = 1 << 20; // grid-stride beyond this

__global__ void setFlagKernel(unsigned long long *flag,
                              unsigned long long value) {
  *flag = value;
}

__global__ void __launch_bounds__(kThreads)
    quantizeKernel(qmath::Layout l, const float *__restrict__ x,
                   uint8_t *__restrict__ data, float *__restrict__ scales,
                   unsigned long long *firstBad) {
  __shared__ uint32_t partial[kThreads];
  __shared__ float unitScale[2]; // blocksPerUnit <= 2
  __shared__ int unitBad;
  const int t = int(threadIdx.x);
  const int64_t units = l.chunks * l.unitsPerChunk;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int64_t c = u / l.unitsPerChunk;
    const int64_t b0 = (u % l.unitsPerChunk) * l.blocksPerUnit;
    const int64_t b1 = min(l.blocksPerChunk, b0 + l.blocksPerUnit);
    const float *xc = x + c * l.m;
    if (t == 0)
      unitBad = 0;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t s0 = b * l.block, s1 = min(l.m, s0 + l.block);
      uint32_t best = 0;
      for (int64_t i = s0 + t; i < s1; i += kThreads) {
        const uint32_t bits = qmath::absBits(xc[i]);
        if (qmath::nonFinite(bits))
          atomicMin(firstBad, (unsigned long long)(c * l.m + i));
        best = bits > best ? bits : best;
      }
      partial[t] = best;
      __syncthreads();
      for (int s = kThreads / 2; s > 0; s >>= 1) {
        if (t < s && partial[t + s] > partial[t])
          partial[t] = partial[t + s];
        __syncthreads();
      }
      if (t == 0) {
        const uint32_t maxBits = partial[0];
        if (qmath::nonFinite(maxBits)) {
          unitBad = 1;
          unitScale[b - b0] = 0.0f;
        } else {
          const float scale = qmath::blockScale(maxBits, l.qmax);
          unitScale[b - b0] = scale;
          scales[c * l.blocksPerChunk + b] = scale;
        }
      }
      __syncthreads(); // partial is reused; unitScale and unitBad are read
    }
    if (!unitBad) {
      const int64_t e0 = b0 * l.block, e1 = min(l.m, b1 * l.block);
      uint8_t *bytes = data + c * l.bytesPerChunk;
      if (l.bits == 8) {
        for (int64_t e = e0 + t; e < e1; e += kThreads)
          bytes[e] = uint8_t(qmath::quantizeValue(
              xc[e], unitScale[e / l.block - b0], l.qmax));
      } else {
        // e0 is even; an odd e1 is the chunk's end (high nibble 0).
        for (int64_t j = e0 / 2 + t; j < (e1 + 1) / 2; j += kThreads) {
          const int64_t e = 2 * j;
          const int8_t lo = qmath::quantizeValue(
              xc[e], unitScale[e / l.block - b0], l.qmax);
          const int8_t hi =
              e + 1 < e1 ? qmath::quantizeValue(
                               xc[e + 1], unitScale[(e + 1) / l.block - b0],
                               l.qmax)
                         : int8_t(0);
          bytes[j] = qmath::packNibbles(lo, hi);
        }
      }
    }
    __syncthreads(); // every thread has read unitBad before the next unit
  }
}

__global__ void __launch_bounds__(kThreads)
    dequantizeKernel(qmath::Layout l, const uint8_t *__restrict__ data,
                     const float *__restrict__ scales, float *__restrict__ y) {
  const int64_t total = l.chunks * l.bytesPerChunk;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t g = int64_t(blockIdx.x) * kThreads + threadIdx.x; g < total;
       g += stride) {
    const int64_t c = g / l.bytesPerChunk, j = g - c * l.bytesPerChunk;
    const float *sc = scales + c * l.blocksPerChunk;
    float *yc = y + c * l.m;
    const uint8_t byte = data[g];
    if (l.bits == 8) {
      yc[j] = qmath::dequantizeValue(int8_t(byte), sc[j / l.block]);
    } else {
      const int64_t e = 2 * j;
      yc[e] = qmath::dequantizeValue(qmath::lowNibble(byte), sc[e / l.block]);
      if (e + 1 < l.m)
        yc[e + 1] = qmath::dequantizeValue(qmath::highNibble(byte),
                                           sc[(e + 1) / l.block]);
    }
  }
}

unsigned gridFor(int64_t work) {
  return unsigned(work < kMaxGrid ? work : kMaxGrid);
}

} // namespace

cudaError_t launchQuantize(const qmath::Layout &l, const float *x,
                           uint8_t *data, float *scales,
                           unsigned long long *firstBad, cudaStream_t stream) {
  setFlagKernel<<<1, 1, 0, stream>>>(firstBad,
                                     (unsigned long long)(l.chunks * l.m));
  const int64_t units = l.chunks * l.unitsPerChunk;
  if (units > 0)
    quantizeKernel<<<gridFor(units), kThreads, 0, stream>>>(l, x, data, scales,
                                                            firstBad);
  return cudaGetLastError();
}

cudaError_t launchDequantize(const qmath::Layout &l, const uint8_t *data,
                             const float *scales, float *y,
                             cudaStream_t stream) {
  const int64_t total = l.chunks * l.bytesPerChunk;
  if (total > 0)
    dequantizeKernel<<<gridFor((total + kThreads - 1) / kThreads), kThreads, 0,
                       stream>>>(l, data, scales, y);
  return cudaGetLastError();
}

} // namespace cuda
} // namespace zrt
