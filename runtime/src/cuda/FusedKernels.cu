//===- FusedKernels.cu - FusedElementwise on the GPU ----------------------===//
//
// FusedElementwise with the CPU kernel's checks (kernels::prepareFused:
// kernels/KernelLayouts.h): one thread per output element interprets
// the op list, each op's f32 result rounded and kept in a per-thread slot
// before the next op reads it, exactly as between two kernels (the
// functors of math/FusedMath.h: the single-op kernels'). The program lives
// in device scratch; the host assigns op results to slots by liveness, so
// a thread holds only the values still to be read (at most
// kMaxFusedSlots). Inputs are read through their broadcast plans. An op of a
// 16-bit type (`round_to`, or `op_types` per op; the operands widened and the
// output rounded by cuda/HalfWidening.cu) rounds its kept result to 16 bits,
// as the CPU kernel does.
//
//===----------------------------------------------------------------------===//

#include "kernels/KernelLayouts.h"
#include "cuda/CudaLoops.cuh"
#include "math/FusedMath.h"
#include "math/HalfMath.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace zrt {
namespace cuda {
namespace {

/// Most op results a thread keeps in its own (local) memory; programs that
/// keep more alive at once use slots in global scratch, one per element.
constexpr int kMaxFusedSlots = 32;

/// Where an operand comes from.
enum OperandKind : int32_t { kInput = 0, kSlot = 1, kConstant = 2 };

struct DeviceFusedOp {
  int32_t code;
  int32_t aKind, aIndex;
  int32_t bKind, bIndex;
  int32_t slot; ///< where the result goes (-1: the output, -2: nowhere)
  int32_t round; ///< a kept result rounded to 0: f32 (not), 1: f16, 2: bf16
  float exponent;
};

struct DeviceFusedInput {
  const float *data;
  DevicePlan<1> plan;
};

/// Slot s of element e: local slots[s], or global[s * numel + e].
struct Slots {
  float *local;
  float *global;
  int64_t numel, e;
  __device__ float &operator[](int32_t s) const {
    return global ? global[s * numel + e] : local[s];
  }
};

__device__ float loadOperand(int32_t kind, int32_t index, int64_t e,
                             const DeviceFusedInput *inputs,
                             const float *constants, const Slots &slots) {
  if (kind == kSlot)
    return slots[index];
  if (kind == kConstant)
    return constants[index];
  int64_t off[1];
  inputs[index].plan.offsets(e, off);
  return inputs[index].data[off[0]];
}

__global__ void __launch_bounds__(kThreads)
    fusedKernel(const DeviceFusedOp *ops, int numOps,
                const DeviceFusedInput *inputs, const float *constants,
                float *y, int64_t numel, float *globalSlots) {
  float local[kMaxFusedSlots];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < numel;
       e += stride) {
    const Slots slots{local, globalSlots, numel, e};
    for (int k = 0; k < numOps; ++k) {
      const DeviceFusedOp op = ops[k];
      const float a =
          loadOperand(op.aKind, op.aIndex, e, inputs, constants, slots);
      float r;
      if (math::isFusedBinary(op.code) && op.code != math::kFusedPow)
        r = math::fusedBinary(
            op.code, a,
            loadOperand(op.bKind, op.bIndex, e, inputs, constants, slots));
      else
        r = math::fusedUnary(op.code, op.exponent, a);
      if (op.slot == -1) {
        y[e] = r;
      } else if (op.slot >= 0) {
        // A 16-bit program: the result as a 16-bit kernel would store it.
        if (op.round == 1)
          r = math::halfToFloat(math::floatToHalf(r));
        else if (op.round == 2)
          r = math::bfloat16ToFloat(math::floatToBfloat16(r));
        slots[op.slot] = r;
      }
    }
  }
}

Status fusedElementwise(const KernelContext &, const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out,
                        const AttrMap &attrs) {
  const char *name = "FusedElementwise";
  kernels::FusedProgram p;
  ZRT_RETURN_IF_ERROR(kernels::prepareFused(in, out, attrs, p, /*halfOperands=*/false));
  cudaStream_t stream;
  ZRT_RETURN_IF_ERROR(streamFor(name, stream));
  const TensorRef &y = out[0];
  const int64_t numel = y.numel();
  if (numel == 0)
    return Status::ok();
  const int64_t numIn = int64_t(in.size());
  const int64_t numOps = int64_t(p.ops.size());
  if (numOps > int64_t(std::numeric_limits<int32_t>::max() / 2) ||
      numIn > int64_t(std::numeric_limits<int32_t>::max() / 2))
    return Status::error(std::string(name) + ": program too large");

  // Results to slots by liveness: a slot is free again once the last op
  // reading its value has read it (operands are read before the result is
  // written, so an op may reuse its own operand's slot).
  std::vector<int64_t> lastUse(static_cast<size_t>(numOps), -1);
  for (int64_t k = 0; k < numOps; ++k) {
    const kernels::FusedOp &op = p.ops[size_t(k)];
    for (int64_t ref : {op.a, math::isFusedBinary(op.code) ? op.b : -1})
      if (ref >= numIn)
        lastUse[size_t(ref - numIn)] = k;
  }
  std::vector<DeviceFusedOp> ops(static_cast<size_t>(numOps));
  std::vector<int32_t> slotOf(static_cast<size_t>(numOps), -1);
  std::vector<int64_t> slotValue; // per slot: the op whose result it holds
  auto operand = [&](int64_t ref, int32_t &kind, int32_t &index) {
    if (ref < 0) {
      kind = kConstant;
      index = int32_t(-ref - 1);
    } else if (ref < numIn) {
      kind = kInput;
      index = int32_t(ref);
    } else {
      kind = kSlot;
      index = slotOf[size_t(ref - numIn)];
    }
  };
  for (int64_t k = 0; k < numOps; ++k) {
    const kernels::FusedOp &op = p.ops[size_t(k)];
    DeviceFusedOp &d = ops[size_t(k)];
    d.code = int32_t(op.code);
    d.round = op.round == DType::F16 ? 1 : op.round == DType::BF16 ? 2 : 0;
    operand(op.a, d.aKind, d.aIndex);
    d.bKind = kConstant;
    d.bIndex = 0;
    d.exponent = 0.0f;
    if (op.code == math::kFusedPow)
      d.exponent = p.constants[size_t(-op.b - 1)];
    else if (math::isFusedBinary(op.code))
      operand(op.b, d.bKind, d.bIndex);
    // Free the slots whose last reader is this op.
    for (int64_t &holder : slotValue)
      if (holder >= 0 && lastUse[size_t(holder)] <= k)
        holder = -1;
    if (k + 1 == numOps) {
      d.slot = -1; // the output
      continue;
    }
    d.slot = -2;
    if (lastUse[size_t(k)] < 0)
      continue; // never read
    auto free = std::find(slotValue.begin(), slotValue.end(), -1);
    if (free == slotValue.end())
      free = slotValue.insert(slotValue.end(), -1);
    *free = k;
    d.slot = int32_t(free - slotValue.begin());
    slotOf[size_t(k)] = d.slot;
  }

  std::vector<DeviceFusedInput> inputs(static_cast<size_t>(numIn));
  for (int64_t i = 0; i < numIn; ++i) {
    inputs[size_t(i)].data = in[size_t(i)].as<float>();
    ZRT_RETURN_IF_ERROR(
        toDevicePlan(name, p.plans[size_t(i)], inputs[size_t(i)].plan));
  }
  // One upload: ops, inputs, constants (each 16-byte aligned).
  auto align = [](size_t v) { return (v + 15) & ~size_t(15); };
  const size_t opsBytes = align(ops.size() * sizeof(DeviceFusedOp));
  const size_t inputsBytes = align(inputs.size() * sizeof(DeviceFusedInput));
  const size_t constantsBytes = p.constants.size() * sizeof(float);
  std::vector<char> host(opsBytes + inputsBytes + constantsBytes);
  if (!ops.empty())
    std::memcpy(host.data(), ops.data(), ops.size() * sizeof(DeviceFusedOp));
  if (!inputs.empty())
    std::memcpy(host.data() + opsBytes, inputs.data(),
                inputs.size() * sizeof(DeviceFusedInput));
  if (!p.constants.empty())
    std::memcpy(host.data() + opsBytes + inputsBytes, p.constants.data(),
                constantsBytes);
  std::shared_ptr<void> scratch, slotScratch;
  ZRT_RETURN_IF_ERROR(CudaLoops::allocate(host.size(), scratch));
  float *globalSlots = nullptr;
  if (slotValue.size() > size_t(kMaxFusedSlots)) {
    ZRT_RETURN_IF_ERROR(CudaLoops::allocate(uint64_t(slotValue.size()) *
                                                uint64_t(numel) * sizeof(float),
                                            slotScratch));
    globalSlots = static_cast<float *>(slotScratch.get());
  }
  auto *base = static_cast<char *>(scratch.get());
  // From pageable memory: returns once `host` has been staged.
  ZRT_RETURN_IF_ERROR(check(cudaMemcpyAsync(base, host.data(), host.size(),
                                            cudaMemcpyHostToDevice, stream),
                            "FusedElementwise: cudaMemcpyAsync"));
  fusedKernel<<<blocksFor(numel), kThreads, 0, stream>>>(
      reinterpret_cast<const DeviceFusedOp *>(base), int(numOps),
      reinterpret_cast<const DeviceFusedInput *>(base + opsBytes),
      reinterpret_cast<const float *>(base + opsBytes + inputsBytes),
      y.as<float>(), numel, globalSlots);
  return launched(name);
}

} // namespace

void registerCudaFusedKernels(KernelTable &table) {
  table.add("FusedElementwise", fusedElementwise);
}

} // namespace cuda
} // namespace zrt
