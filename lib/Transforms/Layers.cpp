//===- Layers.cpp - Layers from module paths; DeepSpeed's partitions ------===//

#include "Layers.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <limits>

using namespace mlir;

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

} // namespace

zero::LayerStructure zero::recoverLayers(func::FuncOp func) {
  LayerStructure result;
  if (func.getBody().empty())
    return result;
  Block &body = func.getBody().front();
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
    if (!global || global->hasAttr("zero.buffer"))
      continue;
    Type full = global.getType();
    if (auto f = global->getAttrOfType<TypeAttr>("zero.full_type"))
      full = f.getValue();
    int64_t numel = cast<ShapedType>(full).getNumElements();
    SmallVector<Operation *> work(load->getUsers().begin(), load->getUsers().end());
    llvm::DenseSet<Operation *> visited;
    while (!work.empty()) {
      Operation *user = work.pop_back_val();
      while (user->getBlock() != &body)
        user = user->getParentOp();
      if (!visited.insert(user).second)
        continue;
      auto it = result.layerOf.find(user);
      if (it != result.layerOf.end()) {
        if (seen[it->second].insert(global).second)
          result.layers[it->second].params += numel;
        continue;
      }
      for (Operation *next : user->getUsers())
        work.push_back(next);
    }
  }
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
