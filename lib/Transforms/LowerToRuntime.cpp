//===- LowerToRuntime.cpp - onnx + zero -> zrt program --------------------===//
//
// The last pass before serialisation. It walks the forward function in order
// and produces a zrt.program:
//  - streams: collectives run on the communication stream, everything else on
//    the compute stream;
//  - storage: every value lives in a storage block; Reshape-like ops are views
//    of their operand's block; parameters sit in the `params` arena (shards
//    of one bucket packed back to back), small constants in `constants`,
//    everything else in `activations`;
//  - memory plan: activation blocks get offsets by greedy-by-size placement
//    over their live intervals [first write, last read], so dead blocks'
//    space is reused (what zero.release makes possible for gathered params);
//  - events: a record/wait pair for every dependency that crosses streams,
//    both read-after-write and the write-after-read that memory reuse creates.
//
//===----------------------------------------------------------------------===//

#include "GatherPlan.h"

#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>
#include <set>

namespace zero {
#define GEN_PASS_DEF_ZEROLOWERTORUNTIMEPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
using namespace zero;

namespace {

constexpr int64_t kAlignment = 64;
constexpr int64_t kMaxInlineSplat = 64; // larger splats become Fill kernels

int64_t alignUp(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

int64_t byteSize(Type t) { return ::zero::tensorBytes(t); }

enum class ArenaKind { Params = 0, Constants = 1, Activations = 2 };
enum StreamId { kCompute = 0, kComm = 1 };

/// A block of memory some values live in (several, when views alias it).
struct Storage {
  ArenaKind arena = ArenaKind::Activations;
  int64_t bytes = 0;
  int64_t offset = -1;
  int64_t def = INT64_MAX; ///< first instruction writing it (-1: before the run)
  int64_t lastUse = -1;    ///< last instruction reading it
  int bucket = -1;         ///< params packed together for a bucketed gather
  bool gathered = false;   ///< holds a gathered parameter (dies at its release)
  int64_t released = -1;   ///< the instruction its zero.release follows
  Operation *release = nullptr;
  /// Instructions that touched it, by stream: the latest index per stream.
  int64_t lastAccess[2] = {-1, -1};
};

/// A value's place: its storage block and a byte offset inside it.
struct Placement {
  int storage = -1;
  int64_t offset = 0;
};

/// One runtime instruction before events are added.
struct Instr {
  bool collective = false;
  std::string name;
  int stream = kCompute;
  SmallVector<std::pair<Value, Type>> ins, outs; ///< value and the view type
  SmallVector<std::pair<int, int64_t>> inViews, outViews; ///< explicit placements
  DictionaryAttr params;
  Location loc;
};

class RuntimeLowering {
public:
  RuntimeLowering(ModuleOp module, func::FuncOp func)
      : module_(module), func_(func), b_(module.getContext()) {}

  LogicalResult run();

private:
  int newStorage(ArenaKind arena, int64_t bytes) {
    Storage s;
    s.arena = arena;
    s.bytes = bytes;
    storages_.push_back(s);
    return storages_.size() - 1;
  }
  void bind(Value v, int storage, int64_t offset = 0) {
    placement_[v] = {storage, offset};
  }
  LogicalResult collect();
  LogicalResult lowerOp(Operation *op);
  LogicalResult computeLiveness();
  void planMemory();
  void emit();

  Type viewType(Value v) { return v.getType(); }

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder b_;
  int64_t worldSize_ = 1;
  std::vector<Storage> storages_;
  llvm::DenseMap<Value, Placement> placement_;
  std::vector<Instr> instrs_;
  /// Globals: (global op, storage).
  SmallVector<std::pair<ml_program::GlobalOp, int>> globals_;
  llvm::DenseMap<Operation *, int> globalStorage_;
  SmallVector<std::pair<::zero::onnx::ConstantOp, int>> constants_;
  SmallVector<std::pair<std::string, Value>> inputs_, outputs_;
  int bucketCounter_ = 0;
  /// Params storages packed for each in-place bucket, in the bucket's order.
  std::map<int, std::vector<int>> bucketMembers_;
  int64_t arenaSize_[3] = {0, 0, 0}, noReuse_[3] = {0, 0, 0}, lowerBound_[3] = {0, 0, 0};
};

DictionaryAttr kernelParams(Operation *op, OpBuilder &b) {
  SmallVector<NamedAttribute> out;
  for (NamedAttribute a : op->getAttrDictionary()) {
    if (isa<TypeAttr>(a.getValue()))
      continue; // Cast's target: the output buffer's dtype says it.
    out.push_back(a);
  }
  return b.getDictionaryAttr(out);
}

std::string locName(Location loc) {
  if (auto n = dyn_cast<NameLoc>(loc))
    return n.getName().str();
  if (auto f = dyn_cast<FusedLoc>(loc))
    for (Location l : f.getLocations())
      if (auto n = locName(l); !n.empty())
        return n;
  return "";
}

/// Element offset of a slice whose result is one contiguous run of its input
/// (unit steps; every dim after the first partial one is whole; every dim
/// before it has extent 1), or nothing.
std::optional<int64_t> contiguousSliceOffset(::zero::onnx::SliceOp slice) {
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

LogicalResult RuntimeLowering::lowerOp(Operation *op) {
  MLIRContext *ctx = op->getContext();
  auto addKernel = [&](StringRef name, DictionaryAttr params) {
    Instr in{false, name.str(), kCompute, {}, {}, {}, {}, params, op->getLoc()};
    for (Value v : op->getOperands())
      in.ins.push_back({v, v.getType()});
    for (Value v : op->getResults()) {
      bind(v, newStorage(ArenaKind::Activations, byteSize(v.getType())));
      in.outs.push_back({v, v.getType()});
    }
    instrs_.push_back(std::move(in));
  };
  auto collective = [&](StringRef name, DictionaryAttr params) {
    addKernel(name, params);
    instrs_.back().collective = true;
    instrs_.back().stream = kComm;
  };
  Builder &b = b_;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ml_program::GlobalLoadOp load) -> LogicalResult {
        auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
            load, load.getGlobalAttr());
        if (!global)
          return load.emitOpError("refers to an unknown global");
        auto it = globalStorage_.find(global);
        if (it == globalStorage_.end()) {
          int s = newStorage(ArenaKind::Params, byteSize(global.getType()));
          storages_[s].def = -1;
          if (auto bucket = global->getAttrOfType<IntegerAttr>("zero.bucket"))
            storages_[s].bucket = bucket.getInt();
          it = globalStorage_.insert({global, s}).first;
          globals_.push_back({global, s});
        }
        bind(load.getResult(), it->second);
        return success();
      })
      .Case([&](::zero::onnx::ConstantOp c) -> LogicalResult {
        auto value = cast<ElementsAttr>(c.getValue());
        auto dense = dyn_cast<DenseElementsAttr>(value);
        if (dense && dense.isSplat() && value.getNumElements() > kMaxInlineSplat) {
          Attribute splat = dense.getSplatValue<Attribute>();
          double v = 0;
          if (auto f = dyn_cast<FloatAttr>(splat))
            v = f.getValueAsDouble();
          else if (auto i = dyn_cast<IntegerAttr>(splat))
            v = double(i.getValue().getSExtValue());
          else if (auto bl = dyn_cast<BoolAttr>(splat))
            v = bl.getValue();
          Instr in{false, "Fill", kCompute, {}, {}, {}, {},
                   b.getDictionaryAttr({b.getNamedAttr("value", b.getF64FloatAttr(v))}),
                   op->getLoc()};
          bind(c.getResult(), newStorage(ArenaKind::Activations, byteSize(c.getType())));
          in.outs.push_back({c.getResult(), c.getType()});
          instrs_.push_back(std::move(in));
          return success();
        }
        int s = newStorage(ArenaKind::Constants, byteSize(c.getType()));
        storages_[s].def = -1;
        bind(c.getResult(), s);
        constants_.push_back({c, s});
        return success();
      })
      .Case<::zero::onnx::ReshapeOp, ::zero::onnx::SqueezeOp, ::zero::onnx::UnsqueezeOp,
            ::zero::onnx::FlattenOp, ::zero::onnx::IdentityOp, ::zero::onnx::DropoutOp>(
          [&](Operation *view) {
            // Same bytes, another shape: a view of the operand's block.
            placement_[view->getResult(0)] = placement_.lookup(view->getOperand(0));
            return success();
          })
      .Case([&](::zero::onnx::SliceOp slice) -> LogicalResult {
        // A contiguous block of the input (the unpad of a gathered parameter,
        // a row range) is a view at an offset; anything else is a copy.
        if (std::optional<int64_t> offset = contiguousSliceOffset(slice)) {
          Placement p = placement_.lookup(slice.getData());
          p.offset += *offset * (byteSize(slice.getType()) /
                                 std::max<int64_t>(1, slice.getType().getNumElements()));
          placement_[slice.getResult()] = p;
          return success();
        }
        addKernel("Slice", kernelParams(op, b_));
        return success();
      })
      .Case([&](::zero::dist::ReleaseOp release) -> LogicalResult {
        // zero.release is when a gathered buffer dies: its memory is free for
        // reuse after the instruction before it.
        Placement p = placement_.lookup(release.getValue());
        if (p.storage < 0 || !storages_[p.storage].gathered)
          return release.emitOpError(
              "releases a value that is not a gathered parameter (the result "
              "of zero.all_gather or zero.bucket_all_gather, or a view of one)");
        Storage &st = storages_[p.storage];
        if (st.release)
          return release.emitOpError("releases a gathered parameter that was "
                                     "already released")
                     .attachNote(st.release->getLoc())
                 << "released here";
        st.released = int64_t(instrs_.size()) - 1;
        st.release = release;
        return success();
      })
      .Case([&](::zero::dist::AllGatherOp g) {
        collective("AllGather", b.getDictionaryAttr({}));
        storages_[placement_.lookup(g.getResult()).storage].gathered = true;
        return success();
      })
      .Case([&](::zero::dist::ReduceScatterOp) {
        collective("ReduceScatter", b.getDictionaryAttr({}));
        return success();
      })
      .Case([&](::zero::dist::AllReduceOp) {
        collective("AllReduce", b.getDictionaryAttr({}));
        return success();
      })
      .Case([&](::zero::dist::BroadcastOp bc) {
        collective("Broadcast", b.getDictionaryAttr(
                                    {b.getNamedAttr("root", bc.getRootAttr())}));
        return success();
      })
      .Case([&](::zero::dist::BucketAllGatherOp g) -> LogicalResult {
        // Input: the bucket's shards, packed back to back in the params arena,
        // seen as one flat buffer. Output: world x S, rank-major; each result
        // is rebuilt from its column block by a 2-D Slice.
        int bucket = bucketCounter_++;
        int64_t total = 0;
        Type elem = cast<RankedTensorType>(g.getShards().front().getType()).getElementType();
        // The bucket's input is its shards back to back, in the bucket's own
        // order. When every shard is a whole parameter shard that no other
        // bucket has claimed, they are packed that way in the params arena
        // (no copy); otherwise (a re-gathered parameter in a second bucket,
        // a shard listed twice) they are staged into one buffer first.
        bool inPlace = true;
        llvm::SmallDenseSet<int> seen;
        for (Value s : g.getShards()) {
          Placement p = placement_.lookup(s);
          total += cast<RankedTensorType>(s.getType()).getNumElements();
          inPlace &= p.storage >= 0 && p.offset == 0 &&
                     storages_[p.storage].arena == ArenaKind::Params &&
                     storages_[p.storage].bucket < 0 &&
                     storages_[p.storage].bytes == byteSize(s.getType()) &&
                     seen.insert(p.storage).second;
        }
        auto inType = RankedTensorType::get({total}, elem);
        if (inPlace) {
          for (Value s : g.getShards()) {
            int st = placement_.lookup(s).storage;
            storages_[st].bucket = bucket;
            bucketMembers_[bucket].push_back(st);
          }
        }
        int staging = -1;
        if (!inPlace) {
          staging = newStorage(ArenaKind::Activations, byteSize(inType));
          Instr concat{false, "Concat", kComm, {}, {}, {}, {},
                       b.getDictionaryAttr({b.getNamedAttr("axis", b.getI64IntegerAttr(0))}),
                       op->getLoc()};
          for (Value s : g.getShards())
            concat.ins.push_back(
                {s, RankedTensorType::get(
                        {cast<RankedTensorType>(s.getType()).getNumElements()}, elem)});
          concat.outViews.push_back({staging, 0});
          concat.outs.push_back({Value(), inType});
          instrs_.push_back(std::move(concat));
        }
        int64_t world = g.getWorld();
        auto flatType = RankedTensorType::get({world * total}, elem);
        int gathered = newStorage(ArenaKind::Activations, byteSize(flatType));
        Instr gather{true, "AllGather", kComm, {}, {}, {}, {},
                     b.getDictionaryAttr({}), op->getLoc()};
        if (inPlace) {
          gather.ins.push_back({g.getShards().front(), inType});
        } else {
          gather.inViews.push_back({staging, 0});
          gather.ins.push_back({Value(), inType});
        }
        gather.outViews.push_back({gathered, 0});
        gather.outs.push_back({Value(), flatType});
        instrs_.push_back(std::move(gather));
        int64_t column = 0;
        for (auto [shard, result] : llvm::zip(g.getShards(), g.getResults())) {
          int64_t s = cast<RankedTensorType>(shard.getType()).getNumElements();
          bind(result, newStorage(ArenaKind::Activations, byteSize(result.getType())));
          storages_.back().gathered = true;
          Instr slice{true, "Slice", kComm, {}, {}, {}, {},
                      b.getDictionaryAttr(
                          {b.getNamedAttr("starts", b.getDenseI64ArrayAttr({0, column})),
                           b.getNamedAttr("ends", b.getDenseI64ArrayAttr({world, column + s})),
                           b.getNamedAttr("steps", b.getDenseI64ArrayAttr({1, 1}))}),
                      op->getLoc()};
          slice.collective = false;
          slice.inViews.push_back({gathered, 0});
          slice.ins.push_back({Value(), RankedTensorType::get({world, total}, elem)});
          slice.outs.push_back({result, RankedTensorType::get({world, s}, elem)});
          instrs_.push_back(std::move(slice));
          column += s;
        }
        return success();
      })
      .Case([&](func::ReturnOp ret) {
        ArrayAttr names = func_.getResAttrsAttr();
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          std::string name = "output" + std::to_string(i);
          if (auto n = func_.getResultAttrOfType<StringAttr>(i, "onnx.name"))
            name = n.str();
          outputs_.push_back({name, v});
        }
        (void)names;
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        if (!isa<::zero::onnx::ONNXDialect>(other->getDialect()))
          return other->emitOpError("cannot be lowered to the runtime: only onnx, "
                                    "zero and ml_program ops are supported");
        addKernel(other->getName().stripDialect(), kernelParams(other, b_));
        (void)ctx;
        return success();
      });
}

