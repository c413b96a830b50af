//===- Report.cpp - Per-rank memory and communication of a ZeRO plan ------===//
//
// zero-report: reads the partitioned program and prints, per rank, the bytes
// of parameter shards, persistent parameters, their sum, the peak of gathered
// parameters live at once, and the communication of one forward by collective,
// each next to the ZeRO paper's closed form (shards Psi/N, all-gather traffic
// Psi(N-1)/N). Padding to a multiple of N is why plan and formula can differ
// by a few elements.
//
//===----------------------------------------------------------------------===//

#include "zero/Transforms/Analysis/GatherPlan.h"
#include "zero/Transforms/Analysis/Layers.h"

#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Transforms/Passes.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

#include <map>
#include <set>

#define DEBUG_TYPE "zero-report"

namespace zero {
#define GEN_PASS_DEF_ZEROREPORTPASS
#include "zero/Transforms/Passes.h.inc"
} // namespace zero

using namespace mlir;
namespace attrs = ::zero::attrs;

/// Bytes a gather over groups of g (its `world`, else `world`) sends per
/// rank: (g-1)/g of what the group ends up holding.
static int64_t gatherSentBytes(Operation *gather, int64_t world) {
  auto w = gather->getAttrOfType<IntegerAttr>("world");
  const int64_t g = w ? w.getInt() : world;
  return ::zero::gatheredBytes(gather) / g * (g - 1);
}

/// The all-gathers that bring parameters in, as they go over the wire:
/// fp32 shards, or with qwZ the quantized data and scales (not the
/// zero.dequantize after them, which isGather names for the passes).
static bool movesParameter(Operation &op) {
  if (isa<::zero::dist::DequantizeOp>(op))
    return false;
  return ::zero::isGather(&op) || ::zero::isQuantizedShardGather(&op);
}

/// The report's name for a collective that moves bytes, by what it moves;
/// none for other ops (a zero.dequantize is compute, though isGather names
/// it for the passes).
static std::optional<std::string> collectiveKind(Operation &op) {
  namespace dist = ::zero::dist;
  if (isa<dist::DequantizeOp>(op))
    return std::nullopt;
  if (::zero::isGather(&op))
    return !::zero::overDataParallelWorld(&op) ? "all_gather (hpZ, in group)"
           : isa<dist::BucketAllGatherOp>(op)  ? "all_gather (bucketed)"
                                               : "all_gather";
  if (::zero::isQuantizedShardGather(&op))
    return "all_gather (qwZ data + scales)";
  if (isa<dist::AllGatherOp, dist::BucketAllGatherOp>(op))
    return "all_gather (updates)"; // a computed value: a step's updated shards
  if (auto a = dyn_cast<dist::AllToAllOp>(op))
    return a.getGroupAttr()
               ? "all_to_all (qgZ, " + a.getGroupAttr().getValue().str() + ")"
               : std::string("all_to_all (qgZ)");
  if (isa<dist::ReduceScatterOp, dist::AllReduceOp, dist::BroadcastOp>(op))
    return op.getName().stripDialect().str();
  if (isa<dist::SendOp>(op))
    return "send (between pipeline stages)";
  return std::nullopt;
}

namespace {

/// The parameter bytes the closed forms are written in, summed over the
/// module's globals.
struct ParameterBytes {
  int64_t tensors = 0, elements = 0;
  /// Psi: every parameter, at its full (unsharded) size.
  int64_t total = 0;
  /// Psi_s: the sharded parameters at full size; `shards`, a rank's part.
  int64_t sharded = 0, shards = 0;
  /// The parameters every rank holds whole.
  int64_t persistent = 0;
  // Training: trained parameters (their gradients are as large), frozen
  // ones, optimizer state and the step counter.
  int64_t trained = 0, state = 0;

