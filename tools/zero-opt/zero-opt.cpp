//===- zero-opt.cpp - The zero compiler driver ----------------------------===//
//
// The one user-facing compiler tool, mlir-opt style: it reads `.mlir`, or an
// ONNX model (`.onnx`, `.onnxtext`) which it imports first, runs the requested
// passes, and writes MLIR. Outputs are written only when everything succeeded:
// a failed run leaves no partial file behind.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

#include "zero/Dialect/ONNX/ONNXDialect.h"
#include "zero/Dialect/ZRT/ZRTDialect.h"
#include "zero/Dialect/Zero/ZeroAttributes.h"
#include "zero/Dialect/Zero/ZeroDialect.h"
#include "zero/Import/ONNXImporter.h"
#include "zero/Support/OutputFile.h"
#include "zero/Target/ZRTSerialization.h"
#include "zero/Pipelines/DeepSpeedConfig.h"
#include "zero/Pipelines/Pipelines.h"
#include "zero/Transforms/Passes.h"

#include "Plan.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

using namespace mlir;
namespace cl = llvm::cl;

/// zero-opt's own options, listed first by --help.
static cl::OptionCategory toolCategory("zero-opt options");

static cl::opt<std::string>
    inputFilename(cl::Positional, cl::desc("<input .mlir/.onnx/.onnxtext>"),
                  cl::init("-"), cl::cat(toolCategory));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("filename"),
                                           cl::init("-"),
                                           cl::cat(toolCategory));
static cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("Fix a graph input's shape: NAME=D0xD1x... (repeatable)"),
    cl::value_desc("name=2x8"), cl::cat(toolCategory));
static cl::opt<std::string>
    weightsOut("weights-out",
               cl::desc("Where to write the imported weights (safetensors); "
                        "default: next to -o, with extension .safetensors"),
               cl::value_desc("file"), cl::cat(toolCategory));
static cl::opt<bool> noWeights(
    "no-weights",
    cl::desc(
        "Compile without reading the parameters' bytes (their external-data "
        "files may be absent) and write no weights: a program for zero-run "
        "--simulate, not for running"),
    cl::cat(toolCategory));
static cl::opt<std::string>
    functionName("function-name", cl::desc("Name of the imported function"),
                 cl::init("forward"), cl::cat(toolCategory));
static cl::opt<bool>
    printSummary("summary",
                 cl::desc("Print a summary of the imported model (ops by type, "
                          "parameters and bytes, weights file)"),
                 cl::cat(toolCategory));
enum class EmitKind { MLIR, ZRT };
static cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to write"), cl::init(EmitKind::MLIR),
    cl::values(clEnumValN(EmitKind::MLIR, "mlir", "MLIR text (default)"),
               clEnumValN(EmitKind::ZRT, "zrt",
                          "the .zrt runtime program (lowers to zrt first)")),
    cl::cat(toolCategory));
static cl::opt<bool> noFuse(
    "no-fuse",
    cl::desc(
        "With --emit=zrt: keep one kernel per elementwise op (no "
        "FusedElementwise; zero-lower-to-runtime's fuse-elementwise=false)"),
    cl::cat(toolCategory));
static cl::opt<std::string> deepspeedConfig(
    "config",
    cl::desc("DeepSpeed-style JSON config (zero_optimization.*, batch sizes); "
             "shorthand for --zero-pipeline=\"config=FILE ...\""),
    cl::value_desc("ds_config.json"), cl::cat(toolCategory));
static cl::opt<bool> zeroReport(
    "report",
    cl::desc("Print the per-rank memory/communication plan (zero-report)"),
    cl::cat(toolCategory));
static cl::opt<std::string> reportNodes(
    "nodes",
    cl::desc(
        "With --report: the nodes the ranks run on, N (the world split "
        "evenly) or the ranks of each node (3,1); the report adds the bytes "
        "per step crossing nodes and staying inside, per collective"),
    cl::value_desc("N|k0,k1,..."), cl::cat(toolCategory));
static int64_t planNodesValue = 0;
static cl::opt<std::string> planMode(
    "plan",
    cl::desc(
        "auto: compile and simulate the layouts zero-opt can build for the "
        "model on --machine (ZeRO stage, pipeline stages, micro-batch, "
        "checkpointing, offload, ZeRO++ across nodes) and write the fastest "
        "that fits to --plan-out"),
    cl::value_desc("auto"), cl::cat(toolCategory));
static cl::opt<std::string> planMachine(
    "machine",
    cl::desc("With --plan: the machine description (JSON, machines/*.json)"),
    cl::value_desc("machine.json"), cl::cat(toolCategory));
static cl::opt<int64_t> planWorld("world",
                                  cl::desc("With --plan: the ranks (devices)"),
                                  cl::init(0), cl::cat(toolCategory));
static cl::opt<int64_t> planGlobalBatch(
    "global-batch",
    cl::desc("With --plan: the global batch (train_batch_size)"), cl::init(0),
    cl::cat(toolCategory));
static cl::opt<std::string> planOut(
    "plan-out",
    cl::desc("With --plan: where to write ds_config.json, zero-pipeline.txt, "
             "plan.txt and each layout tried (layouts/)"),
    cl::value_desc("dir"), cl::cat(toolCategory));
static cl::opt<bool> planExact(
    "plan-exact",
    cl::desc("With --plan: compile and simulate every layout whole, never on "
             "proxies of fewer blocks and micro-batches (docs/simulate.md)"),
    cl::init(false), cl::cat(toolCategory));
static cl::opt<unsigned> planJobs(
    "plan-jobs",
    cl::desc("With --plan: layouts compiled and simulated at once (default: "
             "the hardware threads)"),
    cl::init(0), cl::cat(toolCategory));
static cl::opt<std::string> planMemory(
    "max-memory-per-rank",
    cl::desc(
        "With --plan: the memory a rank may use (bytes, or with a KiB, MiB or "
        "GiB suffix); default: the machine's device memory"),
    cl::value_desc("size"), cl::cat(toolCategory));
static cl::opt<std::string> estimateMemory(
    "estimate-memory",
    cl::desc("Print the ZeRO paper's per-rank model-state memory and "
             "communication for each stage: \"params=7.5e9 dp=64 "
             "precision=mixed|bf16|fp16|fp32\"; on an ONNX model with --train, "
             "without params=, of the parameters its step trains (nothing is written)"),
    cl::value_desc("spec"), cl::cat(toolCategory));
static cl::opt<bool>
    train("train",
          cl::desc("Compile the training step (zero-autodiff, zero-optimizer) "
                   "instead of the forward program"),
          cl::cat(toolCategory));
