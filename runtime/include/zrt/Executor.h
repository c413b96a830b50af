//===- Executor.h - Runs a loaded program on a backend ----------*- C++ -*-===//
//
// The executor allocates the program's arenas, fills its constants, resolves every
// instruction to a kernel or collective once, and runs the streams: one host thread
// per stream, each executing its instructions in program order and meeting the
// others only at events. The first failure cancels the run: streams stop before
// their next instruction, waits on events and collectives still in progress are
// released with an error, and run() returns the first error.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_EXECUTOR_H
#define ZRT_EXECUTOR_H

#include "zrt/Backend.h"
#include "zrt/Communicator.h"
#include "zrt/Program.h"
#include "zrt/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace zrt {

/// How to run.
struct ExecutorOptions {
  /// Track buffer liveness to measure the actual peak bytes per arena.
  bool trackMemory = false;
  /// Record a start/duration for every instruction.
  bool trace = false;
  /// Kernels may keep prepared forms of constant operands (packed GEMM
  /// weights, ConstantOperands in zrt/Kernel.h) beside them: faster
  /// products for the memory of a second copy. Off: none are kept.
  bool prepareConstants = true;
  /// Called once with the first error, on the thread that hit it, before the
  /// other streams are cancelled (zero-run aborts the MPI job here, since other
  /// ranks may be blocked in a collective with this one).
  std::function<void(const Status &)> onError;
  /// Seconds one collective of the program may take before the run is
  /// declared stuck (a rank stopped, or runs another program); 0 waits
  /// forever.
  double collectiveTimeoutSeconds = 0;
  /// Called once, on a watchdog thread, with the message naming the stuck
  /// collective ("rank R: collective AllGather (instruction N, \"loc\") did
  /// not complete within S s; ..."). zero-run prints it and aborts the job,
  /// since a blocking MPI call cannot be interrupted. Without it the run
  /// fails with that message, which releases collectives that poll (MPI
  /// without MPI_THREAD_MULTIPLE) but not blocking ones.
  std::function<void(const Status &)> onTimeout;
  /// The streams take turns on the CPU: a kernel, or a collective of a
  /// communication stream, runs only while no other one does (a receive on a
  /// compute stream waits outside its turn). For a rank with no core to spare
  /// for its communication thread, where a blocking collective would spin
  /// against the kernels: prefetched gathers then run while compute waits,
  /// as without prefetch, instead of slowing every kernel down.
  bool serializeStreams = false;
};

/// What a run of a training program does.
enum class RunMode {
  /// The whole step: forward, backward, update.
  Train,
  /// An evaluation step: only the instructions the loss is computed from
  /// (Instruction::eval; Record and Wait all run), training-mode dropout as
  /// the identity. Nothing is updated, no counter advances; the loss output
  /// is the batch's loss. The figures of the last training run (stats()) are
  /// left as they were.
  Eval,
};

/// One executed instruction, for traces.
struct TraceEvent {
  uint32_t instruction = 0;
  uint32_t stream = 0;
  double startUs = 0; ///< from the start of run()
  double durationUs = 0;
};

/// One point of an arena's live bytes over a run (memory tracked): from
/// `us` microseconds after the start of run(), `bytes` were live.
struct MemorySample {
  double us = 0;
  uint32_t arena = 0;
  uint64_t bytes = 0;
};

/// What the last run measured.
struct RunStats {
  double wallSeconds = 0;
  /// Per arena: the largest union of byte ranges of live buffers seen at any
  /// moment of the run. A buffer is live from the start of the first
  /// instruction that writes it (the start of the run for constants, inputs
  /// and globals) until the end of the last instruction that reads it
  /// (the end of the run for outputs and globals).
  std::vector<uint64_t> peakLiveBytes;
  /// The most bytes live at once in buffers written on communication streams
  /// (gathered parameters, bucket rebuilds and staging) and their views,
  /// measured like peakLiveBytes; and the same figure for the instructions
  /// run one at a time in program order (what the plan promises, an upper
  /// bound of the measured one). Zero unless memory is tracked.
  uint64_t peakGatheredBytes = 0;
  uint64_t plannedPeakGatheredBytes = 0;
  /// Bytes of the forms kernels prepared of constant operands and keep
  /// beside them (packed GEMM weights; ConstantOperands in zrt/Kernel.h),
  /// held at the end of the run.
  uint64_t preparedOperandBytes = 0;
  /// Every change of an arena's live bytes, in time order (memory tracked):
  /// the memory-over-time the --trace file's counter tracks draw.
  std::vector<MemorySample> memoryTimeline;
  /// Per arena: one past the highest byte any executed instruction touched.
  std::vector<uint64_t> highWaterBytes;
  /// Every executed instruction, in stream order then time order.
  std::vector<TraceEvent> trace;
};

/// Executes one program on this rank.
class Executor {
public:
  /// Allocates the arenas, copies the constants in, creates streams and events,
  /// resolves kernels, checks that the instructions this rank runs cannot
  /// deadlock on events, and sets up the communicator's groups and channels.
  /// Collective: every rank calls it; if any rank fails, all return an error.
  /// `program`, `backend` and `comm` must outlive the executor.
  static Expected<std::unique_ptr<Executor>>
  create(const Program &program, Backend &backend, Communicator &comm,
         ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  const Program &program() const;
  /// A view of buffer `index` (device memory on a GPU backend).
  TensorRef buffer(uint32_t index) const;
  /// The buffer's host address, or null when the backend's memory is not host
  /// accessible. The caller may write the buffer through it before the next
  /// run: the forms kernels prepared of it (ConstantOperands) are dropped,
  /// as by writeBuffer.
  void *hostAddress(uint32_t index) const;
  /// Bytes of the arenas that are swap files (ZeRO-Offload to NVMe); 0 when
  /// nothing is offloaded.
  uint64_t offloadedBytes() const;
  /// Writes back and drops every resident page of those swap files: after
  /// the state is loaded (or started), so that the run begins with it on
  /// disk.
  void swapOutOffloaded();
  /// What ZeRO-Offload's swaps did in this process so far: bytes read ahead
  /// (SwapIn) and sent out (SwapOut); seconds the streams spent issuing them
  /// (time the kernels waited), the writer thread in the writebacks and the
  /// reader thread mapping swapped-in pages (beside the streams: overlapped).
  struct SwapStats {
    uint64_t bytesIn = 0, bytesOut = 0;
    double streamSeconds = 0, writerSeconds = 0, readerSeconds = 0;
  };
  SwapStats swapStats() const;
  /// Copies `bytes` from host memory into buffer `index` at `byteOffset`.
  Status writeBuffer(uint32_t index, const void *src, uint64_t bytes,
                     uint64_t byteOffset = 0);
  /// Copies `bytes` of buffer `index` from `byteOffset` into host memory.
  Status readBuffer(uint32_t index, void *dst, uint64_t bytes,
                    uint64_t byteOffset = 0) const;

  /// Runs every stream to completion; returns the first error, if any.
  /// RunMode::Eval needs Program::evaluable().
  Status run(RunMode mode = RunMode::Train);
  /// Figures from the last run().
  const RunStats &stats() const;

private:
  struct Impl;
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace zrt

#endif // ZRT_EXECUTOR_H
