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
// First the pass runs two passes as dynamic pipelines: on the module,
// zero-inline-pipeline-stages (a cut program's stages inlined into the
// function to lower, InlinePipelineStages.cpp); on that function alone,
// zero-simplify-kernels (SimplifyKernels.cpp).
//
// This file holds the pass and instruction selection: lowerOp dispatches each
// op to the lowering of its family (parameter life cycle, collectives,
// pipeline transfers, quantization, storage-only ops, compute kernels).
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Analysis/GatherPlan.h"
#include "zero/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"

#include <tuple>

#define DEBUG_TYPE "zero-lower-to-runtime"

namespace zero {
#define GEN_PASS_DEF_ZEROLOWERTORUNTIMEPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
using namespace zero;

namespace zero {
namespace lowering {

namespace {

/// Whether `name` is one of the zero dialect's discardable attributes
/// (zero.stream, zero.pipeline_stage, ...).
bool isZeroDialectAttr(StringRef name) {
  return name.consume_front(::zero::dist::ZeroDialect::getDialectNamespace()) &&
         name.starts_with(".");
}

/// A kernel's parameters: the op's attributes, less the zero dialect's marks
/// (where and when it runs: stream, stage, micro-batch, not how) and a type
/// (Cast's target: the output buffer's dtype says it).
DictionaryAttr kernelParams(Operation *op, Builder &b) {
  SmallVector<NamedAttribute> out;
  for (NamedAttribute a : op->getAttrDictionary()) {
    if (isa<TypeAttr>(a.getValue()) || isZeroDialectAttr(a.getName()))
      continue;
    out.push_back(a);
  }
  return b.getDictionaryAttr(out);
}

/// The parameters of Quantize and Dequantize: the quantized width, the
/// elements per scale, and the chunks (ranks) the blocks are split into.
DictionaryAttr quantizationParams(Builder &b, IntegerAttr bits, IntegerAttr block,
                                  IntegerAttr chunks) {
  return b.getDictionaryAttr({b.getNamedAttr("bits", bits), b.getNamedAttr("block", block),
                              b.getNamedAttr("chunks", chunks)});
}

/// The parameters of Send and Recv: the peer rank and the message tag.
DictionaryAttr pointToPointParams(Builder &b, IntegerAttr peer, IntegerAttr tag) {
  return b.getDictionaryAttr({b.getNamedAttr("peer", peer), b.getNamedAttr("tag", tag)});
}

} // namespace

StreamId kernelStream(Operation *op) {
  return attrs::kStream.get(op) == attrs::StreamKind::Comm ? kComm : kCompute;
}

int RuntimeLowering::globalStorage(Operation *user, SymbolRefAttr sym) {
  auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(user, sym);
  if (!global) {
    user->emitOpError("refers to an unknown global");
    return -1;
  }
  auto it = globalStorage_.find(global);
  if (it == globalStorage_.end()) {
    // Offloaded optimizer state or shards live in the swap file
    // (zero.offload "nvme") or in the host arena ("cpu").
    ArenaKind arena = ArenaKind::Params;
    if (std::optional<attrs::OffloadDevice> offload =
            attrs::kOffload.get(global))
      arena = *offload == attrs::OffloadDevice::Cpu ? ArenaKind::Host
                                                    : ArenaKind::Offload;
    int s = newStorage(arena, byteSize(global.getType()));
    storages_[s].def = -1;
    it = globalStorage_.insert({global, s}).first;
    globals_.push_back({global, s});
  }
  return it->second;
}

//===----------------------------------------------------------------------===//
// Instruction selection
//===----------------------------------------------------------------------===//

LogicalResult RuntimeLowering::lowerOp(Operation *op) {
  using namespace ::zero::dist;
  Builder &b = b_;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // Parameters, optimizer state and their updates.
      .Case([&](ml_program::GlobalLoadOp load) { return lowerGlobalLoad(load); })
      .Case([&](ml_program::GlobalStoreOp store) { return lowerGlobalStore(store); })
      .Case<AdamWOp, SGDOp, LrScheduleOp>(
          [&](Operation *update) { return lowerOptimizerUpdate(update); })
      .Case([&](ReleaseOp release) { return lowerRelease(release); })
      // Collectives.
      .Case([&](AllGatherOp gather) { return lowerAllGather(gather); })
      .Case([&](BucketAllGatherOp gather) { return lowerBucketAllGather(gather); })
      .Case([&](ReduceScatterOp) { return lowerCollective(op, "ReduceScatter"); })
      .Case([&](AllReduceOp) { return lowerCollective(op, "AllReduce"); })
      .Case([&](AllToAllOp) { return lowerCollective(op, "AllToAll"); })
      .Case([&](BroadcastOp bc) {
        return lowerCollective(op, "Broadcast", b.getNamedAttr("root", bc.getRootAttr()));
      })
      // Pipeline stages' transfers.
      .Case([&](SendOp send) { return lowerSend(send); })
      .Case([&](RecvOp recv) { return lowerRecv(recv); })
      // ZeRO++ quantization and sharding.
      .Case([&](QuantizeOp q) { return lowerQuantize(q); })
      .Case([&](DequantizeOp dq) { return lowerDequantize(dq); })
      .Case([&](LocalShardOp shard) { return lowerLocalShard(shard); })
      // Storage, mostly without instructions.
      .Case([&](onnx::ConstantOp c) { return lowerConstant(c); })
      .Case<onnx::ReshapeOp, onnx::SqueezeOp, onnx::UnsqueezeOp, onnx::FlattenOp,
            onnx::IdentityOp, onnx::DropoutOp>([&](Operation *view) { return lowerView(view); })
      .Case([&](onnx::SliceOp slice) { return lowerSlice(slice); })
      // The program's outputs.
      .Case([&](func::ReturnOp ret) { return lowerReturn(ret); })
      // Compute kernels.
      .Case<onnx::ScatterNDOp, onnx::ScatterElementsOp>(
          [&](Operation *scatter) { return lowerScatter(scatter); })
      .Default([&](Operation *other) { return lowerComputeOp(other); });
}

void RuntimeLowering::readOperandsWriteResults(Instr &in, Operation *op) {
  in.readsAll(op->getOperands());
  for (Value v : op->getResults()) {
    bind(v, newStorage(ArenaKind::Activations, byteSize(v.getType())));
    in.writes(v);
  }
}

Instr &RuntimeLowering::appendKernel(Operation *op, StringRef name, DictionaryAttr params) {
  Instr &in = append(Instr::kernel(name, op->getLoc()));
  in.on(kernelStream(op)).withParams(params);
  LLVM_DEBUG(if (in.stream == kComm) llvm::dbgs()
             << DEBUG_TYPE ": kernel " << name
             << " runs on the communication stream (zero.stream) at " << op->getLoc()
             << "\n");
  readOperandsWriteResults(in, op);
  return in;
}

Instr &RuntimeLowering::appendCollective(Operation *op, StringRef name,
                                         DictionaryAttr params) {
  auto group = op->getAttrOfType<FlatSymbolRefAttr>("group");
  Instr &in = append(Instr::collective(name, op->getLoc(), group));
  in.withParams(params);
  readOperandsWriteResults(in, op);
  return in;
}

/// A load reads the global's storage in the params arena: no instruction.
LogicalResult RuntimeLowering::lowerGlobalLoad(ml_program::GlobalLoadOp load) {
  int s = globalStorage(load, load.getGlobalAttr());
  if (s < 0)
    return failure();
  bind(load.getResult(), s);
  return success();
}

/// The optimizer's updates are bound to their global's storage when lowered
/// (in place); anything else is copied in.
LogicalResult RuntimeLowering::lowerGlobalStore(ml_program::GlobalStoreOp store) {
  int s = globalStorage(store, store.getGlobalAttr());
  if (s < 0)
    return failure();
  Value value = store.getValue();
  Placement p = placement_.lookup(value);
  if (p.storage == s && p.offset == 0)
    return success();
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": copy into " << store.getGlobalAttr()
                          << " (its value is not computed in place)\n");
  append(Instr::kernel("Copy", store.getLoc())).reads(value).writesTo(s, 0, value.getType());
  return success();
}

/// The store of `r` into a global, when `r` may be computed in the global's
/// storage: one of r's uses stores it (the others only read it), and nothing
/// reads the global after `def` computes r (every load of it comes before),
/// so writing the new value early changes no value any op reads. Else null.
static ml_program::GlobalStoreOp storedInPlace(Value r, Operation *def) {
  ml_program::GlobalStoreOp store;
  for (Operation *user : r.getUsers())
    if (auto s = dyn_cast<ml_program::GlobalStoreOp>(user)) {
      if (store || user->getBlock() != def->getBlock())
        return nullptr;
      store = s;
    }
  if (!store)
    return nullptr;
  bool laterLoad = false;
  def->getBlock()->walk([&](ml_program::GlobalLoadOp load) {
    laterLoad |= load.getGlobalAttr() == store.getGlobalAttr() &&
                 load->getBlock() == def->getBlock() && def->isBeforeInBlock(load);
  });
  return laterLoad ? nullptr : store;
}

/// An update stored into a global (its other readers only reading it, no
/// load of the global after it: storedInPlace) is written there directly:
/// the kernel runs in place, and the block it would have had is never used.
/// Its parameters are the op's attributes, `schedule` named `type` as the
/// runtime's LrSchedule reads it.
void RuntimeLowering::planOffload() {
  offloadPlanned_ = true;
  func_.walk([&](Operation *op) {
    const bool gather = isa<::zero::dist::AllGatherOp, ::zero::dist::BucketAllGatherOp>(op);
    if (!gather && !isa<::zero::dist::AdamWOp, ::zero::dist::SGDOp>(op))
      return;
    OffloadedUpdate u{op, {}, gather ? kComm : kCompute};
    for (Value v : op->getOperands()) {
      auto load = v.getDefiningOp<ml_program::GlobalLoadOp>();
      if (!load)
        continue;
      auto global =
          SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(load, load.getGlobalAttr());
      // Only the swap file's state is swapped (the host arena's stays put).
      if (!global || attrs::kOffload.get(global) != attrs::OffloadDevice::Nvme)
        continue;
      int s = globalStorage(load, load.getGlobalAttr());
      if (s >= 0)
        u.storages.push_back({s, global.getType()});
    }
    if (!u.storages.empty())
      offloadedUpdates_.push_back(std::move(u));
  });
}

/// ZeRO-Offload to NVMe: an update's offloaded state (or a gather's
/// offloaded parameter shard) is swapped in (SwapIn: the pages read ahead,
/// asynchronously) `buffer_count` consumers before it runs, and swapped out
/// (SwapOut: written back and dropped) right after a gather (its only
/// reader), and after an update just before the next consumer runs, once the
/// update's readers (a 16-bit parameter rounded from its master) are done. So at most buffer_count + 1 consumers' bytes are resident at a
/// time. Each swap runs on its consumer's stream.
void RuntimeLowering::swapAround(Operation *op) {
  if (!offloadPlanned_)
    planOffload();
  auto at = llvm::find_if(offloadedUpdates_,
                          [&](const OffloadedUpdate &u) { return u.update == op; });
  if (at == offloadedUpdates_.end())
    return;
  const size_t i = size_t(at - offloadedUpdates_.begin());
  int64_t ahead = 4;
  if (auto cfg = attrs::kOffloadConfig.get(module_))
    ahead = std::max<int64_t>(1, cfg.getBufferCount());
  swapOutResident(op->getLoc());
  for (; swappedIn_ < std::min(offloadedUpdates_.size(), i + size_t(ahead)); ++swappedIn_) {
    const OffloadedUpdate &u = offloadedUpdates_[swappedIn_];
    Instr &in = append(Instr::kernel("SwapIn", u.update->getLoc())).on(u.stream);
    for (auto [s, type] : u.storages) {
      in.readsFrom(s, 0, type);
      residentBytes_ += (byteSize(type) + kPageBytes - 1) / kPageBytes * kPageBytes;
    }
    residentPeak_ = std::max(residentPeak_, residentBytes_);
  }
  resident_.push_back(i);
}

void RuntimeLowering::swapOutResident(Location loc) {
  for (size_t i : resident_) {
    Instr &out = append(Instr::kernel("SwapOut", offloadedUpdates_[i].update->getLoc()))
                     .on(offloadedUpdates_[i].stream);
    for (auto [s, type] : offloadedUpdates_[i].storages) {
      out.writesTo(s, 0, type);
      residentBytes_ -= (byteSize(type) + kPageBytes - 1) / kPageBytes * kPageBytes;
    }
  }
  resident_.clear();
}

LogicalResult RuntimeLowering::lowerOptimizerUpdate(Operation *update) {
  Builder &b = b_;
  swapAround(update);
  StringRef kernel = isa<::zero::dist::AdamWOp>(update) ? "AdamW"
                     : isa<::zero::dist::SGDOp>(update) ? "SGD"
                                                        : "LrSchedule";
  SmallVector<NamedAttribute> params;
  for (NamedAttribute a : update->getAttrDictionary())
    params.push_back(a.getName() == "schedule" ? b.getNamedAttr("type", a.getValue()) : a);
  appendKernel(update, kernel, b.getDictionaryAttr(params));
  for (Value r : update->getResults()) {
    ml_program::GlobalStoreOp store = storedInPlace(r, update);
    if (!store)
      continue;
    int s = globalStorage(store, store.getGlobalAttr());
    if (s < 0)
      return failure();
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << kernel << " updates "
                            << store.getGlobalAttr() << " in place\n");
    storages_[placement_.lookup(r).storage].bytes = 0; // never used
    bind(r, s);
  }
  return success();
}

/// zero.release is when a gathered buffer dies: its memory is free for reuse
/// after the instruction before it. A bucket's buffer is released once per
/// member; it dies at the last.
LogicalResult RuntimeLowering::lowerRelease(::zero::dist::ReleaseOp release) {
  Placement p = placement_.lookup(release.getValue());
  if (p.storage < 0 || !storages_[p.storage].gathered)
    return release.emitOpError(
        "releases a value that is not a gathered parameter (the result "
        "of zero.all_gather or zero.bucket_all_gather, or a view of one)");
  Storage &st = storages_[p.storage];
  if (st.release && ++st.releases > st.members)
    return release.emitOpError("releases a gathered parameter that was "
                               "already released")
               .attachNote(st.release->getLoc())
           << "released here";
  if (!st.release)
    st.releases = 1;
  st.released = int64_t(instrs_.size()) - 1;
  st.release = release;
  releaseMarks_.push_back({st.released, p.storage, release.getLoc()});
  return success();
}

LogicalResult RuntimeLowering::lowerCollective(Operation *op, StringRef name,
                                               ArrayRef<NamedAttribute> params) {
  appendCollective(op, name, b_.getDictionaryAttr(params));
  return success();
}

/// A gathered parameter lives until its zero.release; a gathered computed
/// value (a training step's updated shards) is an ordinary activation.
LogicalResult RuntimeLowering::lowerAllGather(::zero::dist::AllGatherOp gather) {
  swapAround(gather); // an offloaded shard (offload_param)
  appendCollective(gather, "AllGather", b_.getDictionaryAttr({}));
  swapOutResident(gather.getLoc()); // the gather was the shard's only reader
  if (::zero::isGather(gather))
    markGathered(gather.getResult());
  return success();
}

/// DeepSpeed's coalesced all-gather: one buffer for the whole bucket, each
/// member gathered into its own part of it (world x its shard, back to back
/// in the bucket's order), so every result is a view of the bucket's buffer
/// and the bucket holds its bytes once. One AllGather instruction with a
/// shard in and a part out per member; the buffer lives until the last
/// member's zero.release.
LogicalResult RuntimeLowering::lowerBucketAllGather(::zero::dist::BucketAllGatherOp gather) {
  swapAround(gather); // offloaded shards (offload_param)
  int64_t total = 0;
  for (Value r : gather.getResults())
    total += byteSize(r.getType());
  int bucket = newStorage(ArenaKind::Activations, total);
  storages_[bucket].gathered = true;
  storages_[bucket].members = int(gather.getResults().size());
  Instr &in = append(Instr::collective("AllGather", gather.getLoc(), gather.getGroupAttr()));
  int64_t offset = 0;
  for (auto [shard, result] : llvm::zip(gather.getShards(), gather.getResults())) {
    bind(result, bucket, offset);
    in.reads(shard).writes(result);
    offset += byteSize(result.getType());
  }
  swapOutResident(gather.getLoc()); // the gather was the shards' only reader
  return success();
}

LogicalResult RuntimeLowering::lowerSend(::zero::dist::SendOp send) {
  appendCollective(send, "Send", pointToPointParams(b_, send.getPeerAttr(), send.getTagAttr()));
  return success();
}

/// A stage receives on its compute stream (its own channel), which needs the
/// data next anyway; sends stay on the communication stream. So a stage's
/// sends never wait behind its receives: with blocking point-to-point calls
/// the two directions cannot deadlock.
LogicalResult RuntimeLowering::lowerRecv(::zero::dist::RecvOp recv) {
  appendCollective(recv, "Recv", pointToPointParams(b_, recv.getPeerAttr(), recv.getTagAttr()))
      .on(kCompute);
  return success();
}

LogicalResult RuntimeLowering::lowerQuantize(::zero::dist::QuantizeOp q) {
  appendKernel(q, "Quantize",
               quantizationParams(b_, q.getBitsAttr(), q.getBlockAttr(), q.getChunksAttr()));
  return success();
}

/// qwZ: the dequantized parameter is the gathered one (released by its
/// zero.release).
LogicalResult RuntimeLowering::lowerDequantize(::zero::dist::DequantizeOp dq) {
  appendKernel(dq, "Dequantize",
               quantizationParams(b_, dq.getBitsAttr(), dq.getBlockAttr(), dq.getChunksAttr()));
  if (::zero::isGather(dq))
    markGathered(dq.getResult());
  return success();
}

/// Over a process group, the kernel finds the rank's position in it as
/// (rank / stride) % world: a group whose positions are not such cannot be
/// lowered.
LogicalResult RuntimeLowering::lowerLocalShard(::zero::dist::LocalShardOp shard) {
  Builder &b = b_;
  SmallVector<NamedAttribute> params{b.getNamedAttr("world", shard.getWorldAttr())};
  if (shard.getGroupAttr()) {
    auto pg = SymbolTable::lookupNearestSymbolFrom<::zero::dist::ProcessGroupOp>(
        shard, shard.getGroupAttr());
    std::optional<int64_t> stride = pg ? pg.positionStride() : std::nullopt;
    if (!stride)
      return shard.emitOpError("takes a shard over a process group whose "
                               "positions are not (rank / stride) % size; "
                               "the runtime cannot compute them");
    params.push_back(b.getNamedAttr("stride", b.getI64IntegerAttr(*stride)));
  }
  appendKernel(shard, "LocalShard", b.getDictionaryAttr(params));
  return success();
}

/// A splat of more than kMaxInlineSplat elements becomes a Fill kernel into
/// an activation block (the program carries one number, not the tensor);
/// anything else is a block of the constants arena the program carries.
LogicalResult RuntimeLowering::lowerConstant(::zero::onnx::ConstantOp c) {
  auto value = cast<ElementsAttr>(c.getValue());
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (dense && dense.isSplat() && value.getNumElements() > kMaxInlineSplat) {
    Builder &b = b_;
    Attribute splat = dense.getSplatValue<Attribute>();
    double v = 0;
    if (auto f = dyn_cast<FloatAttr>(splat))
      v = f.getValueAsDouble();
    else if (auto i = dyn_cast<IntegerAttr>(splat))
      v = double(i.getValue().getSExtValue());
    else if (auto bl = dyn_cast<BoolAttr>(splat))
      v = bl.getValue();
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": splat constant of " << value.getNumElements()
                            << " elements becomes a Fill at " << c.getLoc() << "\n");
    bind(c.getResult(), newStorage(ArenaKind::Activations, byteSize(c.getType())));
    append(Instr::kernel("Fill", c.getLoc()))
        .withParams(b.getDictionaryAttr({b.getNamedAttr("value", b.getF64FloatAttr(v))}))
        .writes(c.getResult());
    return success();
  }
  int s = newStorage(ArenaKind::Constants, byteSize(c.getType()));
  storages_[s].def = -1;
  bind(c.getResult(), s);
  constants_.push_back({c, s});
  return success();
}

