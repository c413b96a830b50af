//===- Calibration.cpp - Measuring this machine for --simulate ------------===//
//
// Every figure is the median of several repetitions, each repetition long
// enough (several calls in a row) for the clock to resolve it, the figures
// timed in rounds. The kernels are the backend's own, launched on a stream
// of the backend as the executor launches them; the cost of an instruction
// is the executor's own, running small programs; the collectives are the
// communicator's. A figure is turned into the description's terms with the
// simulator's formulas read backwards: a product's rate is its FLOPs over
// its time less a one-element kernel's, the memory bandwidth an elementwise
// kernel's operand bytes over the same, a link's latency and bandwidth the
// least-squares fit of collectiveSeconds to the timed collectives.
//
//===----------------------------------------------------------------------===//

#include "run/Calibration.h"

#include "zrt/Executor.h"

#include "io/SwapFiles.h"
#include "math/FusedMath.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sys/mman.h>
#include <unistd.h>

namespace zrt {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// How long and how often each figure is timed.
struct Budget {
  int repetitions;
  double repetitionSeconds; ///< the least a repetition lasts
  /// The bytes a repetition of a collective moves (its calls are set by
  /// the size alone, so that every member makes as many).
  double collectiveBytes;
  explicit Budget(bool quick)
      : repetitions(quick ? 3 : 7), repetitionSeconds(quick ? 0.004 : 0.02),
        collectiveBytes(quick ? 16e6 : 64e6) {}
};

/// Figures timed in rounds: each round times one repetition of every
/// figure in turn, so that a burst of other work on a shared machine
/// spreads over all of them instead of spoiling one (the products' curve
/// would bend where it hit).
class RoundRobin {
public:
  explicit RoundRobin(const Budget &budget) : budget_(budget) {}
  /// Adds a figure: `call` is run once untimed now, and each repetition
  /// runs it as many times as make one last repetitionSeconds. Its index.
  Expected<size_t> add(std::function<Status()> call) {
    const Clock::time_point start = Clock::now();
    ZRT_RETURN_IF_ERROR(call());
    const double once = std::max(1e-9, secondsSince(start));
    calls_.push_back(
        int(std::clamp(budget_.repetitionSeconds / once, 1.0, 1e5)));
    figures_.push_back(std::move(call));
    return figures_.size() - 1;
  }
  /// Times the rounds; the median seconds of one call of each figure.
  Expected<std::vector<double>> run() {
    std::vector<std::vector<double>> perCall(figures_.size());
    for (int r = 0; r < budget_.repetitions; ++r)
      for (size_t f = 0; f < figures_.size(); ++f) {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < calls_[f]; ++i)
          ZRT_RETURN_IF_ERROR(figures_[f]());
        perCall[f].push_back(secondsSince(start) / calls_[f]);
      }
    std::vector<double> out;
    for (const std::vector<double> &samples : perCall)
      out.push_back(median(samples));
    return out;
  }

private:
  const Budget &budget_;
  std::vector<std::function<Status()>> figures_;
  std::vector<int> calls_;
};

/// Tensors of the backend's memory, freed with it.
class DeviceTensors {
public:
  explicit DeviceTensors(Allocator &allocator) : allocator_(allocator) {}
  ~DeviceTensors() {
    for (void *p : blocks_)
      allocator_.deallocate(p);
  }
  /// A tensor of `dtype` and `shape` filled with small values (0.125 and
  /// such: no denormals, no overflow however often a kernel runs; integers
  /// 1: a valid step counter and class index).
  Expected<TensorRef> make(DType dtype, std::vector<int64_t> shape) {
    TensorRef t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    Expected<void *> block = allocator_.allocate(t.bytes(), "calibration");
    if (!block)
      return block.status();
    blocks_.push_back(*block);
    t.data = *block;
    std::vector<uint8_t> host(t.bytes());
    const size_t n = size_t(t.numel());
    if (dtype == DType::F32) {
      for (size_t i = 0; i < n; ++i) {
        const float v = 0.125f * float(1 + i % 5);
        std::memcpy(host.data() + 4 * i, &v, 4);
      }
    } else if (dtype == DType::I64) {
      for (size_t i = 0; i < n; ++i) {
        const int64_t one = 1;
        std::memcpy(host.data() + 8 * i, &one, 8);
      }
    } else if (dtype == DType::BF16 || dtype == DType::F16) {
      // bf16 0.125 (0x3E00), f16 0.125 (0x3000)
      const uint16_t bits = dtype == DType::BF16 ? 0x3E00 : 0x3000;
      for (size_t i = 0; i < n; ++i)
        std::memcpy(host.data() + 2 * i, &bits, 2);
    } else { // int8 (quantized data): 1
      std::fill(host.begin(), host.end(), uint8_t(1));
    }
    ZRT_RETURN_IF_ERROR(
        allocator_.copyFromHost(t.data, host.data(), t.bytes()));
    return t;
  }

private:
  Allocator &allocator_;
  std::vector<void *> blocks_;
};

/// A kernel operand's type and shape.
struct Operand {
  DType dtype;
  std::vector<int64_t> shape;
};

