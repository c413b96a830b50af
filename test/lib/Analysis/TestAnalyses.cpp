//===- TestAnalyses.cpp - Print the analyses' results for lit -------------===//
//
// Test passes, as mlir/test/lib has them: each runs one analysis of
// include/zero/Transforms/Analysis on a function and prints what it found,
// so lit tests check the analysis itself rather than through a whole pass
// pipeline (test/Transforms/Analysis).
//
//   --zero-test-gather-liveness   GatherLiveness: each gather, its bytes,
//                                 first use and death, the live gathered
//                                 bytes at each op and the peak
//   --zero-test-layers            recoverLayers: each layer, its class, ops
//                                 and parameter elements, and each op's layer
//
// Ops are named by their position in the block (#0 is the first op) and
// their name.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/GatherPlan.h"
#include "zero/Transforms/Analysis/Layers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {

/// "#P name" of an op of `block` at position P; "none" for null.
std::string describe(Operation *op,
                     const llvm::DenseMap<Operation *, int64_t> &position) {
  if (!op)
    return "none";
  return "#" + std::to_string(position.lookup(op)) + " " +
         op->getName().getStringRef().str();
}

llvm::DenseMap<Operation *, int64_t> positions(Block &block) {
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t n = 0;
  for (Operation &op : block)
    position[&op] = n++;
  return position;
}

struct TestGatherLivenessPass
    : public PassWrapper<TestGatherLivenessPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestGatherLivenessPass)

  StringRef getArgument() const final { return "zero-test-gather-liveness"; }
  StringRef getDescription() const final {
    return "Print GatherLiveness of each function (test pass)";
  }

  void runOnOperation() override {
    for (func::FuncOp func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        print(func);
  }

  void print(func::FuncOp func) {
    llvm::raw_ostream &os = llvm::outs();
    os << "gather liveness of @" << func.getSymName() << "\n";
    for (Block &block : func.getBody()) {
      zero::GatherLiveness liveness(block);
      llvm::DenseMap<Operation *, int64_t> position = positions(block);
      for (const zero::GatherLiveness::Gather &g : liveness.gathers()) {
        os << "  gather " << describe(g.op, position) << ": " << g.bytes
           << " B, first use " << describe(g.firstUse, position) << ", dies at "
           << describe(g.death, position) << (g.released ? ", released" : "")
           << "\n";
        for (auto [k, result] : llvm::enumerate(g.results))
          os << "    result " << k << ": " << result.first << " B, dies at "
             << describe(result.second, position) << "\n";
      }
      for (Operation &op : block)
        if (int64_t live = liveness.liveBytesAt(position.lookup(&op)))
          os << "  live at " << describe(&op, position) << ": " << live
             << " B\n";
      os << "  peak: " << liveness.peakBytes() << " B\n";
    }
  }
};

struct TestLayersPass
    : public PassWrapper<TestLayersPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestLayersPass)

  StringRef getArgument() const final { return "zero-test-layers"; }
  StringRef getDescription() const final {
    return "Print the layers recoverLayers finds in each function (test pass)";
  }

  void runOnOperation() override {
    for (func::FuncOp func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        print(func);
  }

  void print(func::FuncOp func) {
    zero::LayerStructure layers = zero::recoverLayers(func);
    llvm::raw_ostream &os = llvm::outs();
    os << "layers of @" << func.getSymName() << ": " << layers.layers.size()
       << (layers.segments ? " segments" : " by module path") << "\n";
    for (auto [i, layer] : llvm::enumerate(layers.layers))
      os << "  layer " << i << " '" << layer.name << "' class '" << layer.cls
         << "': " << layer.ops.size() << " ops, " << layer.params
         << " parameter elements\n";
    Block &block = func.getBody().front();
    llvm::DenseMap<Operation *, int64_t> position = positions(block);
    for (Operation &op : block) {
      auto it = layers.layerOf.find(&op);
      os << "  " << describe(&op, position) << ": "
         << (it == layers.layerOf.end() ? std::string("none")
                                        : "layer " + std::to_string(it->second))
         << "\n";
    }
  }
};

} // namespace

namespace zero {
namespace test {
void registerTestPasses() {
  PassRegistration<TestGatherLivenessPass>();
  PassRegistration<TestLayersPass>();
}
} // namespace test
} // namespace zero
