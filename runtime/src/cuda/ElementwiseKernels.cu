//===- ElementwiseKernels.cu - Unary and binary kernels on the GPU --------===//
//
// The elementwise kernels of kernels/ElementwiseKernels.h (the CPU
// kernels' host code: checks, attributes, dispatch) instantiated with
// cuda::CudaLoops: one thread per output element running the functors of
// math/ElementwiseMath.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/ElementwiseKernels.h"
#include "cuda/CudaLoops.cuh"

namespace zrt {
namespace cuda {

void registerCudaElementwiseKernels(KernelTable &table) {
  kernels::elementwise::addUnaryKernels<CudaLoops>(table);
  kernels::elementwise::addBinaryKernels<CudaLoops>(table);
}

} // namespace cuda
} // namespace zrt
