//===- ZeroDialect.cpp - ZeRO collectives and life cycle ------------------===//
//
// Registers the zero ops, checks the shape rules of each collective and the
// value type of every zero.* attribute.
//
//===----------------------------------------------------------------------===//

#include "zero/Dialect/Zero/ZeroDialect.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace zero::dist;

#include "zero/Dialect/Zero/ZeroEnums.cpp.inc"
#include "zero/Dialect/Zero/ZeroOpsDialect.cpp.inc"

#include "llvm/ADT/TypeSwitch.h"
#define GET_ATTRDEF_CLASSES
#include "zero/Dialect/Zero/ZeroAttrDefs.cpp.inc"

void ZeroDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "zero/Dialect/Zero/ZeroOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "zero/Dialect/Zero/ZeroAttrDefs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// The structured zero.* values
//===----------------------------------------------------------------------===//

using EmitFn = llvm::function_ref<InFlightDiagnostic()>;

LogicalResult ShardAttr::verify(EmitFn emitError, int64_t world, int64_t numel,
                                int64_t paddedNumel) {
  if (world < 1)
    return emitError() << "#zero.shard: world must be >= 1, got " << world;
  if (numel < 0)
    return emitError() << "#zero.shard: numel must be >= 0, got " << numel;
  // DeepSpeed's rule: numel rounded up to a multiple of the world.
  int64_t rounded = (numel + world - 1) / world * world;
  if (paddedNumel != rounded)
    return emitError() << "#zero.shard: padded_numel " << paddedNumel
                       << " is not numel " << numel
                       << " rounded up to a multiple of the world " << world
                       << " (" << rounded << ")";
  return success();
}

LogicalResult TrainingAttr::verify(EmitFn emitError, StringRef loss,
                                   StringRef gradNorm, StringRef lr,
                                   int64_t accumulationSteps, StringRef,
                                   StringRef lossScale, StringRef skipped,
                                   int64_t stepsPerPrint, StringRef) {
  if (loss.empty() || gradNorm.empty() || lr.empty())
    return emitError() << "#zero.training: loss, grad_norm and lr must name "
                          "the step's results";
  if (accumulationSteps < 1)
    return emitError()
           << "#zero.training: accumulation_steps must be >= 1, got "
           << accumulationSteps;
  if (!lossScale.empty() && skipped.empty())
    return emitError()
           << "#zero.training: a loss_scale needs skipped (fp16's loss scaler "
              "skips a step that overflows)";
  if (stepsPerPrint < 0)
    return emitError() << "#zero.training: steps_per_print must be >= 0, got "
                       << stepsPerPrint;
  return success();
}

LogicalResult PipelinePlanAttr::verify(EmitFn emitError, int64_t stages,
                                       StringRef, ArrayAttr layers,
                                       DenseI64ArrayAttr layerParams,
                                       DenseI64ArrayAttr parts,
                                       int64_t microBatches, int64_t dp,
                                       StringRef, ArrayAttr layerClasses,
                                       DenseI64ArrayAttr layerMacs) {
  if (stages < 1 || microBatches < 1 || dp < 1)
    return emitError() << "#zero.pipeline_plan: stages, micro_batches and dp "
                          "must be >= 1, got "
                       << stages << ", " << microBatches << ", " << dp;
  const int64_t n = int64_t(layers.size());
  if (!llvm::all_of(layers, [](Attribute a) { return isa<StringAttr>(a); }) ||
      (layerClasses && !llvm::all_of(layerClasses, [](Attribute a) {
         return isa<StringAttr>(a);
       })))
    return emitError() << "#zero.pipeline_plan: layers and layer_classes are "
                          "lists of strings";
  auto sameLength = [&](int64_t size, StringRef what) -> LogicalResult {
    if (size == n)
      return success();
    return emitError() << "#zero.pipeline_plan: " << what << " has " << size
                       << " entries for " << n << " layers";
  };
  if (failed(sameLength(layerParams.size(), "layer_params")) ||
      (layerClasses &&
       failed(sameLength(layerClasses.size(), "layer_classes"))) ||
      (layerMacs && failed(sameLength(layerMacs.size(), "layer_macs"))))
    return failure();
  // parts: stages + 1 bounds from 0 to the layers, in order.
  ArrayRef<int64_t> p = parts.asArrayRef();
  if (int64_t(p.size()) != stages + 1 || p.front() != 0 || p.back() != n ||
      !llvm::is_sorted(p))
    return emitError() << "#zero.pipeline_plan: parts must be " << stages + 1
                       << " bounds rising from 0 to " << n
                       << " (stage s holds layers [parts[s], parts[s+1]))";
  return success();
}