  /// Sums the globals of `module`.
  static ParameterBytes of(ModuleOp module) {
    ParameterBytes p;
    for (auto g : module.getOps<ml_program::GlobalOp>()) {
      if (attrs::kRole.isSetOn(g)) {
        p.state += ::zero::tensorBytes(g.getType());
        continue;
      }
      Type full = g.getType();
      if (auto f = attrs::kFullType.get(g))
        full = f.getValue();
      int64_t bytes = ::zero::tensorBytes(full);
      if (attrs::kTrainable.isSetOn(g))
        p.trained += bytes;
      ++p.tensors;
      p.elements += cast<RankedTensorType>(full).getNumElements();
      p.total += bytes;
      if (attrs::kShard.isSetOn(g)) {
        p.sharded += bytes;
        p.shards += ::zero::tensorBytes(g.getType());
      } else {
        p.persistent += bytes;
      }
    }
    return p;
  }
};

/// The collectives of one forward (a training step's, with its gradients'),
/// by kind, and the peak of gathered bytes live at once (from the same
/// liveness analysis the prefetch budget and the lowering use).
struct CommunicationTally {
  int64_t world;
  std::map<std::string, std::pair<int64_t, int64_t>> sent; // count, bytes
  int64_t peak = 0;
  int64_t gradShardBytes = 0; // a training step's reduce-scattered gradients
  int64_t quantBits = 0, quantBlock = 0; // qwZ's format, when it ran
  int64_t secondaryBytes = 0;            // hpZ's secondary shards
  int64_t qgzFallbacks = 0;

  /// Tallies every function of `module`.
  static CommunicationTally of(ModuleOp module, int64_t world) {
    CommunicationTally tally{world};
    module.walk([&](func::FuncOp func) {
      if (func.getBody().empty())
        return;
      tally.peak =
          std::max(tally.peak, ::zero::GatherLiveness(func.getBody().front()).peakBytes());
      for (Operation &op : func.getBody().front())
        tally.count(op);
    });
    return tally;
  }

  /// One more collective of `kind` that sends `bytes` per rank.
  void record(const std::string &kind, int64_t bytes) {
    auto &entry = sent[kind];
    entry.first += 1;
    entry.second += bytes;
  }

  /// Tallies one op. A collective over groups of g sends per rank (g-1)/g
  /// of what the group ends up holding (a gather's result, an all-to-all's
  /// input).
  void count(Operation &op) {
    if (auto dq = dyn_cast<::zero::dist::DequantizeOp>(op)) {
      // qwZ: the bytes moved are the quantized data and scales' gathers.
      if (::zero::isGather(&op) && quantBits == 0) {
        quantBits = dq.getBits();
        quantBlock = dq.getBlock();
        LLVM_DEBUG(llvm::dbgs() << "zero-report: qwZ gathers int" << quantBits << ", block "
                                << quantBlock << "\n");
      }
      return;
    }
    if (auto sec = dyn_cast<::zero::dist::LocalShardOp>(op); sec && sec.getGroupAttr()) {
      secondaryBytes += ::zero::tensorBytes(sec.getType());
      return;
    }
    if (attrs::kQgzFallback.isSetOn(&op))
      ++qgzFallbacks;
    std::optional<std::string> kind = collectiveKind(op);
    if (!kind || isa<::zero::dist::SendOp>(op))
      return; // sends: the pipeline's report
    int64_t bytes;
    if (isa<::zero::dist::AllGatherOp, ::zero::dist::BucketAllGatherOp>(op)) {
      bytes = gatherSentBytes(&op, world);
    } else if (auto a = dyn_cast<::zero::dist::AllToAllOp>(op)) {
      bytes =
          ::zero::tensorBytes(a.getType()) / a.getWorld() * (a.getWorld() - 1);
    } else {
      // Ring volumes, as the runtime counts them: a reduce-scatter sends
      // (N-1)/N of its input, an all-reduce twice that.
      bytes = ::zero::tensorBytes(op.getOperand(0).getType());
      if (isa<::zero::dist::ReduceScatterOp>(op)) {
        bytes = bytes / world * (world - 1);
        gradShardBytes += ::zero::tensorBytes(op.getResult(0).getType());
      } else if (isa<::zero::dist::AllReduceOp>(op)) {
        bytes = 2 * (world - 1) * bytes / world;
      }
    }
    record(*kind, bytes);
  }
};

} // namespace