/// The device's kernels, run on one of its streams as the executor runs
/// them (launch, then synchronize), timed in rounds.
struct KernelRunner {
  Backend &backend;
  std::unique_ptr<Stream> stream;
  DeviceTensors tensors;
  RoundRobin rounds;

  /// Adds `op` on new tensors of `dtype` and these shapes (the outputs'
  /// last) as a figure; its index.
  Expected<size_t> add(const std::string &op, DType dtype,
                       const std::vector<std::vector<int64_t>> &inputs,
                       const std::vector<int64_t> &output) {
    std::vector<Operand> in;
    for (const std::vector<int64_t> &shape : inputs)
      in.push_back({dtype, shape});
    return add(op, in, {{dtype, output}}, AttrMap());
  }

  /// Adds `op` with `attrs` on new tensors of these types and shapes.
  Expected<size_t> add(const std::string &op,
                       const std::vector<Operand> &inputs,
                       const std::vector<Operand> &outputs, AttrMap attrs) {
    KernelFn fn = backend.kernels().lookup(op);
    if (!fn)
      return Status::error("the " + backend.name() + " backend has no " + op +
                           " kernel to calibrate with");
    std::vector<TensorRef> in, out;
    const std::pair<std::vector<TensorRef> *, const std::vector<Operand> *>
        lists[] = {{&in, &inputs}, {&out, &outputs}};
    for (auto [list, operands] : lists)
      for (const Operand &o : *operands) {
        Expected<TensorRef> t = tensors.make(o.dtype, o.shape);
        if (!t)
          return t.status();
        list->push_back(*t);
      }
    Stream *s = stream.get();
    return rounds.add([s, fn, in, out, attrs]() -> Status {
      ZRT_RETURN_IF_ERROR(s->launch(fn, in, out, attrs));
      return s->synchronize();
    });
  }
};

