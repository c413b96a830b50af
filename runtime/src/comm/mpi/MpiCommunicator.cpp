//===- MpiCommunicator.cpp - Collectives over MPI -------------------------===//
//
// The CPU collectives. Every program process group becomes an MPI communicator
// (MPI_Comm_split of the world, keyed by the position in the group's rank list,
// so MPI ranks are group ranks; a partitioned group's parts are the split's
// colours), duplicated once per channel so that two communication streams never
// interleave operations on one communicator. Each rank's node (its processor
// name; the ranks of one MPI_COMM_TYPE_SHARED split are one node) is gathered
// once at start, and reorder() replaces the world by a split of it keyed by
// each process's program rank (zrt/Placement.h), so everything after it, the
// program's groups included, runs over the renumbered world.
//
// All-gathers and reduce-scatters over a group of 2^m > 2 ranks run on a copy
// of its communicator whose ranks are in bit-reversed order (group rank g at
// position bitrev(g)). Open MPI's tuned component is asked (before MPI_Init,
// where the environment does not say otherwise) to run them by recursive
// doubling / halving at every size: its own choice for 4 ranks is a butterfly
// for 8-16 KiB blocks (the small exchanges first) and reduce-then-scatter from
// 1 MiB, which cross the nodes 2x and 2.5x the least. Their largest exchanges
// are between positions p/2 apart: in bit-reversed order those are
// neighbouring group ranks, so with the ranks numbered node by node
// (zrt/Placement.h) the large exchanges stay inside a node and only the
// smallest cross (the least the data needs: (n-1)/n of the buffer into each of
// n nodes), where the plain order sent the largest across.
// The all-gather's blocks are swapped back into group-rank order; the
// reduce-scatter's input blocks are swapped before. Its sum is then a binary
// tree over consecutive group ranks ((x0+x1)+(x2+x3)): fixed by the group's
// size alone, so the same bits on one node or several, under any --map-by.
//
// bytesSentAcrossNodes() sums, over the peers on other nodes, what each
// collective sent to each peer under the algorithm that ran it: recursive
// doubling / halving for all-gathers and reduce-scatters over 2^m ranks (the
// exchanges are known exactly, in bit-reversed order), the peer itself for
// sends and all-to-all blocks; recursive doubling (the whole buffer to each
// partner) for all-reduces and a root sending to every rank for broadcasts,
// which tuned follows for the small buffers programs reduce and broadcast; a
// block to each peer for all-gathers and reduce-scatters over other sizes.
// (Open MPI 4.1's pml monitoring counts each peer's bytes, but its MPI_T
// variables are gone once the monitoring pml is unloaded at MPI_Init, issue
// open-mpi/ompi#9260.) Messages outside collectives (zero-run's agreements,
// the program's broadcast) are not counted.
//
// With MPI_THREAD_MULTIPLE, collectives are the blocking MPI calls (their tuned
// algorithms were up to 2x faster than the non-blocking ones for a 64 MiB
// allreduce on 2 ranks here). With less thread support they are issued
// non-blocking and completed by polling MPI_Test, holding the mutex that
// serialises MPI calls per call rather than for the whole collective, so two
// streams' collectives cannot deadlock on it; a cancelled run then also stops
// waiting.
//
//===----------------------------------------------------------------------===//

#include "zrt/Backend.h"
#include "zrt/Communicator.h"
#include "zrt/MpiCommunicator.h"

#include "math/HalfMath.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace zrt {
namespace {

void sumF16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = math::floatToHalf(math::halfToFloat(a[i]) + math::halfToFloat(b[i]));
}

void sumBF16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = math::floatToBfloat16(math::bfloat16ToFloat(a[i]) +
                                math::bfloat16ToFloat(b[i]));
}

/// The position of group rank `g` in a group of `size` ranks (a power of two):
/// g's bits reversed.
int bitReversed(int g, int size) {
  int reversed = 0;
  for (int bit = 1; bit < size; bit <<= 1)
    reversed = (reversed << 1) | ((g & bit) ? 1 : 0);
  return reversed;
}

