//===- Plan.cpp - zero-opt --plan auto: pick a layout by simulating it ----===//
//
// The search has two rounds. The first compiles every base layout: each ZeRO
// stage (0 only without replicas), each pipeline depth pp dividing the world
// (up to 8), each micro-batch m (a power of two) with dp x m dividing the
// global batch, the rest gradient accumulation (a pipeline's micro-batches).
// The second tries, for each base layout that did not fit the memory per
// rank, activation checkpointing of every layer, then the optimizer offloaded
// to the host (stages 1-3), then both; across nodes, ZeRO++ (qwZ 8, hpZ over
// the node's ranks, qgZ 4) beside every stage-3 layout. Each layout is a
// ds_config (the base config's other keys kept: its precision, optimizer,
// clipping) and a --zero-pipeline string; zero-opt --no-weights compiles it
// and zero-run --simulate predicts its step and memory.
//
//===----------------------------------------------------------------------===//

#include "Plan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <optional>

using namespace llvm;

namespace zero::plan {
namespace {

/// One layout of the training step over the world.
struct Layout {
  int64_t stage = 0, pp = 1, dp = 1, micro = 1, accum = 1;
  bool checkpoint = false, offload = false, zeropp = false;
  int64_t hpz = 1;

  std::string describe() const {
    std::string s = "ZeRO-" + std::to_string(stage);
    if (pp > 1)
      s += " pp=" + std::to_string(pp);
    s += " dp=" + std::to_string(dp) + " micro=" + std::to_string(micro) +
         " accum=" + std::to_string(accum);
    if (checkpoint)
      s += " checkpoint";
    if (offload)
      s += " offload=cpu";
    if (zeropp)
      s += " zero++(hpz=" + std::to_string(hpz) + ")";
    return s;
  }

  /// The --zero-pipeline string beside the ds_config (empty: none).
  std::string zeroPipeline() const {
    std::vector<std::string> parts;
    if (pp > 1)
      parts.push_back("pp=" + std::to_string(pp));
    if (checkpoint)
      parts.push_back("activation-checkpoint-interval=1");
    return join(parts, " ");
  }
};

/// What the simulation of one layout predicts.
struct Outcome {
  Layout layout;
  bool built = false;
  std::string why; ///< not built: the compiler's or simulator's message
  double step = 0, mfu = 0;
  int64_t peak = 0; ///< device bytes of the rank with the most
  std::string arena;
  int64_t arenaBytes = 0; ///< that rank's largest arena
  std::string dir;
  bool fits(int64_t cap) const { return built && peak <= cap; }
};

/// The machine facts the search needs.
struct Machine {
  int64_t memory = 0, nodes = 1, devicesPerNode = 1;
};

std::optional<json::Value> readJson(StringRef path, std::string &err) {
  auto buf = MemoryBuffer::getFile(path);
  if (!buf) {
    err = path.str() + ": " + buf.getError().message();
    return std::nullopt;
  }
  Expected<json::Value> v = json::parse((*buf)->getBuffer());
  if (!v) {
    err = path.str() + ": not valid JSON: " + toString(v.takeError());
    return std::nullopt;
  }
  return std::move(*v);
}

bool writeFile(StringRef path, StringRef text, std::string &err) {
  std::error_code ec;
  raw_fd_ostream os(path, ec);
  if (ec) {
    err = path.str() + ": " + ec.message();
    return false;
  }
  os << text;
  return true;
}

std::string readText(StringRef path) {
  auto buf = MemoryBuffer::getFile(path);
  return buf ? (*buf)->getBuffer().str() : std::string();
}

/// The last non-empty line of `text` (a failed command's message).
std::string lastLine(StringRef text) {
  SmallVector<StringRef> lines;
  text.split(lines, '\n', -1, false);
  for (StringRef l : llvm::reverse(lines))
    if (!l.trim().empty())
      return l.trim().str();
  return "(no message)";
}

class Planner {
public:
  explicit Planner(const PlanRequest &r) : r_(r) {}

  int run() {
    std::string err;
    if (!readMachine(err) || !readBase(err) || !prepareDir(err)) {
      errs() << "zero-opt: error: " << err << "\n";
      return 1;
    }
    cap_ = r_.memoryCap > 0 ? r_.memoryCap : machine_.memory;
    for (const Layout &l : baseLayouts())
      try_(l);
    secondRound();
    return finish();
  }

private:
  const PlanRequest &r_;
  Machine machine_;
  json::Object base_;
  int64_t cap_ = 0;
  int64_t nodes_ = 0; ///< the nodes the world spans (0: the machine's own)
  std::vector<Outcome> outcomes_;