/// A product of the ladder: [m, k] x [k, n] in `dtype`.
struct ProductShape {
  DType dtype;
  int64_t m, n, k;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

/// The products timed: f32, bf16 and f16 at min(M, N, K) = 16, 64, 256 (and
/// 1024) with the other two dimensions at least 256 (512), as a layer's
/// products of a few tokens are.
std::vector<ProductShape> productLadder(bool quick) {
  const std::vector<int64_t> ladder =
      quick ? std::vector<int64_t>{16, 64, 256}
            : std::vector<int64_t>{16, 64, 256, 1024};
  const int64_t wide = quick ? 256 : 512;
  std::vector<ProductShape> out;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (int64_t d : ladder)
      out.push_back({dtype, d, std::max(d, wide), std::max(d, wide)});
  return out;
}

/// The kernels that run slower than streaming their operands at the memory
/// bandwidth, timed for device.kernel_rates (operand bytes over the time
/// less a one-element Add's), and FusedElementwise's seconds per element of
/// an arithmetic and of a transcendental op (device.fused_elementwise).
/// Shapes are a layer's: rows x cols = the size of the memory figure's
/// vectors / 8, cols 1024 (quick: 512).
class KernelKinds {
public:
  /// `memoryElements`: the size of the memory figure's vectors.
  Status add(KernelRunner &k, bool quick, int64_t memoryElements) {
    memoryElements_ = memoryElements;
    const int64_t cols = quick ? 512 : 1024, rows = quick ? 256 : 1024;
    const int64_t n = rows * cols;
    const DType f = DType::F32;
    const Operand vec{f, {n}}, scalar{f, {}}, matrix{f, {rows, cols}},
        row{f, {cols}};
    AttrMap none;
    ZRT_RETURN_IF_ERROR(kernel(
        k, "AdamW", {vec, vec, {DType::I64, {}}, scalar, scalar, vec, vec},
        {vec, vec, vec}, none));
    ZRT_RETURN_IF_ERROR(kernel(
        k, "SGD", {vec, vec, {DType::I64, {}}, scalar, scalar}, {vec}, none));
    ZRT_RETURN_IF_ERROR(
        kernel(k, "Transpose", {matrix}, {{f, {cols, rows}}}, none));
    AttrMap heads; // [batch, seq, heads, head_dim] -> [batch, heads, seq, ...]
    heads.set("perm", AttrValue{{0, 2, 1, 3}, {}, {}});
    const int64_t seq = rows / 2, perHead = cols / 8;
    ZRT_RETURN_IF_ERROR(kernel(k, "Transpose", {{f, {2, seq, 8, perHead}}},
                               {{f, {2, 8, seq, perHead}}}, heads));
    for (const char *op : {"Softmax", "LogSoftmax"})
      ZRT_RETURN_IF_ERROR(kernel(k, op, {matrix}, {matrix}, none));
    ZRT_RETURN_IF_ERROR(kernel(k, "SoftmaxCrossEntropyLoss",
                               {matrix, {DType::I64, {rows}}}, {scalar}, none));
    ZRT_RETURN_IF_ERROR(
        kernel(k, "LayerNormalization", {matrix, row, row}, {matrix}, none));
    ZRT_RETURN_IF_ERROR(
        kernel(k, "RMSNormalization", {matrix, row}, {matrix}, none));
    for (const char *op :
         {"Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Gelu"})
      ZRT_RETURN_IF_ERROR(kernel(k, op, {vec}, {vec}, none));
    // ZeRO++'s quantization: int8 (qwZ) and int4 (qgZ) in blocks of 2048.
    for (int64_t bits : {8, 4}) {
      AttrMap q;
      q.set("bits", AttrValue{{bits}, {}, ""});
      q.set("block", AttrValue{{2048}, {}, ""});
      const Operand data{DType::I8, {n * bits / 8}},
          scales{f, {(n + 2047) / 2048}};
      ZRT_RETURN_IF_ERROR(kernel(k, "Quantize", {vec}, {data, scales}, q));
      ZRT_RETURN_IF_ERROR(kernel(k, "Dequantize", {data, scales}, {vec}, q));
    }
    // Adds small enough to stay in the caches: the bandwidth by size.
    for (int64_t elements : {int64_t(4096), int64_t(32768), int64_t(262144)}) {
      Expected<size_t> i =
          k.add("Add", DType::F32, {{elements}, {elements}}, {elements});
      if (!i)
        return i.status();
      smallAdds_.push_back({*i, elements});
    }
    // A bf16 Mul through the trampolines against the f32 one: the widening.
    const Operand half{DType::BF16, {n}};
    Expected<size_t> f32Mul = k.add("Mul", {vec, vec}, {vec}, none);
    Expected<size_t> bf16Mul = k.add("Mul", {half, half}, {half}, none);
    if (!f32Mul || !bf16Mul)
      return !f32Mul ? f32Mul.status() : bf16Mul.status();
    f32Mul_ = *f32Mul;
    bf16Mul_ = *bf16Mul;
    ZRT_RETURN_IF_ERROR(kernel(k, "Cast", {vec}, {{DType::BF16, {n}}}, none));
    ZRT_RETURN_IF_ERROR(kernel(k, "Cast", {{DType::BF16, {n}}}, {vec}, none));
    // FusedElementwise: 8 arithmetic ops on x and a broadcast row y, each
    // with an operand from memory; 4 transcendental ops on x.
    const int64_t mul = math::kFusedMul, add = math::kFusedAdd,
                  sub = math::kFusedSub;
    std::vector<int64_t> arithmetic;
    for (int64_t i = 0; i < kArithmeticOps; ++i) {
      const int64_t previous = i == 0 ? 0 : 1 + i; // an input, or op i-1
      const int64_t code = i % 2 == 0 ? mul : (i % 4 == 1 ? add : sub);
      arithmetic.insert(arithmetic.end(), {code, previous, i % 2 == 0 ? 1 : 0});
    }
    const std::vector<int64_t> transcendental = {
        math::kFusedSigmoid, 0, 0, math::kFusedTanh, 1, 0,
        math::kFusedExp,     2, 0, math::kFusedErf,  3, 0};
    AttrMap a, t;
    a.set("ops", AttrValue{arithmetic, {}, {}});
    t.set("ops", AttrValue{transcendental, {}, {}});
    Expected<size_t> ai =
        k.add("FusedElementwise", {matrix, {f, {1, cols}}}, {matrix}, a);
    Expected<size_t> ti = k.add("FusedElementwise", {vec}, {vec}, t);
    if (!ai || !ti)
      return !ai ? ai.status() : ti.status();
    fusedArithmetic_ = *ai;
    fusedTranscendental_ = *ti;
    elements_ = double(n);
    return Status::ok();
  }

