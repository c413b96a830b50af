//===- Fused.cpp - FusedElementwise: a chain of elementwise ops -----------===//
//
// FusedElementwise (docs/kernels.md, "Fused elementwise") evaluates a small
// expression program per output element: the compiler (zero-lower-to-runtime)
// replaces a chain or DAG of f32 elementwise ops whose intermediates have no
// other reader by one instruction, so the intermediates never get buffers and
// the activation is read and written once instead of once per op.
//
// The output is processed in blocks of kBlock elements. Each op of the
// program runs over a whole block as one call of the very loop functions the
// single-op kernels run (unaryLoop / binaryRow of CpuLoops.h, the same
// template instantiations and target clones, with the same functors from
// math/ElementwiseMath.h), writing a block-sized scratch buffer; the last op
// writes the output. Each op's result is rounded to f32 and stored before
// the next op reads it, exactly as between two kernels, so the result is bit
// for bit the one of running the ops one by one. Ops of a 16-bit type
// (`round_to`, or per op `op_types` in a group that mixes types through its
// Casts) also round their result to 16 bits, as a 16-bit kernel stores it;
// 16-bit inputs are widened a block at a time as they are read and a 16-bit
// output is rounded from the last op's f32 block (no whole-tensor f32 copy,
// so the kernel takes them itself, not through cpu/HalfWidening.cpp). Blocks
// are split over threads by parallelRange (a function of the shape only), and
// no element depends on which block or thread computed it.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuLoops.h"
#include "kernels/ElementwiseKernels.h"
#include "kernels/KernelLayouts.h"
#include "math/FusedMath.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

/// Elements per block: every op of the program runs over one block at a
/// time, with its result in a block-sized scratch buffer (a program of 8 ops
/// keeps 16 KiB of scratch, in L1).
constexpr int64_t kBlock = 512;

/// Where an operand of one block lives: a pointer and a stride (0: one value
/// for the whole block, 1: one value per element).
struct Operand {
  const float *data = nullptr;
  int64_t stride = 1;
};

/// Runs unary op `code` over n elements (src stride 1).
void runUnaryBlock(int64_t code, float exponent, const float *src, float *dst,
                   int64_t n) {
  math::withFusedUnary(code, exponent,
                       [&](auto fn) { unaryLoop(fn, src, dst, n); });
}

/// Runs binary op `code` (Add Sub Mul Div) over n elements.
void runBinaryBlock(int64_t code, Operand x, Operand y, float *dst, int64_t n) {
  math::withFusedBinary(code, [&](auto fn) {
    binaryRow(fn, x.data, x.stride, y.data, y.stride, dst, n);
  });
}

/// How fusedElementwiseKernel reads each input: one value, the output's own
/// layout, or gathered per block. A 16-bit input is widened (exactly) as it
/// is read: a block at a time into a scratch block (a scalar once, into
/// `scalars`).
struct FusedInputs {
  std::vector<int> kind; // 0 scalar, 1 contiguous, 2 gathered
  int numStaged = 0;     // inputs read through a scratch block
  std::vector<int> stagedSlot; // an input's scratch block, or -1
  std::vector<float> scalars;  // a scalar input's value, as f32
};

/// The FusedInputs of inputs `in` of an output of `numel` elements.
FusedInputs classifyInputs(const std::vector<TensorRef> &in, int64_t numel) {
  const int64_t numIn = int64_t(in.size());
  FusedInputs r;
  r.kind.resize(static_cast<size_t>(numIn));
  r.stagedSlot.assign(size_t(numIn), -1);
  r.scalars.assign(size_t(numIn), 0.0f);
  for (int64_t i = 0; i < numIn; ++i) {
    const TensorRef &t = in[size_t(i)];
    if (t.numel() == 1) {
      r.kind[size_t(i)] = 0;
      if (isHalf(t.dtype))
        widenHalfRow(t.dtype, t.as<uint16_t>(), &r.scalars[size_t(i)], 1);
      else
        r.scalars[size_t(i)] = *t.as<float>();
      continue;
    }
    r.kind[size_t(i)] = t.numel() == numel ? 1 : 2;
    if (r.kind[size_t(i)] == 2 || isHalf(t.dtype))
      r.stagedSlot[size_t(i)] = r.numStaged++;
  }
  return r;
}