/// The layers a pipeline split works with (Layers.h) and, after
/// zero-pipeline-split, which stage holds which.
static void printLayers(ModuleOp module, raw_ostream &os) {
  auto plan = attrs::kPipelinePlan.get(module);
  auto funcs = module.getOps<func::FuncOp>();
  ::zero::LayerStructure ls;
  bool fromPlan = false;
  if (plan) {
    // Already cut (the ops live in one function per stage): the plan names
    // the layers it cut between.
    // The plan's verifier holds the lists to one length.
    ArrayAttr classes = plan.getLayerClasses();
    for (auto [i, name] : llvm::enumerate(plan.getLayers())) {
      ::zero::Layer l;
      l.name = cast<StringAttr>(name).getValue().str();
      l.params = plan.getLayerParams()[i];
      if (classes)
        l.cls = cast<StringAttr>(classes[i]).getValue().str();
      ls.layers.push_back(std::move(l));
    }
    ls.segments = llvm::all_of(ls.layers, [](const ::zero::Layer &l) {
      return StringRef(l.name).starts_with("segment.");
    });
    fromPlan = true;
  } else if (!funcs.empty() && std::next(funcs.begin()) == funcs.end()) {
    ls = ::zero::recoverLayers(*funcs.begin());
  }
  if (ls.layers.empty())
    return;
  ArrayRef<int64_t> parts;
  if (plan)
    parts = plan.getParts().asArrayRef();
  os << (ls.segments ? "layers (no module paths: segments between single-activation cut "
                       "points): "
                     : "layers (from the exporter's module paths): ")
     << ls.layers.size() << "\n";
  int64_t stage = -1;
  for (auto [i, l] : llvm::enumerate(ls.layers)) {
    while (stage + 1 < int64_t(parts.size()) - 1 && int64_t(i) >= parts[size_t(stage) + 1]) {
      ++stage;
      int64_t params = 0;
      for (int64_t k = parts[size_t(stage)]; k < parts[size_t(stage) + 1]; ++k)
        params += ls.layers[size_t(k)].params;
      os << "  stage " << stage << " (" << plan.getPartition() << "): layers "
         << parts[size_t(stage)] << "-" << parts[size_t(stage) + 1] - 1 << ", "
         << params << " parameters\n";
    }
    os << llvm::format("  %4zu  %-36s %-22s %12lld parameters", i, l.name.c_str(),
                       l.cls.empty() ? "-" : l.cls.c_str(), (long long)l.params);
    if (!fromPlan)
      os << ", " << l.ops.size() << " ops";
    os << "\n";
  }
}

