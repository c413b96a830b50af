//===- Layers.cpp - Layers from module paths or cut points; partitions ---===//

#include "zero/Transforms/Analysis/Layers.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Dialect/Zero/ZeroDialect.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <limits>

using namespace mlir;
namespace attrs = ::zero::attrs;

namespace {

/// The module paths and classes the importer put on an op's location.
struct Scopes {
  SmallVector<StringRef> paths, classes;
};

Scopes scopesOf(Location loc) {
  Scopes s;
  if (auto name = dyn_cast<NameLoc>(loc))
    return scopesOf(name.getChildLoc());
  auto fused = dyn_cast<FusedLoc>(loc);
  if (!fused)
    return s;
  if (auto meta = dyn_cast_or_null<DictionaryAttr>(fused.getMetadata())) {
    auto paths = meta.getAs<ArrayAttr>("module_scopes");
    auto classes = meta.getAs<ArrayAttr>("module_classes");
    if (paths)
      for (auto [i, p] : llvm::enumerate(paths)) {
        s.paths.push_back(cast<StringAttr>(p).getValue());
        s.classes.push_back(classes && i < classes.size()
                                ? cast<StringAttr>(classes[i]).getValue()
                                : StringRef());
      }
    if (!s.paths.empty())
      return s;
  }
  for (Location l : fused.getLocations())
    if (Scopes inner = scopesOf(l); !inner.paths.empty())
      return inner;
  return s;
}

/// A module path whose last component is an index: a block of a repeated
/// container (`transformer.h.3`, `model.layers.0`).
bool isIndexed(StringRef path) {
  StringRef last = path.rsplit('.').second;
  if (last.empty() && !path.contains('.'))
    last = path;
  return !last.empty() && llvm::all_of(last, [](char c) { return c >= '0' && c <= '9'; });
}

bool isAncestorOrSelf(StringRef ancestor, StringRef path) {
  return path == ancestor || path.starts_with((ancestor + ".").str());
}

/// The layers from the module paths (see Layers.h); empty when none.
zero::LayerStructure fromModulePaths(Block &body) {
  zero::LayerStructure result;
  // The repeated container: the parent of the first indexed module path.
  std::optional<std::string> container;
  for (Operation &op : body) {
    for (StringRef p : scopesOf(op.getLoc()).paths)
      if (isIndexed(p)) {
        container = p.contains('.') ? p.rsplit('.').first.str() : std::string();
        break;
      }
    if (container)
      break;
  }
  llvm::StringMap<int> index;
  for (Operation &op : body) {
    Scopes s = scopesOf(op.getLoc());
    int chosen = -1;
    for (auto [path, cls] : llvm::zip(s.paths, s.classes)) {
      bool block = container && isIndexed(path) &&
                   (container->empty() ? !path.contains('.')
                                       : path.rsplit('.').first == *container);
      // Outside the blocks: the outermost module that does not enclose the
      // container (a sibling of it, or a top-level module next to it).
      bool sibling = !isIndexed(path) && !(container && isAncestorOrSelf(path, *container));
      if (!block && !sibling)
        continue;
      auto [it, inserted] = index.try_emplace(path, int(result.layers.size()));
      if (inserted)
        result.layers.push_back({path.str(), cls.str(), {}, 0});
      chosen = it->second;
      break;
    }
    if (chosen < 0)
      continue;
    result.layers[chosen].ops.push_back(&op);
    result.layerOf[&op] = chosen;
  }
  // Parameters: each global a layer's ops read, directly or through the ops
  // that only reshape, gather or convert it (those belong to no layer).
  std::vector<llvm::DenseSet<Operation *>> seen(result.layers.size());
  for (auto load : body.getOps<ml_program::GlobalLoadOp>()) {
    auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
        load, load.getGlobalAttr());
    // Trainable parameters, as DeepSpeed counts them (requires_grad): the
    // exporter's buffers (rotary frequencies, position ids) are not.
    if (!global || attrs::kBuffer.isSetOn(global))
      continue;
    Type full = global.getType();
    if (auto f = attrs::kFullType.get(global))
      full = f.getValue();
    int64_t numel = cast<ShapedType>(full).getNumElements();
    // Followed use by use: a bucketed gather's result i is its operand i's
    // (the other members' results lead to other layers).
    SmallVector<OpOperand *> work;
    for (OpOperand &use : load->getUses())
      work.push_back(&use);
    llvm::DenseSet<std::pair<Operation *, int>> visited;
    while (!work.empty()) {
      OpOperand *use = work.pop_back_val();
      Operation *user = use->getOwner();
      auto bucket = dyn_cast<::zero::dist::BucketAllGatherOp>(user);
      while (user->getBlock() != &body)
        user = user->getParentOp();
      const int member =
          bucket && bucket == user ? int(use->getOperandNumber()) : -1;
      if (!visited.insert({user, member}).second)
        continue;
      auto it = result.layerOf.find(user);
      if (it != result.layerOf.end()) {
        if (seen[it->second].insert(global).second)
          result.layers[it->second].params += numel;
        continue;
      }
      for (OpResult out : user->getResults())
        if (member < 0 || out.getResultNumber() == unsigned(member))
          for (OpOperand &next : out.getUses())
            work.push_back(&next);
    }
  }
  return result;
}

