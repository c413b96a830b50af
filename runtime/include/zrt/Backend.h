//===- Backend.h - What the executor needs from a device --------*- C++ -*-===//
//
// The executor runs a program against two interfaces: a Backend (memory, streams,
// events, kernels; this header) and a Communicator (collectives between ranks,
// zrt/Communicator.h). The CPU backend
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

} // namespace zrt

#endif // ZRT_BACKEND_H