static cl::opt<std::string> lossSpec(
    "loss",
    cl::desc("With --train on a logits model: KIND:LABELS[@OUTPUT], KIND "
             "cross-entropy or causal-lm (shifts labels by one token)"),
    cl::value_desc("cross-entropy:labels"), cl::cat(toolCategory));
static cl::opt<std::string> optimizerSpec(
    "optimizer",
    cl::desc(
        "With --train: \"adamw|adam|sgd key=value ...\" (lr, betas=B1,B2, eps, "
        "weight-decay, momentum, dampening, nesterov, clip), or none to "
        "output the gradients; default: the config's, else adamw"),
    cl::value_desc("spec"), cl::cat(toolCategory));
static cl::opt<std::string> trainOutput(
    "loss-output",
    cl::desc(
        "With --train on a model that returns its loss and more (Hugging "
        "Face's "
        "loss and logits): the output that is the loss; default: the one named "
        "loss, else the only floating-point scalar"),
    cl::value_desc("name"), cl::cat(toolCategory));
static cl::opt<std::string> freezeRegex(
    "freeze",
    cl::desc("With --train: parameters whose initializer name matches "
             "this regex are not trained"),
    cl::value_desc("regex"), cl::cat(toolCategory));
static cl::opt<std::string> noDecayRegex(
    "no-decay",
    cl::desc("With --train: parameters whose initializer name matches this regex "
             "get weight decay 0 (a second parameter group; the Hugging Face "
             "Trainer's: \"bias|norm|ln_\")"),
    cl::value_desc("regex"), cl::cat(toolCategory));
static cl::opt<int64_t> truncateLayers(
    "truncate-layers",
    cl::desc(
        "Keep only the model's first N repeated blocks (zero-truncate-layers): "
        "the proxies --plan auto simulates a deep model's layouts on"),
    cl::value_desc("N"), cl::init(0), cl::cat(toolCategory));
static cl::opt<bool> fp32Loss(
    "fp32-loss",
    cl::desc(
        "With --train and bf16/fp16: compute every loss in fp32 "
        "(torch.autocast's list), whatever the model does; by default a loss "
        "computes as the model computes it (docs/training.md)"),
    cl::init(false), cl::cat(toolCategory));
/// --config's file when --train takes it (the training keys and the check
/// that it describes one rank).
static std::string trainConfig;
/// With --train: the --zero-pipeline options (plus config=FILE), read into the
/// training settings instead of running as a pass pipeline.
static std::string trainZeroOptions;
static bool trainZeroGiven = false;
static cl::opt<bool>
    splitInputFile("split-input-file",
                   cl::desc("Process each `// -----` chunk separately"),
                   cl::cat(toolCategory));
static cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check that emitted diagnostics match expected-* comments"),
    cl::cat(toolCategory));

namespace {

bool isONNXInput(StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".onnxtext");
}

/// Prints import diagnostics as "<file>: error: node '<name>': <message>".
LogicalResult printImportDiagnostic(Diagnostic &diag) {
  std::string where, node;
  Location loc = diag.getLocation();
  if (auto name = dyn_cast<NameLoc>(loc)) {
    node = name.getName().str();
    loc = name.getChildLoc();
  }
  if (auto fused = dyn_cast<FusedLoc>(loc); fused && fused.getLocations().size() == 1)
    loc = fused.getLocations().front(); // the module path of the node
  
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    where = file.getFilename().str();
  const char *kind = diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
                     : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                                         : "note";
  llvm::errs() << (where.empty() ? std::string("zero-opt") : where) << ": " << kind
               << ": ";
  if (!node.empty())
    llvm::errs() << "node '" << node << "': ";
  llvm::errs() << diag.str() << "\n";
  return success();
}

/// Writes `contents` to `path` through an OutputFile (whole or not at all).
std::string writeOutput(StringRef path, StringRef contents) {
  std::string err;
  std::unique_ptr<zero::OutputFile> out = zero::OutputFile::open(path, err);
  if (!out)
    return err;
  out->os() << contents;
  return out->commit();
}

/// Checks up front that `path` can be created, so a bad -o fails before work.
std::string checkWritable(StringRef path) {
  if (path == "-")
    return "";
  StringRef dir = llvm::sys::path::parent_path(path);
  if (dir.empty())
    dir = ".";
  if (!llvm::sys::fs::is_directory(dir))
    return "cannot write '" + path.str() + "': directory '" + dir.str() +
           "' does not exist";
  if (llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write))
    return "cannot write '" + path.str() + "': directory '" + dir.str() +
           "' is not writable";
  return "";
}

void printModelSummary(ModuleOp module, const zero::ImportedWeights &weights,
                       StringRef weightsPath, raw_ostream &os) {
  std::map<std::string, int> opCounts;
  int64_t params = 0, globals = 0;
  module.walk([&](Operation *op) {
    if (auto g = dyn_cast<ml_program::GlobalOp>(op)) {
      ++globals;
      params += cast<ShapedType>(g.getType()).getNumElements();
    } else if (op->getDialect() &&
               op->getDialect()->getNamespace() == "onnx") {
      ++opCounts[op->getName().stripDialect().str()];
    }
  });
  os << "== model summary ==\n";
  module.walk([&](func::FuncOp f) {
    os << "function @" << f.getName() << " : " << f.getFunctionType() << "\n";
  });
  os << "ops by type:\n";
  int total = 0;
  for (auto &[name, n] : opCounts) {
    os << llvm::format("  %-28s %d\n", name.c_str(), n);
    total += n;
  }
  os << "  total                        " << total << "\n";
  os << "parameters: " << globals << " tensors, " << params << " elements, "
     << weights.totalBytes() << " bytes\n";
  os << "weights file: " << (weightsPath.empty() ? "(not written)" : weightsPath)
     << "\n";
}

/// Produces the output bytes for `module`: MLIR text, or the serialised zrt
/// program (running zero-lower-to-runtime first when it has not run yet).
LogicalResult renderOutput(ModuleOp module, std::string &out) {
  if (emitKind == EmitKind::MLIR) {
    llvm::raw_string_ostream os(out);
    module.print(os);
    os << "\n";
    return success();
  }
  auto programs = module.getOps<zero::zrt::ProgramOp>();
  if (programs.empty()) {
    PassManager pm(module.getContext());
    zero::ZeroLowerToRuntimePassOptions options;
    options.fuseElementwise = !noFuse;
    pm.addPass(zero::createZeroLowerToRuntimePass(options));
    zero::ZeroVerifyPassOptions verify;
    verify.phase = zero::VerifyPhase::Lowered;
    pm.addPass(zero::createZeroVerifyPass(verify));
    if (failed(pm.run(module)))
      return failure();
    programs = module.getOps<zero::zrt::ProgramOp>();
  }
  if (programs.empty()) {
    module.emitError("--emit=zrt: the module has no zrt.program");
    return failure();
  }
  return zero::serializeZRTProgram(*programs.begin(), out);
}

} // namespace