LogicalResult LossScalerAttr::verify(EmitFn emitError, FloatAttr lossScale,
                                     int64_t initialScalePower,
                                     int64_t lossScaleWindow,
                                     int64_t hysteresis, FloatAttr minLossScale,
                                     BoolAttr) {
  if (lossScale.getValueAsDouble() < 0 || minLossScale.getValueAsDouble() <= 0)
    return emitError() << "#zero.loss_scaler: loss_scale must be >= 0 (0: "
                          "dynamic) and min_loss_scale > 0";
  if (initialScalePower < 0 || lossScaleWindow < 1 || hysteresis < 1)
    return emitError()
           << "#zero.loss_scaler: initial_scale_power must be >= 0, "
              "loss_scale_window and hysteresis >= 1";
  return success();
}

LogicalResult OffloadConfigAttr::verify(EmitFn emitError, StringRef nvmePath,
                                        int64_t bufferCount) {
  if (nvmePath.empty())
    return emitError() << "#zero.offload_config: nvme_path must name a folder";
  if (bufferCount < 0)
    return emitError()
           << "#zero.offload_config: buffer_count must be >= 0, got "
           << bufferCount;
  return success();
}

namespace {
/// A zero.* attribute's name and the check of its value.
struct KnownAttribute {
  StringRef name;
  bool (*isValid)(Attribute);
  StringRef expected;
};

template <typename AttrT>
KnownAttribute known(const zero::attrs::ZeroAttr<AttrT> &attr, StringRef expected) {
  return {attr.name, [](Attribute v) { return isa<AttrT>(v); }, expected};
}

/// A string attribute whose value must be one of E's spellings.
template <typename E>
KnownAttribute known(const zero::attrs::ZeroEnumAttr<E> &attr,
                     StringRef expected) {
  return {attr.name,
          [](Attribute v) {
            auto s = dyn_cast<StringAttr>(v);
            return s && zero::attrs::symbolizeEnum<E>(s.getValue()).has_value();
          },
          expected};
}

/// Every zero.* attribute, as ZeroAttributes.h names it.
ArrayRef<KnownAttribute> knownAttributes() {
  namespace a = zero::attrs;
  static const KnownAttribute table[] = {
      known(a::kWorldSize, "an integer"),
      known(a::kStage, "an integer"),
      known(a::kTraining, "a #zero.training"),
      known(a::kAccumulationSteps, "an integer"),
      known(a::kActivationCheckpointInterval, "an integer"),
      known(a::kPipelinePlan, "a #zero.pipeline_plan"),
      known(a::kLossScaler, "a #zero.loss_scaler"),
      known(a::kSkipNonFinite, "a unit attribute"),
      known(a::kTensor, "a string"),
      known(a::kRole, "\"optimizer_state\" or \"counter\""),
      known(a::kShard, "a #zero.shard"),
      known(a::kFullType, "a type"),
      known(a::kBuffer, "a unit attribute"),
      known(a::kTrainable, "a unit attribute"),
      known(a::kGradType, "a type"),
      known(a::kWidenFrom, "a symbol reference"),
      known(a::kOffload, "\"cpu\" or \"nvme\""),
      known(a::kOffloadConfig, "a #zero.offload_config"),
      known(a::kPipelineStage, "an integer"),
      known(a::kPipelineStep, "a string"),
      known(a::kPhase, "\"forward\" or \"backward\""),
      known(a::kMicroBatch, "an integer"),
      known(a::kStream, "\"compute\" or \"comm\""),
      known(a::kFusionGroup, "an integer"),
      known(a::kRecompute, "a unit attribute"),
      known(a::kComputeF32, "a unit attribute"),
      known(a::kTruncatedFrom, "an integer attribute"),
      known(a::kQgzFallback, "a unit attribute"),
      known(a::kGradOf, "a symbol reference"),
      known(a::kGradShard, "an integer"),
  };
  return table;
}

/// Checks a structured value's fields again (its verifier runs when it is
/// parsed, but not when a pass builds it with get()).
LogicalResult verifyFields(Attribute value, EmitFn emitError) {
  return llvm::TypeSwitch<Attribute, LogicalResult>(value)
      .Case([&](ShardAttr a) {
        return ShardAttr::verify(emitError, a.getWorld(), a.getNumel(),
                                 a.getPaddedNumel());
      })
      .Case([&](TrainingAttr a) {
        return TrainingAttr::verify(
            emitError, a.getLoss(), a.getGradNorm(), a.getLr(),
            a.getAccumulationSteps(), a.getOptimizer(), a.getLossScale(),
            a.getSkipped(), a.getStepsPerPrint(), a.getCsvMonitor());
      })
      .Case([&](PipelinePlanAttr a) {
        return PipelinePlanAttr::verify(
            emitError, a.getStages(), a.getPartition(), a.getLayers(),
            a.getLayerParams(), a.getParts(), a.getMicroBatches(), a.getDp(),
            a.getSchedule(), a.getLayerClasses(), a.getLayerMacs());
      })
      .Case([&](LossScalerAttr a) {
        return LossScalerAttr::verify(
            emitError, a.getLossScale(), a.getInitialScalePower(),
            a.getLossScaleWindow(), a.getHysteresis(), a.getMinLossScale(),
            a.getConsecutiveHysteresis());
      })
      .Case([&](OffloadConfigAttr a) {
        return OffloadConfigAttr::verify(emitError, a.getNvmePath(),
                                         a.getBufferCount());
      })
      .Default([](Attribute) { return success(); });
}

/// Checks one zero.* attribute: a known name with a value of its type.
LogicalResult verifyZeroAttribute(Operation *op, NamedAttribute attr,
                                  StringRef where) {
  StringRef name = attr.getName().getValue();
  for (const KnownAttribute &k : knownAttributes()) {
    if (k.name != name)
      continue;
    if (k.isValid(attr.getValue()))
      return verifyFields(attr.getValue(), [&] {
        return op->emitOpError() << where << "'" << name << "': ";
      });
    return op->emitOpError() << where << "'" << name << "' must be " << k.expected
                             << ", got " << attr.getValue();
  }
  return op->emitOpError() << where << "'" << name
                           << "' is not a zero attribute (see ZeroAttributes.h)";
}
} // namespace