/// After zero-pipeline-split: per stage (per rank of its dp replicas) the
/// parameter bytes it holds (a tied weight on every stage that reads it; a
/// shard of each sharded one), what it sends per forward, with replicas the
/// peak of gathered bytes and what its gathers send, and the schedule's
/// bubble.
static void printPipeline(ModuleOp module, raw_ostream &os) {
  auto plan = attrs::kPipelinePlan.get(module);
  const int64_t stages = plan.getStages(), micro = plan.getMicroBatches();
  std::vector<llvm::StringSet<>> loaded{size_t(stages)};
  std::vector<int64_t> paramBytes(size_t(stages), 0), sendBytes(size_t(stages), 0),
      sends(size_t(stages), 0), gatherPeak(size_t(stages), 0), gatherSent(size_t(stages), 0);
  const int64_t dp = plan.getDp();
  // With replicas (dp > 1), each stage's rank holds its shards and gathers
  // the rest over the stage's replicas: the peak of gathered bytes live at
  // once in the stage's order of work, and the bytes its gathers send.
  for (auto f : module.getOps<func::FuncOp>()) {
    auto st = attrs::kPipelineStage.get(f);
    if (!st || st.getInt() < 0 || st.getInt() >= stages || f.getBody().empty())
      continue;
    Block &body = f.getBody().front();
    gatherPeak[size_t(st.getInt())] = ::zero::GatherLiveness(body).peakBytes();
    for (Operation &op : body)
      if (movesParameter(op))
        gatherSent[size_t(st.getInt())] += gatherSentBytes(&op, dp);
  }
  module.walk([&](Operation *op) {
    std::optional<int64_t> st = ::zero::pipelineStageOf(op);
    if (!st || *st < 0 || *st >= stages)
      return;
    size_t s = size_t(*st);
    if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op)) {
      if (loaded[s].insert(load.getGlobal().getLeafReference()).second)
        paramBytes[s] += ::zero::tensorBytes(load.getType());
    } else if (isa<::zero::dist::SendOp>(op)) {
      sends[s] += 1;
      sendBytes[s] += ::zero::tensorBytes(op->getOperand(0).getType());
    }
  });
  // A training step: its schedule (the bubble is the same for both).
  StringRef schedule = plan.getSchedule();
  const bool training = schedule == "gpipe" || schedule == "1f1b";
  StringRef per = training ? "step" : "forward";
  os << "== zero-report: pipeline, " << stages << " stages x " << dp << " rank"
     << (dp == 1 ? "" : "s") << ", " << micro << " micro-batch" << (micro == 1 ? "" : "es")
     << " per " << per << " ==\n";
  os << llvm::format("%s bubble (S-1)/(M+S-1): %.3f\n",
                     training ? schedule.str().c_str() : "fill/drain",
                     double(stages - 1) / double(micro + stages - 1));
  os << "per stage" << (dp > 1 ? ", per rank" : "          ") << "       "
     << (training ? "params+state" : "  parameters") << " (bytes)   sent per " << per
     << " (bytes, sends)" << (dp > 1 ? "   peak gathered   all_gather sent (bytes)" : "")
     << "\n";
  for (int64_t s = 0; s < stages; ++s) {
    os << llvm::format("  stage %-3lld               %14lld   %14lld %6lld", (long long)s,
                       (long long)paramBytes[size_t(s)], (long long)sendBytes[size_t(s)],
                       (long long)sends[size_t(s)]);
    if (dp > 1)
      os << llvm::format("   %14lld   %14lld", (long long)gatherPeak[size_t(s)],
                         (long long)gatherSent[size_t(s)]);
    os << "\n";
  }
  if (training) {
    os << "order of work per stage (F: forward, B: backward of micro-batch k)\n";
    for (int64_t s = 0; s < stages; ++s) {
      os << "  stage " << s << ":";
      for (const ::zero::PipelineStep &step :
           ::zero::pipelineSchedule(schedule, stages, s, micro))
        os << " " << (step.forward ? "F" : "B") << step.micro;
      os << "\n";
    }
  }
  printLayers(module, os);
}

namespace {

/// The report of a program not cut into pipeline stages: per rank of its
/// `world`, the plan's bytes next to the ZeRO paper's closed forms.
struct DataParallelReport {
  ModuleOp module;
  raw_ostream &os;
  int64_t world, stage;
  ParameterBytes params;
  CommunicationTally comm;

  void print() {
    printParameters();
    printCommunication();
    if (auto training = attrs::kTraining.get(module))
      printTrainingStep(training);
    printLayers(module, os);
  }

  /// One line of the table: what, the plan's bytes, and (when `formula` is
  /// not empty) the closed form and its value.
  void row(StringRef what, int64_t plan, StringRef formula, int64_t closed) {
    os << llvm::format("  %-34s %14lld", what.str().c_str(), (long long)plan);
    if (!formula.empty())
      os << llvm::format("   %-22s %14lld", formula.str().c_str(), (long long)closed);
    os << "\n";
  }

  /// The parameters, and what a rank holds of them.
  void printParameters() {
    os << "== zero-report: stage " << stage << ", dp = " << world << " ==\n";
    os << "parameters: " << params.tensors << " tensors, " << params.elements
       << " elements, " << params.total << " bytes (Psi); sharded " << params.sharded
       << " bytes (Psi_s), persistent " << params.persistent << " bytes\n";
    os << "per rank                                       plan   closed form\n";
    row("parameter shards (bytes)", params.shards, "Psi_s/N", params.sharded / world);
    row("persistent parameters (bytes)", params.persistent, "", 0);
    row("resident parameters (bytes)", params.shards + params.persistent,
        "Psi_s/N + persistent", params.sharded / world + params.persistent);
    row("peak gathered parameters (bytes)", comm.peak, "", 0);
  }