/// The global a load reads when it is a trainable parameter (not one of the
/// exporter's buffers), else null.
ml_program::GlobalOp parameterOf(ml_program::GlobalLoadOp load) {
  auto global =
      SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(load, load.getGlobalAttr());
  return global && !attrs::kBuffer.isSetOn(global) ? global : ml_program::GlobalOp();
}

/// A parameter's elements (its full shape when sharded).
int64_t elementsOf(ml_program::GlobalOp global) {
  Type full = global.getType();
  if (auto f = attrs::kFullType.get(global))
    full = f.getValue();
  return cast<ShapedType>(full).getNumElements();
}

/// The values `op` reads: its operands and what its regions use from above.
SmallVector<Value> readsOf(Operation *op) {
  SmallVector<Value> reads(op->getOperands().begin(), op->getOperands().end());
  if (op->getNumRegions()) {
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(op->getRegions(), above);
    reads.append(above.begin(), above.end());
  }
  return reads;
}

/// The op of `body` that holds `op` (op itself when it is in `body`).
Operation *topLevelIn(Block &body, Operation *op) {
  while (op->getBlock() != &body)
    op = op->getParentOp();
  return op;
}

/// Free ops of `ops` (the ops of `body` but its terminator): loads,
/// constants and what is computed from them only.
llvm::DenseSet<Operation *> freeOps(Block &body, ArrayRef<Operation *> ops) {
  llvm::DenseSet<Operation *> free;
  for (Operation *op : ops) {
    bool isFree = isa<ml_program::GlobalLoadOp>(op) ||
                  op->getName().getStringRef() == "onnx.Constant";
    if (!isFree && op->getNumOperands() > 0 && op->getNumResults() > 0) {
      isFree = llvm::all_of(readsOf(op), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && def->getBlock() == &body && free.contains(def);
      });
    }
    if (isFree)
      free.insert(op);
  }
  return free;
}

/// crossing[i]: the non-free values defined at or before op i of `ops` and
/// used after it (the return at position n).
std::vector<int64_t> crossingCounts(Block &body, ArrayRef<Operation *> ops,
                                    const llvm::DenseSet<Operation *> &free,
                                    const llvm::DenseMap<Operation *, int64_t> &position) {
  const int64_t n = int64_t(ops.size());
  Operation *term = body.getTerminator();
  std::vector<int64_t> crossing(size_t(n) + 1, 0);
  auto addLiveRange = [&](Value v, int64_t def) {
    int64_t last = def;
    for (Operation *user : v.getUsers()) {
      Operation *top = topLevelIn(body, user);
      last = std::max(last, top == term ? n : position.lookup(top));
    }
    // v crosses the points after ops max(def, 0) .. last-1.
    const int64_t from = std::max<int64_t>(def, 0);
    if (last > from) {
      crossing[size_t(from)] += 1;
      crossing[size_t(last)] -= 1;
    }
  };
  // The inputs themselves never cross: every rank binds every input (a
  // label read at the loss does not pin the whole forward into one segment).
  for (Operation *op : ops)
    if (!free.contains(op))
      for (Value v : op->getResults())
        addLiveRange(v, position.lookup(op));
  for (int64_t i = 1; i <= n; ++i)
    crossing[size_t(i)] += crossing[size_t(i) - 1];
  return crossing;
}

/// The parameters each segment's ops read (directly, through free ops, or
/// from a load inside their regions).
std::vector<llvm::SetVector<Operation *>>
segmentGlobals(Block &body, const std::vector<SmallVector<Operation *>> &segments,
               const llvm::DenseSet<Operation *> &free) {
  std::vector<llvm::SetVector<Operation *>> globals(segments.size());
  for (auto [k, segment] : llvm::enumerate(segments))
    for (Operation *op : segment) {
      SmallVector<Value> work = readsOf(op);
      op->walk([&](ml_program::GlobalLoadOp load) { work.push_back(load.getResult()); });
      llvm::DenseSet<Operation *> visited;
      while (!work.empty()) {
        Operation *def = work.pop_back_val().getDefiningOp();
        if (!def || !visited.insert(def).second)
          continue;
        if (auto load = dyn_cast<ml_program::GlobalLoadOp>(def)) {
          if (ml_program::GlobalOp global = parameterOf(load))
            globals[k].insert(global);
          continue;
        }
        if (def->getBlock() == &body && free.contains(def))
          llvm::append_range(work, readsOf(def));
      }
    }
  return globals;
}

