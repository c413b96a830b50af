//===- MachineModel.cpp - A machine description for --simulate ------------===//
//
// The loader checks every key it knows and refuses the ones it does not (a
// misspelt key would otherwise leave a default in place silently). The cost
// formulas are the usual alpha-beta models of ring and recursive-doubling
// collectives; docs/simulate.md writes them out.
//
//===----------------------------------------------------------------------===//

#include "run/MachineModel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace zrt {

const char *linkClassName(LinkClass c) {
  switch (c) {
  case LinkClass::IntraNode:
    return "intra_node";
  case LinkClass::InterNode:
    return "inter_node";
  case LinkClass::HostDevice:
    return "host_device";
  case LinkClass::Nvme:
    return "nvme";
  }
  return "?";
}

double MachineModel::peakFlops(DType dtype) const {
  if (dtype == DType::BF16)
    return device.peakBF16;
  if (dtype == DType::F16)
    return device.peakF16;
  return device.peakF32;
}

namespace {

double readX(const EfficiencyPoint &p) { return p.minDim; }
double readX(const BandwidthPoint &p) { return p.bytes; }
double readY(const EfficiencyPoint &p) { return p.efficiency; }
double readY(const BandwidthPoint &p) { return p.bandwidth; }

/// `curve` (x increasing) at `x`: linear in log2(x) between its points,
/// its first point's y below them, `beyond` past the last.
template <typename Point>
double interpolateLog2(const std::vector<Point> &curve, double x,
                       double beyond) {
  if (x <= readX(curve.front()))
    return readY(curve.front());
  for (size_t i = 1; i < curve.size(); ++i)
    if (x <= readX(curve[i])) {
      const Point &a = curve[i - 1], &b = curve[i];
      const double t = (std::log2(x) - std::log2(readX(a))) /
                       (std::log2(readX(b)) - std::log2(readX(a)));
      return readY(a) + t * (readY(b) - readY(a));
    }
  return beyond;
}

} // namespace

double MachineModel::streamBandwidth(double bytes) const {
  const std::vector<BandwidthPoint> &curve = device.bandwidthBySize;
  if (curve.empty() || bytes >= curve.back().bytes)
    return device.memoryBandwidth;
  return interpolateLog2(curve, bytes, device.memoryBandwidth);
}

double MachineModel::matmulEfficiency(double minDim, DType dtype) const {
  const std::vector<EfficiencyPoint> &half =
      dtype == DType::BF16  ? device.matmulEfficiencyBF16
      : dtype == DType::F16 ? device.matmulEfficiencyF16
                            : device.matmulEfficiency;
  const std::vector<EfficiencyPoint> &curve =
      half.empty() ? device.matmulEfficiency : half;
  if (curve.empty())
    return 1;
  return interpolateLog2(curve, minDim, curve.back().efficiency);
}

namespace {

using nlohmann::json;

/// Reads one JSON object's keys, each checked; the first problem is kept
/// and names the file and the key's path.
class KeyReader {
public:
  KeyReader(const std::string &path, Status &error)
      : path_(path), error_(error) {}

  /// The object at `key` of `parent` (`where` its own path), or null with
  /// an error when it is missing or not an object.
  const json *object(const json &parent, const std::string &where,
                     const std::string &key, bool required = true) {
    const std::string name = join(where, key);
    auto it = parent.find(key);
    if (it == parent.end()) {
      if (required)
        fail(name, "missing");
      return nullptr;
    }
    if (!it->is_object()) {
      fail(name, "expected an object");
      return nullptr;
    }
    return &*it;
  }

  /// A number at `key`, > 0 (or >= 0 when `zeroAllowed`), into `out`.
  void number(const json &parent, const std::string &where,
              const std::string &key, double &out, bool zeroAllowed = false) {
    const std::string name = join(where, key);
    auto it = parent.find(key);
    if (it == parent.end())
      return fail(name, "missing");
    if (!it->is_number())
      return fail(name, "expected a number, got " + it->dump());
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < 0 || (v == 0 && !zeroAllowed))
      return fail(name, std::string("expected a ") +
                            (zeroAllowed ? "non-negative" : "positive") +
                            " number, got " + it->dump());
    out = v;
  }