/// --config FILE is shorthand for the zero-pipeline's `config=FILE` option:
/// it is folded into the --zero-pipeline argument (added when absent), so a
/// DeepSpeed config and explicit options resolve in one place, the pipeline.
static std::vector<std::string> withConfigInPipeline(int argc, char **argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::string config;
  bool haveConfig = false;
  bool training = false;
  for (const std::string &a : args)
    training |=
        a == "--train" || a == "-train" || StringRef(a).starts_with("--plan");
  for (size_t i = 1; i < args.size(); ++i) {
    StringRef a = args[i];
    if (a == "--" )
      break;
    if (a == "--config" || a == "-config") {
      if (i + 1 == args.size())
        break; // cl reports the missing value
      if (haveConfig) {
        llvm::errs() << "zero-opt: error: --config is given twice; give one "
                        "DeepSpeed config\n";
        std::exit(1);
      }
      config = args[i + 1];
      haveConfig = true;
      args.erase(args.begin() + i, args.begin() + i + 2);
      --i;
    } else if (a.starts_with("--config=") || a.starts_with("-config=")) {
      if (haveConfig) {
        llvm::errs() << "zero-opt: error: --config is given twice; give one "
                        "DeepSpeed config\n";
        std::exit(1);
      }
      config = a.split('=').second.str();
      haveConfig = true;
      args.erase(args.begin() + i);
      --i;
    } else if ((a == "--zero-pipeline" || a == "-zero-pipeline") &&
               i + 1 < args.size()) {
      args[i] = "--zero-pipeline=" + args[i + 1];
      args.erase(args.begin() + i + 1);
    }
  }
  // One ZeRO configuration per run: a second --zero-pipeline would partition
  // the partitioned program again.
  int pipelines = 0;
  for (const std::string &a : args)
    pipelines += StringRef(a).starts_with("--zero-pipeline=") ||
                 StringRef(a).starts_with("-zero-pipeline=");
  if (pipelines > 1) {
    llvm::errs() << "zero-opt: error: --zero-pipeline is given " << pipelines
                 << " times; give one with all the options\n";
    std::exit(1);
  }
  if (training) {
    // --train compiles the ZeRO stage into the optimizer step: the pipeline's
    // options (and the config's zero_optimization and batch sizes) are read
    // by the training settings, not run as a pass pipeline after it.
    for (size_t i = 1; i < args.size(); ++i) {
      StringRef a = args[i];
      if (a.starts_with("--zero-pipeline=") || a.starts_with("-zero-pipeline=")) {
        trainZeroOptions = a.split('=').second.str();
        trainZeroGiven = true;
        args.erase(args.begin() + i);
        break;
      }
    }
    if (haveConfig) {
      trainConfig = config; // read by the training settings
      trainZeroOptions += " config=" + config;
    }
    return args;
  }
  if (!haveConfig)
    return args;
  for (std::string &a : args)
    if (StringRef(a).starts_with("--zero-pipeline=") ||
        StringRef(a).starts_with("-zero-pipeline=")) {
      a += " config=" + config;
      return args;
    }
  args.push_back("--zero-pipeline=config=" + config);
  return args;
}

/// --estimate-memory's settings: Psi (< 0: count the model's), N (< 0: the
/// compiled step's data-parallel world) and the precision.
struct MemoryEstimateSpec {
  double psi = -1;
  int64_t dp = -1;
  std::optional<bool> mixed; ///< absent: the compiled step's (default mixed)
};

/// --estimate-memory without params=, on an ONNX model: printed from the
/// compiled module instead of writing it.
static std::optional<MemoryEstimateSpec> memoryEstimateOfModel;
static int printModelMemoryEstimate(ModuleOp module, MemoryEstimateSpec spec);

/// Where the weights go: --weights-out, else beside a regular -o (none with
/// --no-weights); checked writable and apart from -o. None after an error
/// (printed).
static std::optional<std::string> weightsDestination() {
  std::string weightsPath = weightsOut;
  if (noWeights && !weightsPath.empty()) {
    llvm::errs()
        << "zero-opt: error: --no-weights reads no weights, so --weights-out "
           "has nothing to write; drop one of them\n";
    return std::nullopt;
  }
  if (weightsPath == "-") {
    llvm::errs()
        << "zero-opt: error: --weights-out - : the weights are binary "
           "safetensors and cannot go to standard output; name a file\n";
    return std::nullopt;
  }
  // Weights go next to -o only when -o is (or will be) a regular file: never
  // beside /dev/null or a FIFO.
  llvm::sys::fs::file_status outStatus;
  const bool outIsSpecial =
      !llvm::sys::fs::status(outputFilename, outStatus) &&
      outStatus.type() != llvm::sys::fs::file_type::regular_file;
  if (weightsPath.empty() && outputFilename != "-" && !outIsSpecial &&
      !noWeights) {
    SmallString<256> p(outputFilename);
    llvm::sys::path::replace_extension(p, "safetensors");
    weightsPath = std::string(p);
  }
  if (!weightsPath.empty() && (weightsPath == outputFilename ||
                               zero::isSameFile(weightsPath, outputFilename))) {
    llvm::errs() << "zero-opt: error: -o and the weights file are both '"
                 << weightsPath << "'; give --weights-out a different file\n";
    return std::nullopt;
  }
  for (const std::string &path : {std::string(outputFilename), weightsPath}) {
    if (path.empty())
      continue;
    std::string err = checkWritable(path);
    if (!err.empty()) {
      llvm::errs() << "zero-opt: error: " << err << "\n";
      return std::nullopt;
    }
  }
  return weightsPath;
}