LogicalResult ZeroDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  return verifyZeroAttribute(op, attr, "attribute ");
}

LogicalResult ZeroDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned result,
                                                       NamedAttribute attr) {
  return verifyZeroAttribute(op, attr,
                             ("result " + Twine(result) + " attribute ").str());
}

/// Checks `world` and that `in` and `out` are 1-D of one element type with
/// out = in * numerator / denominator elements.
static LogicalResult verifyFlatRatio(Operation *op, Type in, Type out,
                                     int64_t world, int64_t num, int64_t den) {
  if (world < 1)
    return op->emitOpError() << "world must be >= 1, got " << world;
  auto it = cast<RankedTensorType>(in), ot = cast<RankedTensorType>(out);
  if (it.getElementType() != ot.getElementType())
    return op->emitOpError() << "input and result element types differ";
  if (num == den)
    return it.getShape() == ot.getShape()
               ? success()
               : op->emitOpError() << "result shape must equal the input shape";
  if (it.getRank() != 1 || ot.getRank() != 1)
    return op->emitOpError() << "operates on flat (1-D) tensors";
  if (it.getNumElements() * num != ot.getNumElements() * den)
    return op->emitOpError() << "expects " << it.getNumElements() * num / den
                             << " result elements for " << it.getNumElements()
                             << " input elements and world " << world << ", got "
                             << ot.getNumElements();
  return success();
}

/// With `group`, the named zero.process_group exists and `world` is its
/// group size.
static LogicalResult verifyGroup(Operation *op, FlatSymbolRefAttr group,
                                 int64_t world) {
  if (!group)
    return success();
  auto pg = SymbolTable::lookupNearestSymbolFrom<ProcessGroupOp>(op, group);
  if (!pg)
    return op->emitOpError() << "names " << group
                             << ", which is not a zero.process_group";
  if (int64_t(pg.getGroupSize()) != world)
    return op->emitOpError() << "has world " << world << " but " << group
                             << " has groups of " << pg.getGroupSize();
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyGroup(*this, getGroupAttr(), getWorld())))
    return failure();
  return verifyFlatRatio(*this, getShard().getType(), getType(), getWorld(),
                         getWorld(), 1);
}