  /// A positive integer at `key` into `out` (absent: `out` kept when
  /// not `required`).
  void count(const json &parent, const std::string &where,
             const std::string &key, int &out, bool required = true) {
    const std::string name = join(where, key);
    auto it = parent.find(key);
    if (it == parent.end()) {
      if (required)
        fail(name, "missing");
      return;
    }
    if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
        it->get<int64_t>() > 1000000)
      return fail(name, "expected a positive integer, got " + it->dump());
    out = int(it->get<int64_t>());
  }

  /// A string at `key` that is one of `choices` into `out` (absent: kept).
  void choice(const json &parent, const std::string &where,
              const std::string &key, const std::vector<std::string> &choices,
              std::string &out) {
    const std::string name = join(where, key);
    auto it = parent.find(key);
    if (it == parent.end())
      return;
    std::string list;
    for (const std::string &c : choices)
      list += (list.empty() ? "" : ", ") + c;
    if (!it->is_string() || std::find(choices.begin(), choices.end(),
                                      it->get<std::string>()) == choices.end())
      return fail(name, "expected one of " + list + ", got " + it->dump());
    out = it->get<std::string>();
  }

  /// Refuses keys of `object` outside `known`.
  void onlyKeys(const json &object, const std::string &where,
                const std::set<std::string> &known) {
    for (auto it = object.begin(); it != object.end(); ++it)
      if (!known.count(it.key())) {
        std::string list;
        for (const std::string &k : known)
          list += (list.empty() ? "" : ", ") + k;
        return fail(join(where, it.key()),
                    "unknown key (known here: " + list + ")");
      }
  }

  void fail(const std::string &key, const std::string &what) {
    if (error_.isOk())
      error_ = Status::error(path_ + ": key \"" + key + "\": " + what);
  }

  static std::string join(const std::string &where, const std::string &key) {
    return where.empty() ? key : where + "." + key;
  }

private:
  const std::string &path_;
  Status &error_;
};

/// device.KEY: [{X, Y}...], X increasing along the array, Y at most `maxY`
/// (`why` says why); each point into `curve` as Point{x, y}. Read for
/// matmul_efficiency (or _bf16, _f16: min_dim, efficiency in (0, 1]) and
/// bandwidth_by_size (bytes, bandwidth).
template <typename Point>
void readCurve(KeyReader &keys, const json &device, const std::string &key,
               const std::string &x, const std::string &y, double maxY,
               const char *why, std::vector<Point> &curve) {
  auto it = device.find(key);
  if (it == device.end())
    return;
  const std::string where = "device." + key,
                    shape = "{\"" + x + "\", \"" + y + "\"}";
  if (!it->is_array() || it->empty())
    return keys.fail(where, "expected a non-empty array of " + shape);
  for (size_t i = 0; i < it->size(); ++i) {
    const json &point = (*it)[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!point.is_object())
      return keys.fail(at, "expected an object " + shape);
    keys.onlyKeys(point, at, {x, y});
    double px = 1, py = 1;
    keys.number(point, at, x, px);
    keys.number(point, at, y, py);
    if (py > maxY)
      return keys.fail(at + "." + y, why);
    if (!curve.empty() && px <= readX(curve.back()))
      return keys.fail(at + "." + x,
                       "expected " + x + " to increase along the array");
    curve.push_back(Point{px, py});
  }
}

