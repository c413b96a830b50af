//===- Communicator.h - Collectives between ranks ------------------*- C++ -*-===//
//
// The interface the executor runs collectives through (library zrt_comm),
// and the single-process communicator. MPI's is in zrt/MpiCommunicator.h
// (zrt_comm_mpi), NCCL's in zrt/CudaBackend.h (zrt_cuda).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_COMMUNICATOR_H
#define ZRT_COMMUNICATOR_H

#include "zrt/Backend.h"
#include "zrt/Program.h"
#include "zrt/Status.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zrt {

/// Where and how a collective runs.
struct CommContext {
  int group = -1;           ///< program process group; -1 is the world
  int channel = 0;          ///< ordering channel: one per communication stream
  Stream *stream = nullptr; ///< where a GPU communicator enqueues; unused on CPU
  /// When it becomes true, a collective still waiting gives up with an error.
  const std::atomic<bool> *cancelled = nullptr;
};

/// Collectives between the ranks of a job, over process groups of the program.
/// Peers and roots are group ranks. Every call blocks the calling thread until
/// the collective completes (CPU) or is enqueued on ctx.stream (GPU). All members
/// of a group must issue the same collectives on a channel in the same order.
class Communicator {
public:
  virtual ~Communicator() = default;
  /// "mpi", "local" (a single process), "nccl".
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  /// Ranks on this host (for dividing the cores between them).
  virtual int localSize() const = 0;
  /// This rank's index among the ranks on its host (MPI_COMM_TYPE_SHARED),
  /// in [0, localSize()).
  virtual int localRank() const { return 0; }
  /// Each world rank's node, by rank: its host's name, one per set of ranks
  /// that share memory (MPI_COMM_TYPE_SHARED). By default every rank is on
  /// this host.
  virtual std::vector<std::string> nodeNames() const;
  /// Renumbers the world: the process of rank r becomes rank rankOf[r]
  /// (zrt/Placement.h's answer, the same permutation on every rank), for
  /// everything after it. Collective over the world, before setup().
  virtual Status reorder(const std::vector<int> &rankOf);

  /// Builds the program's process groups and `numChannels` independent
  /// channels. Collective over the world: every rank calls it with the same
  /// arguments before any collective. Resets the per-group byte counts.
  virtual Status setup(const std::vector<ProcessGroupDesc> &groups,
                       int numChannels) = 0;
  /// The world ranks, in group-rank order, of the group this process uses
  /// for `group`: the world for -1, the part of a partitioned group that
  /// holds this rank; empty when this rank is not a member.
  std::vector<int> groupRanks(int group) const;
  /// This process's rank in `group`, or -1 when it is not a member.
  int groupRank(int group) const;

  /// out = concat over group ranks of `in` (rank-major); out has size*in elements.
  virtual Status allGather(const TensorRef &in, const TensorRef &out,
                           const CommContext &ctx) = 0;
  /// Sums `in` (size*s elements) over the group; this rank keeps block
  /// groupRank of the sum in `out` (s elements).
  virtual Status reduceScatter(const TensorRef &in, const TensorRef &out,
                               const CommContext &ctx) = 0;
  /// out = sum over the group of `in`; `in` and `out` may be the same memory.
  virtual Status allReduce(const TensorRef &in, const TensorRef &out,
                           const CommContext &ctx) = 0;
  /// out = `in` of group rank `root` on every member (`in` is read on the
  /// root only; the two may be the same memory).
  virtual Status broadcast(const TensorRef &in, const TensorRef &out, int root,
                           const CommContext &ctx) = 0;
  /// Block j (numel/size elements) of `in` goes to group rank j; block i of
  /// `out` comes from group rank i.
  virtual Status allToAll(const TensorRef &in, const TensorRef &out,
                          const CommContext &ctx) = 0;
  /// Sends `in` to group rank `peer`; matched in order with its recv().
  /// May return before the receiver has the bytes (MPI buffers them: a send
  /// never waits for its receiver); `in` may be reused once it returns.
  virtual Status send(const TensorRef &in, int peer, int tag,
                      const CommContext &ctx) = 0;
  /// Completes every send still in flight; the executor calls it at the end
  /// of each run.
  virtual Status flushSends(const CommContext &ctx) {
    (void)ctx;
    return Status::ok();
  }
  /// Receives `out` from group rank `peer`.
  virtual Status recv(const TensorRef &out, int peer, int tag,
                      const CommContext &ctx) = 0;

  // Host-side coordination over the world, outside of runs.

  /// Every rank passes whether it succeeded; all get the ranks that failed.
  virtual std::vector<int> failedRanks(bool localOk) = 0;
  /// Rank 0 gets every rank's string, in rank order; other ranks get none.
  virtual std::vector<std::string> gatherToRoot(const std::string &text) = 0;
  /// Copies `bytes` at `data` from world rank `root` to every rank.
  virtual Status broadcastBytes(void *data, uint64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  /// Ends every rank of the job with exit code `code`.
  [[noreturn]] virtual void abortJob(int code) = 0;

  /// Bytes this rank sent for collectives of `kind` (point-to-point volume:
  /// what it hands to other ranks, see docs/program-format.md).
  uint64_t bytesSent(OpKind kind) const {
    return sent_[collectiveIndex(kind)].load();
  }
  /// Collectives of `kind` this rank took part in.
  uint64_t callCount(OpKind kind) const {
    return calls_[collectiveIndex(kind)].load();
  }
  /// Bytes this process has sent in collectives to processes on other nodes
  /// since setup(): each collective's exchanges with each peer as the
  /// algorithm that ran it sends them (zrt_comm_mpi says which); nothing
  /// where the communicator cannot tell.
  virtual std::optional<uint64_t> bytesSentAcrossNodes() const {
    return std::nullopt;
  }
  /// Bytes this rank sent in collectives over program group `group` (-1:
  /// the world) since setup(), counted like bytesSent().
  uint64_t bytesSentInGroup(int group) const {
    return group >= -1 && size_t(group + 1) < groupSent_.size()
               ? groupSent_[size_t(group + 1)].load()
               : 0;
  }

protected:
  /// Checks the sizes of a collective for a group of `groupSize` ranks.
  static Status checkShapes(OpKind kind, const TensorRef &in,
                            const TensorRef &out, int groupSize);
  /// Keeps the program's groups and starts their byte counts at zero.
  void setGroups(const std::vector<ProcessGroupDesc> &groups) {
    groups_ = groups;
    groupSent_ = std::vector<std::atomic<uint64_t>>(groups.size() + 1);
  }
  /// Counts a collective of `kind` over `group` that sent `bytesSent`.
  void countCall(OpKind kind, int group, uint64_t bytesSent) {
    sent_[collectiveIndex(kind)] += bytesSent;
    calls_[collectiveIndex(kind)] += 1;
    if (group >= -1 && size_t(group + 1) < groupSent_.size())
      groupSent_[size_t(group + 1)] += bytesSent;
  }

  std::vector<ProcessGroupDesc> groups_;

private:
  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> sent_{};
  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> calls_{};
  std::vector<std::atomic<uint64_t>> groupSent_ =
      std::vector<std::atomic<uint64_t>>(1); // [group + 1]
};

/// Whether this process was started by an MPI launcher (mpirun, srun).
bool launchedByMpiLauncher();

/// A single-process communicator (world size 1): collectives are copies.
std::unique_ptr<Communicator> createLocalCommunicator();

} // namespace zrt

#endif // ZRT_COMMUNICATOR_H