  /// Each collective's bytes, and the all-gathers' total against Psi_s(N-1)/N
  /// (or qwZ's quantized form of it).
  void printCommunication() {
    os << "communication per forward, per rank (bytes sent)\n";
    int64_t gatherSent = 0;
    for (auto &[kind, entry] : comm.sent) {
      row((kind + " x" + std::to_string(entry.first)).c_str(), entry.second, "", 0);
      if (kind.rfind("all_gather", 0) == 0)
        gatherSent += entry.second;
    }
    if (comm.quantBits == 0) {
      row("all_gather total", gatherSent, "Psi_s(N-1)/N",
          params.sharded * (world - 1) / world);
    } else {
      row("all_gather total", gatherSent,
          ("qwZ int" + std::to_string(comm.quantBits) + ", block " +
           std::to_string(comm.quantBlock)).c_str(),
          quantizedGatherBytes());
      row("  fp32 all_gather would send", params.sharded * (world - 1) / world, "", 0);
    }
    if (comm.secondaryBytes > 0)
      row("hpZ secondary shards (bytes)", comm.secondaryBytes, "", 0);
    if (comm.qgzFallbacks > 0)
      os << "  qgZ: " << comm.qgzFallbacks
         << " reduce-scatter(s) kept plain (not fp32 over the world)\n";
  }

  /// qwZ's closed form: per sharded parameter of s elements per rank, (N-1)
  /// x (its quantized bytes + 4 per block); about bits/32 of the fp32 gather.
  int64_t quantizedGatherBytes() {
    int64_t closed = 0;
    for (auto g : module.getOps<ml_program::GlobalOp>())
      if (attrs::kShard.isSetOn(g) && !attrs::kRole.isSetOn(g)) {
        int64_t s = cast<RankedTensorType>(g.getType()).getNumElements();
        auto [bytes, scales] =
            ::zero::dist::DequantizeOp::quantizedSizes(s, comm.quantBits, comm.quantBlock, 1);
        closed += (world - 1) * (bytes + 4 * scales);
      }
    return closed;
  }

  /// A training step's memory per rank (parameters, gradients, optimizer
  /// state) and, over several ranks, its communication.
  void printTrainingStep(::zero::dist::TrainingAttr training) {
    StringRef optimizer = training.getOptimizer();
    StringRef kind = optimizer.split(' ').first;
    bool adam = kind.starts_with("adam"), momentum = false;
    if (kind == "sgd")
      momentum = !optimizer.contains("momentum=0.000000e+00");
    int64_t psi = params.trained; // fp32: 4 bytes per trained element
    os << "training step (" << optimizer << ", "
       << "accumulation " << training.getAccumulationSteps()
       << "), per rank; Psi_t = trained parameter bytes\n";
    // Stages 1 and 2 over N ranks keep the gradient and state of a 1/N
    // shard (the ZeRO paper's 4 Psi + 12 Psi / N for fp32 Adam; padding
    // to a multiple of N is why the plan can exceed it by a few bytes).
    const bool sharded = world > 1 && stage > 0;
    const int64_t part = sharded ? world : 1;
    std::string perN = sharded ? " / N" : "";
    row("trained parameters (bytes)", params.trained, "Psi_t", psi);
    row("frozen parameters (bytes)", params.total - params.trained, "", 0);
    row("gradients (bytes)", sharded ? comm.gradShardBytes : params.trained, "Psi_t" + perN,
        psi / part);
    row("optimizer state + counter (bytes)", params.state,
        adam ? "2 Psi_t" + perN + " + 8" : (momentum ? "Psi_t" + perN + " + 8" : "8"),
        (adam ? 2 * psi / part : momentum ? psi / part : 0) + 8);
    // Stage 3 holds parameter shards (and the persistent ones whole).
    const bool stage3 = sharded && stage == 3;
    int64_t heldParams = stage3 ? params.shards + params.persistent : params.total;
    int64_t model =
        heldParams + (sharded ? comm.gradShardBytes : params.trained) + params.state;
    if (stage3)
      row("parameters + gradients + state", model,
          adam ? "4 Psi_t / N + 8 + persistent" : "",
          adam ? 4 * psi / world + 8 + params.persistent : 0);
    else
      row("parameters + gradients + state", model,
          adam ? (sharded ? "Psi_t + 3 Psi_t / N + 8 + frozen"
                          : "4 Psi_t (16 B/param) + 8 + frozen")
               : "",
          adam ? psi + 3 * psi / part + 8 + params.total - params.trained : 0);
    if (world > 1)
      printStepCommunication(sharded, stage3);
    os << "  (activations kept for backward and the gradients' buffers are placed by "
          "the memory plan: zero-run --report shows the activations arena)\n";
  }