/// The layers of a model without module paths: the segments between its
/// single-activation cut points (the rule is in Layers.h).
zero::LayerStructure fromCutPoints(Block &body) {
  zero::LayerStructure result;
  result.segments = true;
  Operation *term = body.getTerminator();
  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    // Already cut, or a training step: the fallback needs the forward.
    if (attrs::kPipelineStage.isSetOn(op) || attrs::kPhase.isSetOn(op))
      return zero::LayerStructure();
    if (&op != term)
      ops.push_back(&op);
  }
  llvm::DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = int64_t(i);
  // Free ops: loads, constants and what is computed from them only.
  llvm::DenseSet<Operation *> free = freeOps(body, ops);
  std::vector<int64_t> crossing = crossingCounts(body, ops, free, position);
  // Segments of non-free ops, cut after op i where one value crosses.
  SmallVector<Operation *> nonFree;
  for (Operation *op : ops)
    if (!free.contains(op))
      nonFree.push_back(op);
  if (nonFree.empty())
    return zero::LayerStructure();
  std::vector<SmallVector<Operation *>> segments(1);
  for (auto [k, op] : llvm::enumerate(nonFree)) {
    segments.back().push_back(op);
    if (k + 1 < nonFree.size() && crossing[size_t(position[op])] == 1)
      segments.emplace_back();
  }
  std::vector<llvm::SetVector<Operation *>> globals = segmentGlobals(body, segments, free);
  // Segments without parameters join the next one (trailing ones the last
  // one with parameters); none with parameters: one layer.
  std::vector<int64_t> layerOfSegment(segments.size(), 0);
  int64_t layers = 0;
  for (size_t k = 0; k < segments.size(); ++k) {
    layerOfSegment[k] = layers;
    if (!globals[k].empty())
      ++layers;
  }
  if (layers == 0)
    layers = 1;
  for (size_t k = 0; k < segments.size(); ++k)
    layerOfSegment[k] = std::min(layerOfSegment[k], layers - 1);
  result.layers.resize(size_t(layers));
  std::vector<llvm::SetVector<Operation *>> layerGlobals(static_cast<size_t>(layers));
  for (auto [k, segment] : llvm::enumerate(segments))
    for (Operation *op : segment) {
      result.layerOf[op] = int(layerOfSegment[k]);
      layerGlobals[size_t(layerOfSegment[k])].insert(globals[k].begin(), globals[k].end());
    }
  // Free ops: with their first non-free user, else the next non-free op.
  int next = int(layers) - 1;
  for (Operation *op : llvm::reverse(ops)) {
    if (!free.contains(op)) {
      next = result.layerOf[op];
      continue;
    }
    std::optional<int> first;
    for (Operation *user : op->getUsers()) {
      auto it = result.layerOf.find(topLevelIn(body, user));
      if (it != result.layerOf.end())
        first = std::min(first.value_or(it->second), it->second);
    }
    result.layerOf[op] = first.value_or(next);
  }
  for (Operation *op : ops)
    result.layers[size_t(result.layerOf[op])].ops.push_back(op);
  for (auto [l, layer] : llvm::enumerate(result.layers)) {
    layer.name = "segment." + std::to_string(l);
    for (Operation *global : layerGlobals[l])
      layer.params += elementsOf(cast<ml_program::GlobalOp>(global));
  }
  return result;
}

} // namespace

zero::LayerStructure zero::recoverLayers(func::FuncOp func) {
  if (func.getBody().empty())
    return zero::LayerStructure();
  Block &body = func.getBody().front();
  LayerStructure result = fromModulePaths(body);
  if (result.layers.empty())
    result = fromCutPoints(body);
  return result;
}

std::vector<int64_t> zero::partitionUniform(int64_t items, int64_t parts) {
  std::vector<int64_t> bounds(size_t(parts) + 1, 0);
  if (items <= parts) {
    for (int64_t p = 0; p <= parts; ++p)
      bounds[size_t(p)] = std::min(p, items);
    return bounds;
  }
  int64_t chunk = items / parts, residual = items - chunk * parts;
  for (int64_t p = 0; p <= parts; ++p)
    bounds[size_t(p)] = p * chunk + std::min(p, residual);
  return bounds;
}

