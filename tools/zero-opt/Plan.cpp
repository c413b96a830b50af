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
// A deep model (more repeated blocks than four per pipeline stage) is not
// compiled whole per layout: each layout is compiled and simulated as
// proxies, the model cut to its first S and 2S blocks (zero-truncate-layers;
// S the pipeline stages; 2S and 4S with activation checkpointing, 4 and 8
// blocks without a pipeline) and, with more micro-batches per step than a proxy
// needs (2 and 4; a pipeline's S and 2S), with fewer; the step time, the
// work (MFU x step) and the memory are extrapolated bilinearly in blocks and
// micro-batches (a stack of equal blocks costs a constant plus a part per
// block, a step a constant plus a part per micro-batch). Layouts run
// --plan-jobs at once.
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
#include <atomic>
#include <functional>
#include <optional>
#include <thread>

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
  int64_t live = 0; ///< that rank's live peak (device_peak_bytes)
  std::string arena;
  int64_t arenaBytes = 0;                ///< that rank's largest arena
  std::map<std::string, int64_t> arenas; ///< that rank's arenas
  std::string dir;
  /// Empty: simulated whole; else the proxies it is extrapolated from.
  std::string basis;
  /// Only its memory is known (over the cap before its step was simulated).
  bool partial = false;
  bool fits(int64_t cap) const { return built && !partial && peak <= cap; }
};

/// One program to compile and simulate: a layout, or a proxy of it with the
/// first `blocks` repeated blocks (0: all) and `micro` micro-batches per step
/// (0: the layout's).
struct Job {
  Layout layout;
  int64_t blocks = 0, micro = 0;
  std::string dir;
  /// What zero-opt compiles: the model, or a proxy's truncated forward
  /// (imported once per depth and micro-batch size).
  std::string source;
  /// 1: a proxy of the second micro-batch count, compiled only when the
  /// first's memory does not already exceed the cap.
  int phase = 0;
  bool skipped = false;
  Outcome result;
};

/// f at (x, y) from its values at (x0|x1, y0|y1): bilinear (linear in one
/// variable when the other has one point).
double bilinear(ArrayRef<int64_t> xs, ArrayRef<int64_t> ys, ArrayRef<double> f,
                int64_t x, int64_t y) {
  auto at = [&](size_t i, size_t j) { return f[i * ys.size() + j]; };
  double tx = xs.size() > 1 ? double(x - xs[0]) / double(xs[1] - xs[0]) : 0;
  double ty = ys.size() > 1 ? double(y - ys[0]) / double(ys[1] - ys[0]) : 0;
  size_t i1 = xs.size() - 1, j1 = ys.size() - 1;
  return at(0, 0) * (1 - tx) * (1 - ty) + at(i1, 0) * tx * (1 - ty) +
         at(0, j1) * (1 - tx) * ty + at(i1, j1) * tx * ty;
}

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
    if (!r_.exact)
      probeBlocks();
    evaluate(baseLayouts());
    secondRound();
    return finish();
  }