  bool readMachine(std::string &err) {
    std::optional<json::Value> m = readJson(r_.machine, err);
    if (!m)
      return false;
    const json::Object *o = m->getAsObject();
    const json::Object *device = o ? o->getObject("device") : nullptr;
    std::optional<double> memory =
        device ? device->getNumber("memory_bytes") : std::nullopt;
    if (!memory || *memory <= 0) {
      err = r_.machine +
            ": device.memory_bytes: expected a positive number (the memory "
            "per device the plan must fit)";
      return false;
    }
    machine_.memory = int64_t(*memory);
    if (std::optional<int64_t> d = o->getInteger("devices_per_node"))
      machine_.devicesPerNode = std::max<int64_t>(1, *d);
    if (std::optional<int64_t> n = o->getInteger("nodes"))
      machine_.nodes = std::max<int64_t>(1, *n);
    // The world on nodes of the described kind: as given, or as many as
    // the world fills.
    nodes_ = r_.nodes;
    if (nodes_ == 0 && r_.world > machine_.nodes * machine_.devicesPerNode) {
      if (r_.world % machine_.devicesPerNode != 0) {
        err = std::to_string(r_.world) + " ranks do not fill nodes of " +
              std::to_string(machine_.devicesPerNode) + " devices (" +
              r_.machine + "); give --nodes K";
        return false;
      }
      nodes_ = r_.world / machine_.devicesPerNode;
    }
    return true;
  }

  bool readBase(std::string &err) {
    if (r_.baseConfig.empty())
      return true;
    std::optional<json::Value> c = readJson(r_.baseConfig, err);
    if (!c)
      return false;
    if (!c->getAsObject()) {
      err = r_.baseConfig + ": a ds_config must be a JSON object";
      return false;
    }
    base_ = *c->getAsObject();
    return true;
  }

  bool prepareDir(std::string &err) {
    if (std::error_code ec =
            sys::fs::create_directories(r_.outDir + "/layouts")) {
      err = r_.outDir + ": " + ec.message();
      return false;
    }
    return true;
  }

  std::vector<Layout> baseLayouts() const {
    std::vector<Layout> layouts;
    for (int64_t pp = 1; pp <= std::min<int64_t>(8, r_.world); pp *= 2) {
      if (r_.world % pp != 0)
        continue;
      const int64_t dp = r_.world / pp;
      for (int64_t m = 1; m <= 64 && dp * m <= r_.globalBatch; m *= 2) {
        if (r_.globalBatch % (dp * m) != 0)
          continue;
        for (int64_t stage = 0; stage <= (dp > 1 ? 3 : 0); ++stage) {
          Layout l;
          l.stage = stage;
          l.pp = pp;
          l.dp = dp;
          l.micro = m;
          l.accum = r_.globalBatch / (dp * m);
          layouts.push_back(l);
        }
      }
    }
    return layouts;
  }

  /// Checkpointing, offload and ZeRO++ where the first round calls for them.
  void secondRound() {
    const size_t first = outcomes_.size();
    const bool acrossNodes = nodes_ > 1;
    for (size_t i = 0; i < first; ++i) {
      const Outcome o = outcomes_[i];
      if (!o.built)
        continue;
      Layout l = o.layout;
      if (acrossNodes && l.stage == 3 && r_.world / nodes_ > 1) {
        Layout z = l;
        z.zeropp = true;
        z.hpz = r_.world / nodes_;
        try_(z);
      }
      if (o.fits(cap_))
        continue;
      Layout c = l;
      c.checkpoint = true;
      if (try_(c).fits(cap_) || l.stage == 0)
        continue;
      Layout off = l;
      off.offload = true;
      if (try_(off).fits(cap_))
        continue;
      off.checkpoint = true;
      try_(off);
    }
  }