LogicalResult RuntimeLowering::collect() {
  if (auto w = module_->getAttrOfType<IntegerAttr>("zero.world_size"))
    worldSize_ = w.getInt();
  Block &body = func_.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    int s = newStorage(ArenaKind::Activations, byteSize(arg.getType()));
    storages_[s].def = -1;
    bind(arg, s);
    std::string name = "input" + std::to_string(i);
    if (auto n = func_.getArgAttrOfType<StringAttr>(i, "onnx.name"))
      name = n.str();
    inputs_.push_back({name, arg});
  }
  for (Operation &op : body)
    if (failed(lowerOp(&op)))
      return failure();
  return success();
}

LogicalResult RuntimeLowering::computeLiveness() {
  int64_t end = instrs_.size();
  // Uses by views/releases are covered: a view shares its operand's storage and
  // any instruction reading the view reads the storage.
  for (auto [i, in] : llvm::enumerate(instrs_)) {
    for (auto [k, inp] : llvm::enumerate(in.ins)) {
      int s = k < in.inViews.size() ? in.inViews[k].first
                                    : placement_.lookup(inp.first).storage;
      storages_[s].lastUse = std::max<int64_t>(storages_[s].lastUse, i);
    }
    for (auto [k, out] : llvm::enumerate(in.outs)) {
      int s = k < in.outViews.size() ? in.outViews[k].first
                                     : placement_.lookup(out.first).storage;
      storages_[s].def = std::min<int64_t>(storages_[s].def, i);
      storages_[s].lastUse = std::max<int64_t>(storages_[s].lastUse, i);
    }
  }
  for (auto &[name, v] : outputs_)
    storages_[placement_.lookup(v).storage].lastUse = end;
  for (auto &[name, v] : inputs_)
    storages_[placement_.lookup(v).storage].def = -1;
  // A gathered parameter lives until its zero.release, the single source of
  // truth; one never released is kept to the end of the program.
  for (Storage &st : storages_) {
    if (!st.gathered)
      continue;
    if (!st.release) {
      st.lastUse = end;
      continue;
    }
    if (st.lastUse > st.released)
      return st.release
                 ->emitOpError("releases a gathered parameter that is still "
                               "used after it; move the release after its "
                               "last use")
                 .attachNote(instrs_[size_t(st.lastUse)].loc)
             << "used here";
    st.lastUse = std::max(st.lastUse, st.released);
  }
  return success();
}