void readDevice(KeyReader &keys, const json &root, DeviceModel &out) {
  const json *device = keys.object(root, "", "device");
  if (!device)
    return;
  keys.onlyKeys(*device, "device",
                {"peak_flops", "memory_bandwidth", "memory_bytes",
                 "kernel_launch_s", "matmul_efficiency",
                 "matmul_efficiency_bf16", "matmul_efficiency_f16",
                 "kernel_rates", "fused_elementwise", "half_widening_s",
                 "host_is_device", "bandwidth_by_size", "note"});
  if (const json *peak = keys.object(*device, "device", "peak_flops")) {
    keys.onlyKeys(*peak, "device.peak_flops", {"f32", "bf16", "f16", "note"});
    keys.number(*peak, "device.peak_flops", "f32", out.peakF32);
    keys.number(*peak, "device.peak_flops", "bf16", out.peakBF16);
    keys.number(*peak, "device.peak_flops", "f16", out.peakF16);
  }
  keys.number(*device, "device", "memory_bandwidth", out.memoryBandwidth);
  double capacity = 0;
  keys.number(*device, "device", "memory_bytes", capacity);
  out.memoryBytes = uint64_t(capacity);
  keys.number(*device, "device", "kernel_launch_s", out.launchSeconds, true);
  const char *fraction = "expected at most 1 (a fraction of the peak)";
  for (auto [key, curve] :
       {std::pair{"matmul_efficiency", &out.matmulEfficiency},
        std::pair{"matmul_efficiency_bf16", &out.matmulEfficiencyBF16},
        std::pair{"matmul_efficiency_f16", &out.matmulEfficiencyF16}})
    readCurve(keys, *device, key, "min_dim", "efficiency", 1.0, fraction,
              *curve);
  if (const json *rates = keys.object(*device, "device", "kernel_rates", false))
    for (auto it = rates->begin(); it != rates->end(); ++it) {
      if (it.key() == "note")
        continue;
      double rate = 0;
      keys.number(*rates, "device.kernel_rates", it.key(), rate);
      out.kernelRates[it.key()] = rate;
    }
  readCurve(keys, *device, "bandwidth_by_size", "bytes", "bandwidth", HUGE_VAL,
            "", out.bandwidthBySize);
  if (auto it = device->find("host_is_device"); it != device->end()) {
    if (it->is_boolean())
      out.hostIsDevice = it->get<bool>();
    else
      keys.fail("device.host_is_device",
                "expected true or false, got " + it->dump());
  }
  if (device->contains("half_widening_s"))
    keys.number(*device, "device", "half_widening_s", out.halfWideningSeconds,
                true);
  if (const json *fused =
          keys.object(*device, "device", "fused_elementwise", false)) {
    const std::string where = "device.fused_elementwise";
    keys.onlyKeys(*fused, where, {"arithmetic_s", "transcendental_s", "note"});
    keys.number(*fused, where, "arithmetic_s", out.fusedArithmeticSeconds,
                true);
    keys.number(*fused, where, "transcendental_s",
                out.fusedTranscendentalSeconds, true);
  }
}

void readLinks(KeyReader &keys, const json &root, MachineModel &out) {
  const json *links = keys.object(root, "", "links");
  if (!links)
    return;
  keys.onlyKeys(*links, "links",
                {"intra_node", "inter_node", "host_device", "nvme"});
  for (int c = 0; c < kNumLinkClasses; ++c) {
    const std::string name = linkClassName(LinkClass(c));
    const std::string where = "links." + name;
    const json *link = keys.object(*links, "links", name);
    if (!link)
      continue;
    keys.onlyKeys(*link, where, {"bandwidth", "latency", "algorithm", "note"});
    keys.number(*link, where, "bandwidth", out.links[c].bandwidth);
    keys.number(*link, where, "latency", out.links[c].latency, true);
    std::string algorithm = "ring";
    keys.choice(*link, where, "algorithm", {"ring", "recursive_doubling"},
                algorithm);
    out.links[c].algorithm = algorithm == "ring"
                                 ? CollectiveAlgorithm::Ring
                                 : CollectiveAlgorithm::RecursiveDoubling;
  }
}

} // namespace

