//===- FuseElementwise.cpp - zero-lower-to-runtime: fused elementwise -----===//
//
// Before instruction selection, the lowering looks for groups of f32, f16
// and bf16 elementwise ops (Add Sub Mul Div, Pow by a scalar constant, Neg
// Abs Relu Sqrt Reciprocal Exp Log Tanh Erf Sigmoid, and the Casts between
// those types) whose intermediate results are
// read only inside the group, and lowers each group of two or more ops to
// one FusedElementwise kernel (docs/kernels.md, "Fused elementwise"): the
// intermediates never get buffers, and the runtime reads the group's inputs
// and writes its output once. GPT-2's tanh GELU (Mul Pow Mul Add Mul Tanh
// Add Mul) and its attention's scale + mask (Mul Add) are such groups.
//
// A group:
//  - every op produces a tensor of the same shape (the group's output
//    shape); its operands may broadcast to it (external inputs do, as in
//    Binary.cpp); each op's operands have its result's type, but a Cast's
//    (so a mixed-precision region's f32 islands, GPT-2's GELU with its Pow
//    in f32, fuse with the bf16 ops around them);
//  - the root (the op whose result leaves the group) is its last op in
//    program order; every other member's result is read by members only
//    (never by another op, a view or the function's return);
//  - every member has the root's zero.stream, zero.pipeline_stage and
//    zero.pipeline_step;
//  - no zero.release, ml_program.global_store or in-place optimizer update
//    lies between the group's first op and its root (the fused kernel runs at
//    the root, so it must still see what its first op saw).
// Scalar constants read by a member are folded into the program as
// constants. Each op's result is rounded to its type (`round_to` for a group
// of one 16-bit type, `op_types` per op for a mixed one), so the group's bits
// are those of the ops one by one; Pow is fused only with a scalar constant
// exponent and a base of the output's shape (the Pow kernel's scalar fast
// path).
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "zero/Dialect/ONNX/ONNXDialect.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Dialect/Zero/ZeroDialect.h"
#include "zero/Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Debug.h"

#include <algorithm>
#include <map>

#define DEBUG_TYPE "zero-lower-to-runtime"