void RuntimeLowering::planMemory() {
  // Params: whole tensors and shards; a bucket's shards back to back.
  int64_t offset = 0;
  for (auto &[g, s] : globals_) {
    Storage &st = storages_[s];
    if (st.bucket >= 0)
      continue;
    st.offset = offset;
    offset += alignUp(st.bytes);
  }
  // Each bucket's shards in the bucket's order: the collective reads them as
  // one flat buffer.
  for (auto &[id, members] : bucketMembers_) {
    for (int s : members) {
      storages_[s].offset = offset;
      offset += storages_[s].bytes;
    }
    offset = alignUp(offset);
  }
  arenaSize_[0] = noReuse_[0] = lowerBound_[0] = offset;
  // Constants: never freed.
  offset = 0;
  for (auto &[c, s] : constants_) {
    storages_[s].offset = offset;
    offset += alignUp(storages_[s].bytes);
  }
  arenaSize_[1] = noReuse_[1] = lowerBound_[1] = offset;

  // Activations: greedy by size over live intervals.
  std::vector<int> order;
  for (size_t s = 0; s < storages_.size(); ++s)
    if (storages_[s].arena == ArenaKind::Activations) {
      if (storages_[s].def == INT64_MAX)
        storages_[s].def = storages_[s].lastUse; // written by nobody
      order.push_back(s);
      noReuse_[2] += alignUp(storages_[s].bytes);
    }
  llvm::stable_sort(order, [&](int a, int b) {
    return storages_[a].bytes > storages_[b].bytes;
  });
  std::vector<int> placed;
  for (int s : order) {
    Storage &st = storages_[s];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int p : placed) {
      const Storage &o = storages_[p];
      if (o.def <= st.lastUse && st.def <= o.lastUse)
        busy.push_back({o.offset, o.offset + alignUp(o.bytes)});
    }
    llvm::sort(busy);
    int64_t candidate = 0;
    for (auto [lo, hi] : busy) {
      if (candidate + alignUp(st.bytes) <= lo)
        break;
      candidate = std::max(candidate, hi);
    }
    st.offset = candidate;
    arenaSize_[2] = std::max(arenaSize_[2], candidate + alignUp(st.bytes));
    placed.push_back(s);
  }
  // Lower bound: the most bytes simultaneously live at any instruction.
  for (int64_t i = -1; i <= int64_t(instrs_.size()); ++i) {
    int64_t live = 0;
    for (int s : order)
      if (storages_[s].def <= i && i <= storages_[s].lastUse)
        live += alignUp(storages_[s].bytes);
    lowerBound_[2] = std::max(lowerBound_[2], live);
  }
}