private:
  const PlanRequest &r_;
  Machine machine_;
  json::Object base_;
  int64_t cap_ = 0;
  int64_t nodes_ = 0; ///< the nodes the world spans (0: the machine's own)
  /// The model's repeated blocks when layouts are planned on proxies (0:
  /// every layout compiled whole).
  int64_t blocks_ = 0;
  std::vector<Outcome> outcomes_;

  /// How many repeated blocks the model has (zero-opt --truncate-layers'
  /// note); proxies are used when there are more than four per stage of
  /// the deepest pipeline tried.
  void probeBlocks() {
    const std::string log = r_.outDir + "/probe.txt";
    std::vector<std::string> args{r_.zeroOpt, r_.model};
    appendShapes(args,
                 r_.shapes.empty() ? 1 : r_.shapes.begin()->second.front());
    for (const char *a : {"--no-weights", "--truncate-layers=1", "-o"})
      args.push_back(a);
    args.push_back(r_.outDir + "/probe.mlir");
    const bool ok = execute(args, log);
    sys::fs::remove(r_.outDir + "/probe.mlir");
    const std::string logText = readText(log);
    StringRef text = logText;
    int64_t blocks = 0;
    if (size_t at = text.find("kept 1 of "); ok && at != StringRef::npos)
      text.substr(at + 10).take_while(isDigit).getAsInteger(10, blocks);
    if (blocks > 4 * std::min<int64_t>(8, r_.world))
      blocks_ = blocks;
    outs() << "zero-opt --plan auto: " << blocks << " repeated blocks; "
           << (blocks_ ? "each layout simulated on proxies and extrapolated"
               : ok    ? "each layout compiled whole"
                       : "each layout compiled whole (" + lastLine(text) + ")")
           << "\n";
  }

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

  /// Checkpointing, offload and ZeRO++ where the first round calls for them,
  /// in waves (a wave's layouts at once): ZeRO++ beside every stage-3 layout
  /// across nodes and checkpointing for each layout over the memory; then
  /// the optimizer offloaded (stages 1-3) where checkpointing did not fit;
  /// then both where the offload alone did not.
  void secondRound() {
    const bool acrossNodes = nodes_ > 1;
    std::vector<Layout> wave;
    for (size_t i = 0, n = outcomes_.size(); i < n; ++i) {
      const Outcome &o = outcomes_[i];
      if (!o.built)
        continue;
      if (acrossNodes && o.layout.stage == 3 && r_.world / nodes_ > 1) {
        Layout z = o.layout;
        z.zeropp = true;
        z.hpz = r_.world / nodes_;
        wave.push_back(z);
      }
      if (!o.fits(cap_)) {
        Layout c = o.layout;
        c.checkpoint = true;
        wave.push_back(c);
      }
    }
    size_t from = outcomes_.size();
    evaluate(wave);
    wave.clear();
    for (size_t i = from, n = outcomes_.size(); i < n; ++i)
      if (const Outcome &o = outcomes_[i];
          o.layout.checkpoint && !o.fits(cap_) && o.layout.stage > 0) {
        Layout off = o.layout;
        off.checkpoint = false;
        off.offload = true;
        wave.push_back(off);
      }
    from = outcomes_.size();
    evaluate(wave);
    wave.clear();
    for (size_t i = from, n = outcomes_.size(); i < n; ++i)
      if (const Outcome &o = outcomes_[i]; !o.fits(cap_)) {
        Layout both = o.layout;
        both.checkpoint = true;
        wave.push_back(both);
      }
    evaluate(wave);
  }

  /// The layout's ds_config; a proxy's with `accum` micro-batches a step.
  std::string configText(const Layout &l, int64_t accum = 0) const {
    json::Object cfg = base_;
    cfg["train_batch_size"] = accum ? l.dp * l.micro * accum : r_.globalBatch;
    cfg["train_micro_batch_size_per_gpu"] = l.micro;
    cfg["gradient_accumulation_steps"] = accum ? accum : l.accum;
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

  /// The proxies of `l`: its blocks (0: all) and micro-batches (0: its own).
  std::pair<SmallVector<int64_t, 2>, SmallVector<int64_t, 2>>
  proxyPoints(const Layout &l) const {
    SmallVector<int64_t, 2> blocks{0}, micro{0};
    if (!blocks_)
      return {blocks, micro};
    // With activation checkpointing the step's peak holds every checkpoint
    // and the last blocks' activations whole: linear in depth from two blocks
    // a stage on in a pipeline, from four without one (measured:
    // bench/plan_proxies.py).
    const int64_t perStage = !l.checkpoint ? 1 : l.pp > 1 ? 2 : 4;
    if (blocks_ > 4 * perStage * l.pp)
      blocks = {perStage * l.pp, 2 * perStage * l.pp};
    // A pipeline's steady state needs a micro-batch per stage.
    const int64_t least = l.pp > 1 ? l.pp : 2;
    if (l.accum > 2 * least)
      micro = {least, 2 * least};
    return {blocks, micro};
  }

  /// Compiles and simulates each layout (as its proxies where the model is
  /// deep), --plan-jobs at once; records the outcomes in order.
  void evaluate(const std::vector<Layout> &layouts) {
    std::vector<Job> jobs;
    std::vector<std::pair<size_t, size_t>> ranges;
    for (const Layout &l : layouts) {
      const std::string dir = r_.outDir + "/layouts/" +
                              std::to_string(outcomes_.size() + ranges.size());
      auto [blocks, micro] = proxyPoints(l);
      const size_t begin = jobs.size();
      for (int64_t k : blocks)
        for (auto [mi, m] : llvm::enumerate(micro)) {
          Job j;
          j.layout = l;
          j.blocks = k;
          j.micro = m;
          j.phase = int(mi);
          j.dir = k || m ? formatv("{0}/proxy-{1}-blocks-{2}-micro", dir,
                                   k ? k : blocks_, m ? m : l.accum)
                               .str()
                         : dir;
          jobs.push_back(std::move(j));
        }
      ranges.push_back({begin, jobs.size()});
    }
    // The proxies' forwards: the model imported and truncated once per depth
    // and micro-batch size (an import of a deep model costs more than the
    // compile of a proxy).
    std::vector<std::pair<int64_t, int64_t>> forwards;
    for (Job &j : jobs) {
      j.source = r_.model;
      if (!j.blocks)
        continue;
      j.source = formatv("{0}/proxies/blocks-{1}-micro-batch-{2}.mlir",
                         r_.outDir, j.blocks, j.layout.micro);
      if (!sys::fs::exists(j.source) &&
          !llvm::is_contained(forwards,
                              std::make_pair(j.blocks, j.layout.micro)))
        forwards.push_back({j.blocks, j.layout.micro});
    }
    sys::fs::create_directories(r_.outDir + "/proxies");
    parallel(forwards.size(), [&](size_t i) {
      auto [blocks, micro] = forwards[i];
      std::vector<std::string> args{r_.zeroOpt, r_.model};
      appendShapes(args, micro);
      args.push_back("--no-weights");
      args.push_back("--truncate-layers=" + std::to_string(blocks));
      args.push_back("-o");
      args.push_back(formatv("{0}/proxies/blocks-{1}-micro-batch-{2}.mlir",
                             r_.outDir, blocks, micro));
      execute(args, formatv("{0}/proxies/blocks-{1}-micro-batch-{2}.txt",
                            r_.outDir, blocks, micro)
                        .str());
    });
    // The first micro-batch count's proxies; a layout whose memory there,
    // extrapolated to every block, already exceeds the cap is not compiled
    // at the second (more micro-batches never hold less).
    std::vector<size_t> order;
    for (auto [i, j] : llvm::enumerate(jobs))
      if (j.phase == 0)
        order.push_back(i);
    parallel(order.size(), [&](size_t i) { runJob(jobs[order[i]]); });
    order.clear();
    for (auto [i, range] : llvm::enumerate(ranges)) {
      MutableArrayRef<Job> own = MutableArrayRef<Job>(jobs).slice(
          range.first, range.second - range.first);
      const bool over = overAtFirst(layouts[i], own);
      for (auto [j, job] : llvm::enumerate(own))
        if (job.phase == 1) {
          job.skipped = over;
          if (!over)
            order.push_back(range.first + j);
        }
    }
    parallel(order.size(), [&](size_t i) { runJob(jobs[order[i]]); });
    for (auto [i, range] : llvm::enumerate(ranges)) {
      Outcome o = combine(
          layouts[i],
          ArrayRef<Job>(jobs).slice(range.first, range.second - range.first));
      o.dir = r_.outDir + "/layouts/" + std::to_string(outcomes_.size());
      outs() << "  " << o.layout.describe() << ": "
             << (o.partial ? formatv("{0:F1} MiB per rank",
                                     double(o.peak) / double(1 << 20))
                                 .str()
                 : o.built ? formatv("{0:F6} s/step, {1:F1} MiB per rank",
                                     o.step, double(o.peak) / double(1 << 20))
                                 .str()
                           : "not built (" + o.why + ")")
             << (o.basis.empty() ? "" : " [" + o.basis + "]") << "\n";
      outs().flush();
      outcomes_.push_back(std::move(o));
    }
  }

  /// fn(0..n-1) on --plan-jobs threads.
  void parallel(size_t n, const std::function<void(size_t)> &fn) const {
    const unsigned threads = std::max(
        1u, std::min<unsigned>(r_.jobs ? r_.jobs
                                       : std::thread::hardware_concurrency(),
                               unsigned(std::max<size_t>(n, 1))));
    std::atomic<size_t> next{0};
    std::vector<std::thread> workers;
    for (unsigned w = 0; w < threads; ++w)
      workers.emplace_back([&] {
        for (size_t i; (i = next++) < n;)
          fn(i);
      });
    for (std::thread &t : workers)
      t.join();
  }

  /// --input-shape for each input, dimension 0 the micro-batch.
  void appendShapes(std::vector<std::string> &args, int64_t micro) const {
    for (const auto &[name, dims] : r_.shapes) {
      std::vector<std::string> d;
      for (auto [i, x] : llvm::enumerate(dims))
        d.push_back(std::to_string(i == 0 ? micro : x));
      args.push_back("--input-shape=" + name + "=" + join(d, "x"));
    }
  }

  /// Compiles and simulates one program (a layout or a proxy of it).
  void runJob(Job &j) {
    Outcome &o = j.result;
    o.layout = j.layout;
    o.dir = j.dir;
    sys::fs::create_directories(j.dir);
    std::string err;
    const std::string cfg = j.dir + "/ds_config.json",
                      zrt = j.dir + "/program.zrt",
                      sim = j.dir + "/simulation.json",
                      log = j.dir + "/log.txt";
    if (!writeFile(cfg, configText(j.layout, j.micro), err) ||
        !writeFile(j.dir + "/zero-pipeline.txt", j.layout.zeroPipeline() + "\n",
                   err))
      o.why = err;
    else if (!compile(j, cfg, zrt, log))
      o.why = "zero-opt: " + lastLine(readText(log));
    else if (!simulate(zrt, sim, log))
      o.why = "zero-run --simulate: " + lastLine(readText(log));
    else
      readSimulation(sim, o);
  }

  /// Whether `l`'s proxies at their first micro-batch count, extrapolated
  /// to every block, exceed the memory per rank.
  bool overAtFirst(const Layout &l, ArrayRef<Job> jobs) const {
    if (llvm::all_of(jobs, [](const Job &j) { return j.phase == 0; }) ||
        llvm::any_of(
            jobs, [](const Job &j) { return j.phase == 0 && !j.result.built; }))
      return false; // one micro-batch count (nothing to skip), or a proxy
                    // failed
    // The live peak, extrapolated: below the planned arenas.
    return atFirstCount(jobs, [](const Outcome &r) { return double(r.live); }) >
           double(cap_);
  }

  /// `value` of the proxies at the first micro-batch count, extrapolated
  /// (linearly) to every block.
  double atFirstCount(ArrayRef<Job> jobs,
                      function_ref<double(const Outcome &)> value) const {
    SmallVector<int64_t, 2> xs;
    SmallVector<double, 2> f;
    for (const Job &j : jobs)
      if (j.phase == 0) {
        xs.push_back(j.blocks ? j.blocks : blocks_);
        f.push_back(value(j.result));
      }
    const int64_t y[] = {0};
    return bilinear(xs, y, f, blocks_, 0);
  }

  /// A layout's outcome from its program, or extrapolated from its proxies'
  /// (bilinear in blocks and micro-batches: step time, work = MFU x step,
  /// the peak and the largest arena of the last proxy).
  Outcome combine(const Layout &l, ArrayRef<Job> jobs) const {
    if (jobs.size() == 1 && !jobs[0].blocks && !jobs[0].micro)
      return jobs[0].result;
    Outcome o;
    o.layout = l;
    auto [blocks, micro] = proxyPoints(l);
    if (llvm::any_of(jobs, [](const Job &j) { return j.skipped; })) {
      // Over the memory at the first micro-batch count already.
      o.arena = jobs.front().result.arena;
      o.peak = int64_t(
          atFirstCount(jobs, [](const Outcome &r) { return double(r.live); }));
      o.arenaBytes = int64_t(
          std::max(0.0, atFirstCount(jobs, [&](const Outcome &r) {
                     auto it = r.arenas.find(o.arena);
                     return it == r.arenas.end() ? 0.0 : double(it->second);
                   })));
      SmallVector<int64_t, 2> xs;
      for (const Job &j : jobs)
        if (j.phase == 0)
          xs.push_back(j.blocks ? j.blocks : blocks_);
      o.basis =
          formatv(
              "over the memory at {0} micro-batches already, extrapolated from "
              "blocks {1}; not simulated further",
              micro.front(),
              join(llvm::map_range(xs,
                                   [](int64_t x) { return std::to_string(x); }),
                   "/"))
              .str();
      o.built = true;
      o.partial = true;
      return o;
    }
    for (const Job &j : jobs)
      if (!j.skipped && !j.result.built) {
        o.why = formatv("proxy of {0} blocks, {1} micro-batches: {2}",
                        j.blocks ? j.blocks : blocks_,
                        j.micro ? j.micro : l.accum, j.result.why);
        return o;
      }
    SmallVector<int64_t, 2> xs = blocks, ys = micro;
    for (int64_t &x : xs)
      x = x ? x : blocks_;
    for (int64_t &y : ys)
      y = y ? y : l.accum;
    auto extrapolate = [&](auto value) {
      SmallVector<double, 4> f;
      for (const Job &j : jobs)
        f.push_back(double(value(j.result)));
      return bilinear(xs, ys, f, blocks_, l.accum);
    };
    o.step = extrapolate([](const Outcome &r) { return r.step; });
    const double work =
        extrapolate([](const Outcome &r) { return r.mfu * r.step; });
    o.mfu = o.step > 0 ? work / o.step : 0;
    // The arenas as planned, extrapolated; the live peak too (it extrapolates
    // exactly where the arenas' packing does not), and the larger of the two:
    // the planned arenas never hold less than the live peak.
    o.live = int64_t(std::max(
        0.0, extrapolate([](const Outcome &r) { return double(r.live); })));
    o.peak = std::max(o.live,
                      int64_t(std::max(0.0, extrapolate([](const Outcome &r) {
                                         return double(r.peak);
                                       }))));
    o.arena = jobs.back().result.arena;
    o.arenaBytes = int64_t(std::max(0.0, extrapolate([&](const Outcome &r) {
                                      auto it = r.arenas.find(o.arena);
                                      return it == r.arenas.end()
                                                 ? 0.0
                                                 : double(it->second);
                                    })));
    o.basis = formatv("extrapolated: blocks {0}, micro-batches {1}",
                      join(llvm::map_range(
                               xs, [](int64_t x) { return std::to_string(x); }),
                           "/"),
                      join(llvm::map_range(
                               ys, [](int64_t y) { return std::to_string(y); }),
                           "/"))
                  .str();
    o.built = true;
    return o;
  }

  bool execute(ArrayRef<std::string> args, StringRef log) {
    std::vector<StringRef> argv(args.begin(), args.end());
    std::optional<StringRef> redirects[] = {StringRef(""), log, log};
    return sys::ExecuteAndWait(args.front(), argv, std::nullopt, redirects) ==
           0;
  }

  bool compile(const Job &j, StringRef cfg, StringRef zrt, StringRef log) {
    std::vector<std::string> args{r_.zeroOpt, j.source};
    if (!j.blocks)
      appendShapes(args, j.layout.micro); // a proxy's forward has them
    args.insert(args.end(), r_.trainingArgs.begin(), r_.trainingArgs.end());
    args.push_back("--train");
    args.push_back("--config=" + cfg.str());
    if (std::string zp = j.layout.zeroPipeline(); !zp.empty())
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
      o.live = int64_t(
          rank->getNumber("device_peak_bytes")
              .value_or(rank->getNumber("peak_bytes").value_or(double(peak))));
      o.arenas.clear();
      if (const json::Object *arenas = rank->getObject("arenas"))
        for (const auto &[name, bytes] : *arenas) {
          int64_t b = int64_t(bytes.getAsNumber().value_or(0));
          o.arenas[name.str()] = b;
          if (b > o.arenaBytes) {
            o.arenaBytes = b;
            o.arena = name.str();
          }
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

  /// Every layout tried, in order, as plan.json: what plan.txt says, with
  /// bytes and whether it was extrapolated.
  std::string planJson() const {
    json::Array layouts;
    for (const Outcome &o : outcomes_) {
      json::Object l{{"layout", o.layout.describe()},
                     {"dir", o.dir},
                     {"built", o.built},
                     {"fits", o.fits(cap_)}};
      if (!o.built)
        l["why"] = o.why;
      if (o.built && !o.partial) {
        l["step_s"] = o.step;
        l["mfu"] = o.mfu;
      }
      if (o.built) {
        l["planned_bytes"] = o.peak;
        l["live_bytes"] = o.live;
      }
      if (!o.basis.empty())
        l["extrapolated"] = o.basis;
      layouts.push_back(std::move(l));
    }
    json::Object root{{"memory_per_rank", cap_},
                      {"repeated_blocks", blocks_},
                      {"layouts", std::move(layouts)}};
    std::string text;
    raw_string_ostream os(text);
    os << formatv("{0:2}", json::Value(std::move(root))) << "\n";
    return text;
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
      os << formatv(
          "{0,4}  {1,16:F6}  {2,10:F0}  {3,7:F4}  {4,10:F1}  {5}{6}\n", i + 1,
          o->step, tokensPerStep() / o->step, o->mfu,
          double(o->peak) / double(1 << 20), o->layout.describe(),
          o->basis.empty() ? "" : " *");
    if (blocks_)
      os << "\n* extrapolated from proxies of the model's first S and 2S of "
            "its "
         << blocks_
         << " repeated blocks (S: the pipeline stages; with checkpointing 2S "
            "and 4S,\n"
            "  4 and 8 without a pipeline)\n"
            "  and of 2 and 4 micro-batches a step (a pipeline's S and 2S) "
            "where the layout "
            "has more;\n  --plan-exact compiles each layout whole\n";
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
    if (!writeFile(r_.outDir + "/plan.txt", text, err) ||
        !writeFile(r_.outDir + "/plan.json", planJson(), err)) {
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
