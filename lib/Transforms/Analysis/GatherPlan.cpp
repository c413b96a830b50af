//===- GatherPlan.cpp - What the ZeRO passes know about gathers -----------===//
//
// Shared queries over gathered parameters for the ZeRO passes.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/GatherPlan.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

int64_t zero::tensorBytes(Type type) {
  auto t = cast<RankedTensorType>(type);
  Type e = t.getElementType();
  int64_t elem = e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8;
  return t.getNumElements() * elem;
}

int64_t zero::gatheredBytes(Operation *gather) {
  int64_t n = 0;
  for (Value r : gather->getResults())
    n += tensorBytes(r.getType());
  return n;
}

/// Element offset of a slice whose result is one contiguous run of its input
/// (unit steps; every dim after the first partial one is whole; every dim
/// before it has extent 1), or nothing.
std::optional<int64_t> zero::contiguousSliceOffset(zero::onnx::SliceOp slice) {
  auto in = cast<RankedTensorType>(slice.getData().getType());
  ArrayRef<int64_t> out = slice.getType().getShape();
  ArrayRef<int64_t> starts = slice.getStarts(), steps = slice.getSteps();
  if (out.empty() || slice.getType().getNumElements() == 0)
    return std::nullopt;
  int64_t rank = in.getRank(), partial = rank;
  for (int64_t d = 0; d < rank; ++d) {
    if (steps[d] != 1)
      return std::nullopt;
    if (partial == rank && out[d] != in.getDimSize(d))
      partial = d;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (d < partial && out[d] != 1 && out[d] != in.getDimSize(d))
      return std::nullopt;
    if (d < partial && out[d] != 1 && partial != rank)
      return std::nullopt;
    if (d > partial && (starts[d] != 0 || out[d] != in.getDimSize(d)))
      return std::nullopt;
  }
  int64_t offset = 0, stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    offset += starts[d] * stride;
    stride *= in.getDimSize(d);
  }
  return offset;
}

/// The ops whose result is the same bytes as their operand, which
/// zero-lower-to-runtime places as views of the operand's block (the
/// partitioner's unpad slice and reshape, and any the model applies itself:
/// a buffer's Unsqueeze, a Squeeze, a contiguous row range): a gathered
/// parameter lives as long as any of them is used.
static bool isViewKind(Operation *op) {
  if (auto slice = dyn_cast<zero::onnx::SliceOp>(op))
    return zero::contiguousSliceOffset(slice).has_value();
  return isa<zero::onnx::ReshapeOp, zero::onnx::SqueezeOp, zero::onnx::UnsqueezeOp,
             zero::onnx::FlattenOp, zero::onnx::IdentityOp, zero::onnx::DropoutOp>(op);
}

bool zero::isParameterView(Operation *op) {
  if (!isViewKind(op) || op->getNumOperands() == 0)
    return false;
  Value source = op->getOperand(0);
  while (Operation *def = source.getDefiningOp()) {
    if (isGather(def))
      return true;
    if (!isViewKind(def))
      return false;
    source = def->getOperand(0);
  }
  return false;
}

SmallVector<Value> zero::parameterViews(Value gathered) {
  SmallVector<Value> out{gathered};
  for (size_t i = 0; i < out.size(); ++i)
    for (Operation *user : out[i].getUsers())
      if (isViewKind(user) && user->getBlock() == gathered.getParentBlock())
        out.push_back(user->getResult(0));
  return out;
}

/// Ops (outside the view chain) that use any view of any result of `gather`.
static SmallVector<Operation *> computeUsers(Operation *gather) {
  SmallVector<Operation *> users;
  for (Value r : gather->getResults())
    for (Value v : zero::parameterViews(r))
      for (Operation *user : v.getUsers())
        if (!isViewKind(user) && !isa<zero::dist::ReleaseOp>(user))
          users.push_back(user);
  return users;
}

Operation *zero::firstUse(Operation *gather) {
  Operation *first = nullptr;
  for (Operation *u : computeUsers(gather)) {
    while (u->getBlock() != gather->getBlock())
      u = u->getParentOp();
    if (!first || u->isBeforeInBlock(first))
      first = u;
  }
  return first;
}

Operation *zero::lastUse(Operation *gather) {
  Operation *last = nullptr;
  for (Operation *u : computeUsers(gather)) {
    while (u->getBlock() != gather->getBlock())
      u = u->getParentOp();
    if (!last || last->isBeforeInBlock(u))
      last = u;
  }
  return last;
}

//===----------------------------------------------------------------------===//
// GatherLiveness
//===----------------------------------------------------------------------===//

/// The op of `block` that contains `op` (itself, or an ancestor).
static Operation *inBlock(Operation *op, Block &block) {
  while (op && op->getBlock() != &block)
    op = op->getParentOp();
  return op;
}