void RuntimeLowering::emit() {
  MLIRContext *ctx = module_.getContext();
  OpBuilder b(ctx);
  b.setInsertionPoint(func_);
  Location loc = func_.getLoc();
  auto program = ::zero::zrt::ProgramOp::create(b, loc, func_.getName(), worldSize_);
  Block *body = new Block();
  program.getBody().push_back(body);
  b.setInsertionPointToStart(body);

  const char *streamNames[2] = {"compute", "comm"};
  for (const char *s : streamNames)
    ::zero::zrt::StreamOp::create(b, loc, s, s);
  SmallVector<int64_t> ranks;
  for (int64_t r = 0; r < worldSize_; ++r)
    ranks.push_back(r);
  ::zero::zrt::GroupOp::create(b, loc, "world", b.getDenseI64ArrayAttr(ranks));
  const char *arenaNames[3] = {"params", "constants", "activations"};
  for (int a = 0; a < 3; ++a)
    ::zero::zrt::ArenaOp::create(b, loc, arenaNames[a], arenaSize_[a], noReuse_[a],
                                 lowerBound_[a]);

  // Buffers: one per distinct (storage, offset, type) view.
  std::map<std::tuple<int, int64_t, std::string>, FlatSymbolRefAttr> buffers;
  auto bufferFor = [&](int storage, int64_t off, Type type) {
    std::string key;
    llvm::raw_string_ostream(key) << type;
    auto it = buffers.find({storage, off, key});
    if (it != buffers.end())
      return it->second;
    std::string name = "b" + std::to_string(buffers.size());
    const Storage &st = storages_[storage];
    ::zero::zrt::BufferOp::create(b, loc, name, type, arenaNames[int(st.arena)],
                                  st.offset + off);
    auto ref = FlatSymbolRefAttr::get(ctx, name);
    buffers[{storage, off, key}] = ref;
    return ref;
  };
  auto valueBuffer = [&](Value v, Type type) {
    Placement p = placement_.lookup(v);
    return bufferFor(p.storage, p.offset, type);
  };

  for (auto &[global, s] : globals_) {
    auto type = cast<RankedTensorType>(global.getType());
    auto ref = bufferFor(s, 0, type);
    Type full = type;
    if (auto f = global->getAttrOfType<TypeAttr>("zero.full_type"))
      full = f.getValue();
    auto tensor = global->getAttrOfType<StringAttr>("zero.tensor");
    auto op = ::zero::zrt::GlobalOp::create(
        b, loc, global.getSymName(), tensor ? tensor.getValue() : global.getSymName(),
        full, ref.getValue(), nullptr, nullptr);
    if (auto shard = global->getAttrOfType<DictionaryAttr>("zero.shard")) {
      op.setShardWorldAttr(cast<IntegerAttr>(shard.get("world")));
      op.setPaddedNumelAttr(cast<IntegerAttr>(shard.get("padded_numel")));
    }
  }
  for (auto &[c, s] : constants_)
    ::zero::zrt::ConstantOp::create(b, loc, bufferFor(s, 0, c.getType()).getValue(),
                                  cast<ElementsAttr>(c.getValue()));
  for (auto &[name, v] : inputs_)
    ::zero::zrt::InputOp::create(b, loc, name, valueBuffer(v, v.getType()).getValue());

  // Events: for each instruction, the earlier instructions on other streams it
  // must follow (RAW on its inputs; WAR/WAW on memory its outputs reuse).
  int64_t n = instrs_.size();
  std::vector<std::vector<int64_t>> deps(n);
  std::vector<int64_t> lastWriter(storages_.size(), -1);
  std::vector<std::array<int64_t, 2>> lastTouch(storages_.size(), {-1, -1});
  auto storageOf = [&](const Instr &in, size_t k, bool out) {
    const auto &views = out ? in.outViews : in.inViews;
    if (k < views.size())
      return views[k].first;
    return placement_.lookup(out ? in.outs[k].first : in.ins[k].first).storage;
  };
  int64_t lastCompute = -1;
  for (int64_t i = 0; i < n; ++i) {
    const Instr &in = instrs_[i];
    // Program order is the schedule: communication starts when compute has
    // reached the point where the pass pipeline put it (zero-prefetch moves
    // gathers earlier on purpose), so a gather never runs ahead unbounded.
    if (in.stream == kComm && lastCompute >= 0)
      deps[i].push_back(lastCompute);
    if (in.stream == kCompute)
      lastCompute = i;
    for (size_t k = 0; k < in.ins.size(); ++k) {
      int s = storageOf(in, k, false);
      if (lastWriter[s] >= 0 && instrs_[lastWriter[s]].stream != in.stream)
        deps[i].push_back(lastWriter[s]);
    }
    for (size_t k = 0; k < in.outs.size(); ++k) {
      int s = storageOf(in, k, true);
      const Storage &st = storages_[s];
      // Everything that used overlapping activation memory before.
      for (size_t o = 0; o < storages_.size(); ++o) {
        const Storage &other = storages_[o];
        if (other.arena != st.arena || (int(o) != s && other.lastUse >= i))
          continue;
        bool overlap = other.offset < st.offset + alignUp(st.bytes) &&
                       st.offset < other.offset + alignUp(other.bytes);
        if (!overlap)
          continue;
        int64_t t = lastTouch[o][1 - in.stream];
        if (t >= 0)
          deps[i].push_back(t);
      }
    }
    for (size_t k = 0; k < in.ins.size(); ++k)
      lastTouch[storageOf(in, k, false)][in.stream] = i;
    for (size_t k = 0; k < in.outs.size(); ++k) {
      int s = storageOf(in, k, true);
      lastTouch[s][in.stream] = i;
      lastWriter[s] = i;
    }
  }
  // One event per producing instruction; a stream waits for an event only if
  // it has not already waited for a later one from the same stream.
  std::vector<int64_t> eventOf(n, -1);
  int64_t numEvents = 0;
  std::vector<std::vector<int64_t>> waits(n);
  int64_t waitedUpTo[2] = {-1, -1};
  for (int64_t i = 0; i < n; ++i) {
    int s = instrs_[i].stream;
    int64_t latest = -1;
    for (int64_t d : deps[i])
      latest = std::max(latest, d);
    if (latest < 0 || latest <= waitedUpTo[s])
      continue;
    if (eventOf[latest] < 0)
      eventOf[latest] = numEvents++;
    waits[i].push_back(latest);
    waitedUpTo[s] = latest;
  }

  auto streamRef = [&](int s) { return FlatSymbolRefAttr::get(ctx, streamNames[s]); };
  auto worldRef = FlatSymbolRefAttr::get(ctx, "world");
  for (int64_t i = 0; i < n; ++i) {
    const Instr &in = instrs_[i];
    for (int64_t d : waits[i])
      ::zero::zrt::WaitOp::create(b, in.loc, b.getI64IntegerAttr(eventOf[d]),
                                streamRef(in.stream));
    SmallVector<Attribute> ins, outs;
    for (size_t k = 0; k < in.ins.size(); ++k) {
      if (k < in.inViews.size())
        ins.push_back(bufferFor(in.inViews[k].first, in.inViews[k].second, in.ins[k].second));
      else
        ins.push_back(valueBuffer(in.ins[k].first, in.ins[k].second));
    }
    for (size_t k = 0; k < in.outs.size(); ++k) {
      if (k < in.outViews.size())
        outs.push_back(bufferFor(in.outViews[k].first, in.outViews[k].second, in.outs[k].second));
      else
        outs.push_back(valueBuffer(in.outs[k].first, in.outs[k].second));
    }
    if (in.collective)
      ::zero::zrt::CollectiveOp::create(b, in.loc, b.getStringAttr(in.name),
                                        streamRef(in.stream), worldRef,
                                      b.getArrayAttr(ins), b.getArrayAttr(outs), in.params);
    else
      ::zero::zrt::KernelOp::create(b, in.loc, b.getStringAttr(in.name),
                                    streamRef(in.stream),
                                  b.getArrayAttr(ins), b.getArrayAttr(outs), in.params);
    if (eventOf[i] >= 0)
      ::zero::zrt::RecordOp::create(b, in.loc, b.getI64IntegerAttr(eventOf[i]),
                                  streamRef(in.stream));
  }
  for (auto &[name, v] : outputs_)
    ::zero::zrt::OutputOp::create(b, loc, name, valueBuffer(v, v.getType()).getValue());
}