  /// The rates from `seconds` (the rounds' medians); `launch` the time of a
  /// one-element Add.
  void read(const std::vector<double> &seconds, double launch,
            Calibration &out) {
    auto net = [&](size_t i) {
      return std::max(seconds[i] - launch, 0.5 * seconds[i]);
    };
    std::map<std::string, std::pair<double, double>> perOp; // bytes, seconds
    json rows = json::array();
    for (const Figure &f : figures_) {
      perOp[f.op].first += f.bytes;
      perOp[f.op].second += net(f.index);
      rows.push_back({{"kernel", f.op},
                      {"operands", f.operands},
                      {"operand_bytes", f.bytes},
                      {"seconds", seconds[f.index]},
                      {"bytes_per_s", f.bytes / net(f.index)}});
    }
    DeviceModel &device = out.machine.device;
    for (const auto &[op, total] : perOp)
      device.kernelRates[op] = total.first / total.second;
    device.fusedArithmeticSeconds =
        net(fusedArithmetic_) / (elements_ * kArithmeticOps);
    device.fusedTranscendentalSeconds =
        net(fusedTranscendental_) / (elements_ * kTranscendentalOps);
    for (const auto &[index, elements] : smallAdds_) {
      const double bytes = 12.0 * double(elements);
      const double bandwidth = bytes / net(index);
      // Only where it beats streaming from memory (a point below would
      // make small kernels slower than large ones).
      if (bandwidth > device.memoryBandwidth)
        device.bandwidthBySize.push_back({bytes, bandwidth});
      rows.push_back({{"kernel", "Add"},
                      {"elements", elements},
                      {"operand_bytes", bytes},
                      {"seconds", seconds[index]},
                      {"bytes_per_s", bandwidth}});
    }
    if (!device.bandwidthBySize.empty()) // the memory figure closes the curve
      device.bandwidthBySize.push_back(
          {12.0 * double(memoryElements_), device.memoryBandwidth});
    device.halfWideningSeconds =
        std::max(0.0, net(bf16Mul_) - net(f32Mul_)) / (3 * elements_);
    rows.push_back({{"kernel", "Mul"},
                    {"elements", elements_},
                    {"f32_seconds", seconds[f32Mul_]},
                    {"bf16_seconds", seconds[bf16Mul_]},
                    {"half_widening_s", device.halfWideningSeconds}});
    rows.push_back({{"kernel", "FusedElementwise"},
                    {"elements", elements_},
                    {"arithmetic_ops", kArithmeticOps},
                    {"arithmetic_seconds", seconds[fusedArithmetic_]},
                    {"transcendental_ops", kTranscendentalOps},
                    {"transcendental_seconds", seconds[fusedTranscendental_]}});
    out.measurements["kernels"] = rows;
  }

private:
  static constexpr int kArithmeticOps = 8, kTranscendentalOps = 4;
  struct Figure {
    std::string op, operands;
    double bytes;
    size_t index;
  };
  Status kernel(KernelRunner &k, const std::string &op,
                const std::vector<Operand> &inputs,
                const std::vector<Operand> &outputs, const AttrMap &attrs) {
    Expected<size_t> index = k.add(op, inputs, outputs, attrs);
    if (!index)
      return index.status();
    Figure f{op, "", 0, *index};
    for (const std::vector<Operand> *list : {&inputs, &outputs})
      for (const Operand &o : *list) {
        TensorRef t;
        t.dtype = o.dtype;
        t.shape = o.shape;
        f.bytes += double(t.bytes());
        f.operands += (f.operands.empty() ? "" : " ") +
                      std::string(dtypeName(o.dtype)) + shapeString(o.shape);
      }
    figures_.push_back(std::move(f));
    return Status::ok();
  }
  std::vector<Figure> figures_;
  size_t fusedArithmetic_ = 0, fusedTranscendental_ = 0, f32Mul_ = 0,
         bf16Mul_ = 0;
  std::vector<std::pair<size_t, int64_t>> smallAdds_; ///< figure, elements
  int64_t memoryElements_ = 0; ///< the memory figure's vectors
  double elements_ = 0;
};

/// A program of `count` one-element Adds on one stream: the executor's
/// cost of an instruction, kernel launch included, is the slope of its run
/// time in `count`.
Program tinyAddProgram(int count, int worldSize) {
  Program p;
  p.path = "calibration: " + std::to_string(count) + " one-element Adds";
  p.version = kFormatVersion;
  p.worldSize = worldSize;
  ArenaDesc arena;
  arena.name = "calibration";
  arena.size = arena.noReuseSize = arena.lowerBound = 192;
  p.arenas.push_back(arena);
  for (uint64_t i = 0; i < 3; ++i)
    p.buffers.push_back({"x" + std::to_string(i), DType::F32, {1}, 0, 64 * i});
  p.streams.push_back({"compute", StreamKind::Compute});
  for (int i = 0; i < count; ++i) {
    Instruction add;
    add.op = "Add";
    add.inputs = {0, 1};
    add.outputs = {2};
    p.instructions.push_back(add);
  }
  return p;
}

/// The executor's cost of one instruction (the simulator's launch cost):
/// programs of kFew and kMany one-element Adds, timed in `rounds`; `first`
/// gets the index of the first of their two figures.
constexpr int kFew = 16, kMany = 256;
struct InstructionCost {
  Program few = tinyAddProgram(kFew, 1), many = tinyAddProgram(kMany, 1);
  std::unique_ptr<Executor> executors[2];

