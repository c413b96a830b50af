//===- ElementwiseKernels.cu - Unary and binary kernels on the GPU --------===//
//
// The elementwise kernels of cpu/kernels/ElementwiseKernels.h (the CPU
// kernels' host code: checks, attributes, dispatch) instantiated with
// cuda::CudaLoops: one thread per output element running the functors of
// math/ElementwiseMath.h.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/ElementwiseKernels.h"
#include "cuda/CudaLoops.cuh"

namespace zrt {
namespace cuda {

void registerCudaElementwiseKernels(KernelTable &table) {
  cpu::elementwise::addUnaryKernels<CudaLoops>(table);
  cpu::elementwise::addBinaryKernels<CudaLoops>(table);
}

} // namespace cuda
} // namespace zrt