LogicalResult RuntimeLowering::run() {
  if (failed(collect()))
    return failure();
  if (failed(computeLiveness()))
    return failure();
  planMemory();
  emit();
  for (auto &[g, s] : globals_)
    (void)s;
  func_.erase();
  for (auto g : llvm::make_early_inc_range(module_.getOps<ml_program::GlobalOp>()))
    g.erase();
  return success();
}

struct ZeroLowerToRuntimePass
    : public ::zero::impl::ZeroLowerToRuntimePassBase<ZeroLowerToRuntimePass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func;
    if (!function.empty()) {
      func = module.lookupSymbol<func::FuncOp>(function);
    } else {
      auto funcs = module.getOps<func::FuncOp>();
      if (!funcs.empty() && std::next(funcs.begin()) == funcs.end())
        func = *funcs.begin();
      else
        func = module.lookupSymbol<func::FuncOp>("forward");
    }
    if (!func) {
      module.emitError() << "zero-lower-to-runtime: no function @"
                         << (function.empty() ? std::string("forward") : std::string(function))
                         << " to lower (name one with function=...)";
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitOpError("must have a single block to be lowered");
      return signalPassFailure();
    }
    // Kernel-level simplifications first (e.g. MatMul of a transposed weight
    // becomes a Gemm that reads the weight as stored).
    RewritePatternSet patterns(&getContext());
    ::zero::onnx::MatMulOp::getCanonicalizationPatterns(patterns, &getContext());
    // Program order is the schedule: no constant hoisting or folding here.
    GreedyRewriteConfig config;
    config.enableFolding(false)
        .enableConstantCSE(false)
        .setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(func, std::move(patterns), config)))
      return signalPassFailure();
    RuntimeLowering lowering(module, func);
    if (failed(lowering.run()))
      return signalPassFailure();
  }
};

} // namespace
