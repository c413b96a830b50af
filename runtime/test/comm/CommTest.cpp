//===- CommTest.cpp - Collectives under mpirun against closed forms -------===//
//
// Run as `mpirun -np N zrt-comm-tests` (N = 2 and 4 in ctest; N = 1 without
// mpirun exercises the single-process communicator). Every rank runs every test;
// inputs are functions of the rank and index, and each result is checked
// against its closed form. Only rank 0 prints gtest's report, but a failure on
// any rank fails the job. Tests use EXPECT, not ASSERT, around collectives so a
// failing rank still takes part in the next one instead of hanging the others.
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"

#include "zrt/Agreement.h"
#include "zrt/Backend.h"
#include "zrt/Bindings.h"
#include "zrt/Executor.h"
#include "zrt/CpuBackend.h"
#include "zrt/Communicator.h"
#include "zrt/MpiCommunicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <unistd.h>

using namespace zrt;
using ::testing::HasSubstr;

namespace {

Communicator *world = nullptr;

TensorRef ref(std::vector<float> &v) {
  return {v.data(), DType::F32, {int64_t(v.size())}};
}
TensorRef ref(std::vector<int64_t> &v) {
  return {v.data(), DType::I64, {int64_t(v.size())}};
}

class Collectives : public ::testing::Test {
protected:
  void SetUp() override {
    rank = world->rank();
    size = world->worldSize();
    // groups: 0 = even ranks, 1 = odd ranks (the even ones again when there
    // are none), 2 = the world in reverse order.
    groups = {{"even", {}}, {"odd", {}}, {"reversed", {}}};
    for (int r = 0; r < size; ++r)
      groups[size_t(r % 2)].ranks.push_back(r);
    for (int r = size - 1; r >= 0; --r)
      groups[2].ranks.push_back(r);
    if (groups[1].ranks.empty())
      groups[1].ranks = groups[0].ranks;
    Status s = world->setup(groups, 2);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
  int rank = 0, size = 1;
  std::vector<ProcessGroupDesc> groups;
};

TEST_F(Collectives, AllGatherConcatenatesRankMajor) {
  const int s = 5;
  std::vector<float> in(s), out(size_t(s * size), -1);
  for (int i = 0; i < s; ++i)
    in[i] = float(rank * 100 + i);
  uint64_t before = world->bytesSent(OpKind::AllGather);
  Status st = world->allGather(ref(in), ref(out), {});
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < s; ++i)
      EXPECT_EQ(out[size_t(r * s + i)], float(r * 100 + i));
  EXPECT_EQ(world->bytesSent(OpKind::AllGather) - before,
            uint64_t(size - 1) * s * 4);