  /// Communication of one step (at the accumulation boundary).
  void printStepCommunication(bool sharded, bool stage3) {
    const int64_t psi = params.trained;
    int64_t stepSent = 0;
    for (auto &[kind, entry] : comm.sent)
      stepSent += entry.second;
    // Stage 3 gathers in forward and again in backward: up to 3 Psi.
    int64_t passes = stage3 ? 3 : 2;
    row("communication per step (bytes sent)", stepSent,
        stage3    ? "3 Psi_t (N-1)/N + 8(N-1)/N"
        : sharded ? "2 Psi_t (N-1)/N + 8(N-1)/N"
                  : "2 Psi_t (N-1)/N",
        sharded ? passes * psi / world * (world - 1) + 8 * (world - 1) / world
                : 2 * (world - 1) * psi / world);
  }
};

/// The nodes the program's ranks run on, numbered node by node (as zero-run
/// places them whatever mpirun's --map-by: zrt/Placement.h).
struct NodeLayout {
  std::vector<int64_t> slots;  // ranks per node
  std::vector<int64_t> nodeOf; // by program rank

  /// `spec` is N (the world split evenly over N nodes) or the ranks of each
  /// node, "3,1".
  static FailureOr<NodeLayout> parse(StringRef spec, int64_t world,
                                     ModuleOp module) {
    NodeLayout layout;
    SmallVector<StringRef> parts;
    spec.split(parts, ',');
    for (StringRef p : parts) {
      int64_t n = 0;
      if (p.trim().getAsInteger(10, n) || n < 1)
        return module.emitError()
               << "zero-report: nodes=\"" << spec
               << "\": expected N (nodes) or the ranks of each node "
                  "(3,1), each a positive integer";
      layout.slots.push_back(n);
    }
    if (layout.slots.size() == 1) {
      int64_t n = layout.slots[0];
      if (world % n != 0)
        return module.emitError() << "zero-report: nodes=" << n
                                  << " does not split the program's " << world
                                  << " ranks evenly; give the ranks of each "
                                     "node instead, e.g. 3,1";
      layout.slots.assign(size_t(n), world / n);
    }
    int64_t sum = 0;
    for (int64_t k : layout.slots)
      sum += k;
    if (sum != world)
      return module.emitError()
             << "zero-report: nodes=\"" << spec << "\" places " << sum
             << " ranks; the program runs on " << world;
    for (auto [node, k] : llvm::enumerate(layout.slots))
      layout.nodeOf.insert(layout.nodeOf.end(), size_t(k), int64_t(node));
    return layout;
  }

  std::string describe() const {
    std::string text = std::to_string(slots.size()) + " nodes";
    if (llvm::all_equal(slots))
      return text + " x " + std::to_string(slots[0]) + " ranks";
    text += " of ";
    for (auto [i, k] : llvm::enumerate(slots))
      text += (i ? ", " : "") + std::to_string(k);
    return text + " ranks";
  }
};

/// Position i's bits reversed over log2(size) bits.
static int64_t bitReversed(int64_t i, int64_t size) {
  int64_t r = 0;
  for (int64_t b = 1; b < size; b <<= 1)
    r = (r << 1) | ((i & b) ? 1 : 0);
  return r;
}

/// The bytes a step sends to ranks on other nodes and on the same node,
/// summed over the ranks, per collective: each rank's sends to each peer as
/// zero-run's MPI communicator runs the collective (MpiCommunicator.cpp, whose
/// bytesSentAcrossNodes() counts the same): all-gathers and reduce-scatters
/// over 2^m > 2 ranks by recursive doubling / halving in bit-reversed rank
/// order, a block to each peer over other sizes; all-reduces by recursive
/// doubling (the whole buffer to each partner); a broadcast's root to every
/// rank; an all-to-all's blocks and a stage's sends to their peers. Beside
/// each, the least its data needs across nodes: a gather or reduce-scatter of
/// D bytes over a group on m nodes, D(m-1); an all-reduce 2D(m-1); a
/// broadcast D(m-1); all-to-alls and sends what they address to other nodes.
struct NodeTraffic {
  struct Entry {
    int64_t count = 0, across = 0, inside = 0, least = 0;
  };
  const NodeLayout &layout;
  int64_t world, pipelineDp;
  std::map<std::string, Entry> kinds;
  std::vector<int64_t> acrossOf; // by rank