/// Same bytes, another shape: a view of the operand's block.
LogicalResult RuntimeLowering::lowerView(Operation *view) {
  placement_[view->getResult(0)] = placement_.lookup(view->getOperand(0));
  return success();
}

/// A contiguous block of the input (the unpad of a gathered parameter, a row
/// range) is a view at an offset; anything else is a copy by a Slice kernel.
LogicalResult RuntimeLowering::lowerSlice(::zero::onnx::SliceOp slice) {
  if (std::optional<int64_t> offset = ::zero::contiguousSliceOffset(slice)) {
    Placement p = placement_.lookup(slice.getData());
    p.offset += *offset * (byteSize(slice.getType()) /
                           std::max<int64_t>(1, slice.getType().getNumElements()));
    placement_[slice.getResult()] = p;
    return success();
  }
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": slice at " << slice.getLoc()
                          << " is not contiguous: a Slice kernel copies it\n");
  appendKernel(slice, "Slice", kernelParams(slice, b_));
  return success();
}

/// A scatter is the last reader of its data when nothing else reads the
/// data's block (a gradient sum's running total, zeros filled for it): it
/// then writes there, and the kernel skips its copy.
LogicalResult RuntimeLowering::lowerScatter(Operation *scatter) {
  appendKernel(scatter, scatter->getName().stripDialect(), kernelParams(scatter, b_));
  Value data = scatter->getOperand(0), result = scatter->getResult(0);
  Placement p = placement_.lookup(data);
  if (!data.hasOneUse() || !data.getDefiningOp() || p.storage < 0 || p.offset != 0)
    return success();
  const Storage &st = storages_[p.storage];
  if (st.arena != ArenaKind::Activations || st.gathered || st.bytes != byteSize(result.getType()))
    return success();
  // Other values on the block (a view of it, the data of an earlier in-place
  // scatter) must all have been read already.
  for (auto &[v, q] : placement_)
    if (q.storage == p.storage && v != data)
      for (Operation *user : v.getUsers())
        if (user->getBlock() != scatter->getBlock() || !user->isBeforeInBlock(scatter))
          return success();
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << scatter->getName() << " at "
                          << scatter->getLoc() << " writes its data's block in place\n");
  storages_[placement_.lookup(result).storage].bytes = 0; // never used
  bind(result, p.storage);
  return success();
}