/// Whether a group of `size` ranks gets the bit-reversed communicator.
bool reversesOrder(int size) { return size > 2 && (size & (size - 1)) == 0; }

/// Swaps block i of `blocks` with block bitReversed(i) (its own inverse):
/// position order to group-rank order and back.
void swapBitReversed(uint8_t *blocks, uint64_t blockBytes, int size) {
  std::vector<uint8_t> spare(blockBytes);
  for (int i = 0; i < size; ++i) {
    int j = bitReversed(i, size);
    if (j <= i)
      continue;
    uint8_t *a = blocks + blockBytes * uint64_t(i);
    uint8_t *b = blocks + blockBytes * uint64_t(j);
    std::memcpy(spare.data(), a, blockBytes);
    std::memcpy(a, b, blockBytes);
    std::memcpy(b, spare.data(), blockBytes);
  }
}

bool overlaps(const void *a, uint64_t na, const void *b, uint64_t nb) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return na && nb && pa < pb + nb && pb < pa + na;
}

std::string mpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, size_t(len));
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(bool finalizeAtEnd, bool threadMultiple)
      : finalize_(finalizeAtEnd), multiple_(threadMultiple) {
    MPI_Comm_dup(MPI_COMM_WORLD, &control_);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(control_, &rank_);
    MPI_Comm_size(control_, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(control_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL,
                        &local);
    MPI_Comm_size(local, &localSize_);
    MPI_Comm_rank(local, &localRank_);
    nodes_ = gatherNodeNames(local);
    MPI_Comm_free(&local);
    MPI_Op_create(sumF16, /*commute=*/1, &sumF16_);
    MPI_Op_create(sumBF16, /*commute=*/1, &sumBF16_);
  }

  ~MpiCommunicator() override {
    freeChannels();
    MPI_Op_free(&sumF16_);
    MPI_Op_free(&sumBF16_);
    MPI_Comm_free(&control_);
    if (finalize_)
      MPI_Finalize();
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int worldSize() const override { return size_; }
  int localSize() const override { return localSize_; }
  int localRank() const override { return localRank_; }
  std::vector<std::string> nodeNames() const override { return nodes_; }

  std::optional<uint64_t> bytesSentAcrossNodes() const override {
    uint64_t across = 0;
    for (size_t peer = 0; peer < sentTo_.size(); ++peer)
      if (nodes_[peer] != nodes_[size_t(rank_)])
        across += sentTo_[peer].load();
    return across;
  }

  /// The world again, split with this process's new rank as the key: every
  /// collective after it (the program's groups, zero-run's agreements) runs
  /// over the renumbered world.
  Status reorder(const std::vector<int> &rankOf) override {
    std::vector<int> sorted = rankOf;
    std::sort(sorted.begin(), sorted.end());
    for (size_t r = 0; r < sorted.size(); ++r)
      if (sorted.size() != size_t(size_) || sorted[r] != int(r))
        return Status::error("cannot renumber " + std::to_string(size_) +
                             " ranks with a list that is not a permutation");
    auto lock = serialize();
    freeChannels();
    MPI_Comm next = MPI_COMM_NULL;
    int rc = MPI_Comm_split(control_, 0, rankOf[size_t(rank_)], &next);
    if (rc != MPI_SUCCESS)
      return Status::error("cannot renumber the ranks: " + mpiErrorString(rc));
    MPI_Comm_free(&control_);
    control_ = next;
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(control_, &rank_);
    std::vector<std::string> nodes(nodes_.size());
    for (size_t r = 0; r < nodes_.size(); ++r)
      nodes[size_t(rankOf[r])] = nodes_[r];
    nodes_ = std::move(nodes);
    return Status::ok();
  }

  Status setup(const std::vector<ProcessGroupDesc> &groups,
               int numChannels) override {
    freeChannels();
    setGroups(groups);
    sentTo_ = std::vector<std::atomic<uint64_t>>(size_t(size_));
    channels_.assign(size_t(std::max(1, numChannels)), {});
    for (std::vector<GroupComm> &comms : channels_) {
      comms.assign(groups.size() + 1, GroupComm());
      MPI_Comm_dup(control_, &comms[0].comm);
      for (size_t g = 0; g < groups.size(); ++g) {
        // Colour: the part holding this rank; key: its place in that part.
        int part = groups[g].partOf(rank_);
        int position = groupRank(int(g));
        int rc = MPI_Comm_split(control_, part >= 0 ? part : MPI_UNDEFINED,
                                position, &comms[g + 1].comm);
        if (rc != MPI_SUCCESS)
          return Status::error("cannot create MPI communicator for process "
                               "group " + std::to_string(g) + ": " +
                               mpiErrorString(rc));
      }
      for (size_t g = 0; g < comms.size(); ++g) {
        GroupComm &c = comms[g];
        if (c.comm == MPI_COMM_NULL)
          continue;
        MPI_Comm_set_errhandler(c.comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(c.comm, &c.rank);
        MPI_Comm_size(c.comm, &c.size);
        c.worldRanks = groupRanks(int(g) - 1); // comms[0] is the world
        if (!reversesOrder(c.size))
          continue;
        MPI_Comm_split(c.comm, 0, bitReversed(c.rank, c.size), &c.reversed);
        MPI_Comm_set_errhandler(c.reversed, MPI_ERRORS_RETURN);
      }
    }
    return Status::ok();
  }

  Status allGather(const TensorRef &in, const TensorRef &out,
                   const CommContext &ctx) override {
    GroupComm gc;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::AllGather, in, out, ctx, gc));
    uint64_t shard = in.bytes();
    ZRT_RETURN_IF_ERROR(checkCount(OpKind::AllGather, shard));
    const bool reversed = gc.reversed != MPI_COMM_NULL;
    MPI_Comm comm = reversed ? gc.reversed : gc.comm;
    int position = reversed ? bitReversed(gc.rank, gc.size) : gc.rank;
    auto *blocks = static_cast<uint8_t *>(out.data);
    std::vector<uint8_t> temp;
    const void *send = sendBuffer(in, out, blocks + shard * position, temp);
    ZRT_RETURN_IF_ERROR(complete(OpKind::AllGather, ctx, [&](MPI_Request *req) {
      return req ? MPI_Iallgather(send, int(shard), MPI_BYTE, out.data,
                                  int(shard), MPI_BYTE, comm, req)
                 : MPI_Allgather(send, int(shard), MPI_BYTE, out.data,
                                 int(shard), MPI_BYTE, comm);
    }));
    if (reversed)
      swapBitReversed(blocks, shard, gc.size);
    countCall(OpKind::AllGather, ctx.group, shard * uint64_t(gc.size - 1));
    // Recursive doubling: 2^i blocks to the partner 2^i positions away.
    countExchanges(gc, shard);
    return Status::ok();
  }

  Status reduceScatter(const TensorRef &in, const TensorRef &out,
                       const CommContext &ctx) override {
    GroupComm gc;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::ReduceScatter, in, out, ctx, gc));
    ZRT_RETURN_IF_ERROR(checkCount(OpKind::ReduceScatter, uint64_t(in.numel())));
    MPI_Datatype type;
    MPI_Op op;
    ZRT_RETURN_IF_ERROR(sumType(OpKind::ReduceScatter, in.dtype, type, op));
    std::vector<uint8_t> temp;
    const bool reversed = gc.reversed != MPI_COMM_NULL;
    MPI_Comm comm = reversed ? gc.reversed : gc.comm;
    const void *send;
    if (reversed) {
      // Block j goes to position j: group rank bitReversed(j)'s block.
      const auto *blocks = static_cast<const uint8_t *>(in.data);
      temp.assign(blocks, blocks + in.bytes());
      swapBitReversed(temp.data(), out.bytes(), gc.size);
      send = temp.data();
    } else {
      send = sendBuffer(in, out, out.data, temp);
    }
    ZRT_RETURN_IF_ERROR(complete(
        OpKind::ReduceScatter, ctx, [&](MPI_Request *req) {
          int count = int(out.numel());
          return req ? MPI_Ireduce_scatter_block(send, out.data, count, type,
                                                 op, comm, req)
                     : MPI_Reduce_scatter_block(send, out.data, count, type, op,
                                                comm);
        }));
    countCall(OpKind::ReduceScatter, ctx.group,
              out.bytes() * uint64_t(gc.size - 1));
    // Recursive halving: p/2^i blocks to the partner p/2^i positions away.
    countExchanges(gc, out.bytes());
    return Status::ok();
  }

  Status allReduce(const TensorRef &in, const TensorRef &out,
                   const CommContext &ctx) override {
    GroupComm gc;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::AllReduce, in, out, ctx, gc));
    ZRT_RETURN_IF_ERROR(checkCount(OpKind::AllReduce, uint64_t(in.numel())));
    MPI_Datatype type;
    MPI_Op op;
    ZRT_RETURN_IF_ERROR(sumType(OpKind::AllReduce, in.dtype, type, op));
    std::vector<uint8_t> temp;
    const void *send = sendBuffer(in, out, out.data, temp);
    ZRT_RETURN_IF_ERROR(complete(OpKind::AllReduce, ctx, [&](MPI_Request *req) {
      int count = int(out.numel());
      return req ? MPI_Iallreduce(send, out.data, count, type, op, gc.comm, req)
                 : MPI_Allreduce(send, out.data, count, type, op, gc.comm);
    }));
    // Ring volume: a reduce-scatter then an all-gather of n/g-sized blocks.
    countCall(OpKind::AllReduce, ctx.group,
              2 * uint64_t(gc.size - 1) * out.bytes() / uint64_t(gc.size));
    for (int d = 1; d < gc.size; d <<= 1)
      if ((gc.rank ^ d) < gc.size)
        countPeer(gc, gc.rank ^ d, out.bytes());
    return Status::ok();
  }

  Status broadcast(const TensorRef &in, const TensorRef &out, int root,
                   const CommContext &ctx) override {
    GroupComm gc;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::Broadcast, in, out, ctx, gc));
    ZRT_RETURN_IF_ERROR(checkCount(OpKind::Broadcast, out.bytes()));
    if (root < 0 || root >= gc.size)
      return Status::error("Broadcast: root " + std::to_string(root) +
                           " is not a rank of a group of " +
                           std::to_string(gc.size));
    if (gc.rank == root && in.data != out.data)
      std::memmove(out.data, in.data, out.bytes());
    ZRT_RETURN_IF_ERROR(complete(OpKind::Broadcast, ctx, [&](MPI_Request *req) {
      int count = int(out.bytes());
      return req ? MPI_Ibcast(out.data, count, MPI_BYTE, root, gc.comm, req)
                 : MPI_Bcast(out.data, count, MPI_BYTE, root, gc.comm);
    }));
    countCall(OpKind::Broadcast, ctx.group,
              gc.rank == root ? out.bytes() * uint64_t(gc.size - 1) : 0);
    for (int peer = 0; gc.rank == root && peer < gc.size; ++peer)
      if (peer != root)
        countPeer(gc, peer, out.bytes());
    return Status::ok();
  }

  Status allToAll(const TensorRef &in, const TensorRef &out,
                  const CommContext &ctx) override {
    GroupComm gc;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::AllToAll, in, out, ctx, gc));
    ZRT_RETURN_IF_ERROR(checkCount(OpKind::AllToAll, in.bytes()));
    uint64_t block = in.bytes() / uint64_t(gc.size);
    std::vector<uint8_t> temp;
    const void *send = sendBuffer(in, out, nullptr, temp);
    ZRT_RETURN_IF_ERROR(complete(OpKind::AllToAll, ctx, [&](MPI_Request *req) {
      return req ? MPI_Ialltoall(send, int(block), MPI_BYTE, out.data,
                                 int(block), MPI_BYTE, gc.comm, req)
                 : MPI_Alltoall(send, int(block), MPI_BYTE, out.data,
                                int(block), MPI_BYTE, gc.comm);
    }));
    countCall(OpKind::AllToAll, ctx.group, block * uint64_t(gc.size - 1));
    for (int peer = 0; peer < gc.size; ++peer)
      if (peer != gc.rank)
        countPeer(gc, peer, block);
    return Status::ok();
  }

  /// Buffered: the bytes are copied and sent with MPI_Isend, so the call
  /// returns at once and `in` may be reused. A pipeline stage's send then
  /// never waits for its receiver, and no cycle of blocked sends can form
  /// between stages whose memory is reused (the receiver blocks instead, on
  /// data that flows one way). flushSends() completes them.
  Status send(const TensorRef &in, int peer, int tag,
              const CommContext &ctx) override {
    GroupComm gc;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::Send, in, in, ctx, gc));
    ZRT_RETURN_IF_ERROR(checkPeer(OpKind::Send, peer, gc));
    ZRT_RETURN_IF_ERROR(checkCount(OpKind::Send, in.bytes()));
    if (ctx.cancelled && ctx.cancelled->load(std::memory_order_relaxed))
      return Status::error("Send: cancelled because the run failed");
    std::lock_guard<std::mutex> pendingLock(pendingMutex_);
    PendingSend &p = pendingSends_.emplace_back();
    const auto *bytes = static_cast<const uint8_t *>(in.data);
    p.bytes.assign(bytes, bytes + in.bytes());
    int rc;
    {
      auto lock = serialize();
      rc = MPI_Isend(p.bytes.data(), int(in.bytes()), MPI_BYTE, peer, tag,
                     gc.comm, &p.request);
    }
    if (rc != MPI_SUCCESS) {
      pendingSends_.pop_back();
      return Status::error("Send failed in MPI: " + mpiErrorString(rc));
    }
    ZRT_RETURN_IF_ERROR(reapSends(/*all=*/false, ctx));
    countCall(OpKind::Send, ctx.group, in.bytes());
    countPeer(gc, peer, in.bytes());
    return Status::ok();
  }

  Status flushSends(const CommContext &ctx) override {
    std::lock_guard<std::mutex> pendingLock(pendingMutex_);
    return reapSends(/*all=*/true, ctx);
  }

  Status recv(const TensorRef &out, int peer, int tag,
              const CommContext &ctx) override {
    GroupComm gc;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::Recv, out, out, ctx, gc));
    ZRT_RETURN_IF_ERROR(checkPeer(OpKind::Recv, peer, gc));
    ZRT_RETURN_IF_ERROR(checkCount(OpKind::Recv, out.bytes()));
    ZRT_RETURN_IF_ERROR(complete(OpKind::Recv, ctx, [&](MPI_Request *req) {
      int count = int(out.bytes());
      return req ? MPI_Irecv(out.data, count, MPI_BYTE, peer, tag, gc.comm, req)
                 : MPI_Recv(out.data, count, MPI_BYTE, peer, tag, gc.comm,
                            MPI_STATUS_IGNORE);
    }));
    countCall(OpKind::Recv, ctx.group, 0);
    return Status::ok();
  }

  std::vector<int> failedRanks(bool localOk) override {
    int mine = localOk ? 1 : 0;
    std::vector<int> all(size_t(size_), 0);
    {
      auto lock = serialize();
      MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, control_);
    }
    std::vector<int> failed;
    for (int r = 0; r < size_; ++r)
      if (!all[r])
        failed.push_back(r);
    return failed;
  }

  std::vector<std::string> gatherToRoot(const std::string &text) override {
    auto lock = serialize();
    int len = int(text.size());
    std::vector<int> lens(size_t(size_), 0), displs(size_t(size_), 0);
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, control_);
    std::string all;
    if (rank_ == 0) {
      int total = 0;
      for (int r = 0; r < size_; ++r) {
        displs[r] = total;
        total += lens[r];
      }
      all.resize(size_t(total));
    }
    MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(),
                displs.data(), MPI_CHAR, 0, control_);
    std::vector<std::string> out;
    if (rank_ == 0)
      for (int r = 0; r < size_; ++r)
        out.push_back(all.substr(size_t(displs[r]), size_t(lens[r])));
    return out;
  }

  Status broadcastBytes(void *data, uint64_t bytes, int root) override {
    auto lock = serialize();
    auto *p = static_cast<char *>(data);
    while (bytes > 0) {
      int chunk = int(std::min<uint64_t>(bytes, INT_MAX));
      int rc = MPI_Bcast(p, chunk, MPI_BYTE, root, control_);
      if (rc != MPI_SUCCESS)
        return Status::error("MPI_Bcast failed: " + mpiErrorString(rc));
      p += chunk;
      bytes -= uint64_t(chunk);
    }
    return Status::ok();
  }

  void barrier() override {
    auto lock = serialize();
    MPI_Barrier(control_);
  }

  [[noreturn]] void abortJob(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

private:
  /// Every world rank's node, by rank: its processor name (the host's). Two
  /// nodes that report one name (hosts named alike) stay two nodes, told
  /// apart by their first world rank; `local` holds this node's ranks.
  std::vector<std::string> gatherNodeNames(MPI_Comm local) {
    constexpr int width = MPI_MAX_PROCESSOR_NAME + 1;
    char name[width] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    int first = rank_; // local rank 0 is the node's first world rank
    MPI_Bcast(&first, 1, MPI_INT, 0, local);
    std::vector<char> names(size_t(size_) * width);
    std::vector<int> firsts(names.size() / width);
    MPI_Allgather(name, width, MPI_CHAR, names.data(), width, MPI_CHAR,
                  control_);
    MPI_Allgather(&first, 1, MPI_INT, firsts.data(), 1, MPI_INT, control_);
    std::vector<std::string> plain, nodes;
    for (int r = 0; r < size_; ++r)
      plain.emplace_back(&names[size_t(r) * width]);
    for (size_t r = 0; r < plain.size(); ++r) {
      nodes.push_back(plain[r]);
      for (size_t other = 0; other < plain.size(); ++other)
        if (plain[other] == plain[r] && firsts[other] != firsts[r]) {
          nodes.back() += "#" + std::to_string(firsts[r]);
          break;
        }
    }
    return nodes;
  }

  struct GroupComm {
    MPI_Comm comm = MPI_COMM_NULL;
    /// The same ranks in bit-reversed order, for all-gathers and
    /// reduce-scatters; null where the size is not a power of two above 2.
    MPI_Comm reversed = MPI_COMM_NULL;
    int rank = 0;
    int size = 1;
    std::vector<int> worldRanks; ///< by group rank
  };

  /// A send in flight: its request and the copy of its bytes.
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<uint8_t> bytes;
  };

  /// Counts `bytes` sent to group rank `peer` of `gc`.
  void countPeer(const GroupComm &gc, int peer, uint64_t bytes) {
    sentTo_[size_t(gc.worldRanks[size_t(peer)])] += bytes;
  }

  /// Counts an all-gather or reduce-scatter of `block`-byte blocks over 2^m
  /// positions: recursive doubling sends 2^i blocks to the partner 2^i
  /// positions away (i = 0, 1, ...), recursive halving the same exchanges
  /// largest first. Groups of other sizes: a block to each peer.
  void countExchanges(const GroupComm &gc, uint64_t block) {
    if (gc.size < 2 || (gc.size & (gc.size - 1)) != 0) {
      for (int peer = 0; peer < gc.size; ++peer)
        if (peer != gc.rank)
          countPeer(gc, peer, block);
      return;
    }
    const bool reversed = gc.reversed != MPI_COMM_NULL;
    int position = reversed ? bitReversed(gc.rank, gc.size) : gc.rank;
    for (int d = 1; d < gc.size; d <<= 1) {
      int partner = position ^ d;
      countPeer(gc, reversed ? bitReversed(partner, gc.size) : partner,
                block * uint64_t(d));
    }
  }

  /// Frees the sends that have completed; with `all`, polls until every one
  /// has (or the run is cancelled). The caller holds pendingMutex_.
  Status reapSends(bool all, const CommContext &ctx) {
    while (!pendingSends_.empty()) {
      for (auto it = pendingSends_.begin(); it != pendingSends_.end();) {
        int done = 0, rc;
        {
          auto lock = serialize();
          rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
        }
        if (rc != MPI_SUCCESS)
          return Status::error("Send failed in MPI: " + mpiErrorString(rc));
        it = done ? pendingSends_.erase(it) : std::next(it);
      }
      if (!all || pendingSends_.empty())
        break;
      if (ctx.cancelled && ctx.cancelled->load(std::memory_order_relaxed))
        return Status::error("Send: cancelled because the run failed");
      std::this_thread::yield();
    }
    return Status::ok();
  }

  /// Holds the MPI mutex unless the library is MPI_THREAD_MULTIPLE.
  std::unique_lock<std::mutex> serialize() {
    return multiple_ ? std::unique_lock<std::mutex>()
                     : std::unique_lock<std::mutex>(mpiMutex_);
  }

  void freeChannels() {
    for (std::vector<GroupComm> &comms : channels_)
      for (GroupComm &c : comms)
        for (MPI_Comm *m : {&c.comm, &c.reversed})
          if (*m != MPI_COMM_NULL)
            MPI_Comm_free(m);
    channels_.clear();
  }

  Status prepare(OpKind kind, const TensorRef &in, const TensorRef &out,
                 const CommContext &ctx, GroupComm &gc) {
    std::string what = opKindName(kind);
    if (channels_.empty())
      return Status::error(what + ": the communicator has not been set up");
    if (ctx.channel < 0 || size_t(ctx.channel) >= channels_.size())
      return Status::error(what + ": channel " + std::to_string(ctx.channel) +
                           " of " + std::to_string(channels_.size()));
    if (ctx.group < -1 || ctx.group >= int(groups_.size()))
      return Status::error(what + ": unknown process group " +
                           std::to_string(ctx.group));
    gc = channels_[size_t(ctx.channel)][size_t(ctx.group + 1)];
    if (gc.comm == MPI_COMM_NULL)
      return Status::error(what + ": rank " + std::to_string(rank_) +
                           " is not a member of process group " +
                           std::to_string(ctx.group));
    return checkShapes(kind, in, out, gc.size);
  }

  static Status checkPeer(OpKind kind, int peer, const GroupComm &gc) {
    if (peer < 0 || peer >= gc.size || peer == gc.rank)
      return Status::error(std::string(opKindName(kind)) + ": peer " +
                           std::to_string(peer) + " is not another rank of a "
                           "group of " + std::to_string(gc.size) +
                           " (this rank is " + std::to_string(gc.rank) + ")");
    return Status::ok();
  }

  static Status checkCount(OpKind kind, uint64_t count) {
    if (count > uint64_t(INT_MAX))
      return Status::error(std::string(opKindName(kind)) + ": " +
                           std::to_string(count) +
                           " elements/bytes exceed one MPI call's limit of "
                           "2^31-1; split the collective (zero-bucket)");
    return Status::ok();
  }

  Status sumType(OpKind kind, DType dtype, MPI_Datatype &type, MPI_Op &op) {
    op = MPI_SUM;
    switch (dtype) {
    case DType::F32: type = MPI_FLOAT; return Status::ok();
    case DType::F64: type = MPI_DOUBLE; return Status::ok();
    case DType::I8: type = MPI_INT8_T; return Status::ok();
    case DType::U8: type = MPI_UINT8_T; return Status::ok();
    case DType::I32: type = MPI_INT32_T; return Status::ok();
    case DType::I64: type = MPI_INT64_T; return Status::ok();
    case DType::F16: type = MPI_UINT16_T; op = sumF16_; return Status::ok();
    case DType::BF16: type = MPI_UINT16_T; op = sumBF16_; return Status::ok();
    case DType::Bool: break;
    }
    return Status::error(std::string(opKindName(kind)) + ": cannot sum " +
                         dtypeName(dtype) + " tensors");
  }

  /// The send buffer for `in`: MPI_IN_PLACE when `in` sits where MPI's
  /// in-place form expects it (`inPlaceAt`), a copy in `temp` when it overlaps
  /// `out` any other way, else `in` itself.
  static const void *sendBuffer(const TensorRef &in, const TensorRef &out,
                                const void *inPlaceAt, std::vector<uint8_t> &temp) {
    if (inPlaceAt && in.data == inPlaceAt)
      return MPI_IN_PLACE;
    if (!overlaps(in.data, in.bytes(), out.data, out.bytes()))
      return in.data;
    temp.assign(static_cast<const uint8_t *>(in.data),
                static_cast<const uint8_t *>(in.data) + in.bytes());
    return temp.data();
  }

  /// Runs a collective: `start(nullptr)` calls the blocking form, `start(&req)`
  /// the non-blocking one. With MPI_THREAD_MULTIPLE the blocking form runs
  /// (the library's tuned algorithms; a cancelled run is noticed only before
  /// the call, and zero-run aborts the job on errors anyway). Otherwise the
  /// request is polled, taking the MPI mutex per call, until it completes or
  /// the run is cancelled.
  template <typename StartFn>
  Status complete(OpKind kind, const CommContext &ctx, StartFn start) {
    if (ctx.cancelled && ctx.cancelled->load(std::memory_order_relaxed))
      return Status::error(std::string(opKindName(kind)) +
                           ": cancelled because the run failed");
    int rc;
    if (multiple_) {
      rc = start(nullptr);
      if (rc == MPI_SUCCESS)
        return Status::ok();
      return Status::error(std::string(opKindName(kind)) +
                           " failed in MPI: " + mpiErrorString(rc));
    }
    MPI_Request req = MPI_REQUEST_NULL;
    {
      auto lock = serialize();
      rc = start(&req);
    }
    while (rc == MPI_SUCCESS) {
      int done = 0;
      {
        auto lock = serialize();
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      }
      if (rc == MPI_SUCCESS && done)
        return Status::ok();
      if (ctx.cancelled && ctx.cancelled->load(std::memory_order_relaxed))
        return Status::error(std::string(opKindName(kind)) +
                             ": cancelled because the run failed");
      std::this_thread::yield();
    }
    return Status::error(std::string(opKindName(kind)) +
                         " failed in MPI: " + mpiErrorString(rc));
  }

  bool finalize_;
  bool multiple_;
  MPI_Comm control_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, localSize_ = 1, localRank_ = 0;
  std::vector<std::string> nodes_; ///< by rank
  /// Bytes sent to each world rank in collectives (countPeers()).
  std::vector<std::atomic<uint64_t>> sentTo_;
  MPI_Op sumF16_ = MPI_OP_NULL, sumBF16_ = MPI_OP_NULL;
  std::vector<std::vector<GroupComm>> channels_; // [channel][group + 1]
  std::mutex pendingMutex_;
  std::list<PendingSend> pendingSends_; ///< buffered sends in flight
  std::mutex mpiMutex_;
};

} // namespace