  Status add(Backend &backend, Communicator &comm, RoundRobin &rounds) {
    few.worldSize = many.worldSize = comm.worldSize();
    const Program *programs[2] = {&few, &many};
    for (int i = 0; i < 2; ++i) {
      Expected<std::unique_ptr<Executor>> e =
          Executor::create(*programs[i], backend, comm);
      if (!e)
        return e.status();
      executors[i] = std::move(*e);
      Executor *run = executors[i].get();
      Expected<size_t> added = rounds.add([run] { return run->run(); });
      if (!added)
        return added.status();
    }
    return Status::ok();
  }
  /// From the two programs' run times.
  static double perInstruction(double few, double many) {
    const double slope = (many - few) / double(kMany - kFew);
    return slope > 0 ? slope : many / kMany;
  }
};

/// The launch cost (the executor's cost of an instruction: InstructionCost),
/// the memory bandwidth (an Add of large vectors: its three operands' bytes
/// over its time less a one-element Add's) and the products. The peak of
/// each type is its best rate (FLOPs, 2 m n k as the simulator counts them,
/// over the time less a one-element Add's); the curve each f32 shape's rate
/// over the f32 peak.
Status measureDevice(KernelRunner &k, Communicator &comm, bool quick,
                     Calibration &out) {
  const int64_t n = quick ? (int64_t(2) << 20) : (int64_t(8) << 20);
  const std::vector<ProductShape> shapes = productLadder(quick);
  std::vector<Expected<size_t>> added;
  added.push_back(k.add("Add", DType::F32, {{1}, {1}}, {1}));
  added.push_back(k.add("Add", DType::F32, {{n}, {n}}, {n}));
  for (const ProductShape &p : shapes)
    added.push_back(
        k.add("MatMul", p.dtype, {{p.m, p.k}, {p.k, p.n}}, {p.m, p.n}));
  for (Expected<size_t> &a : added)
    if (!a)
      return a.status();
  KernelKinds kinds;
  ZRT_RETURN_IF_ERROR(kinds.add(k, quick, n));
  InstructionCost instructions;
  ZRT_RETURN_IF_ERROR(instructions.add(k.backend, comm, k.rounds));
  Expected<std::vector<double>> seconds = k.rounds.run();
  if (!seconds)
    return seconds.status();
  DeviceModel &device = out.machine.device;
  const double launch = (*seconds)[0], add = (*seconds)[1];
  const size_t last = seconds->size();
  const double bytes = 3.0 * double(n) * 4;
  device.launchSeconds = InstructionCost::perInstruction((*seconds)[last - 2],
                                                         (*seconds)[last - 1]);
  device.memoryBandwidth = bytes / std::max(add - launch, 0.5 * add);
  out.measurements["launch"] = {
      {"kernel", "Add"},
      {"elements", 1},
      {"stream_seconds", launch},
      {"executor_runs_seconds",
       {{std::to_string(kFew), (*seconds)[last - 2]},
        {std::to_string(kMany), (*seconds)[last - 1]}}},
      {"executor_seconds_per_instruction", device.launchSeconds}};
  out.measurements["memory"] = {{"kernel", "Add"},
                                {"elements", n},
                                {"operand_bytes", bytes},
                                {"seconds", add},
                                {"bytes_per_s", device.memoryBandwidth}};
  json rows = json::array();
  std::vector<double> rates;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ProductShape &p = shapes[i];
    const double t = (*seconds)[2 + i];
    rates.push_back(p.flops() / std::max(t - launch, 0.5 * t));
    double &peak = p.dtype == DType::F32    ? device.peakF32
                   : p.dtype == DType::BF16 ? device.peakBF16
                                            : device.peakF16;
    peak = std::max(peak, rates.back());
    rows.push_back({{"kernel", "MatMul"},
                    {"dtype", dtypeName(p.dtype)},
                    {"m", p.m},
                    {"n", p.n},
                    {"k", p.k},
                    {"seconds", t},
                    {"flops_per_s", rates.back()}});
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const DType dtype = shapes[i].dtype;
    std::vector<EfficiencyPoint> &curve =
        dtype == DType::F32    ? device.matmulEfficiency
        : dtype == DType::BF16 ? device.matmulEfficiencyBF16
                               : device.matmulEfficiencyF16;
    curve.push_back(
        {double(std::min({shapes[i].m, shapes[i].n, shapes[i].k})),
         std::clamp(rates[i] / out.machine.peakFlops(dtype), 1e-4, 1.0)});
  }
  out.measurements["products"] = rows;
  kinds.read(*seconds, launch, out);
  return Status::ok();
}

/// The groups the links are timed over: each node's ranks (intra_node),
/// then the first rank of each node (inter_node, when there are several).
struct LinkGroups {
  std::vector<ProcessGroupDesc> groups;
  int nodeGroup = -1;   ///< this rank's node's group
  int leaderGroup = -1; ///< the group of one rank per node; -1: one node
  int nodes = 1, ranksPerNode = 1;
};

LinkGroups linkGroups(Communicator &comm) {
  const std::vector<std::string> names = comm.nodeNames();
  std::map<std::string, std::vector<int>> byNode;
  std::vector<std::string> order;
  for (int r = 0; r < int(names.size()); ++r) {
    if (!byNode.count(names[size_t(r)]))
      order.push_back(names[size_t(r)]);
    byNode[names[size_t(r)]].push_back(r);
  }
  LinkGroups out;
  out.nodes = int(order.size());
  ProcessGroupDesc leaders{"calibration.leaders", {}};
  for (const std::string &node : order) {
    const std::vector<int> &ranks = byNode[node];
    out.ranksPerNode = std::max(out.ranksPerNode, int(ranks.size()));
    if (std::count(ranks.begin(), ranks.end(), comm.rank()))
      out.nodeGroup = int(out.groups.size());
    out.groups.push_back({"calibration.node " + node, ranks});
    leaders.ranks.push_back(ranks.front());
  }
  if (out.nodes > 1) {
    out.leaderGroup = int(out.groups.size());
    out.groups.push_back(leaders);
  }
  return out;
}