/// Each result is an output, named by its onnx.name (else output<i>).
LogicalResult RuntimeLowering::lowerReturn(func::ReturnOp ret) {
  swapOutResident(ret.getLoc());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    std::string name = "output" + std::to_string(i);
    if (auto n = func_.getResultAttrOfType<StringAttr>(i, "onnx.name"))
      name = n.str();
    outputs_.push_back({name, v});
  }
  return success();
}

/// The runtime has a kernel per onnx op of the same name, taking the op's
/// attributes as parameters; ops of other dialects have none.
LogicalResult RuntimeLowering::lowerComputeOp(Operation *op) {
  if (!isa<::zero::onnx::ONNXDialect>(op->getDialect()))
    return op->emitOpError("cannot be lowered to the runtime: only onnx, "
                           "zero and ml_program ops are supported");
  appendKernel(op, op->getName().stripDialect(), kernelParams(op, b_));
  // A Cast whose result goes into a global (a 16-bit parameter rounded from
  // its master) writes the global's storage directly, as an update does.
  if (auto cast = dyn_cast<::zero::onnx::CastOp>(op))
    if (ml_program::GlobalStoreOp store = storedInPlace(cast.getResult(), op)) {
      int s = globalStorage(store, store.getGlobalAttr());
      if (s < 0)
        return failure();
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": Cast writes " << store.getGlobalAttr()
                              << " in place\n");
      storages_[placement_.lookup(cast.getResult()).storage].bytes = 0; // never used
      bind(cast.getResult(), s);
    }
  return success();
}

