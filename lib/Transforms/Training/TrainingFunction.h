//===- TrainingFunction.h - The function a training pass works on -*- C++ -*-===//
//
// zero-add-loss and zero-autodiff both start from one function of the module:
// the one named by their option, else the only one, else @forward. Internal
// to lib/Transforms/Training.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_TRANSFORMS_TRAINING_TRAININGFUNCTION_H
#define ZERO_LIB_TRANSFORMS_TRAINING_TRAININGFUNCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace zero {
namespace training {

/// The function a training pass works on: the one named, else the only one,
/// else @forward. Null, with an error naming `pass`, when there is none or it
/// has more than one block.
mlir::func::FuncOp pickFunction(mlir::ModuleOp module, llvm::StringRef name,
                                llvm::StringRef pass);

} // namespace training
} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_TRAINING_TRAININGFUNCTION_H