LogicalResult AllToAllOp::verify() {
  if (failed(verifyGroup(*this, getGroupAttr(), getWorld())))
    return failure();
  if (failed(verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1, 1)))
    return failure();
  if (getInput().getType().getNumElements() % getWorld() != 0)
    return emitOpError() << getInput().getType().getNumElements()
                         << " elements do not split into " << getWorld() << " blocks";
  return success();
}

LogicalResult ProcessGroupOp::verify() {
  ArrayRef<int64_t> ranks = getRanks();
  int64_t k = getGroupSize();
  if (k < 1 || ranks.empty() || int64_t(ranks.size()) % k != 0)
    return emitOpError() << "group_size " << k << " must be >= 1 and divide the "
                         << ranks.size() << " ranks listed";
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t r : ranks)
    if (r < 0 || !seen.insert(r).second)
      return emitOpError() << "lists rank " << r
                           << (r < 0 ? ", which is negative" : " twice");
  return success();
}

std::optional<int64_t> ProcessGroupOp::positionStride() {
  ArrayRef<int64_t> ranks = getRanks();
  int64_t k = getGroupSize();
  for (int64_t stride = 1; stride <= int64_t(ranks.size()); ++stride) {
    bool ok = true;
    for (size_t i = 0; i < ranks.size() && ok; ++i)
      ok = (ranks[i] / stride) % k == int64_t(i) % k;
    if (ok)
      return stride;
  }
  return std::nullopt;
}

LogicalResult BucketAllGatherOp::verify() {
  if (failed(verifyGroup(*this, getGroupAttr(), getWorld())))
    return failure();
  if (getShards().size() != getResults().size() || getShards().empty())
    return emitOpError() << "needs one result per shard and at least one shard";
  for (auto [s, r] : llvm::zip(getShards(), getResults()))
    if (failed(verifyFlatRatio(*this, s.getType(), r.getType(), getWorld(),
                               getWorld(), 1)))
      return failure();
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyGroup(*this, getGroupAttr(), getWorld())))
    return failure();
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1,
                         getWorld());
}

LogicalResult LocalShardOp::verify() {
  if (failed(verifyGroup(*this, getGroupAttr(), getWorld())))
    return failure();
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1,
                         getWorld());
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyGroup(*this, getGroupAttr(), getWorld())))
    return failure();
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1, 1);
}

LogicalResult BroadcastOp::verify() {
  if (getRoot() < 0 || getRoot() >= getWorld())
    return emitOpError() << "root " << getRoot() << " is not a rank of a world of "
                         << getWorld();
  return verifyFlatRatio(*this, getInput().getType(), getType(), getWorld(), 1, 1);
}

std::pair<int64_t, int64_t> DequantizeOp::quantizedSizes(int64_t n, int64_t bits,
                                                        int64_t block,
                                                        int64_t chunks) {
  int64_t m = n / chunks;
  int64_t bytes = bits == 4 ? (m + 1) / 2 : m;
  return {chunks * bytes, chunks * ((m + block - 1) / block)};
}

/// The attributes and the three sizes of a quantize / dequantize pair.
static LogicalResult verifyQuantized(Operation *op, RankedTensorType full,
                                     RankedTensorType data, RankedTensorType scales,
                                     int64_t bits, int64_t block, int64_t chunks) {
  if (bits != 8 && bits != 4)
    return op->emitOpError() << "bits must be 8 or 4, got " << bits;
  if (block < 1 || chunks < 1)
    return op->emitOpError() << "block and chunks must be >= 1";
  if (!full.getElementType().isF32() || !scales.getElementType().isF32() ||
      !data.getElementType().isInteger(8))
    return op->emitOpError() << "works on f32 values, i8 data and f32 scales";
  if (full.getRank() != 1 || data.getRank() != 1 || scales.getRank() != 1)
    return op->emitOpError() << "operates on flat (1-D) tensors";
  int64_t n = full.getNumElements();
  if (n % chunks != 0)
    return op->emitOpError() << n << " elements do not split into " << chunks
                             << " chunks";
  auto [bytes, numScales] = DequantizeOp::quantizedSizes(n, bits, block, chunks);
  if (data.getNumElements() != bytes || scales.getNumElements() != numScales)
    return op->emitOpError() << "expects " << bytes << " bytes of data and "
                             << numScales << " scales for " << n << " elements ("
                             << bits << " bits, block " << block << ", " << chunks
                             << " chunks), got " << data.getNumElements() << " and "
                             << scales.getNumElements();
  return success();
}