static int importAndWrite(MLIRContext &context, PassManager &pm) {
  zero::ImportOptions options;
  options.functionName = functionName;
  options.training = train;
  options.withoutWeights = noWeights;
  for (const std::string &spec : inputShapes) {
    StringRef s(spec);
    auto [name, dims] = s.split('=');
    std::vector<int64_t> shape;
    if (name.empty() || !s.contains('=') || !zero::parseShape(dims, shape)) {
      llvm::errs() << "zero-opt: error: malformed --input-shape '" << spec
                   << "'; expected NAME=D0xD1x... with non-negative integers, "
                      "e.g. input_ids=2x8\n";
      return 1;
    }
    if (options.inputShapes.count(name.str())) {
      llvm::errs() << "zero-opt: error: --input-shape names '" << name
                   << "' twice; give each input's shape once\n";
      return 1;
    }
    // Elements times the widest element (8 bytes) must fit in 63 bits.
    int64_t elements = 1;
    for (int64_t d : shape)
      if (llvm::MulOverflow(elements, d, elements) ||
          elements > std::numeric_limits<int64_t>::max() / 8) {
        llvm::errs() << "zero-opt: error: --input-shape '" << spec
                     << "': the tensor's byte size overflows 64 bits\n";
        return 1;
      }
    options.inputShapes[name.str()] = shape;
  }
  std::optional<std::string> destination = weightsDestination();
  if (!destination)
    return 1;
  const std::string weightsPath = *destination;

  zero::ImportedModel model;
  {
    ScopedDiagnosticHandler handler(&context, printImportDiagnostic);
    model = zero::importONNXFile(context, inputFilename, options);
    if (!model.module)
      return 1;
  }
  if (failed(pm.run(*model.module)))
    return 1;
  if (auto from = zero::attrs::kTruncatedFrom.get(*model.module))
    llvm::errs() << "zero-opt: note: --truncate-layers: kept "
                 << std::min<int64_t>(truncateLayers, from.getInt()) << " of "
                 << from.getInt() << " repeated blocks\n";
  if (memoryEstimateOfModel)
    return printModelMemoryEstimate(*model.module, *memoryEstimateOfModel);

  // Never overwrite what the model is read from.
  std::vector<std::string> sources = model.weights->externalDataFiles();
  sources.push_back(inputFilename);
  for (const std::string &path : {std::string(outputFilename), weightsPath})
    for (const std::string &source : sources)
      if (!path.empty() && path != "-" && zero::isSameFile(path, source)) {
        llvm::errs() << "zero-opt: error: the output '" << path
                     << "' is the model's own file '" << source
                     << "'; writing it would destroy the input; choose "
                        "another output path\n";
        return 1;
      }

  std::string text;
  if (failed(renderOutput(*model.module, text)))
    return 1;
  // Both outputs are complete before either replaces anything.
  std::string err;
  std::unique_ptr<zero::OutputFile> weightsFile;
  if (!weightsPath.empty()) {
    weightsFile = zero::OutputFile::open(weightsPath, err);
    if (weightsFile)
      err = model.weights->writeSafetensors(weightsFile->os());
  }
  std::unique_ptr<zero::OutputFile> mainFile;
  if (err.empty()) {
    mainFile = zero::OutputFile::open(outputFilename, err);
    if (mainFile)
      mainFile->os() << text;
  }
  if (err.empty() && weightsFile)
    err = weightsFile->commit();
  if (err.empty())
    err = mainFile->commit();
  if (!err.empty()) {
    llvm::errs() << "zero-opt: error: " << err << "\n";
    return 1;
  }
  if (printSummary)
    printModelSummary(*model.module, *model.weights, weightsPath,
                      outputFilename == "-" ? llvm::errs() : llvm::outs());
  return 0;
}

static std::optional<MemoryEstimateSpec> parseMemoryEstimate(StringRef spec) {
  MemoryEstimateSpec e;
  SmallVector<StringRef> tokens;
  spec.split(tokens, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef token : tokens) {
    auto [key, value] = token.split('=');
    bool ok = true;
    if (key == "params") {
      std::string v = value.str();
      char *end = nullptr;
      e.psi = std::strtod(v.c_str(), &end);
      ok = !v.empty() && end && *end == 0 && e.psi > 0;
    } else if (key == "dp") {
      ok = !value.getAsInteger(10, e.dp) && e.dp >= 1;
    } else if (key == "precision") {
      ok = value == "mixed" || value == "bf16" || value == "fp16" || value == "fp32";
      e.mixed = value != "fp32";
    } else {
      ok = false;
    }
    if (!ok) {
      llvm::errs() << "zero-opt: error: --estimate-memory: bad '" << token
                   << "'; expected params=COUNT (e.g. 7.5e9) dp=RANKS "
                      "precision=mixed|bf16|fp16|fp32\n";
      return std::nullopt;
    }
  }
  return e;
}

/// --estimate-memory: the model-state bytes per rank of Adam training at ZeRO
/// stages 0-3 (Rajbhandari et al., "ZeRO", Table 1 and section 5): with mixed
/// precision 2 bytes of 16-bit parameters and of gradients and K = 12 bytes
/// of fp32 master weights, momentum and variance per parameter; with fp32,
/// 4 + 4 and K = 8. Communication per step in parameter elements: 2 Psi for
/// stages 0-2, 3 Psi for stage 3. Psi is `params=`, or the parameters a
/// compiled step trains (`counted`); then each part is also printed in
/// bytes, as zero-run --report-json's model_state_bytes gives them (which
/// add each parameter's padding to a multiple of N).
static int printMemoryEstimate(double psi, int64_t dp, bool mixed, bool counted) {
  const double p = mixed ? 2 : 4, g = mixed ? 2 : 4, k = mixed ? 12 : 8;
  const double n = double(dp), gb = 1e9;
  struct Row {
    const char *stage, *formula;
    double params, grads, optimizer, comm;
    double bytes() const { return params + grads + optimizer; }
  } rows[] = {
      {"0 (data parallel)", mixed ? "(2 + 2 + K) Psi" : "(4 + 4 + K) Psi", p * psi, g * psi,
       k * psi, 2 * psi},
      {"1 (P_os)", mixed ? "2 Psi + 2 Psi + K Psi / N" : "4 Psi + 4 Psi + K Psi / N", p * psi,
       g * psi, k * psi / n, 2 * psi},
      {"2 (P_os+g)", mixed ? "2 Psi + (2 + K) Psi / N" : "4 Psi + (4 + K) Psi / N", p * psi,
       g * psi / n, k * psi / n, 2 * psi},
      {"3 (P_os+g+p)", mixed ? "(2 + 2 + K) Psi / N" : "(4 + 4 + K) Psi / N", p * psi / n,
       g * psi / n, k * psi / n, 3 * psi},
  };
  llvm::outs() << llvm::format("model-state memory per rank: Psi = %g parameters, N = %lld "
                               "ranks, %s precision Adam (K = %g)\n",
                               psi, (long long)dp, mixed ? "mixed" : "fp32", k);
  llvm::outs() << llvm::format("%-18s %-28s %10s %20s\n", "stage", "formula", "GB",
                               "comm (elements/step)");
  for (const Row &r : rows)
    llvm::outs() << llvm::format("%-18s %-28s %10.2f %20.4g\n", r.stage, r.formula,
                                 r.bytes() / gb, r.comm);
  llvm::outs() << "(GB = 1e9 bytes; activations, buffers and fragmentation are not "
                  "included; communication in parameter elements per rank and step)\n";
  if (counted) {
    llvm::outs() << llvm::format("%-18s %16s %16s %16s %16s\n", "bytes per rank",
                                 "parameters", "gradients", "optimizer", "total");
    for (const Row &r : rows)
      llvm::outs() << llvm::format("%-18s %16.0f %16.0f %16.0f %16.0f\n", r.stage,
                                   r.params, r.grads, r.optimizer, r.bytes());
  }
  return 0;
}