  static NodeTraffic of(ModuleOp module, const NodeLayout &layout,
                        int64_t world) {
    auto plan = attrs::kPipelinePlan.get(module);
    NodeTraffic t{layout,
                  world,
                  plan ? plan.getDp() : 1,
                  {},
                  std::vector<int64_t>(size_t(world), 0)};
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.getBody().empty())
        continue;
      // Stage s of a pipeline runs on its replicas' ranks [s*dp, (s+1)*dp).
      std::vector<int64_t> ranks;
      if (auto st = attrs::kPipelineStage.get(func))
        for (int64_t d = 0; d < t.pipelineDp; ++d)
          ranks.push_back(st.getInt() * t.pipelineDp + d);
      else
        for (int64_t r = 0; r < world; ++r)
          ranks.push_back(r);
      func.walk([&](Operation *op) {
        if (std::optional<std::string> kind = collectiveKind(*op))
          for (int64_t r : ranks)
            t.count(*op, *kind, r);
      });
    }
    return t;
  }

  /// The world ranks of the group `op` runs over that holds rank `r`, in
  /// group-rank order (empty when none does).
  std::vector<int64_t> groupOf(Operation *op, int64_t r) {
    auto ref = op->getAttrOfType<FlatSymbolRefAttr>("group");
    std::vector<int64_t> members;
    if (!ref) {
      for (int64_t q = 0; q < world; ++q)
        members.push_back(q);
      return members;
    }
    auto group =
        SymbolTable::lookupNearestSymbolFrom<::zero::dist::ProcessGroupOp>(op,
                                                                           ref);
    if (!group)
      return members;
    ArrayRef<int64_t> all = group.getRanks();
    int64_t k =
        group.getGroupSize() > 0 ? group.getGroupSize() : int64_t(all.size());
    auto it = llvm::find(all, r);
    if (it == all.end())
      return members;
    int64_t part = (it - all.begin()) / k;
    members.assign(all.begin() + part * k, all.begin() + (part + 1) * k);
    return members;
  }

  /// Rank `from` sends `bytes` to rank `to`.
  void send(Entry &e, int64_t from, int64_t to, int64_t bytes) {
    if (layout.nodeOf[size_t(from)] != layout.nodeOf[size_t(to)]) {
      e.across += bytes;
      acrossOf[size_t(from)] += bytes;
    } else {
      e.inside += bytes;
    }
  }

  /// Rank `r`'s part of `op`.
  void count(Operation &op, const std::string &kind, int64_t r) {
    namespace dist = ::zero::dist;
    Entry &e = kinds[kind];
    if (auto s = dyn_cast<dist::SendOp>(op)) {
      int64_t peer = int64_t(s.getPeer()) * pipelineDp + r % pipelineDp;
      int64_t bytes = ::zero::tensorBytes(s.getInput().getType());
      ++e.count;
      send(e, r, peer, bytes);
      if (layout.nodeOf[size_t(r)] != layout.nodeOf[size_t(peer)])
        e.least += bytes;
      return;
    }
    std::vector<int64_t> members = groupOf(&op, r);
    const int64_t g = int64_t(members.size());
    if (g == 0)
      return;
    ++e.count;
    const int64_t p = llvm::find(members, r) - members.begin();
    std::set<int64_t> spanned;
    for (int64_t q : members)
      spanned.insert(layout.nodeOf[size_t(q)]);
    const int64_t m = int64_t(spanned.size());
    if (isa<dist::AllGatherOp, dist::BucketAllGatherOp, dist::ReduceScatterOp>(
            op)) {
      const int64_t block = isa<dist::ReduceScatterOp>(op)
                                ? ::zero::tensorBytes(op.getResult(0).getType())
                                : ::zero::gatheredBytes(&op) / g;
      if (p == 0)
        e.least += block * g * (m - 1);
      if (g < 2 || (g & (g - 1)) != 0) {
        for (int64_t q = 0; q < g; ++q)
          if (q != p)
            send(e, r, members[size_t(q)], block);
        return;
      }
      const bool reversed = g > 2;
      const int64_t position = reversed ? bitReversed(p, g) : p;
      for (int64_t d = 1; d < g; d <<= 1) {
        int64_t partner = position ^ d;
        send(e, r,
             members[size_t(reversed ? bitReversed(partner, g) : partner)],
             block * d);
      }
    } else if (isa<dist::AllReduceOp>(op)) {
      const int64_t bytes = ::zero::tensorBytes(op.getResult(0).getType());
      if (p == 0)
        e.least += 2 * bytes * (m - 1);
      for (int64_t d = 1; d < g; d <<= 1)
        if ((p ^ d) < g)
          send(e, r, members[size_t(p ^ d)], bytes);
    } else if (auto b = dyn_cast<dist::BroadcastOp>(op)) {
      const int64_t bytes = ::zero::tensorBytes(b.getType());
      if (p != int64_t(b.getRoot()))
        return;
      e.least += bytes * (m - 1);
      for (int64_t q = 0; q < g; ++q)
        if (q != p)
          send(e, r, members[size_t(q)], bytes);
    } else if (auto a = dyn_cast<dist::AllToAllOp>(op)) {
      const int64_t block = ::zero::tensorBytes(a.getInput().getType()) / g;
      for (int64_t q = 0; q < g; ++q)
        if (q != p) {
          send(e, r, members[size_t(q)], block);
          if (layout.nodeOf[size_t(r)] !=
              layout.nodeOf[size_t(members[size_t(q)])])
            e.least += block;
        }
    }
  }

  void print(raw_ostream &os) {
    os << "== zero-report: across nodes, " << layout.describe()
       << " (ranks numbered node by node, as zero-run places them) ==\n";
    os << "per step, all ranks (bytes sent)          calls   across nodes   "
          "inside nodes"
          "   least across\n";
    Entry total;
    for (auto &[kind, e] : kinds) {
      if (e.count == 0)
        continue;
      os << llvm::format("  %-36s %7lld %14lld %14lld %14lld\n", kind.c_str(),
                         (long long)e.count, (long long)e.across,
                         (long long)e.inside, (long long)e.least);
      total.across += e.across;
      total.inside += e.inside;
      total.least += e.least;
    }
    os << llvm::format("  %-36s %7s %14lld %14lld %14lld\n", "total", "",
                       (long long)total.across, (long long)total.inside,
                       (long long)total.least);
    os << "  across nodes per rank (zero-run --report-json's "
          "bytes_sent_across_nodes / "
          "steps):";
    for (int64_t b : acrossOf)
      os << " " << b;
    os << "\n  (least across: a gather or reduce-scatter of D bytes over a "
          "group on m "
          "nodes D(m-1), an all-reduce 2D(m-1), a broadcast D(m-1); "
          "all-to-alls and "
          "sends what they address to other nodes)\n";
  }
};