/// Times all-reduces and all-gathers over `group` of `n` ranks (this rank
/// a member or not: every rank calls it, for the barriers) at each of
/// `sizes`, in
/// rounds as RoundRobin times kernels; each repetition starts at a barrier
/// and makes a number of calls set by the size alone (the same on every
/// member).
Expected<std::vector<CollectiveTiming>>
timeCollectives(Communicator &comm, DeviceTensors &tensors,
                const Budget &budget, int group, int n,
                const std::vector<int64_t> &sizes) {
  const bool member = comm.groupRank(group) >= 0;
  struct Point {
    OpKind kind;
    TensorRef full, part;
    int calls;
    std::vector<double> perCall;
  };
  std::vector<Point> points;
  for (OpKind kind : {OpKind::AllReduce, OpKind::AllGather})
    for (int64_t bytes : sizes) {
      const int64_t elements = std::max<int64_t>(n, bytes / 4 / n * n);
      Expected<TensorRef> full = tensors.make(DType::F32, {elements});
      Expected<TensorRef> part = tensors.make(DType::F32, {elements / n});
      if (!full || !part)
        return (!full ? full : part).status();
      const int calls =
          int(std::clamp(budget.collectiveBytes / double(bytes), 3.0, 200.0));
      points.push_back({kind, *full, *part, calls, {}});
    }
  CommContext ctx;
  ctx.group = group;
  for (int r = 0; r <= budget.repetitions; ++r)
    for (Point &p : points) {
      comm.barrier();
      const Clock::time_point start = Clock::now();
      for (int i = 0; member && i < (r == 0 ? 1 : p.calls); ++i)
        ZRT_RETURN_IF_ERROR(p.kind == OpKind::AllReduce
                                ? comm.allReduce(p.full, p.full, ctx)
                                : comm.allGather(p.part, p.full, ctx));
      if (r > 0) // the first round is one untimed call of each
        p.perCall.push_back(secondsSince(start) / p.calls);
    }
  std::vector<CollectiveTiming> out;
  for (const Point &p : points)
    out.push_back({p.kind, n, double(p.full.bytes()), median(p.perCall)});
  return out;
}

/// A ReduceScatter of a 16-bit (bf16) buffer of `elements` over `group`
/// (collective: every rank calls it), the median seconds of a call.
Expected<double> timeHalfReduceScatter(Communicator &comm,
                                       DeviceTensors &tensors,
                                       const Budget &budget, int group, int n,
                                       int64_t elements) {
  const bool member = comm.groupRank(group) >= 0;
  Expected<TensorRef> full = tensors.make(DType::BF16, {elements});
  Expected<TensorRef> part = tensors.make(DType::BF16, {elements / n});
  if (!full || !part)
    return (!full ? full : part).status();
  const int calls = int(
      std::clamp(budget.collectiveBytes / double(full->bytes()), 3.0, 200.0));
  CommContext ctx;
  ctx.group = group;
  std::vector<double> perCall;
  for (int r = 0; r <= budget.repetitions; ++r) {
    comm.barrier();
    const Clock::time_point start = Clock::now();
    for (int i = 0; member && i < (r == 0 ? 1 : calls); ++i)
      ZRT_RETURN_IF_ERROR(comm.reduceScatter(*full, *part, ctx));
    if (r > 0)
      perCall.push_back(secondsSince(start) / calls);
  }
  return median(perCall);
}

json timingsJson(const std::string &link,
                 const std::vector<CollectiveTiming> &timings) {
  json rows = json::array();
  for (const CollectiveTiming &t : timings)
    rows.push_back({{"link", link},
                    {"collective",
                     t.kind == OpKind::AllReduce ? "AllReduce" : "AllGather"},
                    {"ranks", t.ranks},
                    {"bytes", t.bytes},
                    {"seconds", t.seconds}});
  return rows;
}

