//===- PlacementTest.cpp - The program's ranks on the launcher's nodes ----===//
//
// placeRanks and describePlacement (zrt/Placement.h) on the placements mpirun
// makes: --map-by slot (a node filled first), --map-by node (round-robin),
// uneven nodes, one node; with hpZ's, qgZ's and a pipeline's groups as the
// compiler writes them. Expected numberings and messages are written out here.
//
//===----------------------------------------------------------------------===//

#include "zrt/Placement.h"

#include <gtest/gtest.h>

using namespace zrt;

namespace {

using Nodes = std::vector<std::string>;
using Ranks = std::vector<int>;

/// A partitioned group over ranks 0..world-1 in order (hpZ, qgZ's inside,
/// a pipeline's stage replicas).
ProcessGroupDesc blocks(const std::string &name, int world, int size) {
  ProcessGroupDesc g;
  g.name = name;
  for (int r = 0; r < world; ++r)
    g.ranks.push_back(r);
  g.groupSize = size;
  return g;
}

/// qgZ's second level: the ranks at one position of their group of k.
ProcessGroupDesc strided(const std::string &name, int world, int k) {
  ProcessGroupDesc g;
  g.name = name;
  for (int l = 0; l < k; ++l)
    for (int r = l; r < world; r += k)
      g.ranks.push_back(r);
  g.groupSize = world / k;
  return g;
}

Ranks place(const Nodes &nodes, const std::vector<ProcessGroupDesc> &groups) {
  Expected<std::vector<int>> placed = placeRanks(nodes, groups);
  EXPECT_TRUE(placed.isOk()) << placed.status().message();
  return placed ? *placed : Ranks();
}

std::string refusal(const Nodes &nodes,
                    const std::vector<ProcessGroupDesc> &groups) {
  Expected<std::vector<int>> placed = placeRanks(nodes, groups);
  EXPECT_FALSE(placed.isOk());
  return placed ? "" : placed.status().message();
}

TEST(Placement, SlotOrderKeepsTheLaunchersRanks) {
  EXPECT_EQ(place({"n0", "n0", "n1", "n1"}, {blocks("hpz", 4, 2)}),
            Ranks({0, 1, 2, 3}));
}

TEST(Placement, NodeOrderIsRenumberedNodeByNode) {
  // --map-by node: launcher ranks 0, 2 on n0 and 1, 3 on n1 become program
  // ranks 0, 1 and 2, 3.
  EXPECT_EQ(place({"n0", "n1", "n0", "n1"}, {blocks("hpz", 4, 2)}),
            Ranks({0, 2, 1, 3}));
  EXPECT_EQ(place({"a", "b", "c", "a", "b", "c"}, {blocks("hpz", 6, 2)}),
            Ranks({0, 2, 4, 1, 3, 5}));
  // Nodes in order of their first launcher rank, whatever their names.
  EXPECT_EQ(place({"z", "a", "z", "a"},
                  {blocks("qgz_inside", 4, 2), strided("qgz_across", 4, 2)}),
            Ranks({0, 2, 1, 3}));
}

TEST(Placement, ThreePlusOneIsRefusedNamingRanksNodesAndFix) {
  EXPECT_EQ(refusal({"n0", "n0", "n0", "n1"}, {blocks("hpz", 4, 2)}),
            "the program's node groups of 2 ranks (hpZ) need ranks {2, 3} on "
            "one node, but they are placed on n0 (ranks 0, 1, 2) and n1 "
            "(rank 3); put a multiple of 2 ranks on every node (a hostfile "
            "with slots=2 per node and mpirun --map-by slot, or mpirun "
            "--map-by ppr:2:node)");
  // The same nodes under --map-by node: no numbering helps either.
  EXPECT_EQ(refusal({"n0", "n1", "n0", "n0"}, {blocks("hpz", 4, 2)}),
            "the program's node groups of 2 ranks (hpZ) need ranks {1, 3} on "
            "one node, but they are placed on n0 (ranks 0, 2, 3) and n1 "
            "(rank 1); put a multiple of 2 ranks on every node (a hostfile "
            "with slots=2 per node and mpirun --map-by slot, or mpirun "
            "--map-by ppr:2:node)");
}

TEST(Placement, OnePlusThreeIsRefused) {
  EXPECT_EQ(refusal({"n0", "n1", "n1", "n1"}, {blocks("qgz_inside", 4, 2)}),
            "the program's node groups of 2 ranks (qgZ) need ranks {0, 1} on "
            "one node, but they are placed on n0 (rank 0) and n1 (ranks 1, 2, "
            "3); put a multiple of 2 ranks on every node (a hostfile with "
            "slots=2 per node and mpirun --map-by slot, or mpirun --map-by "
            "ppr:2:node)");
}

TEST(Placement, GroupsLargerThanANodeAreRefused) {
  EXPECT_EQ(refusal({"n0", "n0", "n1", "n1"}, {blocks("hpz", 4, 4)}),
            "the program's node groups of 4 ranks (hpZ) need ranks {0, 1, 2, "
            "3} on one node, but they are placed on n0 (ranks 0, 1) and n1 "
            "(ranks 2, 3); put a multiple of 4 ranks on every node (a hostfile "
            "with slots=4 per node and mpirun --map-by slot, or mpirun "
            "--map-by ppr:4:node)");
  // The fix asks for a multiple of every required group's size.
  std::string twoGroups =
      refusal({"n0", "n0", "n1", "n1", "n2", "n2", "n3", "n3"},
              {blocks("hpz", 8, 2), blocks("qgz_inside", 8, 4)});
  EXPECT_NE(twoGroups.find("groups of 4 ranks (qgZ)"), std::string::npos)
      << twoGroups;
  EXPECT_NE(twoGroups.find("a multiple of 4 ranks"), std::string::npos)
      << twoGroups;
}

TEST(Placement, OneNodeKeepsTheLaunchersRanks) {
  EXPECT_EQ(place({"n0", "n0", "n0", "n0"}, {blocks("hpz", 4, 2)}),
            Ranks({0, 1, 2, 3}));
  EXPECT_EQ(place({"n0", "n0", "n0"}, {blocks("hpz", 3, 3)}), Ranks({0, 1, 2}));
}

TEST(Placement, NoNodeGroupIsNumberedNodeByNode) {
  // ZeRO-3 alone (world collectives) and qgZ's second level, meant to cross:
  // node-major, where the bit-reversed collectives keep their large exchanges
  // inside a node.
  EXPECT_EQ(place({"n0", "n1", "n0", "n1"}, {}), Ranks({0, 2, 1, 3}));
  EXPECT_EQ(place({"n0", "n1", "n0", "n1"}, {strided("qgz_across", 4, 2)}),
            Ranks({0, 2, 1, 3}));
  EXPECT_EQ(place({"n0", "n0", "n0", "n1"}, {blocks("other", 4, 2)}),
            Ranks({0, 1, 2, 3}));
}

TEST(Placement, PipelineStagesFillNodesWhenTheyFit) {
  // pp=2 x dp=2 on 2 nodes x 2: each stage's replicas on one node.
  EXPECT_EQ(place({"n0", "n0", "n1", "n1"}, {blocks("dp", 4, 2)}),
            Ranks({0, 1, 2, 3}));
  EXPECT_EQ(place({"n0", "n1", "n0", "n1"}, {blocks("dp", 4, 2)}),
            Ranks({0, 2, 1, 3}));
  // A stage of 4 replicas on nodes of 2 cannot fit one node: it still runs,
  // numbered node by node.
  EXPECT_EQ(
      place({"a", "b", "c", "d", "a", "b", "c", "d"}, {blocks("dp", 8, 4)}),
      Ranks({0, 2, 4, 6, 1, 3, 5, 7}));
  // ... unless hpZ inside the stage needs the node-major one.
  EXPECT_EQ(place({"a", "b", "c", "d", "a", "b", "c", "d"},
                  {blocks("dp", 8, 4), blocks("hpz", 8, 2)}),
            Ranks({0, 2, 4, 6, 1, 3, 5, 7}));
}

TEST(Placement, GroupOutsideTheWorldIsAnError) {
  EXPECT_EQ(refusal({"n0", "n1"}, {blocks("hpz", 4, 2)}),
            "process group \"hpz\" lists rank 2 of a world of 2");
}

TEST(Placement, DescribesEachNodesRanks) {
  EXPECT_EQ(
      describePlacement({"n0", "n0", "n1", "n1"}, {0, 1, 2, 3}),
      std::vector<std::string>({"node n0: ranks 0, 1", "node n1: ranks 2, 3"}));
  EXPECT_EQ(
      describePlacement({"n0", "n1", "n0", "n1"}, {0, 2, 1, 3}),
      std::vector<std::string>({"node n0: ranks 0, 1 (launcher ranks 0, 2)",
                                "node n1: ranks 2, 3 (launcher ranks 1, 3)"}));
  EXPECT_EQ(
      describePlacement({"n0", "n0", "n0", "n1"}, {0, 1, 2, 3}),
      std::vector<std::string>({"node n0: ranks 0, 1, 2", "node n1: rank 3"}));
}

} // namespace
