//===- Backend.h - What the executor needs from a device --------*- C++ -*-===//
//
// The executor runs a program against two interfaces: a Backend (memory, streams,
// events, kernels) and a Communicator (collectives between ranks). The CPU backend
// runs each stream on its own host thread with synchronous kernels; a GPU backend
// keeps the same host thread per stream but enqueues onto a device stream, so the
// executor, the loader and zero-run are shared by both. Every call returns a Status;
// nothing throws.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_BACKEND_H
#define ZRT_BACKEND_H

#include "zrt/Kernel.h"
#include "zrt/Program.h"
#include "zrt/Status.h"
#include "zrt/Tensor.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// Device memory for arenas.
class Allocator {
public:
  virtual ~Allocator() = default;
  /// Allocates `bytes` of zero-filled memory aligned to at least 64 bytes.
  /// `what` names the arena in the error message.
  virtual Expected<void *> allocate(uint64_t bytes, const std::string &what) = 0;
  /// Frees memory from allocate().
  virtual void deallocate(void *ptr) = 0;
  /// Allocates `bytes` of zero-filled host memory that the backend's kernels
  /// read and write through the returned pointer (a host arena: ZeRO-Offload
  /// to the CPU). A GPU backend gives pinned host memory mapped into the
  /// device's address space; the CPU backend's memory is host memory.
  virtual Expected<void *> allocateHost(uint64_t bytes, const std::string &what) {
    return allocate(bytes, what);
  }
  /// Frees memory from allocateHost().
  virtual void deallocateHost(void *ptr) { deallocate(ptr); }
  /// Whether the host may read and write allocations through their pointers.
  virtual bool hostAccessible() const = 0;
  /// Copies host memory into an allocation (blocking).
  virtual Status copyFromHost(void *dst, const void *src, uint64_t bytes) = 0;
  /// Copies from an allocation to host memory (blocking).
  virtual Status copyToHost(void *dst, const void *src, uint64_t bytes) = 0;
};

/// An ordered queue of work. Each program stream gets one, used only by the host
/// thread that executes that stream.
class Stream {
public:
  virtual ~Stream() = default;
  /// Runs `fn` (CPU) or enqueues it after all earlier work on this stream (GPU).
  virtual Status launch(KernelFn fn, const std::vector<TensorRef> &inputs,
                        const std::vector<TensorRef> &outputs,
                        const AttrMap &attrs) = 0;
  /// Blocks until everything issued on this stream so far has finished.
  virtual Status synchronize() = 0;
  /// Hands the stream's kernels the executor's constant operands (kept by
  /// the executor, which outlives the stream); a backend that prepares no
  /// operand ignores it.
  virtual void setConstantOperands(ConstantOperands *constants) {}
};

/// A one-shot synchronisation point between streams: recorded once per run on
/// one stream, waited on by others.
class Event {
public:
  virtual ~Event() = default;
  /// Marks the event reached once the work issued on `stream` so far is done.
  virtual Status record(Stream &stream) = 0;
  /// Makes later work on `stream` wait until the event is reached. Returns an
  /// error, without waiting further, once cancel() has been called.
  virtual Status wait(Stream &stream) = 0;
  /// Releases every current and future wait() with an error (run aborted).
  virtual void cancel() = 0;
  /// Forgets the record and any cancellation, before the next run.
  virtual void reset() = 0;
};

/// A device: its memory, streams, events and kernels.
class Backend {
public:
  virtual ~Backend() = default;
  /// "cpu", "cuda".
  virtual std::string name() const = 0;
  virtual Allocator &allocator() = 0;
  /// The kernels, by op name; the loader checks programs against it.
  virtual const KernelTable &kernels() const = 0;
  /// Creates the queue for program stream `index`.
  virtual Expected<std::unique_ptr<Stream>> createStream(int index,
                                                         const StreamDesc &desc) = 0;
  virtual Expected<std::unique_ptr<Event>> createEvent() = 0;
  /// Worker threads a kernel may use.
  virtual int numThreads() const = 0;
  /// This process's place in the world, for the kernels that pick their
  /// rank's block (LocalShard); set before the first createStream.
  void setRank(int rank, int worldSize) {
    rank_ = rank;
    worldSize_ = worldSize;
  }

protected:
  int rank_ = 0;
  int worldSize_ = 1;
};

/// The CPU backend: arenas are page-aligned host memory, kernels run on the
/// calling stream thread and split loops over a pool of `numThreads` threads
/// (shared by all streams; OpenBLAS is set to the same count).
std::unique_ptr<Backend> createCpuBackend(int numThreads);

/// The instruction set the CPU backend's products run ("avx512bf16",
/// "avx512", "avx2" or "generic"): the CPU's best, lowered by the environment
/// variable ZRT_CPU_ISA. Within one ISA a product's bits never depend on the layout
/// (threads, ranks, micro-batches); between ISAs they may differ.
const char *cpuKernelIsa();

/// An error when ZRT_CPU_ISA names no ISA, or one this CPU cannot run.
Status checkCpuKernelIsa();

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

/// The world communicator: MPI (initialised here with MPI_THREAD_MULTIPLE if
/// the library offers it, finalised when the object dies) when started by an MPI
/// launcher or when MPI is already initialised, else a single-process
/// communicator with copy semantics.
Expected<std::unique_ptr<Communicator>> createWorldCommunicator(int *argc,
                                                                char ***argv);

/// A single-process communicator (world size 1): collectives are copies.
std::unique_ptr<Communicator> createLocalCommunicator();

#ifdef ZRT_HAVE_CUDA
/// The CUDA backend on `device`: cudaMalloc arenas, CUDA streams and events,
/// every kernel of the CPU table (docs/kernels.md, "CUDA backend").
Expected<std::unique_ptr<Backend>> createCudaBackend(int device);
/// The GPU a rank uses: $ZRT_CUDA_DEVICE when set (an override for every
/// rank of the host), else the launcher's local rank
/// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID) or
/// `localRank` (the MPI_COMM_TYPE_SHARED split), modulo the number of GPUs.
/// Fails on a bad override or when there is no GPU.
Expected<int> cudaDeviceForRank(int localRank);
/// An NCCL communicator for the same world as `control`, whose unique id is
/// broadcast over `control` (MPI). NCCL is loaded with dlopen("libnccl.so.2").
/// `control` must outlive it.
Expected<std::unique_ptr<Communicator>>
createNcclCommunicator(Communicator &control, int device);
#endif

} // namespace zrt

#endif // ZRT_BACKEND_H