  // In place: this rank's shard already sits at its block of the output.
  std::vector<float> inPlace(size_t(s * size), -1);
  for (int i = 0; i < s; ++i)
    inPlace[size_t(rank * s + i)] = float(rank * 100 + i);
  TensorRef shard{inPlace.data() + rank * s, DType::F32, {s}};
  st = world->allGather(shard, ref(inPlace), {});
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(inPlace, out);
}

TEST_F(Collectives, ReduceScatterSumsAndKeepsOwnBlock) {
  const int s = 3;
  std::vector<float> in(size_t(s * size)), out(s, -1);
  for (int j = 0; j < s * size; ++j)
    in[j] = float(rank + j);
  Status st = world->reduceScatter(ref(in), ref(out), {});
  ASSERT_TRUE(st.isOk()) << st.message();
  // sum_r (r + rank*s + i) = size*(rank*s + i) + size*(size-1)/2
  for (int i = 0; i < s; ++i)
    EXPECT_EQ(out[i], float(size * (rank * s + i) + size * (size - 1) / 2));
}

// Over 4 ranks, for blocks Open MPI reduces by recursive halving (4 KiB here),
// the sum is ((x0 + x1) + (x2 + x3)) whatever the nodes: in the bit-reversed
// order the first halving step adds neighbouring ranks. With 1e8, -1e8, 1,
// 1e-8 that is 1; the plain order's ((x0 + x2) + (x1 + x3)) loses the 1
// against 1e8 and gives 0. (The blocking calls of MPI_THREAD_MULTIPLE: libnbc's
// non-blocking ones, under less thread support, add in an order of their own.)
TEST_F(Collectives, ReduceScatterAddsNeighbouringRanksFirst) {
  if (size != 4)
    GTEST_SKIP() << "the sum's tree is pinned for 4 ranks";
  const char *level = std::getenv("ZRT_MPI_THREAD_LEVEL");
  if (level && std::string(level) == "serialized")
    GTEST_SKIP()
        << "libnbc's non-blocking reduce-scatter adds in its own order";
  const float mine[] = {1e8f, -1e8f, 1.0f, 1e-8f};
  const size_t block = 1024;
  std::vector<float> in(block * size_t(size), mine[rank]), out(block, -1);
  ASSERT_TRUE(world->reduceScatter(ref(in), ref(out), {}).isOk());
  EXPECT_EQ(out, std::vector<float>(block, 1.0f));
}

TEST_F(Collectives, AllReduceSumsF32I64AndF16) {
  std::vector<float> in(7), out(7);
  for (int i = 0; i < 7; ++i)
    in[i] = float(rank + i);
  ASSERT_TRUE(world->allReduce(ref(in), ref(out), {}).isOk());
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(out[i], float(size * i + size * (size - 1) / 2));

  std::vector<int64_t> big(3);
  for (int i = 0; i < 3; ++i)
    big[i] = (int64_t(1) << 40) + rank * i;
  ASSERT_TRUE(world->allReduce(ref(big), ref(big), {}).isOk()); // in place
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(big[i], size * (int64_t(1) << 40) + int64_t(i) * size * (size - 1) / 2);

  // f16 1.0 = 0x3c00; the sum of `size` ones is exact for small sizes.
  std::vector<uint16_t> half(4, 0x3c00), halfOut(4);
  TensorRef hin{half.data(), DType::F16, {4}}, hout{halfOut.data(), DType::F16, {4}};
  ASSERT_TRUE(world->allReduce(hin, hout, {}).isOk());
  const uint16_t halfOf[] = {0, 0x3c00, 0x4000, 0x4200, 0x4400}; // 0.0 .. 4.0
  if (size <= 4)
    EXPECT_EQ(halfOut[0], halfOf[size]);

  std::vector<uint8_t> flags(2);
  TensorRef b{flags.data(), DType::Bool, {2}};
  Status st = world->allReduce(b, b, {});
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("cannot sum bool tensors"));
}

TEST_F(Collectives, BroadcastCopiesTheRootsInput) {
  int root = size - 1;
  std::vector<float> in(6), out(6, -1);
  for (int i = 0; i < 6; ++i)
    in[i] = float(rank * 10 + i);
  uint64_t before = world->bytesSent(OpKind::Broadcast);
  ASSERT_TRUE(world->broadcast(ref(in), ref(out), root, {}).isOk());
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], float(root * 10 + i));
  EXPECT_EQ(world->bytesSent(OpKind::Broadcast) - before,
            rank == root ? uint64_t(size - 1) * 24 : 0u);
}

TEST_F(Collectives, AllToAllTransposesBlocks) {
  const int blk = 2;
  std::vector<float> in(size_t(blk * size)), out(size_t(blk * size), -1);
  for (int j = 0; j < size; ++j)
    for (int k = 0; k < blk; ++k)
      in[size_t(j * blk + k)] = float(rank * 100 + j * 10 + k);
  ASSERT_TRUE(world->allToAll(ref(in), ref(out), {}).isOk());
  for (int i = 0; i < size; ++i)
    for (int k = 0; k < blk; ++k)
      EXPECT_EQ(out[size_t(i * blk + k)], float(i * 100 + rank * 10 + k));
}

TEST_F(Collectives, SendRecvAroundARing) {
  if (size == 1) {
    std::vector<float> v(1);
    Status st = world->send(ref(v), 0, 0, {});
    EXPECT_THAT(st.message(), HasSubstr("a single-process run has no peers"));
    return;
  }
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  std::vector<float> mine(4, float(rank)), got(4, -1);
  // Even ranks send first, odd ranks receive first: no cycle of waits.
  Status a, b;
  if (rank % 2 == 0) {
    a = world->send(ref(mine), next, 3, {});
    b = world->recv(ref(got), prev, 3, {});
  } else {
    b = world->recv(ref(got), prev, 3, {});
    a = world->send(ref(mine), next, 3, {});
  }
  ASSERT_TRUE(a.isOk()) << a.message();
  ASSERT_TRUE(b.isOk()) << b.message();
  EXPECT_EQ(got, std::vector<float>(4, float(prev)));
  Status self = world->send(ref(mine), rank, 0, {});
  EXPECT_THAT(self.message(), HasSubstr("is not another rank"));
}

