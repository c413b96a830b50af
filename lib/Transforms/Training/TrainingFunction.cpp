//===- TrainingFunction.cpp - The function a training pass works on -------===//
//
// See TrainingFunction.h.
//
//===----------------------------------------------------------------------===//

#include "TrainingFunction.h"

using namespace mlir;

func::FuncOp zero::training::pickFunction(ModuleOp module, StringRef name,
                                          StringRef pass) {
  func::FuncOp func;
  if (!name.empty()) {
    func = module.lookupSymbol<func::FuncOp>(name);
  } else {
    auto funcs = module.getOps<func::FuncOp>();
    if (!funcs.empty() && std::next(funcs.begin()) == funcs.end())
      func = *funcs.begin();
    else
      func = module.lookupSymbol<func::FuncOp>("forward");
  }
  if (!func)
    module.emitError() << pass << ": no function @"
                       << (name.empty() ? StringRef("forward") : name)
                       << " (name one with function=...)";
  else if (!func.getBody().hasOneBlock())
    func.emitOpError() << "must have a single block (" << pass << ")";
  return func && func.getBody().hasOneBlock() ? func : func::FuncOp();
}