/// --estimate-memory on a model: the parameters its compiled training step
/// trains (their full sizes), the precision they train in (16-bit
/// parameters: mixed) and, unless the spec gives one, its data-parallel
/// world.
static int printModelMemoryEstimate(ModuleOp module, MemoryEstimateSpec spec) {
  double psi = 0;
  bool sixteen = false, any = false;
  int64_t world = 1;
  auto count = [&](Type type) {
    auto t = cast<RankedTensorType>(type);
    psi += double(t.getNumElements());
    sixteen |= t.getElementType().getIntOrFloatBitWidth() == 16;
    any = true;
  };
  module.walk([&](Operation *op) {
    if (auto w = ::zero::attrs::kWorldSize.get(op))
      world = std::max<int64_t>(world, w.getInt());
    if (auto g = dyn_cast<ml_program::GlobalOp>(op)) {
      if (::zero::attrs::kTrainable.isSetOn(g)) {
        TypeAttr full = ::zero::attrs::kFullType.get(g);
        count(full ? full.getValue() : g.getType());
      }
    } else if (auto g = dyn_cast<zero::zrt::GlobalOp>(op)) {
      if (g.getRole() && *g.getRole() == "parameter")
        count(g.getType());
    }
  });
  if (!any) {
    llvm::errs() << "zero-opt: error: --estimate-memory: '" << inputFilename
                 << "' compiles to no trained parameter; add --train (the estimate counts "
                    "the parameters the training step trains) or give params=COUNT\n";
    return 1;
  }
  return printMemoryEstimate(psi, spec.dp > 0 ? spec.dp : world,
                             spec.mixed.value_or(sixteen), /*counted=*/true);
}

/// The batch sizes DeepSpeed derives from the world size: the accumulation
/// (train_batch_size and the micro-batch given; parseZeroPipelineOptions
/// derived it), the micro-batch (train_batch_size without it), which
/// zero-autodiff checks against the model's batch.
static LogicalResult
deriveBatchSizes(const zero::ZeroSettings &zs, zero::TrainSettings &settings,
                 function_ref<LogicalResult(const Twine &)> errorHandler) {
  if (zs.derivedAccumulation > 0)
    settings.accumulation = zs.derivedAccumulation;
  if (zs.configBatch == 0 || zs.configMicroBatch > 0)
    return success();
  const int64_t world = settings.step.world,
                accumulation = settings.accumulation;
  const std::string quotient =
      "train_batch_size " + std::to_string(zs.configBatch) + " / (" +
      std::to_string(world) + " rank(s) x " + std::to_string(accumulation) +
      " accumulation step(s))";
  if (zs.configBatch % (world * accumulation) != 0)
    return errorHandler(
        trainConfig + ": " + quotient +
        " is not a whole micro-batch; DeepSpeed derives "
        "train_micro_batch_size_per_gpu from it: give a multiple, or the "
        "micro-batch");
  settings.microBatchSize = zs.configBatch / (world * accumulation);
  settings.microBatchOrigin =
      "the micro-batch DeepSpeed derives, " + quotient + ",";
  llvm::errs() << "note: " << trainConfig
               << ": train_micro_batch_size_per_gpu absent -> "
               << settings.microBatchSize << " (" << quotient
               << ", as DeepSpeed derives it)\n";
  return success();
}

/// With --train: the --zero-pipeline options (and the config's
/// zero_optimization and batch sizes) give the step's data-parallel world
/// and ZeRO stage (DeepSpeed's default: stage 0) and, with pipeline stages,
/// its micro-batches.
static LogicalResult
readTrainingZeroSettings(zero::TrainSettings &settings,
                         function_ref<LogicalResult(const Twine &)> errorHandler) {
  zero::ZeroSettings zs;
  zs.training = true;
  if (failed(zero::parseZeroPipelineOptions(StringRef(trainZeroOptions).trim(), zs,
                                            errorHandler)))
    return failure();
  settings.step.world = zs.dp < 0 ? 1 : zs.dp;
  settings.step.stage = zs.stageGiven ? zs.stage : 0;
  settings.step.bucket = zs.reduceBucketElems;
  // qgZ quantizes a bucket's slices in blocks: one gradient's each, as alone.
  settings.step.bucketAlign = zs.quantizeGradients > 0 ? zs.quantizeBlock : 1;
  const bool shards = settings.step.stage == 3 && settings.step.world >= 2;
  if (zs.offloadParam == "cpu" && !shards) {
    // As DeepSpeed, which only reads offload_param at stage 3: nothing to move.
    llvm::errs() << "warning: " << trainConfig
                 << ": zero_optimization.offload_param.device \"cpu\" has no effect at stage "
                 << settings.step.stage << " over " << settings.step.world
                 << " rank(s), which holds no parameter shards (the parameters stay whole "
                    "in the params arena)\n";
    zs.offloadParam.clear();
  }
  if (zs.offloadParam == "nvme" && !shards)
    return errorHandler("zero_optimization.offload_param moves stage 3's parameter shards to "
                        "NVMe; this step is stage " + Twine(settings.step.stage) + " over " +
                        Twine(settings.step.world) +
                        " rank(s), which holds no shards: use stage 3 over 2 or more ranks, "
                        "or drop offload_param (offload_optimizer moves the optimizer state "
                        "at any stage)");
  settings.step.offloadHost = zs.offloadOptimizer == "cpu";
  if (zs.offloadOptimizer == "nvme") {
    settings.step.nvmePath = zs.nvmePath;
    settings.step.offloadBuffers = zs.offloadBufferCount;
  }
  settings.zero = zs;
  settings.zero.dp = settings.step.world;
  settings.zero.stage = settings.step.stage;
  settings.zeroGiven = trainZeroGiven || zs.stageGiven || zs.dp > 1 || zs.pp > 1 ||
                       zs.activationCheckpointInterval > 0;
  // Pipeline stages: the step's micro-batches are its gradient accumulation
  // steps (DeepSpeed's PipelineEngine takes gradient_accumulation_steps as the
  // micro-batches).
  if (zs.pp > 1 && zs.microBatchesGiven) {
    if (settings.accumulation != 1 && settings.accumulation != zs.microBatches)
      return errorHandler("--zero-pipeline: micro-batches=" + Twine(zs.microBatches) +
                          " but the config's gradient_accumulation_steps is " +
                          Twine(settings.accumulation) +
                          "; a pipeline's micro-batches are the accumulation "
                          "steps: give one of them, or the same number");
    settings.accumulation = zs.microBatches;
  }
  return deriveBatchSizes(zs, settings, errorHandler);
}