TEST_F(Collectives, SubGroupsAndGroupRankOrder) {
  if (size == 1)
    GTEST_SKIP() << "needs several ranks";
  // Within the even/odd group of this rank: sum of the members' world ranks.
  int mine = rank % 2;
  std::vector<float> in(2, float(rank)), out(2);
  CommContext ctx;
  ctx.group = mine;
  ctx.channel = 1;
  ASSERT_TRUE(world->allReduce(ref(in), ref(out), ctx).isOk());
  float sum = 0;
  for (int r : groups[size_t(mine)].ranks)
    sum += float(r);
  EXPECT_EQ(out[0], sum);
  EXPECT_EQ(world->groupRank(mine), rank / 2);
  EXPECT_EQ(world->groupRank(1 - mine), -1);
  Status notMember = world->allReduce(ref(in), ref(out), {1 - mine, 0, nullptr, nullptr});
  ASSERT_FALSE(notMember.isOk());
  EXPECT_THAT(notMember.message(), HasSubstr("is not a member of process group"));

  // The reversed world: group rank g is world rank size-1-g, so the gather is
  // in reverse rank order.
  std::vector<float> one(1, float(rank)), all(static_cast<size_t>(size));
  ctx.group = 2;
  ASSERT_TRUE(world->allGather(ref(one), ref(all), ctx).isOk());
  for (int g = 0; g < size; ++g)
    EXPECT_EQ(all[size_t(g)], float(size - 1 - g));
}

TEST_F(Collectives, CoordinationHelpers) {
  std::vector<int> failed = world->failedRanks(rank != size - 1);
  EXPECT_EQ(failed, std::vector<int>{size - 1});
  EXPECT_TRUE(world->failedRanks(true).empty());
  std::vector<std::string> texts = world->gatherToRoot("rank" + std::to_string(rank));
  if (rank == 0) {
    ASSERT_EQ(int(texts.size()), size);
    EXPECT_EQ(texts[size_t(size - 1)], "rank" + std::to_string(size - 1));
  } else {
    EXPECT_TRUE(texts.empty());
  }
  uint64_t value = rank == 0 ? 0xfeedu : 0u;
  ASSERT_TRUE(world->broadcastBytes(&value, sizeof value, 0).isOk());
  EXPECT_EQ(value, 0xfeedu);
}