//===----------------------------------------------------------------------===//
// The function, op by op
//===----------------------------------------------------------------------===//

void RuntimeLowering::bindArguments(Block &body) {
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    int s = newStorage(ArenaKind::Activations, byteSize(arg.getType()));
    storages_[s].def = -1;
    bind(arg, s);
    std::string name = "input" + std::to_string(i);
    if (auto n = func_.getArgAttrOfType<StringAttr>(i, "onnx.name"))
      name = n.str();
    inputs_.push_back({name, arg});
  }
}

/// A pipeline stage's op runs on that stage's rank only. In a cut program
/// every op that becomes an instruction has a stage: one without would run
/// on every rank, reading memory only its own stage wrote.
LogicalResult RuntimeLowering::markPipelinePlacement(Operation &op, size_t first) {
  IntegerAttr stage = attrs::kPipelineStage.get(&op);
  if (!stage && pipelined_ && first < instrs_.size())
    return op.emitOpError("has no zero.pipeline_stage in a program cut into pipeline "
                          "stages (a rewrite after zero-pipeline-split dropped it)");
  // A training pipeline's step ("F3", "B1", ...): the trace's schedule track.
  if (StringAttr step = attrs::kPipelineStep.get(&op))
    for (size_t i = first; i < instrs_.size(); ++i) {
      NamedAttrList params(instrs_[i].params);
      params.set("pipeline_step", step);
      instrs_[i].params = params.getDictionary(op.getContext());
    }
  if (stage)
    for (size_t i = first; i < instrs_.size(); ++i) {
      // Stage s runs on its data-parallel replicas' ranks [s*dp, (s+1)*dp).
      instrs_[i].ranks.clear();
      for (int64_t d = 0; d < pipelineDp_; ++d)
        instrs_[i].ranks.push_back(stage.getInt() * pipelineDp_ + d);
    }
  return success();
}