/// --loss KIND:LABELS[@OUTPUT] into the training settings.
static LogicalResult
readLossSpec(zero::TrainSettings &settings,
             function_ref<LogicalResult(const Twine &)> errorHandler) {
  StringRef spec = lossSpec;
  auto [kind, rest] = spec.split(':');
  auto [labels, output] = rest.split('@');
  if (kind != "cross-entropy" && kind != "causal-lm")
    return errorHandler("--loss '" + spec +
                        "': the losses are cross-entropy:LABELS and "
                        "causal-lm:LABELS (optionally @OUTPUT)");
  settings.lossKind = zero::symbolizeLossKind(kind);
  if (!labels.empty())
    settings.labels = labels.str();
  settings.lossOutput = output.str();
  return success();
}

/// --train: the training settings from the config, --zero-pipeline,
/// --optimizer, --loss, --loss-output and --freeze, expanded into `pm`.
static LogicalResult
addTrainingPipeline(PassManager &pm,
                    function_ref<LogicalResult(const Twine &)> errorHandler) {
  zero::TrainSettings settings;
  std::vector<std::string> warnings;
  if (!trainConfig.empty()) {
    std::string err = zero::readTrainingConfig(trainConfig, settings, warnings);
    if (!err.empty())
      return errorHandler(err);
    for (const std::string &w : warnings)
      if (StringRef(w).starts_with("note: "))
        llvm::errs() << "note: " << trainConfig << ": " << StringRef(w).drop_front(6) << "\n";
      else
        llvm::errs() << "warning: " << trainConfig << ": " << w << "\n";
  } else {
    settings.step.weightDecay = 0.01; // torch.optim.AdamW's default
  }
  if (!StringRef(trainZeroOptions).trim().empty() &&
      failed(readTrainingZeroSettings(settings, errorHandler)))
    return failure();
  if (!optimizerSpec.empty()) {
    if (std::string err = zero::parseOptimizerSpec(optimizerSpec, settings); !err.empty())
      return errorHandler(err);
    // The schedule's peak "auto" follows the command line's lr.
    if (settings.warmupMaxLrAuto)
      settings.step.warmupMaxLr = settings.step.lr;
  }
  if (!lossSpec.empty() && failed(readLossSpec(settings, errorHandler)))
    return failure();
  settings.freeze = freezeRegex;
  settings.step.noDecay = noDecayRegex;
  settings.trainOutput = trainOutput;
  settings.f32Loss = fp32Loss;
  if (!settings.optimizer && settings.step.world > 1)
    return errorHandler("--optimizer none outputs one rank's gradients; the "
                        "gradient averaging over " + Twine(settings.step.world) +
                        " ranks is part of the optimizer step: compile for one rank "
                        "(dp=1) or give an optimizer");
  if (settings.step.commF32 && settings.step.world > 1 && settings.step.stage == 2 &&
      settings.accumulation > 1)
    return errorHandler(trainConfig + ": communication_data_type \"fp32\" with ZeRO-2 and "
                        "gradient accumulation is not supported yet (its micro-step "
                        "reduce-scatters carry the 16-bit gradients); drop the key, or use "
                        "stage 1 or 3");
  // (A gradient program, --optimizer none, has no optimizer to refuse it.)
  if (!settings.accumDtype.empty() &&
      settings.precision != zero::Precision::FP32 && settings.step.stage == 0 &&
      settings.optimizer)
    return errorHandler(
        trainConfig + ": data_types.grad_accum_dtype \"" + settings.accumDtype +
        "\" with " +
        (settings.precision == zero::Precision::BF16 ? "bf16" : "fp16") +
        " training at ZeRO stage 0 is an unsupported mix, as in DeepSpeed "
        "0.19 (its stage 0 sums the gradients in the model's type); use "
        "zero_optimization.stage 1-3, or drop the key");
  zero::buildTrainingPipeline(pm, settings);
  return success();
}

/// The passes of one run: the training step (--train), then the passes and
/// pipelines named on the command line, then zero-report (--report).
static LogicalResult buildPassPipeline(PassManager &pm,
                                       const PassPipelineCLParser &passPipeline) {
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  auto errorHandler = [&](const Twine &msg) {
    llvm::errs() << "zero-opt: error: " << msg << "\n";
    return failure();
  };
  if (isONNXInput(inputFilename)) {
    zero::ZeroVerifyPassOptions verify;
    verify.phase = zero::VerifyPhase::Imported;
    pm.addPass(zero::createZeroVerifyPass(verify));
  }
  if (truncateLayers > 0) {
    zero::ZeroTruncateLayersPassOptions truncate;
    truncate.keep = truncateLayers;
    pm.addPass(zero::createZeroTruncateLayersPass(truncate));
  }
  if (train) {
    if (failed(addTrainingPipeline(pm, errorHandler)))
      return failure();
  } else if (!lossSpec.empty() || !optimizerSpec.empty() || !freezeRegex.empty() ||
             !noDecayRegex.empty() ||
             !trainOutput.empty()) {
    return errorHandler("--loss, --loss-output, --optimizer, --freeze and --no-decay need --train");
  } else if (fp32Loss) {
    return errorHandler(
        "--fp32-loss needs --train (and a bf16 or fp16 config)");
  }
  if (failed(passPipeline.addToPipeline(pm, errorHandler)))
    return failure();
  if (!reportNodes.empty() && !zeroReport && planMode.empty())
    return errorHandler(
        "--nodes needs --report (it places the ranks for the report's "
        "bytes across nodes)");
  if (zeroReport) {
    zero::ZeroReportPassOptions report;
    report.nodes = reportNodes;
    pm.addPass(zero::createZeroReportPass(report));
  }
  return success();
}