Expected<MachineModel> parseMachineModel(const std::string &text,
                                         const std::string &path) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    return Status::error(path + ": not valid JSON");
  if (!root.is_object())
    return Status::error(path +
                         ": expected a JSON object (a machine description)");
  MachineModel machine;
  machine.path = path;
  Status error = Status::ok();
  KeyReader keys(path, error);
  keys.onlyKeys(root, "",
                {"name", "sources", "note", "measurements", "nodes",
                 "devices_per_node", "device", "links", "collectives"});
  if (auto it = root.find("name"); it != root.end()) {
    if (it->is_string())
      machine.name = it->get<std::string>();
    else
      keys.fail("name", "expected a string");
  }
  keys.count(root, "", "nodes", machine.nodes, /*required=*/false);
  keys.count(root, "", "devices_per_node", machine.devicesPerNode);
  readDevice(keys, root, machine.device);
  readLinks(keys, root, machine);
  if (const json *collectives = keys.object(root, "", "collectives", false)) {
    keys.onlyKeys(*collectives, "collectives",
                  {"across_nodes", "half_reduce_s", "note"});
    if (collectives->contains("half_reduce_s"))
      keys.number(*collectives, "collectives", "half_reduce_s",
                  machine.halfReduceSeconds, true);
    std::string across = "two_level";
    keys.choice(*collectives, "collectives", "across_nodes",
                {"two_level", "flat"}, across);
    machine.twoLevel = across == "two_level";
  }
  if (!error.isOk())
    return error;
  return machine;
}

Expected<MachineModel> loadMachineModel(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return Status::error(path + ": cannot read the machine description");
  std::ostringstream text;
  text << in.rdbuf();
  return parseMachineModel(text.str(), path);
}

nlohmann::json machineModelJson(const MachineModel &machine) {
  const DeviceModel &d = machine.device;
  auto curveJson = [](const std::vector<EfficiencyPoint> &points) {
    json curve = json::array();
    for (const EfficiencyPoint &p : points)
      curve.push_back({{"min_dim", p.minDim}, {"efficiency", p.efficiency}});
    return curve;
  };
  const json curve = curveJson(d.matmulEfficiency);
  json device = {
      {"peak_flops",
       {{"f32", d.peakF32}, {"bf16", d.peakBF16}, {"f16", d.peakF16}}},
      {"memory_bandwidth", d.memoryBandwidth},
      {"memory_bytes", d.memoryBytes},
      {"kernel_launch_s", d.launchSeconds}};
  if (!curve.empty())
    device["matmul_efficiency"] = curve;
  if (!d.matmulEfficiencyBF16.empty())
    device["matmul_efficiency_bf16"] = curveJson(d.matmulEfficiencyBF16);
  if (!d.matmulEfficiencyF16.empty())
    device["matmul_efficiency_f16"] = curveJson(d.matmulEfficiencyF16);
  if (!d.kernelRates.empty())
    device["kernel_rates"] = d.kernelRates;
  if (d.halfWideningSeconds > 0)
    device["half_widening_s"] = d.halfWideningSeconds;
  if (d.hostIsDevice)
    device["host_is_device"] = true;
  if (!d.bandwidthBySize.empty()) {
    json points = json::array();
    for (const BandwidthPoint &p : d.bandwidthBySize)
      points.push_back({{"bytes", p.bytes}, {"bandwidth", p.bandwidth}});
    device["bandwidth_by_size"] = points;
  }
  if (d.fusedArithmeticSeconds > 0 || d.fusedTranscendentalSeconds > 0)
    device["fused_elementwise"] = {
        {"arithmetic_s", d.fusedArithmeticSeconds},
        {"transcendental_s", d.fusedTranscendentalSeconds}};
  json links = json::object();
  for (int c = 0; c < kNumLinkClasses; ++c) {
    const LinkModel &l = machine.links[c];
    json &link = links[linkClassName(LinkClass(c))];
    link = {{"bandwidth", l.bandwidth}, {"latency", l.latency}};
    if (c <= int(LinkClass::InterNode)) // the links collectives run over
      link["algorithm"] = l.algorithm == CollectiveAlgorithm::Ring
                              ? "ring"
                              : "recursive_doubling";
  }
  json collectives = {
      {"across_nodes", machine.twoLevel ? "two_level" : "flat"}};
  if (machine.halfReduceSeconds > 0)
    collectives["half_reduce_s"] = machine.halfReduceSeconds;
  return {{"name", machine.name},
          {"nodes", machine.nodes},
          {"devices_per_node", machine.devicesPerNode},
          {"device", device},
          {"links", links},
          {"collectives", collectives}};
}