/// Partitioned process groups (hpZ), one group read differently by each
/// rank: "nodes" cuts the world into consecutive pairs (group_size 2: the
/// ranks of one node of two), "peers" lists the even ranks, then the odd
/// ones, cut in halves (group_size size/2: the ranks with the same local
/// index on every node; {0, 2}, {1, 3} on 4 ranks). Expected members come
/// from these closed forms, not from the communicator.
class PartitionedGroups : public ::testing::Test {
protected:
  void SetUp() override {
    rank = world->rank();
    size = world->worldSize();
    if (size % 2 != 0)
      GTEST_SKIP() << "needs an even number of ranks";
    groups = {{"nodes", {}, 2}, {"peers", {}, size / 2}};
    for (int r = 0; r < size; ++r)
      groups[0].ranks.push_back(r);
    for (int parity : {0, 1})
      for (int r = parity; r < size; r += 2)
        groups[1].ranks.push_back(r);
    Status s = world->setup(groups, 1);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
  /// The world ranks of this rank's part of group `g`, in group-rank order.
  std::vector<int> members(int g) const {
    if (g == 0)
      return {rank - rank % 2, rank - rank % 2 + 1};
    std::vector<int> out;
    for (int r = rank % 2; r < size; r += 2)
      out.push_back(r);
    return out;
  }
  /// This rank's place in its part of group `g`.
  int memberIndex(int g) const { return g == 0 ? rank % 2 : rank / 2; }
  /// Byte counters of the world and both groups.
  std::array<uint64_t, 3> counters() const {
    return {world->bytesSentInGroup(-1), world->bytesSentInGroup(0),
            world->bytesSentInGroup(1)};
  }
  /// Checks that only group `g`'s counter grew since `before`, by `bytes`.
  void expectCounted(const std::array<uint64_t, 3> &before, int g,
                     uint64_t bytes) const {
    std::array<uint64_t, 3> after = counters();
    EXPECT_EQ(after[0], before[0]) << "the world's counter";
    EXPECT_EQ(after[size_t(g + 1)] - before[size_t(g + 1)], bytes);
    EXPECT_EQ(after[size_t(2 - g)], before[size_t(2 - g)]) << "the other group";
  }
  int rank = 0, size = 1;
  std::vector<ProcessGroupDesc> groups;
};

TEST_F(PartitionedGroups, EachRankUsesThePartHoldingIt) {
  for (int g : {0, 1}) {
    EXPECT_EQ(world->groupRanks(g), members(g)) << "group " << g;
    EXPECT_EQ(world->groupRank(g), memberIndex(g)) << "group " << g;
  }
}

TEST_F(PartitionedGroups, AllGatherWithinThePart) {
  const int s = 3;
  for (int g : {0, 1}) {
    std::vector<int> part = members(g);
    const int gs = int(part.size());
    std::vector<float> in(s), out(size_t(s * gs), -1);
    for (int i = 0; i < s; ++i)
      in[size_t(i)] = float(rank * 100 + i);
    std::array<uint64_t, 3> before = counters();
    uint64_t kindBefore = world->bytesSent(OpKind::AllGather);
    Status st = world->allGather(ref(in), ref(out), {g, 0, nullptr, nullptr});
    EXPECT_TRUE(st.isOk()) << st.message();
    for (int j = 0; j < gs; ++j)
      for (int i = 0; i < s; ++i)
        EXPECT_EQ(out[size_t(j * s + i)], float(part[size_t(j)] * 100 + i))
            << "group " << g;
    // (g-1) * shard bytes, in the group's counter and the kind's alike.
    expectCounted(before, g, uint64_t(gs - 1) * s * 4);
    EXPECT_EQ(world->bytesSent(OpKind::AllGather) - kindBefore,
              uint64_t(gs - 1) * s * 4);
  }
}

TEST_F(PartitionedGroups, ReduceScatterWithinThePart) {
  const int s = 2;
  for (int g : {0, 1}) {
    std::vector<int> part = members(g);
    const int gs = int(part.size());
    std::vector<float> in(size_t(s * gs)), out(s, -1);
    for (int j = 0; j < s * gs; ++j)
      in[size_t(j)] = float(rank * 1000 + j);
    std::array<uint64_t, 3> before = counters();
    Status st =
        world->reduceScatter(ref(in), ref(out), {g, 0, nullptr, nullptr});
    EXPECT_TRUE(st.isOk()) << st.message();
    // Element i of this rank's block: sum over members m of m*1000 + k*s + i.
    float memberSum = 0;
    for (int m : part)
      memberSum += float(m * 1000);
    for (int i = 0; i < s; ++i)
      EXPECT_EQ(out[size_t(i)],
                memberSum + float(gs * (memberIndex(g) * s + i)))
          << "group " << g;
    expectCounted(before, g, uint64_t(gs - 1) * s * 4);
  }
}

TEST_F(PartitionedGroups, AllToAllWithinThePart) {
  const int blk = 2;
  for (int g : {0, 1}) {
    std::vector<int> part = members(g);
    const int gs = int(part.size());
    std::vector<float> in(size_t(blk * gs)), out(size_t(blk * gs), -1);
    for (int j = 0; j < gs; ++j)
      for (int k = 0; k < blk; ++k)
        in[size_t(j * blk + k)] = float(rank * 100 + j * 10 + k);
    std::array<uint64_t, 3> before = counters();
    Status st = world->allToAll(ref(in), ref(out), {g, 0, nullptr, nullptr});
    EXPECT_TRUE(st.isOk()) << st.message();
    // Block i comes from member i, which sent its block memberIndex.
    for (int i = 0; i < gs; ++i)
      for (int k = 0; k < blk; ++k)
        EXPECT_EQ(out[size_t(i * blk + k)],
                  float(part[size_t(i)] * 100 + memberIndex(g) * 10 + k))
            << "group " << g;
    expectCounted(before, g, uint64_t(gs - 1) * blk * 4);
  }
}

TEST(MultiRankExecutor, RunsTheShardedLinearModel) {
  // Each rank writes its own copy of the files, then runs the ZeRO-3 program:
  // its weight shard is all-gathered, y = x @ w + b, y_sum = size * y.
  int rank = world->rank(), size = world->worldSize();
  char pattern[] = "/tmp/zrt-comm-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  std::string dir = pattern;
  ASSERT_TRUE(test::writeLinearModel(dir, size).isOk());
  auto backend = createCpuBackend(1);
  Expected<Program> p = loadProgram(dir + "/model.zrt", &backend->kernels());
  ASSERT_TRUE(p.isOk()) << p.status().message();
  ExecutorOptions options;
  options.trackMemory = true;
  auto exec = Executor::create(*p, *backend, *world, options);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  Expected<SafetensorsFile> weights = SafetensorsFile::open(dir + "/weights.safetensors");
  ASSERT_TRUE(weights.isOk());
  WeightsStats stats;
  ASSERT_TRUE(loadGlobals(**exec, *weights, rank, &stats).isOk());
  // w: 30 elements padded to a multiple of size; rank r reads its real ones.
  uint64_t shard = (30 + size - 1) / size;
  uint64_t real = std::min<uint64_t>(30, (rank + 1) * shard) -
                  std::min<uint64_t>(30, rank * shard);
  EXPECT_EQ(stats.bytesRead, (real + 5) * 4);
  EXPECT_EQ(stats.residentBytes, (shard + 5) * 4);
  ASSERT_TRUE(bindInputs(**exec, {{"x", dir + "/x.npy"}}).isOk());
  Status s = (*exec)->run();
  ASSERT_TRUE(s.isOk()) << s.message();
  test::LinearModel m = test::makeLinearModel(size);
  std::vector<float> y(20), ySum(20);
  ASSERT_TRUE((*exec)->readBuffer(6, y.data(), 80).isOk());
  ASSERT_TRUE((*exec)->readBuffer(7, ySum.data(), 80).isOk());
  EXPECT_EQ(y, m.y);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(ySum[size_t(i)], float(size) * m.y[size_t(i)]);
  // The gathered weight's padding must be zeros, from every rank's shard.
  std::vector<float> gathered(size_t(shard * size));
  ASSERT_TRUE((*exec)->readBuffer(2, gathered.data(), gathered.size() * 4).isOk());
  for (size_t i = 30; i < gathered.size(); ++i)
    EXPECT_EQ(gathered[i], 0.0f);
  EXPECT_EQ(world->bytesSent(OpKind::AllGather) > 0, size > 1);
  if (!::testing::Test::HasFailure())
    std::filesystem::remove_all(dir);
}

TEST(MultiRankExecutor, RunsGroupCollectivesAndRankGatedInstructions) {
  // comm stream: AllReduce over the even ranks and one over the odd ranks
  // (each rank runs its own group's), then rank 0 sends its sum to rank 1,
  // which receives it; a Broadcast from the last rank of the world.
  int rank = world->rank(), size = world->worldSize();
  if (size == 1)
    GTEST_SKIP() << "needs several ranks";
  Program p;
  p.path = "groups.zrt";
  p.version = kFormatVersion;
  p.worldSize = size;
  p.arenas = {{"activations", 4 * 64, 0, 0}};
  p.buffers = {{"v", DType::F32, {4}, 0, 0},
               {"sum", DType::F32, {4}, 0, 64},
               {"got", DType::F32, {4}, 0, 128},
               {"bcast", DType::F32, {4}, 0, 192}};
  p.streams = {{"comm", StreamKind::Comm}};
  p.groups = {{"even", {}}, {"odd", {}}};
  for (int r = 0; r < size; ++r)
    p.groups[size_t(r % 2)].ranks.push_back(r);
  Instruction even = test::makeInstruction("AllReduce", 0, {0}, {1}, "even");
  even.group = 0;
  Instruction odd = test::makeInstruction("AllReduce", 0, {0}, {1}, "odd");
  odd.group = 1;
  Instruction send = test::makeInstruction("Send", 0, {1}, {}, "to1");
  send.attrs.set("peer", AttrValue{{1}, {}, ""});
  send.ranks = {0};
  Instruction recv = test::makeInstruction("Recv", 0, {}, {2}, "from0");
  recv.attrs.set("peer", AttrValue{{0}, {}, ""});
  recv.ranks = {1};
  Instruction bcast = test::makeInstruction("Broadcast", 0, {0}, {3}, "bcast");
  bcast.attrs.set("root", AttrValue{{size - 1}, {}, ""});
  p.instructions = {even, odd, send, recv, bcast};
  ASSERT_TRUE(validateProgram(p).isOk()) << validateProgram(p).message();

  auto backend = createCpuBackend(1);
  auto exec = Executor::create(p, *backend, *world);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();
  std::vector<float> v(4, float(rank + 1));
  ASSERT_TRUE((*exec)->writeBuffer(0, v.data(), 16).isOk());
  Status s = (*exec)->run();
  ASSERT_TRUE(s.isOk()) << s.message();
  auto groupSum = [&](int parity) {
    float sum = 0;
    for (int r = parity; r < size; r += 2)
      sum += float(r + 1);
    return sum;
  };
  std::vector<float> sum(4), got(4), b(4);
  ASSERT_TRUE((*exec)->readBuffer(1, sum.data(), 16).isOk());
  ASSERT_TRUE((*exec)->readBuffer(2, got.data(), 16).isOk());
  ASSERT_TRUE((*exec)->readBuffer(3, b.data(), 16).isOk());
  EXPECT_EQ(sum, std::vector<float>(4, groupSum(rank % 2)));
  EXPECT_EQ(got, std::vector<float>(4, rank == 1 ? groupSum(0) : 0.0f));
  EXPECT_EQ(b, std::vector<float>(4, float(size)));
}

TEST(MultiRankExecutor, RunsCollectivesOverPartitionedGroups) {
  // One comm stream: an AllToAll over the world (the compiler's quantized
  // reduce-scatter), an AllToAll and a ReduceScatter within each node pair,
  // and an AllGather among the ranks of the same local index.
  int rank = world->rank(), size = world->worldSize();
  if (size % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  const int half = size / 2;
  Program p;
  p.path = "partitioned.zrt";
  p.version = kFormatVersion;
  p.worldSize = size;
  const uint64_t slot = 256;
  p.arenas = {{"activations", 8 * slot, 0, 0}};
  p.buffers = {{"a2a.in", DType::F32, {2 * size}, 0, 0},
               {"a2a.out", DType::F32, {2 * size}, 0, slot},
               {"node.in", DType::F32, {4}, 0, 2 * slot},
               {"node.out", DType::F32, {4}, 0, 3 * slot},
               {"shard", DType::F32, {3}, 0, 4 * slot},
               {"gathered", DType::F32, {3 * half}, 0, 5 * slot},
               {"rs.in", DType::F32, {4}, 0, 6 * slot},
               {"rs.out", DType::F32, {2}, 0, 7 * slot}};
  p.streams = {{"comm", StreamKind::Comm}};
  p.groups = {{"nodes", {}, 2}, {"peers", {}, half}};
  for (int r = 0; r < size; ++r)
    p.groups[0].ranks.push_back(r);
  for (int parity : {0, 1})
    for (int r = parity; r < size; r += 2)
      p.groups[1].ranks.push_back(r);
  Instruction worldA2a = test::makeInstruction("AllToAll", 0, {0}, {1}, "a2a");
  Instruction nodeA2a =
      test::makeInstruction("AllToAll", 0, {2}, {3}, "node.a2a");
  nodeA2a.group = 0;
  Instruction gather =
      test::makeInstruction("AllGather", 0, {4}, {5}, "gather");
  gather.group = 1;
  Instruction scatter =
      test::makeInstruction("ReduceScatter", 0, {6}, {7}, "rs");
  scatter.group = 0;
  p.instructions = {worldA2a, nodeA2a, gather, scatter};
  std::vector<uint8_t> bytes = test::serializeProgram(p);
  auto backend = createCpuBackend(1);
  Expected<Program> loaded =
      parseProgram(bytes.data(), bytes.size(), p.path, &backend->kernels());
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  auto exec = Executor::create(*loaded, *backend, *world);
  ASSERT_TRUE(exec.isOk()) << exec.status().message();

  auto fill = [&](uint32_t buffer, size_t n) {
    std::vector<float> v(n);
    for (size_t j = 0; j < n; ++j)
      v[j] = float(rank * 100 + int(j));
    EXPECT_TRUE((*exec)->writeBuffer(buffer, v.data(), n * 4).isOk());
  };
  fill(0, size_t(2 * size));
  fill(2, 4);
  fill(4, 3);
  fill(6, 4);
  Status s = (*exec)->run();
  ASSERT_TRUE(s.isOk()) << s.message();
  auto read = [&](uint32_t buffer, size_t n) {
    std::vector<float> v(n);
    EXPECT_TRUE((*exec)->readBuffer(buffer, v.data(), n * 4).isOk());
    return v;
  };
  // Block i (2 elements) of an all-to-all comes from member i, which sent
  // its elements [2 * index, 2 * index + 2), index = this rank's place.
  const int pairBase = rank - rank % 2, inPair = rank % 2;
  std::vector<float> a2a = read(1, size_t(2 * size)), node = read(3, 4);
  for (int i = 0; i < size; ++i)
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(a2a[size_t(2 * i + k)], float(i * 100 + 2 * rank + k));
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(node[size_t(2 * i + k)],
                float((pairBase + i) * 100 + 2 * inPair + k));
  // The same-local-index ranks rank % 2, rank % 2 + 2, ... in that order.
  std::vector<float> gathered = read(5, size_t(3 * half));
  for (int j = 0; j < half; ++j)
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(gathered[size_t(3 * j + k)],
                float((rank % 2 + 2 * j) * 100 + k));
  // Sum over the pair of m*100 + (2*inPair + i).
  std::vector<float> rs = read(7, 2);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(rs[size_t(i)], float(pairBase * 100 + (pairBase + 1) * 100 +
                                   2 * (2 * inPair + i)));
  // Counters start at setup (Executor::create): the point-to-point volumes.
  EXPECT_EQ(world->bytesSentInGroup(-1), uint64_t(size - 1) * 2 * 4);
  EXPECT_EQ(world->bytesSentInGroup(0), uint64_t(1 * 2 * 4 + 1 * 2 * 4));
  EXPECT_EQ(world->bytesSentInGroup(1), uint64_t(half - 1) * 3 * 4);
}

/// zrt/Agreement.h over the world: what each rank ends with when one rank
/// fails, loads another program, or runs other collectives. Expected messages
/// are written out from the ranks' roles, not from the code under test.
TEST(Agreement, AFailedRankIsNamedOnEveryOther) {
  int rank = world->rank(), size = world->worldSize();
  EXPECT_TRUE(agreeOnOutcome(*world, Status::ok()).isOk());
  Status local = rank == size - 1 ? Status::error("cannot read w.safetensors") : Status::ok();
  Status agreed = agreeOnOutcome(*world, local);
  ASSERT_FALSE(agreed.isOk());
  if (rank == size - 1)
    EXPECT_EQ(agreed.message(), "cannot read w.safetensors");
  else
    EXPECT_EQ(agreed.message(),
              "stopped because rank(s) " + std::to_string(size - 1) + " failed");
}

TEST(Agreement, AnotherProgramOrWeightsLayoutIsNamed) {
  int rank = world->rank();
  EXPECT_TRUE(checkSameProgram(*world, "m.zrt", 0x1234, "w.safetensors", 0x99).isOk());
  // Every rank but 0 loaded another program: each names itself and both hashes.
  Status s = checkSameProgram(*world, "m.zrt", rank == 0 ? 0x1234 : 0x5678,
                              "w.safetensors", 0x99);
  if (rank == 0) {
    EXPECT_TRUE(s.isOk()) << s.message();
  } else {
    ASSERT_FALSE(s.isOk());
    EXPECT_THAT(s.message(), HasSubstr("rank " + std::to_string(rank) +
                                       " loaded a different program than rank 0 (m.zrt: "
                                       "hash 0000000000005678, rank 0's: "
                                       "0000000000001234)"));
  }
  // The same program, another weights layout on the last rank.
  int last = world->worldSize() - 1;
  s = checkSameProgram(*world, "m.zrt", 0x1234, "w.safetensors", rank == last ? 0x77 : 0x99);
  if (rank == 0 || rank != last) {
    EXPECT_TRUE(s.isOk()) << s.message();
  } else {
    ASSERT_FALSE(s.isOk());
    EXPECT_THAT(s.message(), HasSubstr("reads a different weights layout than rank 0 "
                                       "(w.safetensors: hash 0000000000000077, rank 0's: "
                                       "0000000000000099)"));
  }
}

/// A program of world collectives: an AllReduce of `n` f32 elements, then
/// (when `extra`) an AllGather of 8.
Program collectiveProgram(int64_t n, bool extra) {
  Program p;
  p.buffers.push_back(BufferDesc{"g", DType::F32, {n}});
  p.buffers.push_back(BufferDesc{"s", DType::F32, {8}});
  Instruction reduce;
  reduce.kind = OpKind::AllReduce;
  reduce.inputs = {0};
  reduce.loc = "grads";
  p.instructions.push_back(reduce);
  if (extra) {
    Instruction gather;
    gather.kind = OpKind::AllGather;
    gather.inputs = {1};
    p.instructions.push_back(gather);
  }
  return p;
}

TEST(Agreement, TheFirstDifferingCollectiveIsNamed) {
  int rank = world->rank(), size = world->worldSize();
  EXPECT_TRUE(checkCollectiveSequence(*world, collectiveProgram(16, true), "m.zrt").isOk());
  // The last rank reduces 32 elements where the others reduce 16.
  Status s = checkCollectiveSequence(*world, collectiveProgram(rank == size - 1 ? 32 : 16, true),
                                     "m.zrt");
  if (rank != 0 || size == 1) {
    EXPECT_TRUE(s.isOk()) << s.message();
  } else {
    ASSERT_FALSE(s.isOk());
    EXPECT_THAT(s.message(),
                HasSubstr("collective #1 of m.zrt differs between ranks: rank 0 runs "
                          "AllReduce of 64 bytes in group -1 (instruction 0, grads), rank " +
                          std::to_string(size - 1) +
                          " runs AllReduce of 128 bytes in group -1 (instruction 0, grads)"));
  }
  // Rank 1 ends its program early.
  s = checkCollectiveSequence(*world, collectiveProgram(16, rank != 1), "m.zrt");
  if (rank != 0 || size == 1) {
    EXPECT_TRUE(s.isOk()) << s.message();
  } else {
    ASSERT_FALSE(s.isOk());
    EXPECT_THAT(s.message(), HasSubstr("collective #2 of m.zrt differs between ranks: "
                                       "rank 0 runs AllGather of 32 bytes"));
    EXPECT_THAT(s.message(), HasSubstr("rank 1 runs none (its program ends)"));
  }
}

TEST(Agreement, OtherCollectiveCountsAfterAStepAreNamed) {
  int rank = world->rank(), size = world->worldSize();
  // Each rank counts on a communicator of its own: odd ranks run one
  // AllReduce more than the even ones.
  std::unique_ptr<Communicator> counted = createLocalCommunicator();
  ASSERT_TRUE(counted->setup({}, 1).isOk());
  std::vector<float> v(4, 1.0f);
  for (int i = 0; i < 1 + rank % 2; ++i)
    ASSERT_TRUE(counted->allReduce(ref(v), ref(v), CommContext{}).isOk());
  Status s = checkCollectiveCounts(*world, *counted, 3);
  if (rank != 0 || size == 1) {
    EXPECT_TRUE(s.isOk()) << s.message();
  } else {
    ASSERT_FALSE(s.isOk());
    EXPECT_THAT(s.message(), HasSubstr("after step 3 rank 1 has run other collectives "
                                       "than rank 0"));
    EXPECT_THAT(s.message(), HasSubstr("rank 0:\nAllGather 0 0\nReduceScatter 0 0\n"
                                       "AllReduce 1 0\n"));
    EXPECT_THAT(s.message(), HasSubstr("rank 1:\nAllGather 0 0\nReduceScatter 0 0\n"
                                       "AllReduce 2 0\n"));
  }
}

TEST(Placement, NodeNamesAreTheHostsName) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(world->nodeNames(),
            std::vector<std::string>(size_t(world->worldSize()), host));
}

TEST(Placement, ReorderRenumbersTheWorld) {
  const int size = world->worldSize(), before = world->rank();
  if (size > 1) // not a permutation: refused before any MPI call
    EXPECT_FALSE(
        world->reorder(std::vector<int>(world->worldSize(), 0)).isOk());
  std::vector<int> reversed;
  for (int r = 0; r < size; ++r)
    reversed.push_back(size - 1 - r);
  Status s = world->reorder(reversed);
  if (world->name() == "local") {
    EXPECT_TRUE(s.isOk()) << s.message(); // the identity
    return;
  }
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(world->rank(), size - 1 - before);
  // The world's collectives follow the new numbering: new rank i is the
  // process that was rank size - 1 - i.
  ASSERT_TRUE(world->setup({}, 1).isOk());
  std::vector<float> mine = {float(before)}, all(size_t(size), -1.0f);
  CommContext ctx;
  ASSERT_TRUE(world->allGather(ref(mine), ref(all), ctx).isOk());
  for (int i = 0; i < size; ++i)
    EXPECT_EQ(all[size_t(i)], float(size - 1 - i));
  std::vector<std::string> names = world->gatherToRoot(std::to_string(before));
  if (world->rank() == 0)
    for (int i = 0; i < size; ++i)
      EXPECT_EQ(names[size_t(i)], std::to_string(size - 1 - i));
  // And back, for whatever runs after.
  ASSERT_TRUE(world->reorder(reversed).isOk());
  EXPECT_EQ(world->rank(), before);
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Expected<std::unique_ptr<Communicator>> comm = createWorldCommunicator(&argc, &argv);
  if (!comm) {
    std::fprintf(stderr, "%s\n", comm.status().message().c_str());
    return 1;
  }
  world = comm->get();
  if (world->rank() != 0) {
    ::testing::TestEventListeners &listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int result = RUN_ALL_TESTS();
  // A failure on any rank fails every rank's exit code.
  bool anyFailed = !world->failedRanks(result == 0).empty();
  comm->reset();
  return anyFailed ? 1 : 0;
}