/// An .mlir input: each chunk (--split-input-file) parsed, run through the
/// pipeline and printed; with --verify-diagnostics, its diagnostics checked
/// against its expected-* comments instead.
static int processMLIRInput(const DialectRegistry &registry,
                            function_ref<LogicalResult(PassManager &)> buildPipeline) {
  std::string errorMessage;
  auto file = openInputFile(inputFilename, &errorMessage);
  if (!file) {
    llvm::errs() << "zero-opt: error: " << errorMessage << "\n";
    return 1;
  }
  std::string text;
  llvm::raw_string_ostream out(text);
  auto processChunk = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                          raw_ostream &os) -> LogicalResult {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(chunk), SMLoc());
    MLIRContext chunkContext(registry);
    chunkContext.loadAllAvailableDialects();
    chunkContext.allowUnregisteredDialects(false);
    // Like mlir-opt: expected-* comments list the diagnostics themselves.
    chunkContext.printOpOnDiagnostic(!verifyDiagnostics);
    auto run = [&]() -> LogicalResult {
      OwningOpRef<ModuleOp> module =
          parseSourceFile<ModuleOp>(sourceMgr, &chunkContext);
      if (!module)
        return failure();
      PassManager pm(&chunkContext);
      if (failed(buildPipeline(pm)) || failed(pm.run(*module)))
        return failure();
      std::string rendered;
      if (failed(renderOutput(*module, rendered)))
        return failure();
      os << rendered;
      return success();
    };
    if (verifyDiagnostics) {
      SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &chunkContext);
      (void)run();
      return handler.verify();
    }
    SourceMgrDiagnosticHandler handler(sourceMgr, &chunkContext);
    return run();
  };
  LogicalResult result =
      splitInputFile
          ? splitAndProcessBuffer(std::move(file), processChunk, out)
          : processChunk(std::move(file), out);
  if (failed(result))
    return 1;
  if (verifyDiagnostics)
    return 0;
  std::string err = writeOutput(outputFilename, text);
  if (!err.empty()) {
    llvm::errs() << "zero-opt: error: " << err << "\n";
    return 1;
  }
  return 0;
}

/// The MLIR options a zero-opt user reaches for, listed by --help beside
/// zero-opt's own; every other LLVM and MLIR option stays usable and is
/// listed by --help-hidden only.
static const char *const kListedMLIROptions[] = {
    "pass-pipeline", "mlir-pass-statistics", "mlir-print-ir-after-all", "mlir-timing"};

/// `text` broken at spaces into lines of at most `width` columns, each
/// indented by `indent`.
static void printWrapped(raw_ostream &os, StringRef text, size_t indent, size_t width) {
  size_t column = 0;
  SmallVector<StringRef> words;
  text.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef word : words) {
    if (column > indent && column + 1 + word.size() > width) {
      os << "\n";
      column = 0;
    }
    if (column == 0) {
      os.indent(indent);
      column = indent;
    } else {
      os << ' ';
      ++column;
    }
    os << word;
    column += word.size();
  }
  if (column)
    os << "\n";
}

/// A pass's options with their defaults, as a pipeline would spell them
/// (`{dp=-1 stage=3}`); empty for a pass without options.
static std::string passOptionDefaults(const PassInfo &info) {
  OpPassManager pm(ModuleOp::getOperationName());
  if (failed(info.addToPipeline(pm, "", [](const Twine &) { return failure(); })))
    return "";
  std::string pipeline;
  llvm::raw_string_ostream os(pipeline);
  pm.printAsTextualPipeline(os);
  size_t open = pipeline.find('{'), close = pipeline.rfind('}');
  return open == std::string::npos ? "" : pipeline.substr(open, close - open + 1);
}

/// --help's list of the registered passes and pipelines: each with its
/// one-line summary and, under it, its options with their defaults. Each
/// option's own help is in --help-hidden (MLIR's listing, over a hundred
/// lines) and docs/passes.md.
static std::string describePassesForHelp(cl::Option *passList) {
  std::vector<StringRef> names;
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.second == passList && !entry.first.empty() &&
        !entry.first.starts_with("zero-test-")) // for lit, not users
      names.push_back(entry.first);
  llvm::sort(names);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "\nPASSES AND PIPELINES (--NAME, or --NAME=\"key=value ...\"; each option's "
        "help: --help-hidden, docs/passes.md):\n\n";
  for (StringRef name : names) {
    std::string options;
    StringRef summary;
    if (const PassInfo *pass = PassInfo::lookup(name)) {
      summary = pass->getPassDescription();
      options = passOptionDefaults(*pass);
    } else if (const PassPipelineInfo *pipeline = PassPipelineInfo::lookup(name)) {
      summary = pipeline->getPassDescription();
      if (name == "zero-pipeline") {
        llvm::raw_string_ostream optionsOs(options);
        zero::ZeroPipelineOptions().print(optionsOs);
      }
    }
    os << llvm::formatv("  --{0,-28} {1}\n", name, summary);
    if (!options.empty())
      printWrapped(os, options, 8, 100);
  }
  return text;
}

/// Whether the command line asks for one of the help listings (--help,
/// --help-hidden, --help-list, ...): only then is the listing arranged.
static bool asksForHelp(int argc, char **argv) {
  return llvm::any_of(llvm::ArrayRef(argv + 1, argv + argc), [](const char *arg) {
    StringRef a(arg);
    return a.starts_with("-") && a.ltrim('-').starts_with("help");
  });
}

/// --help lists zero-opt's options, a few MLIR options and the registered
/// passes and pipelines, one summary each; LLVM's backend options (linked in
/// with LLVM) and each pass option's help move to --help-hidden.
static void listOnlyToolOptionsInHelp() {
  static cl::OptionCategory mlirCategory("MLIR options");
  auto &options = cl::getRegisteredOptions();
  for (const char *name : kListedMLIROptions)
    if (cl::Option *option = options.lookup(name))
      option->addCategory(mlirCategory);
  for (auto &entry : options) {
    cl::Option *option = entry.second;
    if (llvm::any_of(option->Categories, [&](cl::OptionCategory *c) {
          return c == &toolCategory || c == &mlirCategory ||
                 c->getName() == "Generic Options";
        }))
      continue;
    if (option->getOptionHiddenFlag() == cl::NotHidden)
      option->setHiddenFlag(cl::Hidden);
  }
  // The pass list is one option whose values are the pass names.
  if (cl::Option *passList = options.lookup("zero-partition")) {
    static std::string passHelp = describePassesForHelp(passList);
    static cl::extrahelp passes(passHelp);
  }
}

namespace zero::test {
/// The test passes that print the analyses for lit (test/lib).
void registerTestPasses();
} // namespace zero::test

