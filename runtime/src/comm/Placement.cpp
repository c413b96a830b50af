//===- Placement.cpp - The program's ranks on the launcher's nodes --------===//
//
// zrt/Placement.h's decision. A table names the process groups the compiler
// means to sit inside one node; each is cut into its blocks (consecutive
// group-size slices of its rank list). Two numberings are tried, the
// node-major one first and then the launcher's. Node-major is also what the
// world's collectives want: zrt_comm_mpi runs all-gathers and reduce-scatters
// in bit-reversed rank order, whose large exchanges are then between ranks of
// one node (the launcher's round-robin numbering of --map-by node would send
// them across). The node-scoped groups are consecutive
// blocks of k ranks covering the world, so every numbering that keeps each
// block inside one node needs a multiple of k processes on every node, and the
// node-major numbering keeps them there whenever that holds: when it fails too,
// no numbering can do it, and the error names the first block it splits.
//
//===----------------------------------------------------------------------===//

#include "zrt/Placement.h"

#include <algorithm>
#include <numeric>

namespace zrt {
namespace {

/// A process group the compiler lays out to sit inside one node.
struct NodeGroupRule {
  const char *group; ///< ProcessGroupDesc::name, as the compiler spells it
  const char *what;  ///< what it is, for the refusal
  bool required;     ///< refuse a placement that splits it (else: preferred)
};

constexpr NodeGroupRule kNodeGroupRules[] = {
    // zero-hierarchical: the secondary partition, re-gathered inside a node.
    {"hpz", "hpZ", true},
    // zero-quantize-reduce: the all-to-all inside a node (qgz_across is
    // meant to cross the nodes).
    {"qgz_inside", "qgZ", true},
    // zero-pipeline-split: a stage's data-parallel replicas, so that a stage
    // fills a node and only its activations cross; where a stage has more
    // replicas than a node has processes, the stages still run.
    {"dp", "pipeline stage replicas", false},
};

/// Program ranks that should run on one node: a block of a node-scoped group.
struct NodeBlock {
  const NodeGroupRule *rule;
  std::vector<int> ranks;
};

std::vector<NodeBlock> nodeBlocks(const std::vector<ProcessGroupDesc> &groups) {
  std::vector<NodeBlock> blocks;
  for (const ProcessGroupDesc &g : groups)
    for (const NodeGroupRule &rule : kNodeGroupRules) {
      const size_t k = size_t(g.size());
      if (g.name != rule.group || k < 2)
        continue;
      for (size_t first = 0; first + k <= g.ranks.size(); first += k)
        blocks.push_back(
            {&rule, std::vector<int>(g.ranks.begin() + first,
                                     g.ranks.begin() + first + k)});
    }
  return blocks;
}

/// The first block (of the required groups only, with `requiredOnly`) whose
/// processes run on more than one node when program rank p is launcher rank
/// launcherRank[p]; null when there is none. `node` is by launcher rank.
const NodeBlock *splitBlock(const std::vector<NodeBlock> &blocks,
                            const std::vector<int> &node,
                            const std::vector<int> &launcherRank,
                            bool requiredOnly) {
  for (const NodeBlock &b : blocks) {
    if (requiredOnly && !b.rule->required)
      continue;
    const int first = node[size_t(launcherRank[size_t(b.ranks[0])])];
    for (int r : b.ranks)
      if (node[size_t(launcherRank[size_t(r)])] != first)
        return &b;
  }
  return nullptr;
}

/// "rank 3", "ranks 0, 1, 2".
std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

/// The launcher ranks running on node `n`.
std::vector<int> ranksOn(const std::vector<int> &node, int n) {
  std::vector<int> ranks;
  for (size_t r = 0; r < node.size(); ++r)
    if (node[r] == n)
      ranks.push_back(int(r));
  return ranks;
}

/// Why block `b` cannot run on one node, and what placement fixes it: a
/// multiple of every required group's size on each node.
std::string refusal(const NodeBlock &b, const std::vector<NodeBlock> &blocks,
                    const std::vector<int> &node,
                    const std::vector<std::string> &names,
                    const std::vector<int> &launcherRank) {
  std::vector<int> members, nodes;
  for (int r : b.ranks)
    members.push_back(launcherRank[size_t(r)]);
  std::sort(members.begin(), members.end());
  for (int m : members)
    nodes.push_back(node[size_t(m)]);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  std::string where;
  for (size_t i = 0; i < nodes.size(); ++i)
    where += std::string(i == 0                  ? ""
                         : i + 1 == nodes.size() ? " and "
                                                 : ", ") +
             names[size_t(nodes[i])] + " (" +
             rankList(ranksOn(node, nodes[i])) + ")";
  size_t multiple = 1;
  for (const NodeBlock &other : blocks)
    if (other.rule->required)
      multiple = std::lcm(multiple, other.ranks.size());
  std::string group = "{";
  for (size_t i = 0; i < members.size(); ++i)
    group += (i ? ", " : "") + std::to_string(members[i]);
  const std::string m = std::to_string(multiple);
  const std::string fix = "put a multiple of " + m +
                          " ranks on every node (a hostfile with slots=" + m +
                          " per node and mpirun --map-by slot, or mpirun "
                          "--map-by ppr:" +
                          m + ":node)";
  return "the program's node groups of " + std::to_string(b.ranks.size()) +
         " ranks (" + b.rule->what + ") need ranks " + group +
         "} on one node, but they are placed on " + where + "; " + fix;
}

/// Each launcher rank's node as an index, the nodes numbered in order of
/// their first launcher rank; `names` gets their names in that order.
std::vector<int> nodeIndices(const std::vector<std::string> &nodeOfRank,
                             std::vector<std::string> &names) {
  std::vector<int> node;
  for (const std::string &name : nodeOfRank) {
    auto it = std::find(names.begin(), names.end(), name);
    node.push_back(int(it - names.begin()));
    if (it == names.end())
      names.push_back(name);
  }
  return node;
}

std::vector<int> inverse(const std::vector<int> &permutation) {
  std::vector<int> inv(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i)
    inv[size_t(permutation[i])] = int(i);
  return inv;
}

} // namespace

Expected<std::vector<int>>
placeRanks(const std::vector<std::string> &nodeOfRank,
           const std::vector<ProcessGroupDesc> &groups) {
  const int world = int(nodeOfRank.size());
  for (const ProcessGroupDesc &g : groups)
    for (int r : g.ranks)
      if (r < 0 || r >= world)
        return Status::error("process group \"" + g.name + "\" lists rank " +
                             std::to_string(r) + " of a world of " +
                             std::to_string(world));
  std::vector<std::string> names;
  const std::vector<int> node = nodeIndices(nodeOfRank, names);
  std::vector<int> identity(nodeOfRank.size());
  std::iota(identity.begin(), identity.end(), 0);
  const std::vector<NodeBlock> blocks = nodeBlocks(groups);
  if (names.size() <= 1)
    return identity;
  // Launcher ranks by program rank: the nodes one after the other.
  std::vector<int> nodeMajor = identity;
  std::stable_sort(nodeMajor.begin(), nodeMajor.end(), [&](int a, int b) {
    return node[size_t(a)] < node[size_t(b)];
  });
  if (blocks.empty())
    return inverse(nodeMajor);
  for (bool requiredOnly : {false, true})
    for (const std::vector<int> *order : {&nodeMajor, &identity})
      if (!splitBlock(blocks, node, *order, requiredOnly))
        return inverse(*order);
  return Status::error(refusal(*splitBlock(blocks, node, nodeMajor, true),
                               blocks, node, names, nodeMajor));
}

std::vector<std::string>
describePlacement(const std::vector<std::string> &nodeOfRank,
                  const std::vector<int> &programRank) {
  std::vector<std::string> names, lines;
  const std::vector<int> node = nodeIndices(nodeOfRank, names);
  for (size_t n = 0; n < names.size(); ++n) {
    std::vector<int> launcher = ranksOn(node, int(n)), program;
    for (int r : launcher)
      program.push_back(programRank[size_t(r)]);
    std::sort(program.begin(), program.end());
    std::string line = "node " + names[n] + ": " + rankList(program);
    if (program != launcher)
      line += " (launcher " + rankList(launcher) + ")";
    lines.push_back(line);
  }
  return lines;
}

} // namespace zrt