  std::string configText(const Layout &l) const {
    json::Object cfg = base_;
    cfg["train_batch_size"] = r_.globalBatch;
    cfg["train_micro_batch_size_per_gpu"] = l.micro;
    cfg["gradient_accumulation_steps"] = l.accum;
    json::Object zero;
    if (const json::Object *z = base_.getObject("zero_optimization"))
      zero = *z;
    zero["stage"] = l.stage;
    if (l.offload)
      zero["offload_optimizer"] = json::Object{{"device", "cpu"}};
    if (l.zeropp) {
      zero["zero_quantized_weights"] = true;
      zero["zero_quantized_gradients"] = true;
      zero["zero_hpz_partition_size"] = l.hpz;
    }
    cfg["zero_optimization"] = std::move(zero);
    std::string text;
    raw_string_ostream os(text);
    os << formatv("{0:2}", json::Value(std::move(cfg))) << "\n";
    return text;
  }

  /// Compiles and simulates `l`; records and returns the outcome.
  const Outcome &try_(const Layout &l) {
    Outcome o;
    o.layout = l;
    o.dir = r_.outDir + "/layouts/" + std::to_string(outcomes_.size());
    sys::fs::create_directories(o.dir);
    std::string err;
    const std::string cfg = o.dir + "/ds_config.json",
                      zrt = o.dir + "/program.zrt",
                      sim = o.dir + "/simulation.json",
                      log = o.dir + "/log.txt";
    if (!writeFile(cfg, configText(l), err) ||
        !writeFile(o.dir + "/zero-pipeline.txt", l.zeroPipeline() + "\n",
                   err)) {
      o.why = err;
    } else if (!compile(l, cfg, zrt, log)) {
      o.why = "zero-opt: " + lastLine(readText(log));
    } else if (!simulate(zrt, sim, log)) {
      o.why = "zero-run --simulate: " + lastLine(readText(log));
    } else {
      readSimulation(sim, o);
    }
    outs() << "  " << l.describe() << ": "
           << (o.built ? formatv("{0:F6} s/step, {1:F1} MiB per rank", o.step,
                                 double(o.peak) / double(1 << 20))
                             .str()
                       : "not built (" + o.why + ")")
           << "\n";
    outs().flush();
    outcomes_.push_back(std::move(o));
    return outcomes_.back();
  }

  bool execute(ArrayRef<std::string> args, StringRef log) {
    std::vector<StringRef> argv(args.begin(), args.end());
    std::optional<StringRef> redirects[] = {StringRef(""), log, log};
    return sys::ExecuteAndWait(args.front(), argv, std::nullopt, redirects) ==
           0;
  }

  bool compile(const Layout &l, StringRef cfg, StringRef zrt, StringRef log) {
    std::vector<std::string> args{r_.zeroOpt, r_.model};
    for (const auto &[name, dims] : r_.shapes) {
      std::vector<std::string> d;
      for (auto [i, x] : llvm::enumerate(dims))
        d.push_back(std::to_string(i == 0 ? l.micro : x));
      args.push_back("--input-shape=" + name + "=" + join(d, "x"));
    }
    args.insert(args.end(), r_.trainingArgs.begin(), r_.trainingArgs.end());
    args.push_back("--train");
    args.push_back("--config=" + cfg.str());
    if (std::string zp = l.zeroPipeline(); !zp.empty())
      args.push_back("--zero-pipeline=" + zp);
    for (const char *a : {"--no-weights", "--emit=zrt", "-o"})
      args.push_back(a);
    args.push_back(zrt.str());
    return execute(args, log);
  }

  bool simulate(StringRef zrt, StringRef sim, StringRef log) {
    std::vector<std::string> args{r_.zeroRun, zrt.str(),       "--simulate",
                                  r_.machine, "--report-json", sim.str()};
    if (nodes_ > 0) {
      args.push_back("--nodes");
      args.push_back(std::to_string(nodes_));
    }
    return execute(args, log);
  }

  void readSimulation(StringRef path, Outcome &o) {
    std::string err;
    std::optional<json::Value> v = readJson(path, err);
    const json::Object *s = v && v->getAsObject()
                                ? v->getAsObject()->getObject("simulation")
                                : nullptr;
    const json::Array *ranks = s ? s->getArray("ranks") : nullptr;
    if (!ranks) {
      o.why = err.empty() ? path.str() + ": no simulation" : err;
      return;
    }
    o.step = s->getNumber("step_s").value_or(0);
    o.mfu = s->getNumber("mfu").value_or(0);
    for (const json::Value &rv : *ranks) {
      const json::Object *rank = rv.getAsObject();
      if (!rank)
        continue;
      // What the device must hold: the arenas as planned (a host arena, the
      // offloaded state, is not the device's).
      int64_t peak =
          int64_t(rank->getNumber("device_planned_bytes")
                      .value_or(rank->getNumber("peak_bytes").value_or(0)));
      if (peak < o.peak)
        continue;
      o.peak = peak;
      if (const json::Object *arenas = rank->getObject("arenas"))
        for (const auto &[name, bytes] : *arenas)
          if (int64_t b = int64_t(bytes.getAsNumber().value_or(0));
              b > o.arenaBytes) {
            o.arenaBytes = b;
            o.arena = name.str();
          }
    }
    o.built = true;
  }