Expected<std::unique_ptr<Communicator>> createWorldCommunicator(int *argc,
                                                                char ***argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised && !launchedByMpiLauncher())
    return createLocalCommunicator();
  int provided = MPI_THREAD_SINGLE;
  bool finalize = false;
  if (initialised) {
    MPI_Query_thread(&provided);
  } else {
    // Open MPI reads its parameters from the environment at MPI_Init; one
    // set there (or on mpirun's line, which exports it) wins.
    // Recursive doubling / halving for every all-gather and reduce-scatter
    // (see the file's comment): the bit-reversed order's exchanges.
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
    setenv("OMPI_MCA_coll_tuned_allgather_algorithm", "3", 0);
    setenv("OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm", "3", 0);
    // ZRT_MPI_THREAD_LEVEL=serialized asks for less, to test that path.
    const char *level = std::getenv("ZRT_MPI_THREAD_LEVEL");
    int wanted = level && std::string(level) == "serialized"
                     ? MPI_THREAD_SERIALIZED
                     : MPI_THREAD_MULTIPLE;
    int rc = MPI_Init_thread(argc, argv, wanted, &provided);
    if (rc != MPI_SUCCESS)
      return Status::error("MPI_Init_thread failed: " + mpiErrorString(rc));
    finalize = true;
  }
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(
      finalize, provided >= MPI_THREAD_MULTIPLE));
}

} // namespace zrt