LogicalResult RuntimeLowering::collect() {
  if (IntegerAttr w = attrs::kWorldSize.get(module_))
    worldSize_ = w.getInt();
  pipelined_ = attrs::kPipelinePlan.isSetOn(module_);
  if (auto plan = attrs::kPipelinePlan.get(module_))
    pipelineDp_ = plan.getDp();
  Block &body = func_.getBody().front();
  bindArguments(body);
  findEvalSlice(body);
  // Fusion groups (zero-fuse-elementwise's marks): members before the root
  // become nothing, the root one FusedElementwise instruction.
  std::vector<FusionGroup> groups;
  llvm::DenseMap<Operation *, int> groupOf;
  if (fuseElementwise_) {
    groups = markedFusionGroups(body);
    for (auto [g, group] : llvm::enumerate(groups))
      for (Operation *m : group.members)
        groupOf[m] = int(g);
  }
  for (Operation &op : body) {
    size_t first = instrs_.size();
    if (auto it = groupOf.find(&op); it != groupOf.end()) {
      if (groups[size_t(it->second)].root == &op)
        lowerFusionGroup(groups[size_t(it->second)]);
    } else if (isa<::zero::onnx::ConstantOp>(op) && !op.use_empty() &&
               scalarConstant(op.getResult(0)) &&
               llvm::all_of(op.getUsers(),
                            [&](Operation *u) { return groupOf.count(u) != 0; })) {
      // A scalar read only by fusion groups: a constant of their programs.
    } else if (failed(lowerOp(&op))) {
      return failure();
    }
    if (failed(markPipelinePlacement(op, first)))
      return failure();
    if (evalOps_.contains(&op))
      for (size_t i = first; i < instrs_.size(); ++i)
        instrs_[i].eval = true;
  }
  return success();
}