namespace zero {
#define GEN_PASS_DEF_ZEROFUSEELEMENTWISEPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

namespace zero {
namespace lowering {

namespace {

/// FusedElementwise's opcodes (runtime/src/cpu/kernels/Fused.cpp).
std::optional<int64_t> fusedOpcode(Operation *op) {
  if (!isa<::zero::onnx::ONNXDialect>(op->getDialect()))
    return std::nullopt;
  return llvm::StringSwitch<std::optional<int64_t>>(op->getName().stripDialect())
      .Case("Add", 0)
      .Case("Sub", 1)
      .Case("Mul", 2)
      .Case("Div", 3)
      .Case("Pow", 4)
      .Case("Neg", 5)
      .Case("Abs", 6)
      .Case("Relu", 7)
      .Case("Sqrt", 8)
      .Case("Reciprocal", 9)
      .Case("Exp", 10)
      .Case("Log", 11)
      .Case("Tanh", 12)
      .Case("Erf", 13)
      .Case("Sigmoid", 14)
      .Case("Cast", 15)
      .Default(std::nullopt);
}

/// The marks of where and when an op runs (stream, pipeline stage and step):
/// a member may carry them, and the members of a group share them.
constexpr StringRef kPlacementMarks[] = {attrs::kStream, attrs::kPipelineStage,
                                         attrs::kPipelineStep};

/// A static tensor of the element types the fused kernel computes: f32, or
/// f16 / bf16 (each op's result rounded to it, as between two 16-bit kernels).
bool isStaticFusedFloat(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || !r.hasStaticShape())
    return false;
  Type e = r.getElementType();
  return e.isF32() || e.isF16() || e.isBF16();
}

Type elementOf(Type t) { return cast<RankedTensorType>(t).getElementType(); }

} // namespace

std::optional<float> scalarConstant(Value v) {
  auto c = v.getDefiningOp<::zero::onnx::ConstantOp>();
  if (!c || !isStaticFusedFloat(v.getType()))
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  return (*dense.getValues<APFloat>().begin()).convertToFloat();
}

namespace {

bool isBinary(int64_t code) { return code <= 4; }

constexpr int64_t kCastOpcode = 15;

bool sameShape(Type a, Type b) {
  return cast<RankedTensorType>(a).getShape() == cast<RankedTensorType>(b).getShape();
}

/// Whether `op` may be a member of a group (alone, before its neighbours).
bool fusible(Operation *op) {
  std::optional<int64_t> code = fusedOpcode(op);
  if (!code || op->getNumResults() != 1 || !isStaticFusedFloat(op->getResult(0).getType()))
    return false;
  const Type elem = elementOf(op->getResult(0).getType());
  // The placement marks may be there; the members of a group share them
  // (findFusionGroups).
  // A Cast converts between f32, f16 and bf16 (its `to` is its result's
  // type): in the group, the value itself rounded to its result's type.
  const bool isCast = *code == kCastOpcode;
  for (NamedAttribute a : op->getAttrDictionary())
    if (!llvm::is_contained(kPlacementMarks, a.getName().getValue()) &&
        !(isCast && a.getName() == "to"))
      return false;
  if (op->getNumOperands() != (isBinary(*code) ? 2u : 1u))
    return false;
  for (Value v : op->getOperands())
    if (!isStaticFusedFloat(v.getType()) || (!isCast && elementOf(v.getType()) != elem))
      return false;
  Type result = op->getResult(0).getType();
  if (!isBinary(*code) || *code == 4) {
    // Unary ops and Pow's base: the output's shape (Pow's scalar fast path).
    if (!sameShape(op->getOperand(0).getType(), result))
      return false;
  }
  if (*code == 4 && !scalarConstant(op->getOperand(1)))
    return false;
  return true;
}

/// Whether `a` and `b` carry the same placement marks.
bool samePlacement(Operation *a, Operation *b) {
  return llvm::all_of(kPlacementMarks,
                      [&](StringRef name) { return a->getAttr(name) == b->getAttr(name); });
}

} // namespace

std::vector<FusionGroup> findFusionGroups(Block &body) {
  std::vector<FusionGroup> groups;
  llvm::DenseMap<Operation *, int64_t> position;
  std::vector<Operation *> order;
  for (Operation &op : body) {
    position[&op] = int64_t(order.size());
    order.push_back(&op);
  }
  llvm::SmallPtrSet<Operation *, 32> assigned;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Operation *root = *it;
    if (assigned.contains(root) || !fusible(root))
      continue;
    Type type = root->getResult(0).getType();
    llvm::SetVector<Operation *> members;
    members.insert(root);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t m = 0; m < members.size(); ++m) {
        for (Value v : members[m]->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (!def || def->getBlock() != &body || members.contains(def) ||
              assigned.contains(def) || !fusible(def) ||
              !sameShape(def->getResult(0).getType(), type) || !samePlacement(def, root))
            continue;
          if (!llvm::all_of(def->getResult(0).getUsers(),
                            [&](Operation *u) { return members.contains(u); }))
            continue;
          members.insert(def);
          changed = true;
        }
      }
    }
    if (members.size() < 2)
      continue;
    // Nothing between the first member and the root may change memory a
    // member reads (the fused kernel runs at the root).
    int64_t first = position[root];
    for (Operation *m : members)
      first = std::min(first, position[m]);
    bool safe = true;
    for (int64_t p = first; p < position[root] && safe; ++p) {
      Operation *op = order[size_t(p)];
      if (members.contains(op))
        continue;
      safe = !isa<::zero::dist::ReleaseOp, ml_program::GlobalStoreOp, ::zero::dist::AdamWOp,
                  ::zero::dist::SGDOp>(op);
    }
    if (!safe) {
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": no fusion into " << root->getName() << " at "
                              << root->getLoc()
                              << ": a release, store or update lies inside the group\n");
      continue;
    }
    FusionGroup g;
    g.members.assign(members.begin(), members.end());
    llvm::sort(g.members, [&](Operation *a, Operation *b) {
      return position[a] < position[b];
    });
    g.root = root;
    for (Operation *m : g.members)
      assigned.insert(m);
    groups.push_back(std::move(g));
  }
  std::reverse(groups.begin(), groups.end());
  return groups;
}