struct ZeroReportPass : public ::zero::impl::ZeroReportPassBase<ZeroReportPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string errorMessage;
    std::unique_ptr<llvm::ToolOutputFile> file;
    raw_ostream *os = &llvm::errs();
    if (output != "-") {
      file = openOutputFile(output, &errorMessage);
      if (!file) {
        module.emitError() << "zero-report: " << errorMessage;
        return signalPassFailure();
      }
      os = &file->os();
    }
    // A program cut into pipeline stages holds whole parameters on each
    // stage's rank: its own report.
    if (attrs::kPipelinePlan.isSetOn(module)) {
      LLVM_DEBUG(llvm::dbgs() << "zero-report: a pipeline plan: per-stage report\n");
      printPipeline(module, *os);
    } else {
      const int64_t world = attrs::kWorldSize.getInt(module).value_or(1);
      const int64_t stage = attrs::kStage.getInt(module).value_or(0);
      DataParallelReport{module, *os, world, stage, ParameterBytes::of(module),
                         CommunicationTally::of(module, world)}
          .print();
    }
    if (!nodes.empty()) {
      auto plan = attrs::kPipelinePlan.get(module);
      const int64_t world = plan ? plan.getStages() * plan.getDp()
                                 : attrs::kWorldSize.getInt(module).value_or(1);
      FailureOr<NodeLayout> layout = NodeLayout::parse(nodes, world, module);
      if (failed(layout))
        return signalPassFailure();
      NodeTraffic::of(module, *layout, world).print(*os);
    }
    if (file)
      file->keep();
  }
};

} // namespace