void RuntimeLowering::findEvalSlice(Block &body) {
  auto training = attrs::kTraining.get(module_);
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!training || !ret)
    return;
  StringRef lossName = training.getLoss();
  // Pipeline transfers: a stage's k-th receive of a tag from a stage is that
  // stage's k-th send of the tag to it.
  using Key = std::tuple<int64_t, int64_t, int64_t>; // from, to, tag
  std::map<Key, SmallVector<Operation *>> sends;
  std::map<Key, int64_t> received;
  llvm::DenseMap<Operation *, Operation *> sendOf;
  auto stageOf = [](Operation *op) {
    IntegerAttr s = attrs::kPipelineStage.get(op);
    return s ? s.getInt() : int64_t(0);
  };
  // Stages are inlined one after the other: a receive may come first.
  for (Operation &op : body)
    if (auto send = dyn_cast<::zero::dist::SendOp>(op))
      sends[{stageOf(&op), send.getPeer(), send.getTag()}].push_back(&op);
  for (Operation &op : body) {
    if (auto recv = dyn_cast<::zero::dist::RecvOp>(op)) {
      Key key{recv.getPeer(), stageOf(&op), recv.getTag()};
      auto it = sends.find(key);
      int64_t k = received[key]++;
      if (it != sends.end() && k < int64_t(it->second.size()))
        sendOf[&op] = it->second[size_t(k)];
    }
  }
  SmallVector<Operation *> work;
  auto need = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (def && def->getBlock() == &body && evalOps_.insert(def).second)
      work.push_back(def);
  };
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto n = func_.getResultAttrOfType<StringAttr>(i, "onnx.name");
    if ((n ? n.str() : "output" + std::to_string(i)) == lossName)
      need(v);
  }
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Value v : op->getOperands())
      need(v);
    if (Operation *send = sendOf.lookup(op); send && evalOps_.insert(send).second)
      work.push_back(send);
  }
  LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": " << evalOps_.size()
                          << " ops in the evaluation slice\n");
}