  /// Tokens a step trains: the global batch times the inputs' second
  /// dimension (the sequence), when they have one.
  double tokensPerStep() const {
    int64_t seq = 1;
    for (const auto &[name, dims] : r_.shapes)
      if (dims.size() >= 2)
        seq = std::max(seq, dims[1]);
    return double(r_.globalBatch) * double(seq);
  }

  int finish() {
    std::vector<const Outcome *> fit, over, broken;
    for (const Outcome &o : outcomes_)
      (o.fits(cap_) ? fit : o.built ? over : broken).push_back(&o);
    llvm::stable_sort(fit, [](const Outcome *a, const Outcome *b) {
      return a->step < b->step;
    });
    std::string text;
    raw_string_ostream os(text);
    const double gib = double(1LL << 30);
    os << "zero-opt --plan auto: " << r_.model << " on " << r_.world << " ranks"
       << (nodes_ > 0 ? " (" + std::to_string(nodes_) + " nodes)"
                      : std::string())
       << ", global batch " << r_.globalBatch << ", machine " << r_.machine
       << "\n"
       << formatv("memory per rank: {0} bytes ({1:F2} GiB)", cap_,
                  double(cap_) / gib)
       << "\n"
       << outcomes_.size() << " layouts simulated: " << fit.size() << " fit, "
       << over.size() << " over the memory, " << broken.size()
       << " not built\n\n"
       << "rank  predicted s/step    tokens/s      MFU    MiB/rank  layout\n";
    for (auto [i, o] : llvm::enumerate(fit))
      os << formatv("{0,4}  {1,16:F6}  {2,10:F0}  {3,7:F4}  {4,10:F1}  {5}\n",
                    i + 1, o->step, tokensPerStep() / o->step, o->mfu,
                    double(o->peak) / double(1 << 20), o->layout.describe());
    if (!over.empty())
      os << "\nover the memory per rank:\n";
    for (const Outcome *o : over)
      os << formatv(
          "  {0}: {1} bytes, {2} over; largest arena {3} ({4} bytes)\n",
          o->layout.describe(), o->peak, o->peak - cap_, o->arena,
          o->arenaBytes);
    if (!broken.empty())
      os << "\nnot built:\n";
    for (const Outcome *o : broken)
      os << "  " << o->layout.describe() << ": " << o->why << "\n";
    std::string err;
    if (!writeFile(r_.outDir + "/plan.txt", text, err)) {
      errs() << "zero-opt: error: " << err << "\n";
      return 1;
    }
    outs() << "\n" << text;
    if (fit.empty()) {
      errs() << "zero-opt: error: --plan auto: no layout fits " << cap_
             << " bytes per rank (" << r_.outDir
             << "/plan.txt lists each and by how much); use more ranks, a "
                "smaller micro-batch "
                "or a machine with more memory\n";
      return 1;
    }
    const Outcome &best = *fit.front();
    if (!writeFile(r_.outDir + "/ds_config.json", configText(best.layout),
                   err) ||
        !writeFile(r_.outDir + "/zero-pipeline.txt",
                   best.layout.zeroPipeline() + "\n", err)) {
      errs() << "zero-opt: error: " << err << "\n";
      return 1;
    }
    outs() << "\nchosen: " << best.layout.describe()
           << "\n  zero-opt ... --config " << r_.outDir << "/ds_config.json"
           << (best.layout.zeroPipeline().empty()
                   ? std::string()
                   : " --zero-pipeline=\"" + best.layout.zeroPipeline() + "\"")
           << "\n";
    return 0;
  }
};

} // namespace

int runPlanner(const PlanRequest &request) { return Planner(request).run(); }

} // namespace zero::plan