void RuntimeLowering::lowerFusionGroup(const FusionGroup &g) {
  Operation *root = g.root;
  llvm::DenseMap<Operation *, int64_t> index;
  for (auto [k, m] : llvm::enumerate(g.members))
    index[m] = int64_t(k);
  // External inputs, in order of first use; scalar constants become program
  // constants (negative references).
  llvm::SetVector<Value> inputs;
  for (Operation *m : g.members)
    for (Value v : m->getOperands())
      if (!index.count(v.getDefiningOp()) && !scalarConstant(v))
        inputs.insert(v);
  const int64_t numIn = int64_t(inputs.size());
  SmallVector<double> constants;
  SmallVector<int64_t> program;
  auto ref = [&](Value v) -> int64_t {
    if (Operation *def = v.getDefiningOp(); def && index.count(def))
      return numIn + index[def];
    if (std::optional<float> c = scalarConstant(v)) {
      auto at = llvm::find(constants, double(*c));
      if (at == constants.end()) {
        constants.push_back(double(*c));
        at = constants.end() - 1;
      }
      return -1 - int64_t(at - constants.begin());
    }
    return int64_t(llvm::find(inputs, v) - inputs.begin());
  };
  for (Operation *m : g.members) {
    int64_t code = *fusedOpcode(m);
    program.push_back(code);
    program.push_back(ref(m->getOperand(0)));
    program.push_back(m->getNumOperands() > 1 ? ref(m->getOperand(1)) : 0);
  }
  SmallVector<NamedAttribute> params{b_.getNamedAttr("ops", b_.getDenseI64ArrayAttr(program))};
  if (!constants.empty())
    params.push_back(b_.getNamedAttr("constants", b_.getDenseF64ArrayAttr(constants)));
  // Ops of a 16-bit type: each op's result is rounded to its type before the
  // next op reads it, as the 16-bit kernels one by one would store it. One
  // 16-bit type for the whole group is `round_to`; a group whose types differ
  // (joined by Casts) names each op's, `op_types` (0 f32, 1 f16, 2 bf16).
  SmallVector<int64_t> types;
  for (Operation *m : g.members) {
    Type e = elementOf(m->getResult(0).getType());
    types.push_back(e.isF16() ? 1 : e.isBF16() ? 2 : 0);
  }
  if (llvm::any_of(types, [&](int64_t t) { return t != types.front(); }))
    params.push_back(b_.getNamedAttr("op_types", b_.getDenseI64ArrayAttr(types)));
  else if (types.front() != 0)
    params.push_back(
        b_.getNamedAttr("round_to", b_.getStringAttr(types.front() == 2 ? "bf16" : "f16")));
  LLVM_DEBUG({
    llvm::dbgs() << DEBUG_TYPE ": fused " << g.members.size() << " ops (";
    llvm::interleave(
        g.members, llvm::dbgs(), [](Operation *m) { llvm::dbgs() << m->getName().stripDialect(); },
        " ");
    llvm::dbgs() << ") at " << root->getLoc() << "\n";
  });
  ++fusedGroups_;
  fusedOps_ += int64_t(g.members.size());
  Instr &in = append(Instr::kernel("FusedElementwise", root->getLoc()));
  in.on(kernelStream(root))
      .withParams(b_.getDictionaryAttr(params))
      .readsAll(inputs.getArrayRef());
  Value result = root->getResult(0);
  bind(result, newStorage(ArenaKind::Activations, byteSize(result.getType())));
  in.writes(result);
}

std::vector<FusionGroup> markedFusionGroups(Block &body) {
  std::map<int64_t, FusionGroup> byMark;
  for (Operation &op : body)
    if (std::optional<int64_t> g = attrs::kFusionGroup.getInt(&op)) {
      FusionGroup &group = byMark[*g];
      group.members.push_back(&op); // program order
      group.root = &op;             // the last member
    }
  std::vector<FusionGroup> groups;
  for (auto &[mark, group] : byMark)
    groups.push_back(std::move(group));
  return groups;
}

} // namespace lowering
} // namespace zero

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

using namespace mlir;

struct ZeroFuseElementwisePass
    : public ::zero::impl::ZeroFuseElementwisePassBase<
          ZeroFuseElementwisePass> {
  using Base::Base;
  ZeroFuseElementwisePass() = default;
  /// A clone counts on its own: statistics are not copied.
  ZeroFuseElementwisePass(const ZeroFuseElementwisePass &other) : Base(other) {}

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitOpError("zero-fuse-elementwise: must have a single block");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    for (Operation &op : body)
      ::zero::attrs::kFusionGroup.remove(&op);
    std::vector<::zero::lowering::FusionGroup> groups =
        ::zero::lowering::findFusionGroups(body);
    Builder b(&getContext());
    for (auto [g, group] : llvm::enumerate(groups)) {
      for (Operation *m : group.members)
        ::zero::attrs::kFusionGroup.set(m, b.getI64IntegerAttr(int64_t(g)));
      numFusedOps += group.members.size();
    }
    numGroups += groups.size();
  }

  Statistic numGroups{
      this, "groups",
      "Elementwise groups marked for one FusedElementwise kernel"};
  Statistic numFusedOps{this, "fused-ops",
                        "Elementwise ops marked as members of a group"};
};

} // namespace