LogicalResult RuntimeLowering::run() {
  if (failed(collect()))
    return failure();
  emit();
  func_.erase();
  for (auto g : llvm::make_early_inc_range(module_.getOps<ml_program::GlobalOp>()))
    g.erase();
  // Now zrt.group ops.
  for (auto g : llvm::make_early_inc_range(module_.getOps<::zero::dist::ProcessGroupOp>()))
    g.erase();
  return success();
}

ProgramSummary RuntimeLowering::summary() const {
  ProgramSummary s;
  s.instructions = int64_t(instrs_.size());
  s.collectives = llvm::count_if(instrs_, [](const Instr &in) { return in.isCollective; });
  s.fusedGroups = fusedGroups_;
  s.fusedOps = fusedOps_;
  return s;
}

} // namespace lowering
} // namespace zero

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

using ::zero::lowering::ProgramSummary;
using ::zero::lowering::RuntimeLowering;

/// The function to lower: `function` when named; else the one function that
/// is not a pipeline stage (a cut program's driver), else @forward. Null when
/// there is none.
func::FuncOp entryFunction(ModuleOp module, StringRef function) {
  if (!function.empty())
    return module.lookupSymbol<func::FuncOp>(function);
  SmallVector<func::FuncOp> entries;
  for (func::FuncOp f : module.getOps<func::FuncOp>())
    if (!attrs::kPipelineStage.isSetOn(f))
      entries.push_back(f);
  if (entries.size() == 1)
    return entries.front();
  return module.lookupSymbol<func::FuncOp>("forward");
}