/// Fills the scratch blocks (`staged`, kBlock floats apart) of the inputs
/// read through one for the block of `n` elements from `begin`: a 16-bit
/// input of the output's layout widened, a gathered one copied (or widened)
/// a row of its broadcast `plans` at a time.
void stageBlockInputs(const std::vector<TensorRef> &in,
                      const std::vector<BroadcastPlan> &plans,
                      const FusedInputs &inputs, float *staged, int64_t begin,
                      int64_t n) {
  const int64_t numIn = int64_t(in.size());
  for (int64_t i = 0; i < numIn; ++i) {
    if (inputs.stagedSlot[size_t(i)] < 0)
      continue;
    const TensorRef &t = in[size_t(i)];
    float *dst = staged + inputs.stagedSlot[size_t(i)] * kBlock;
    if (inputs.kind[size_t(i)] == 1) { // a 16-bit input of the output's layout
      widenHalfRow(t.dtype, t.as<uint16_t>() + begin, dst, n);
      continue;
    }
    const BroadcastPlan &plan = plans[size_t(i)];
    const int64_t stride = plan.innerStride(0);
    forEachBroadcastRow(plan, begin, begin + n,
                        [&](int64_t o, const int64_t *off, int64_t len) {
                          float *d = dst + (o - begin);
                          if (isHalf(t.dtype)) {
                            const uint16_t *s = t.as<uint16_t>() + off[0];
                            if (stride == 0) {
                              float v;
                              widenHalfRow(t.dtype, s, &v, 1);
                              std::fill(d, d + len, v);
                            } else {
                              widenHalfRow(t.dtype, s, d, len);
                            }
                            return;
                          }
                          const float *s = t.as<float>() + off[0];
                          if (stride == 0)
                            std::fill(d, d + len, *s);
                          else
                            std::memcpy(d, s, size_t(len) * sizeof(float));
                        });
  }
}

/// Runs the program's ops, in order, over the block of `n` elements from
/// `begin` (its staged inputs already in `staged`): each op's result into
/// its block of `results`, the last op's into y (rounded once if 16-bit).
void runBlockOps(const FusedProgram &program, const std::vector<TensorRef> &in,
                 const FusedInputs &inputs, const TensorRef &y, float *results,
                 const float *staged, int64_t begin, int64_t n) {
  const int64_t numIn = int64_t(in.size());
  const int64_t numOps = int64_t(program.ops.size());
  const std::vector<FusedOp> &ops = program.ops;
  const std::vector<float> &constantValues = program.constants;
  const bool halfOut = isHalf(y.dtype);
  auto operand = [&](int64_t ref) -> Operand {
    if (ref < 0)
      return {&constantValues[size_t(-ref - 1)], 0};
    if (ref < numIn) {
      const int k = inputs.kind[size_t(ref)];
      if (k == 0)
        return {&inputs.scalars[size_t(ref)], 0};
      if (inputs.stagedSlot[size_t(ref)] >= 0)
        return {staged + inputs.stagedSlot[size_t(ref)] * kBlock, 1};
      return {in[size_t(ref)].as<float>() + begin, 1};
    }
    return {results + (ref - numIn) * kBlock, 1};
  };
  for (int64_t k = 0; k < numOps; ++k) {
    const FusedOp &op = ops[size_t(k)];
    const bool last = k + 1 == numOps;
    float *dst = last && !halfOut ? y.as<float>() + begin : results + k * kBlock;
    const Operand x = operand(op.a);
    if (math::isFusedBinary(op.code) && op.code != math::kFusedPow) {
      runBinaryBlock(op.code, x, operand(op.b), dst, n);
    } else {
      const float exponent =
          op.code == math::kFusedPow ? constantValues[size_t(-op.b - 1)] : 0.0f;
      if (x.stride == 0) {
        // A single value (a scalar input or constant): once, then filled.
        float v = 0;
        runUnaryBlock(op.code, exponent, x.data, &v, 1);
        std::fill(dst, dst + n, v);
      } else {
        runUnaryBlock(op.code, exponent, x.data, dst, n);
      }
    }
    if (last) {
      // The output, stored in its type (rounded once if 16-bit).
      if (halfOut)
        narrowHalfRow(y.dtype, dst, y.as<uint16_t>() + begin, n);
    } else if (op.round != DType::F32) {
      // A 16-bit result: as the 16-bit kernel would store it.
      roundHalfRow(op.round, dst, n);
    }
  }
}

Status fusedElementwiseKernel(const KernelContext &ctx,
                              const std::vector<TensorRef> &in,
                              const std::vector<TensorRef> &out,
                              const AttrMap &attrs) {
  FusedProgram program;
  ZRT_RETURN_IF_ERROR(prepareFused(in, out, attrs, program, /*halfOperands=*/true));
  const TensorRef &y = out[0];
  const int64_t numOps = int64_t(program.ops.size());
  const int64_t numel = y.numel();
  const FusedInputs inputs = classifyInputs(in, numel);

  const int64_t numBlocks = (numel + kBlock - 1) / kBlock;
  // Blocks per parallel chunk: the transcendental grain (4096 elements).
  const int64_t grain = std::max<int64_t>(1, kTranscendentalGrain / kBlock);
  parallelRange(ctx, numBlocks, grain, [&](int64_t firstBlock,
                                           int64_t lastBlock) {
    // Scratch: one block per op result and per staged input.
    std::vector<float> scratch(size_t((numOps + inputs.numStaged) * kBlock));
    float *results = scratch.data();
    float *staged = scratch.data() + numOps * kBlock;
    for (int64_t blk = firstBlock; blk < lastBlock; ++blk) {
      const int64_t begin = blk * kBlock;
      const int64_t n = std::min(numel, begin + kBlock) - begin;
      stageBlockInputs(in, program.plans, inputs, staged, begin, n);
      runBlockOps(program, in, inputs, y, results, staged, begin, n);
    }
  });
  return Status::ok();
}

} // namespace

void registerFusedKernels(KernelTable &table) {
  table.add("FusedElementwise", fusedElementwiseKernel);
}

} // namespace cpu
} // namespace zrt