double transferSeconds(const LinkModel &link, double bytes) {
  return link.latency + bytes / link.bandwidth;
}

namespace {

/// One collective of `n` ranks over one link class, `bytes` as in
/// collectiveSeconds.
double flatSeconds(const LinkModel &link, OpKind kind, int n, double bytes) {
  if (n <= 1)
    return 0;
  const double steps = link.algorithm == CollectiveAlgorithm::Ring
                           ? double(n - 1)
                           : std::ceil(std::log2(double(n)));
  const double share = double(n - 1) / double(n) * bytes / link.bandwidth;
  switch (kind) {
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
    return steps * link.latency + share;
  case OpKind::AllReduce: // ring: reduce-scatter then all-gather;
                          // recursive halving then doubling (Rabenseifner)
    return 2 * steps * link.latency + 2 * share;
  case OpKind::Broadcast: // a pipelined ring; a binomial tree
    return link.algorithm == CollectiveAlgorithm::Ring
               ? steps * link.latency + bytes / link.bandwidth
               : steps * (link.latency + bytes / link.bandwidth);
  case OpKind::AllToAll: // pairwise exchange; Bruck (half the buffer a step)
    return link.algorithm == CollectiveAlgorithm::Ring
               ? steps * link.latency + share
               : steps * (link.latency + 0.5 * bytes / link.bandwidth);
  default:
    return transferSeconds(link, bytes);
  }
}

} // namespace

double collectiveSeconds(const MachineModel &machine, OpKind kind,
                         const std::vector<int> &ranks, int ranksPerNode,
                         double bytes) {
  const int n = int(ranks.size());
  if (n <= 1)
    return 0;
  std::map<int, int> perNode; // node -> members there
  for (int r : ranks)
    ++perNode[r / std::max(1, ranksPerNode)];
  const int m = int(perNode.size());
  int k = 0;
  for (const auto &[node, count] : perNode)
    k = std::max(k, count);
  const LinkModel &intra = machine.link(LinkClass::IntraNode);
  const LinkModel &inter = machine.link(LinkClass::InterNode);
  if (m == 1)
    return flatSeconds(intra, kind, n, bytes);
  if (k == 1 || !machine.twoLevel)
    return flatSeconds(inter, kind, n, bytes);
  // Two levels: k ranks on each of m nodes.
  const double local = bytes / double(k); // what one node-local index holds
  switch (kind) {
  case OpKind::AllGather:
    return flatSeconds(inter, kind, m, local) +
           flatSeconds(intra, kind, k, bytes);
  case OpKind::ReduceScatter:
    return flatSeconds(intra, kind, k, bytes) +
           flatSeconds(inter, kind, m, local);
  case OpKind::AllReduce:
    return flatSeconds(intra, OpKind::ReduceScatter, k, bytes) +
           flatSeconds(inter, OpKind::AllReduce, m, local) +
           flatSeconds(intra, OpKind::AllGather, k, bytes);
  case OpKind::Broadcast:
    return flatSeconds(inter, kind, m, bytes) +
           flatSeconds(intra, kind, k, bytes);
  case OpKind::AllToAll:
    return flatSeconds(intra, kind, k, bytes / double(m)) +
           flatSeconds(inter, kind, m, bytes);
  default:
    return transferSeconds(inter, bytes);
  }
}

} // namespace zrt