LogicalResult QuantizeOp::verify() {
  return verifyQuantized(*this, getInput().getType(), getData().getType(),
                         getScales().getType(), getBits(), getBlock(), getChunks());
}

LogicalResult DequantizeOp::verify() {
  return verifyQuantized(*this, getType(), getData().getType(), getScales().getType(),
                         getBits(), getBlock(), getChunks());
}

/// `v` is a scalar (rank 0) tensor of element type `elem`.
static bool isScalarOf(Value v, Type elem) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() == 0 && t.getElementType() == elem;
}

/// The operands every optimizer update shares: parameter and gradient of one
/// f32 type, i64 step, f32 lr and grad_scale scalars; state and results of
/// the parameter's type.
static LogicalResult verifyUpdate(Operation *op, Value param, Value grad, Value step,
                                  Value lr, Value scale, ValueRange state,
                                  ValueRange results) {
  MLIRContext *ctx = op->getContext();
  Type f32 = Float32Type::get(ctx);
  Type pt = param.getType();
  if (cast<RankedTensorType>(pt).getElementType() != f32)
    return op->emitOpError() << "updates f32 parameters, got " << pt;
  if (grad.getType() != pt)
    return op->emitOpError() << "gradient type " << grad.getType()
                             << " differs from the parameter type " << pt;
  if (!isScalarOf(step, IntegerType::get(ctx, 64)))
    return op->emitOpError() << "step must be an i64 scalar, got " << step.getType();
  if (!isScalarOf(lr, f32) || !isScalarOf(scale, f32))
    return op->emitOpError() << "lr and grad_scale must be f32 scalars";
  for (Value v : state)
    if (v.getType() != pt)
      return op->emitOpError() << "optimizer state type " << v.getType()
                               << " differs from the parameter type " << pt;
  for (Value v : results)
    if (v.getType() != pt)
      return op->emitOpError() << "result type " << v.getType()
                               << " differs from the parameter type " << pt;
  return success();
}

LogicalResult AdamWOp::verify() {
  if (getBeta1().convertToDouble() < 0 || getBeta1().convertToDouble() >= 1 ||
      getBeta2().convertToDouble() < 0 || getBeta2().convertToDouble() >= 1)
    return emitOpError() << "betas must be in [0, 1)";
  if (getEps().convertToDouble() < 0 || getWeightDecay().convertToDouble() < 0)
    return emitOpError() << "eps and weight_decay must be >= 0";
  return verifyUpdate(*this, getParam(), getGrad(), getStep(), getLr(), getGradScale(),
                      {getExpAvg(), getExpAvgSq()}, getResults());
}

LogicalResult SGDOp::verify() {
  bool momentum = getMomentum().convertToDouble() != 0;
  if (momentum != bool(getMomentumBuffer()) || momentum != bool(getMomentumBufferOut()))
    return emitOpError() << "has a momentum buffer operand and result exactly when "
                            "momentum is non-zero";
  if (getNesterov() && (!momentum || getDampening().convertToDouble() != 0))
    return emitOpError() << "nesterov needs momentum and zero dampening";
  SmallVector<Value> state;
  if (getMomentumBuffer())
    state.push_back(getMomentumBuffer());
  return verifyUpdate(*this, getParam(), getGrad(), getStep(), getLr(), getGradScale(),
                      state, getResults());
}

LogicalResult LrScheduleOp::verify() {
  StringRef type = getSchedule();
  if (type != "constant" && type != "WarmupLR" && type != "WarmupDecayLR" &&
      type != "WarmupCosineLR" && type != "OneCycle" && type != "LRRangeTest")
    return emitOpError() << "unknown schedule '" << type
                         << "' (constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, "
                            "LRRangeTest)";
  if (!isScalarOf(getStep(), IntegerType::get(getContext(), 64)) ||
      !isScalarOf(getLr(), Float32Type::get(getContext())))
    return emitOpError() << "maps an i64 scalar step to an f32 scalar rate";
  return success();
}

#define GET_OP_CLASSES
#include "zero/Dialect/Zero/ZeroOps.cpp.inc"