struct ZeroLowerToRuntimePass
    : public ::zero::impl::ZeroLowerToRuntimePassBase<ZeroLowerToRuntimePass> {
  using Base::Base;
  ZeroLowerToRuntimePass() = default;
  /// A clone counts on its own: statistics are not copied (and cannot be
  /// where LLVM tracks them).
  ZeroLowerToRuntimePass(const ZeroLowerToRuntimePass &other) : Base(other) {}

  /// The passes run first, as dynamic pipelines: on the module, the driver's
  /// pipeline stages inlined (zero-inline-pipeline-stages); on the function
  /// to lower alone, its kernels simplified (zero-simplify-kernels) and, unless
  /// fuse-elementwise=false, its elementwise groups marked
  /// (zero-fuse-elementwise).
  static OpPassManager stagePipeline(StringRef driver) {
    OpPassManager pm(ModuleOp::getOperationName());
    ::zero::ZeroInlinePipelineStagesPassOptions options;
    options.function = driver.str();
    pm.addPass(::zero::createZeroInlinePipelineStagesPass(options));
    return pm;
  }
  static OpPassManager kernelPipeline(bool fuse) {
    OpPassManager pm(func::FuncOp::getOperationName());
    pm.addPass(::zero::createZeroSimplifyKernelsPass());
    if (fuse)
      pm.addPass(::zero::createZeroFuseElementwisePass());
    return pm;
  }

  /// The passes after instruction selection, on the zrt.program: the memory
  /// plan, events, the in-order plan, the buffers placed in their arenas.
  static OpPassManager programPipeline() {
    OpPassManager pm(::zero::zrt::ProgramOp::getOperationName());
    pm.addPass(::zero::createZeroPlanMemoryPass());
    pm.addPass(::zero::createZeroInsertEventsPass());
    pm.addPass(::zero::createZeroPlanInOrderPass());
    pm.addPass(::zero::createZeroFinalizeProgramPass());
    return pm;
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    stagePipeline("").getDependentDialects(registry);
    kernelPipeline(/*fuse=*/true).getDependentDialects(registry);
    programPipeline().getDependentDialects(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = entryFunction(module, function);
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
    OpPassManager stages = stagePipeline(func.getSymName());
    OpPassManager kernels = kernelPipeline(fuseElementwise);
    if (failed(runPipeline(stages, module)) || failed(runPipeline(kernels, func)))
      return signalPassFailure();
    RuntimeLowering lowering(module, func, fuseElementwise);
    if (failed(lowering.run()))
      return signalPassFailure();
    recordStatistics(lowering.summary());
    OpPassManager program = programPipeline();
    if (failed(runPipeline(program, lowering.program())))
      return signalPassFailure();
  }

  /// Adds what the lowering produced to the pass's statistics.
  void recordStatistics(const ProgramSummary &s) {
    LLVM_DEBUG(llvm::dbgs()
               << DEBUG_TYPE ": " << s.instructions << " instructions ("
               << s.collectives << " collectives), " << s.fusedGroups
               << " fused groups of " << s.fusedOps << " ops\n");
    numInstructions += s.instructions;
    numCollectives += s.collectives;
    numFusedGroups += s.fusedGroups;
    numFusedOps += s.fusedOps;
  }

  Statistic numInstructions{this, "instructions",
                            "Runtime instructions emitted (kernels and collectives)"};
  Statistic numCollectives{this, "collectives",
                           "Collective instructions emitted (Send and Recv included)"};
  Statistic numFusedGroups{this, "fused-groups",
                           "Elementwise groups lowered to one FusedElementwise kernel"};
  Statistic numFusedOps{this, "fused-ops",
                        "Elementwise ops inside FusedElementwise kernels"};
};

} // namespace