/// MLIR's command-line options, the zero passes and pipelines, the test
/// passes, and the few upstream passes zero-opt offers (canonicalize, cse,
/// symbol-dce).
static void registerCommandLine() {
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  // Registered as pipelines of their default form: --help lists each on one
  // line (their options are for MLIR's own tests, not zero-opt's users).
  PassPipelineRegistration<>("canonicalize", "Canonicalize operations (MLIR's)",
                             [](OpPassManager &pm) { pm.addPass(createCanonicalizerPass()); });
  PassPipelineRegistration<>("cse", "Eliminate common sub-expressions (MLIR's)",
                             [](OpPassManager &pm) { pm.addPass(createCSEPass()); });
  registerSymbolDCEPass();
  zero::registerZeroPasses();
  zero::registerZeroPipeline();
  zero::test::registerTestPasses();
}

/// A size in bytes, with an optional KiB, MiB or GiB suffix; 0 when bad.
static int64_t parseSize(StringRef text) {
  text = text.trim();
  int64_t unit = 1;
  for (auto [suffix, scale] : {std::pair<StringRef, int64_t>{"GiB", 1LL << 30},
                               {"MiB", 1LL << 20},
                               {"KiB", 1LL << 10}})
    if (text.consume_back(suffix)) {
      unit = scale;
      break;
    }
  double value = 0;
  if (text.trim().getAsDouble(value) || value <= 0)
    return 0;
  return int64_t(value * double(unit));
}

/// --plan auto: the search (Plan.cpp) over this model, on --machine.
static int runPlan(const char *argv0) {
  auto fail = [](const Twine &msg) {
    llvm::errs() << "zero-opt: error: --plan: " << msg << "\n";
    return 1;
  };
  if (planMode != "auto")
    return fail("'" + planMode + "' is not a mode; give --plan auto");
  if (!isONNXInput(inputFilename))
    return fail("plans an ONNX model; " + inputFilename + " is not one");
  if (planMachine.empty() || planWorld < 1 || planGlobalBatch < 1 ||
      planOut.empty())
    return fail("needs --machine M.json, --world N, --global-batch B and "
                "--plan-out DIR");
  if (reportNodes.getNumOccurrences() &&
      (StringRef(reportNodes).getAsInteger(10, planNodesValue) ||
       planNodesValue < 1 || planWorld % planNodesValue != 0))
    return fail("--nodes " + reportNodes +
                ": expected a number of nodes dividing --world " +
                Twine(int64_t(planWorld)));
  zero::plan::PlanRequest r;
  r.zeroOpt = llvm::sys::fs::getMainExecutable(argv0, (void *)&runPlan);
  SmallString<256> run(llvm::sys::path::parent_path(r.zeroOpt));
  llvm::sys::path::append(run, "zero-run");
  r.zeroRun = std::string(run);
  if (!llvm::sys::fs::can_execute(r.zeroRun))
    return fail(
        "simulates each layout with zero-run, expected beside zero-opt at " +
        r.zeroRun);
  r.model = inputFilename;
  for (const std::string &spec : inputShapes) {
    auto [name, dims] = StringRef(spec).split('=');
    std::vector<int64_t> shape;
    if (!zero::parseShape(dims, shape) || shape.empty())
      return fail("--input-shape '" + spec +
                  "': expected NAME=BxD1x... (B, the "
                  "micro-batch, is the plan's to choose)");
    r.shapes[name.str()] = shape;
  }
  if (r.shapes.empty())
    return fail(
        "needs the inputs' shapes (--input-shape NAME=BxS ...; B is replaced "
        "by each layout's micro-batch)");
  auto flag = [&](const char *name, const std::string &value) {
    if (!value.empty())
      r.trainingArgs.push_back(std::string("--") + name + "=" + value);
  };
  flag("loss", lossSpec);
  flag("optimizer", optimizerSpec);
  flag("loss-output", trainOutput);
  flag("freeze", freezeRegex);
  flag("no-decay", noDecayRegex);
  if (fp32Loss)
    r.trainingArgs.push_back("--fp32-loss");
  r.machine = planMachine;
  r.baseConfig = trainConfig;
  r.world = planWorld;
  r.nodes = planNodesValue;
  r.globalBatch = planGlobalBatch;
  r.outDir = planOut;
  r.exact = planExact;
  r.jobs = planJobs;
  if (!planMemory.empty() && !(r.memoryCap = parseSize(planMemory)))
    return fail("--max-memory-per-rank '" + planMemory +
                "': expected a positive size (bytes, or 40GiB, 512MiB, ...)");
  return zero::plan::runPlanner(r);
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerCommandLine();
  PassPipelineCLParser passPipeline("", "Compiler passes to run", "p");
  if (asksForHelp(argc, argv))
    listOnlyToolOptionsInHelp();
  std::vector<std::string> args = withConfigInPipeline(argc, argv);
  std::vector<const char *> argPointers;
  for (const std::string &a : args)
    argPointers.push_back(a.c_str());
  cl::ParseCommandLineOptions(int(argPointers.size()), argPointers.data(),
                              "zero compiler driver: ONNX import, ZeRO passes\n");
  if (!planMode.empty())
    return runPlan(argv[0]);
  if (estimateMemory.getNumOccurrences()) {
    std::optional<MemoryEstimateSpec> spec = parseMemoryEstimate(estimateMemory);
    if (!spec)
      return 1;
    if (spec->psi > 0 || !isONNXInput(inputFilename)) {
      if (spec->psi <= 0 || spec->dp < 1) {
        llvm::errs() << "zero-opt: error: --estimate-memory needs params=COUNT and "
                        "dp=RANKS, e.g. \"params=7.5e9 dp=64 precision=mixed\" (or an "
                        "ONNX model and --train, whose parameters it counts)\n";
        return 1;
      }
      return printMemoryEstimate(spec->psi, spec->dp, spec->mixed.value_or(true),
                                 /*counted=*/false);
    }
    memoryEstimateOfModel = *spec;
  }


  DialectRegistry registry;
  registry.insert<zero::onnx::ONNXDialect, zero::dist::ZeroDialect,
                  zero::zrt::ZRTDialect, func::FuncDialect,
                  ml_program::MLProgramDialect>();
  auto buildPipeline = [&](PassManager &pm) {
    return buildPassPipeline(pm, passPipeline);
  };
  if (isONNXInput(inputFilename)) {
    MLIRContext context(registry);
    context.loadAllAvailableDialects();
    PassManager pm(&context);
    if (failed(buildPipeline(pm)))
      return 1;
    return importAndWrite(context, pm);
  }
  return processMLIRInput(registry, buildPipeline);
}