/// intra_node and inter_node: timed where the world has such links, else
/// estimated (and said so in the note): a copy through shared memory at
/// half the memory bandwidth, one launch's latency.
Status measureLinks(Communicator &comm, DeviceTensors &tensors,
                    const Budget &budget, bool quick, Calibration &out) {
  LinkGroups lg = linkGroups(comm);
  out.machine.nodes = lg.nodes;
  out.machine.devicesPerNode = lg.ranksPerNode;
  ZRT_RETURN_IF_ERROR(comm.setup(lg.groups, 1));
  const std::vector<int64_t> sizes =
      quick ? std::vector<int64_t>{4096, 262144, 4194304}
            : std::vector<int64_t>{1024, 16384, 262144, 4194304, 33554432};
  LinkModel estimate;
  estimate.bandwidth = out.machine.device.memoryBandwidth / 2;
  estimate.latency = out.machine.device.launchSeconds;
  json rows = json::array();
  std::string notes;
  for (LinkClass c : {LinkClass::IntraNode, LinkClass::InterNode}) {
    const bool intra = c == LinkClass::IntraNode;
    const std::string name = linkClassName(c);
    // Whether the world has such a link (the same on every rank: each
    // takes part in the barriers, a member of the group or not).
    if (intra ? lg.ranksPerNode < 2 : lg.nodes < 2) {
      out.machine.links[int(c)] =
          intra ? estimate : out.machine.link(LinkClass::IntraNode);
      notes += " " + name + ": not measured (" +
               (intra ? "one rank per node; estimated as a copy through "
                        "shared memory at half the memory bandwidth, one "
                        "kernel launch's latency)."
                      : "one node; intra_node's figures).");
      continue;
    }
    const int group = intra ? lg.nodeGroup : lg.leaderGroup;
    const int n = int(lg.groups[size_t(group)].ranks.size());
    Expected<std::vector<CollectiveTiming>> timings =
        timeCollectives(comm, tensors, budget, group, n, sizes);
    if (!timings)
      return timings.status();
    for (json &row : timingsJson(name, *timings))
      rows.push_back(std::move(row));
    const int64_t halfElements = (quick ? 1 << 20 : 1 << 22) / n * n;
    Expected<double> half = intra
                                ? timeHalfReduceScatter(comm, tensors, budget,
                                                        group, n, halfElements)
                                : Expected<double>(0.0);
    if (!half)
      return half.status();
    if (comm.rank() != 0)
      continue;
    if (n < 2) { // rank 0 alone on its node, others not
      out.machine.links[int(c)] = estimate;
      notes += " " + name +
               ": not measured (rank 0 is alone on its node; "
               "estimated as with one rank per node).";
      continue;
    }
    Expected<LinkModel> fit = fitLink(*timings, CollectiveAlgorithm::Ring);
    if (!fit)
      return Status::error(name + ": " + fit.status().message());
    out.machine.links[int(c)] = *fit;
    if (intra) { // the bf16 sums beyond the fitted link's time
      const double share = double(n - 1) / double(n);
      const double link = (n - 1) * fit->latency +
                          share * 2.0 * double(halfElements) / fit->bandwidth;
      out.machine.halfReduceSeconds =
          std::max(0.0, *half - link) / (share * double(halfElements));
      rows.push_back({{"link", name},
                      {"collective", "ReduceScatter"},
                      {"dtype", "bf16"},
                      {"ranks", n},
                      {"bytes", 2.0 * double(halfElements)},
                      {"seconds", *half},
                      {"half_reduce_s", out.machine.halfReduceSeconds}});
    }
  }
  out.measurements["collectives"] = rows;
  out.note += notes;
  return Status::ok();
}

/// A file of `bytes` (whole pages) mapped shared and registered as an
/// offload arena's swap file is (io/SwapFiles.h), unmapped and removed with
/// it.
class SwapFile {
public:
  static Expected<std::unique_ptr<SwapFile>> create(const std::string &path,
                                                    size_t bytes) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
      return Status::error("cannot create " + path + ": " +
                           std::strerror(errno));
    void *base =
        ::ftruncate(fd, off_t(bytes)) == 0
            ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            : MAP_FAILED;
    if (base == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return Status::error("cannot map " + path + ": " + why);
    }
    registerSwapFile(base, bytes, fd);
    return std::unique_ptr<SwapFile>(
        new SwapFile(static_cast<char *>(base), bytes, fd));
  }
  ~SwapFile() {
    unregisterSwapFile(base_);
    ::munmap(base_, bytes_);
    ::close(fd_);
  }
  /// SwapOut of the whole file, SwapIn, and a byte of every page written
  /// (as the optimizer's kernel writes its state next): the seconds.
  double roundTrip(char value) {
    const Clock::time_point start = Clock::now();
    swapOutPages(base_, bytes_);
    swapInPages(base_, bytes_);
    volatile char *page = base_;
    for (size_t at = 0; at < bytes_; at += kPage)
      page[at] = value;
    return secondsSince(start);
  }
  static constexpr size_t kPage = 4096;

private:
  SwapFile(char *base, size_t bytes, int fd)
      : base_(base), bytes_(bytes), fd_(fd) {}
  char *base_;
  size_t bytes_;
  int fd_;
};