/// Where one gathered result dies: its release (the latest, if several),
/// else the last op using it through its views; null when unused.
static Operation *resultDeath(Value result, Block &block, bool &released,
                              const llvm::DenseMap<Operation *, int64_t> &pos) {
  Operation *death = nullptr;
  released = false;
  for (Value v : zero::parameterViews(result))
    for (Operation *u : v.getUsers()) {
      if (!isa<zero::dist::ReleaseOp>(u))
        continue;
      Operation *at = inBlock(u, block);
      if (!released || pos.lookup(death) < pos.lookup(at))
        death = at;
      released = true;
    }
  if (released)
    return death;
  for (Value v : zero::parameterViews(result))
    for (Operation *u : v.getUsers()) {
      if (zero::isParameterView(u))
        continue;
      Operation *at = inBlock(u, block);
      if (!death || pos.lookup(death) < pos.lookup(at))
        death = at;
    }
  return death;
}

zero::GatherLiveness::GatherLiveness(Block &block) : block_(block) {
  int64_t n = 0;
  for (Operation &op : block)
    position_[&op] = n++;
  for (Operation &op : block) {
    if (!isGather(&op))
      continue;
    Gather g{&op, gatheredBytes(&op), firstUse(&op), nullptr, false, {}};
    // Each result dies on its own (a bucket's members are released one by
    // one); the gather as a whole at the last of them.
    for (Value r : op.getResults()) {
      bool released = false;
      Operation *death = resultDeath(r, block, released, position_);
      g.results.push_back({tensorBytes(r.getType()), death});
      g.released |= released;
      if (death && (!g.death || position(g.death) < position(death)))
        g.death = death;
    }
    indexOf_[&op] = gathers_.size();
    gathers_.push_back(g);
  }
  live_.assign(size_t(n) + 1, 0);
  for (const Gather &g : gathers_)
    addRange(g, live_, +1);
  // qwZ's buffers on the way in: the quantized shard and its scales, then
  // their all-gathered forms, each live from where it is made to its last
  // reader (the gather, the zero.dequantize), as the runtime counts them.
  for (Operation &op : block) {
    auto q = dyn_cast<dist::QuantizeOp>(op);
    if (!(q && isParameterShard(q.getInput())) && !isQuantizedShardGather(&op))
      continue;
    for (Value r : op.getResults()) {
      int64_t last = -1;
      for (Operation *u : r.getUsers())
        last = std::max(last, position(inBlock(u, block)));
      if (last < 0)
        continue;
      live_[size_t(position(&op))] += tensorBytes(r.getType());
      live_[size_t(last) + 1] -= tensorBytes(r.getType());
    }
  }
  for (int64_t p = 1; p <= n; ++p)
    live_[size_t(p)] += live_[size_t(p - 1)];
}

void zero::GatherLiveness::addRange(const Gather &g, std::vector<int64_t> &live,
                                    int sign) const {
  const int64_t from = position(g.op);
  if (isa<dist::BucketAllGatherOp>(g.op)) {
    // One buffer for the bucket, its members views of it
    // (zero-lower-to-runtime): all of it alive until the last member dies.
    if (g.death) {
      live[size_t(from)] += sign * g.bytes;
      live[size_t(position(g.death)) + 1] -= sign * g.bytes;
    }
    return;
  }
  for (const auto &[bytes, death] : g.results) {
    if (!death)
      continue;
    live[size_t(from)] += sign * bytes;
    live[size_t(position(death)) + 1] -= sign * bytes;
  }
}

int64_t zero::GatherLiveness::liveBytesAt(int64_t pos, Operation *except) const {
  int64_t bytes = live_[size_t(pos)];
  auto it = except ? indexOf_.find(except) : indexOf_.end();
  if (it == indexOf_.end())
    return bytes;
  const Gather &g = gathers_[it->second];
  const int64_t from = position(g.op);
  if (pos < from)
    return bytes;
  if (isa<dist::BucketAllGatherOp>(g.op))
    return g.death && pos <= position(g.death) ? bytes - g.bytes : bytes;
  for (const auto &[size, death] : g.results)
    if (death && pos <= position(death))
      bytes -= size;
  return bytes;
}

int64_t zero::GatherLiveness::peakAsBucket(ArrayRef<Operation *> members) const {
  std::vector<int64_t> live = live_;
  // Back to a difference array, the members taken out and put back as one
  // buffer.
  for (size_t p = live.size() - 1; p > 0; --p)
    live[p] -= live[p - 1];
  int64_t bytes = 0, from = INT64_MAX, to = -1;
  for (Operation *m : members) {
    auto it = indexOf_.find(m);
    if (it == indexOf_.end())
      continue;
    const Gather &g = gathers_[it->second];
    addRange(g, live, -1);
    bytes += g.bytes;
    from = std::min(from, position(g.op));
    if (g.death)
      to = std::max(to, position(g.death));
  }
  if (to >= 0) {
    live[size_t(from)] += bytes;
    live[size_t(to) + 1] -= bytes;
  }
  int64_t most = 0, running = 0;
  for (int64_t v : live) {
    running += v;
    most = std::max(most, running);
  }
  return most;
}

int64_t zero::GatherLiveness::peakBytes() const {
  int64_t most = 0;
  for (int64_t v : live_)
    most = std::max(most, v);
  return most;
}