std::vector<int64_t> zero::partitionBalanced(const std::vector<int64_t> &weights,
                                             int64_t parts) {
  const int64_t n = int64_t(weights.size()), m = parts;
  if (n <= m)
    return partitionUniform(n, m);
  const double inf = std::numeric_limits<double>::infinity();
  auto at = [m](int64_t i, int64_t j) { return size_t(i * (m + 1) + j); };
  std::vector<double> dpMax(size_t((n + 1) * (m + 1)), inf), dpMin = dpMax, cost = dpMax;
  std::vector<int64_t> position(dpMax.size(), 0);
  std::vector<double> prefix(size_t(n) + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    prefix[size_t(i) + 1] = prefix[size_t(i)] + double(weights[size_t(i)]);
  dpMax[at(0, 0)] = 0;
  cost[at(0, 0)] = 0;
  for (int64_t i = 1; i <= n; ++i)
    for (int64_t j = 1; j <= std::min(i, m); ++j)
      for (int64_t k = 0; k < i; ++k) {
        double part = prefix[size_t(i)] - prefix[size_t(k)];
        double hi = std::max(dpMax[at(k, j - 1)], part);
        double lo = std::min(dpMin[at(k, j - 1)], part);
        double c = hi - lo;
        // An unreachable (k, j-1) costs inf, and inf >= inf: like numpy,
        // the later k wins the tie.
        if (cost[at(i, j)] >= c) {
          cost[at(i, j)] = c;
          dpMax[at(i, j)] = hi;
          dpMin[at(i, j)] = lo;
          position[at(i, j)] = k;
        }
      }
  std::vector<int64_t> bounds{n};
  for (int64_t j = m; j >= 1; --j)
    bounds.push_back(position[at(bounds.back(), j)]);
  std::reverse(bounds.begin(), bounds.end());
  return bounds;
}

std::vector<zero::PipelineStep> zero::pipelineSchedule(llvm::StringRef schedule,
                                                      int64_t stages, int64_t stage,
                                                      int64_t m) {
  std::vector<PipelineStep> order;
  if (schedule == "gpipe") {
    for (int64_t k = 0; k < m; ++k)
      order.push_back({true, k});
    for (int64_t k = 0; k < m; ++k)
      order.push_back({false, k});
    return order;
  }
  const int64_t warmup = std::max<int64_t>(0, std::min(stages - stage - 1, m));
  for (int64_t k = 0; k < warmup; ++k)
    order.push_back({true, k});
  for (int64_t k = 0; k + warmup < m; ++k) {
    order.push_back({true, k + warmup});
    order.push_back({false, k});
  }
  for (int64_t k = m - warmup; k < m; ++k)
    order.push_back({false, k});
  return order;
}

int64_t zero::layerMacs(const Layer &layer) {
  int64_t macs = 0;
  for (mlir::Operation *op : layer.ops) {
    // Forward products only: a training step's backward repeats them in
    // proportion (twice), and its recomputed clones are not the layer's.
    if (auto phase = attrs::kPhase.get(op);
        (phase && *phase != attrs::Phase::Forward) ||
        attrs::kRecompute.isSetOn(op))
      continue;
    llvm::StringRef name = op->getName().getStringRef();
    if (op->getNumResults() != 1 || op->getNumOperands() < 2)
      continue;
    auto out = llvm::dyn_cast<mlir::RankedTensorType>(op->getResult(0).getType());
    auto a = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(0).getType());
    auto w = llvm::dyn_cast<mlir::RankedTensorType>(op->getOperand(1).getType());
    if (!out || !a || !w || !out.hasStaticShape() || !a.hasStaticShape() ||
        !w.hasStaticShape() || a.getRank() == 0)
      continue;
    int64_t k = 0;
    if (name == "onnx.MatMul") {
      k = a.getShape().back();
    } else if (name == "onnx.Gemm" && a.getRank() == 2) {
      auto transA = op->getAttrOfType<mlir::IntegerAttr>("transA");
      k = transA && transA.getInt() ? a.getDimSize(0) : a.getDimSize(1);
    } else if (name == "onnx.Conv" && w.getRank() >= 2) {
      k = 1;
      for (int64_t d = 1; d < w.getRank(); ++d)
        k *= w.getDimSize(d);
    }
    macs += out.getNumElements() * k;
  }
  return macs;
}


std::optional<int64_t> zero::pipelineStageOf(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto st = attrs::kPipelineStage.get(op))
      return st.getInt();
  return std::nullopt;
}