/// The NVMe link as the offload runs use it (rank 0): swap files of one
/// page and of 16 MiB (quick: 4 MiB) in a temporary folder under the
/// scratch folder, removed afterwards, each swapped out and in and its pages
/// written again, in rounds. A SwapOut and a SwapIn each cost latency +
/// bytes / bandwidth in the simulation: latency is half the page's round
/// trip, bandwidth the large file's bytes both ways over its round trip
/// less two latencies. Where the node's memory holds the swap files (the
/// page cache keeps their pages), that is the speed of the page cache and
/// of the mappings, not of the disk, as it is for the runs.
Status measureNvme(const std::string &dir, bool quick, Calibration &out) {
  std::string pattern = dir + "/.zero-run-calibrate-XXXXXX";
  if (!::mkdtemp(pattern.data()))
    return Status::error(
        "--calibrate-dir " + dir +
        ": cannot create a temporary folder: " + std::strerror(errno));
  const size_t big = quick ? (size_t(4) << 20) : (size_t(16) << 20);
  const Budget budget(quick);
  std::vector<double> small, large;
  Status status = Status::ok();
  {
    Expected<std::unique_ptr<SwapFile>> page =
        SwapFile::create(pattern + "/page.swap", SwapFile::kPage);
    Expected<std::unique_ptr<SwapFile>> file =
        page ? SwapFile::create(pattern + "/file.swap", big) : page.status();
    if (!file) {
      status = file.status();
    } else {
      for (int r = 0; r < budget.repetitions; ++r) {
        (*page)->roundTrip(char(r));
        small.push_back((*page)->roundTrip(char(r + 1)));
        large.push_back((*file)->roundTrip(char(r + 1)));
      }
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(pattern, ignored);
  ZRT_RETURN_IF_ERROR(status);
  LinkModel &nvme = out.machine.links[int(LinkClass::Nvme)];
  nvme.latency = 0.5 * median(small);
  const double trip = median(large);
  nvme.bandwidth =
      2.0 * double(big) / std::max(trip - 2 * nvme.latency, 0.5 * trip);
  out.measurements["nvme"] = {{"folder", dir},
                              {"page_round_trip_seconds", median(small)},
                              {"bytes", big},
                              {"round_trip_seconds", trip}};
  return Status::ok();
}

} // namespace

Expected<LinkModel> fitLink(const std::vector<CollectiveTiming> &timings,
                            CollectiveAlgorithm algorithm) {
  // t = a L + b / B, with a and b collectiveSeconds's coefficients (its
  // steps and its bytes on the link); each row weighted by 1 / t, so that
  // small collectives (the latency) count as much as large ones.
  double saa = 0, sab = 0, sbb = 0, sat = 0, sbt = 0;
  std::set<double> sizes;
  for (const CollectiveTiming &t : timings) {
    if (t.ranks < 2 || t.seconds <= 0)
      continue;
    const double n = t.ranks;
    const double steps = algorithm == CollectiveAlgorithm::Ring
                             ? n - 1
                             : std::ceil(std::log2(n));
    const double twice = t.kind == OpKind::AllReduce ? 2 : 1;
    const double a = twice * steps / t.seconds;
    const double b = twice * (n - 1) / n * t.bytes / t.seconds;
    saa += a * a, sab += a * b, sbb += b * b, sat += a, sbt += b;
    sizes.insert(t.bytes);
  }
  if (sizes.size() < 2)
    return Status::error(
        "cannot fit a latency and a bandwidth: fewer than two sizes timed");
  LinkModel link;
  link.algorithm = algorithm;
  const double det = saa * sbb - sab * sab;
  double latency = det > 0 ? (sat * sbb - sbt * sab) / det : -1;
  double inverse = det > 0 ? (saa * sbt - sab * sat) / det : -1;
  if (latency < 0 || inverse <= 0) { // all bandwidth: refit without latency
    latency = 0;
    inverse = sbt / sbb;
  }
  link.latency = latency;
  link.bandwidth = 1 / inverse;
  return link;
}

Expected<Calibration> calibrateMachine(Backend &backend, Communicator &comm,
                                       const CalibrationOptions &options) {
  Calibration out;
  Expected<std::unique_ptr<Stream>> stream =
      backend.createStream(0, StreamDesc{"calibration", StreamKind::Compute});
  if (!stream)
    return stream.status();
  const Budget budget(options.quick);
  KernelRunner k{backend, std::move(*stream),
                 DeviceTensors(backend.allocator()), RoundRobin(budget)};
  out.note = "Measured by zero-run --calibrate" +
             std::string(options.quick ? " --quick" : "") + " with " +
             std::to_string(comm.worldSize()) + " rank(s), " +
             std::to_string(backend.numThreads()) +
             " kernel thread(s) per rank, every rank's kernels running at "
             "once; rank 0's figures.";
  comm.barrier();
  ZRT_RETURN_IF_ERROR(measureDevice(k, comm, options.quick, out));
  ZRT_RETURN_IF_ERROR(
      measureLinks(comm, k.tensors, budget, options.quick, out));
  MachineModel &m = out.machine;
  m.links[int(LinkClass::HostDevice)] = {m.device.memoryBandwidth,
                                         m.device.launchSeconds};
  m.device.hostIsDevice = true;
  out.note += " host_device: the memory bandwidth and the launch cost (a "
              "CPU's device memory is host memory: host_is_device).";
  const long pages = ::sysconf(_SC_PHYS_PAGES),
             pageSize = ::sysconf(_SC_PAGESIZE);
  m.device.memoryBytes = uint64_t(std::max(1L, pages)) *
                         uint64_t(std::max(1L, pageSize)) /
                         uint64_t(std::max(1, m.devicesPerNode));
  out.note += " memory_bytes: the node's memory over its ranks.";
  if (comm.rank() == 0) {
    ZRT_RETURN_IF_ERROR(measureNvme(options.scratchDir, options.quick, out));
    out.note += " nvme: swap files in " + options.scratchDir +
                " swapped out and in as an offload run's (rank 0 alone; the "
                "page cache's speed where memory holds them).";
  }
  m.name = comm.nodeNames().front() + ": " +
           (options.cpuModel.empty() ? "unknown CPU" : options.cpuModel) +
           ", ISA " + options.isa + ", " + std::to_string(m.devicesPerNode) +
           " rank(s) per node, " + std::to_string(backend.numThreads()) +
           " thread(s) per rank";
  return out;
}

json describeCalibration(const Calibration &calibration,
                         const std::string &date) {
  json doc = machineModelJson(calibration.machine);
  doc["sources"] = {"measured by zero-run --calibrate on " + date};
  doc["note"] = calibration.note;
  doc["measurements"] = calibration.measurements;
  return doc;
}

} // namespace zrt
