//===- Executor.cpp - Runs a loaded program on a backend ------------------===//
//
// create() does everything that can fail before a run: arenas, constants,
// streams, events, kernel lookup, the communicator's groups, and the event-order
// check for this rank. It also turns each instruction this rank executes into a
// Step with its TensorRefs resolved, so run() does no lookups. run() starts one
// thread per stream; the first error sets `cancelled`, which every stream checks
// before its next step and every event wait and collective poll observes.
//
//===----------------------------------------------------------------------===//

#include "zrt/Executor.h"

#include "executor/ConstantOperandCache.h"
#include "executor/LiveBytes.h"
#include "io/SwapFiles.h"

#include "zrt/Watchdog.h"
#include "zrt/Communicator.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

namespace zrt {

namespace {
/// One instruction as this rank executes it.
struct Step {
  size_t index = 0;
  const Instruction *inst = nullptr;
  KernelFn kernel = nullptr;
  std::vector<TensorRef> inputs, outputs;
  int channel = 0;
  /// In an evaluation step: whether it runs, and the kernel it runs
  /// instead (training-mode Dropout: Identity of its input into its output).
  bool inEval = true;
  KernelFn evalKernel = nullptr;
};
} // namespace

struct Executor::Impl {
  Impl(const Program &p, Backend &b, Communicator &c, ExecutorOptions o)
      : program(p), backend(b), comm(c), options(std::move(o)) {}
  ~Impl() {
    stopStreamThreads();
    for (size_t a = 0; a < arenaBase.size(); ++a) {
      if (!arenaBase[a])
        continue;
      if (!program.arenas[a].path.empty()) {
        unregisterSwapFile(arenaBase[a]);
        munmap(arenaBase[a], size_t(std::max<uint64_t>(program.arenas[a].size, 1)));
        ::close(swapFds[a]);
      } else if (program.arenas[a].host)
        backend.allocator().deallocateHost(arenaBase[a]);
      else
        backend.allocator().deallocate(arenaBase[a]);
    }
  }
  /// An offload arena: a swap file in `arena.path`, unlinked as soon as it
  /// is open (so it goes when the process does, however it ends), its bytes
  /// reserved now (a full filesystem fails here, before step 1), mapped
  /// shared: the kernel reads and writes its pages (SwapIn / SwapOut).
  Expected<void *> mapSwapFile(size_t index);
  /// Per arena: its swap file's descriptor (kept open for the writeback
  /// the swaps start), or -1.
  std::vector<int> swapFds;

  /// Runs `work(s)` for each stream s in `active` on that stream's own
  /// thread, and returns when all are done. The threads live as long as the
  /// executor (started at the first run): what a kernel keeps in a
  /// thread_local buffer (packed panels, 16-bit operands widened to f32) is
  /// allocated and faulted in once, not again at every step.
  void runOnStreamThreads(const std::vector<size_t> &active,
                          const std::function<void(size_t)> &work);
  void stopStreamThreads();
  struct StreamThreads {
    std::vector<std::thread> threads;
    std::vector<size_t> streams; ///< the stream each thread runs
    std::mutex mutex;
    std::condition_variable wake, done;
    uint64_t generation = 0;
    size_t remaining = 0;
    bool stop = false;
    const std::function<void(size_t)> *work = nullptr;
  } streamThreads;

  /// Everything local to this rank; may fail on some ranks only.
  Status init();
  /// init's steps, in its order. The arenas (swap files mapped, the others
  /// allocated), the buffers in them, the constants copied into theirs.
  Status allocateArenas();
  /// The constant operand cache (host memory, options.prepareConstants), the
  /// streams (each given the cache) and the events.
  Status createStreamsAndEvents();
  /// Each instruction this rank executes as a Step of its stream, on the
  /// channel `channelOf` its stream (a point-to-point one on channel 0);
  /// returns their indices, in program order.
  std::vector<size_t> buildSteps(int rank, const std::vector<int> &channelOf);
  /// With options.trackMemory: the live-bytes tracker and the planned peak
  /// of gathered bytes of the instructions `executed`.
  void startMemoryTracking(const std::vector<size_t> &executed);
  /// The collective part: the communicator's groups and channels.
  Status connect(int numChannels);
  void runStream(size_t stream, std::chrono::steady_clock::time_point start);
  Status execute(Step &step, Stream &stream);
  void fail(Status error);
  /// The watchdog's report on instruction `index`.
  Status timeoutError(size_t index) const;
  int peerRank(const Instruction &inst) const;
  Status checkRange(uint32_t index, uint64_t bytes, uint64_t offset) const;

  const Program &program;
  Backend &backend;
  Communicator &comm;
  ExecutorOptions options;
  std::vector<void *> arenaBase;
  std::vector<TensorRef> buffers;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<Event>> events;
  std::vector<std::vector<Step>> steps; // per stream
  /// The constant buffers and kernels' prepared forms of them (host memory
  /// only; streams get it through Stream::setConstantOperands).
  std::unique_ptr<ConstantOperandCache> constants;
  std::unique_ptr<LiveBytesTracker> liveBytes;
  std::vector<std::vector<TraceEvent>> trace; // per stream
  int numChannels = 0;
  std::unique_ptr<Watchdog> watchdog; // during run(), with a timeout; slot = stream

  /// The run in progress: a training step or an evaluation step; whether
  /// the program can run the latter (Program::evaluable, once at init).
  RunMode mode = RunMode::Train;
  bool evaluable = false;
  std::atomic<bool> cancelled{false};
  std::mutex errorMutex;
  Status firstError;
  /// options.serializeStreams: held by the stream whose turn it is; the
  /// compute streams not idle (not waiting, not done); communication
  /// streams wait on idleCv for that count to reach zero.
  std::mutex turnMutex, idleMutex;
  std::condition_variable idleCv;
  std::atomic<int> busyComputeStreams{0};
  /// Compute streams blocked in a receive or done: any collective may run.
  std::atomic<int> unboundedIdle{0};
  /// The communication steps compute has waited for: positions up to it.
  std::atomic<int64_t> commNeeded{-1};
  std::vector<int64_t> commRecordPos; ///< by event, or -1
  /// A compute stream stops (idle) or resumes. `unbounded`: it stops in a
  /// receive or for good; otherwise it waits for an event recorded at
  /// communication position `needed` (or -1).
  void setComputeIdle(bool idle, bool unbounded = false, int64_t needed = -1) {
    {
      std::lock_guard<std::mutex> lock(idleMutex);
      busyComputeStreams += idle ? -1 : 1;
      if (unbounded)
        unboundedIdle += idle ? 1 : -1;
      if (idle && needed > commNeeded.load())
        commNeeded = needed;
    }
    idleCv.notify_all();
  }
  RunStats stats;
};

Expected<void *> Executor::Impl::mapSwapFile(size_t index) {
  const ArenaDesc &arena = program.arenas[index];
  const std::string what = program.path + ": the offloaded optimizer state (arena \"" +
                           arena.name + "\", " + std::to_string(arena.size) + " bytes)";
  if (!backend.allocator().hostAccessible())
    return Status::error(what + " is a swap file mapped in pageable host memory, which "
                         "the " + backend.name() + " backend's kernels cannot read; run it "
                         "with --backend cpu, or compile with the offload's \"device\": "
                         "\"cpu\" (pinned host memory the GPU reads)");
  struct stat st {};
  if (stat(arena.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(what + ": offload_optimizer.nvme_path " + arena.path +
                         " is not a directory; create it, or compile with another nvme_path");
  const std::string file = arena.path + "/zero-offload-rank" + std::to_string(comm.rank()) +
                           "-" + std::to_string(getpid()) + "-" + arena.name + ".swap";
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status::error(what + ": cannot create the swap file " + file + ": " +
                         std::strerror(errno));
  ::unlink(file.c_str()); // gone with the process, never mistaken for a checkpoint
  const size_t bytes = size_t(std::max<uint64_t>(arena.size, 1));
  if (int e = posix_fallocate(fd, 0, off_t(bytes)); e != 0) {
    ::close(fd);
    return Status::error(what + ": cannot reserve " + std::to_string(bytes) + " bytes in " +
                         arena.path + ": " + std::strerror(e) +
                         "; free space there or compile with another nvme_path");
  }
  void *base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mapErr = errno;
  if (base == MAP_FAILED) {
    ::close(fd);
    return Status::error(what + ": cannot map the swap file in " + arena.path + ": " +
                         std::strerror(mapErr));
  }
  swapFds[index] = fd;
  registerSwapFile(base, bytes, fd);
  return base;
}

namespace {
/// One communication channel per stream of `p` that issues collectives, in
/// the order of their first collective: the channel of each stream, or -1;
/// their number in `numChannels`.
std::vector<int> collectiveChannels(const Program &p, int &numChannels) {
  std::vector<int> channelOf(p.streams.size(), -1);
  numChannels = 0;
  for (const Instruction &inst : p.instructions)
    if (isCollective(inst.kind) && channelOf[inst.stream] < 0)
      channelOf[inst.stream] = numChannels++;
  return channelOf;
}

/// Whether `rank` is a member of each of `p`'s groups.
std::vector<bool> groupMembership(const Program &p, int rank) {
  std::vector<bool> member(p.groups.size(), false);
  for (size_t g = 0; g < p.groups.size(); ++g)
    for (int r : p.groups[g].ranks)
      member[g] = member[g] || r == rank;
  return member;
}

/// Where each event is recorded on a communication stream: the position of
/// its Record among that stream's `steps`, or -1 (options.serializeStreams).
std::vector<int64_t> commRecordPositions(const Program &p,
                                         const std::vector<std::vector<Step>> &steps) {
  std::vector<int64_t> pos(p.numEvents, -1);
  for (size_t s = 0; s < steps.size(); ++s)
    if (p.streams[s].kind == StreamKind::Comm)
      for (size_t k = 0; k < steps[s].size(); ++k)
        if (steps[s][k].inst->kind == OpKind::Record && steps[s][k].inst->event >= 0)
          pos[size_t(steps[s][k].inst->event)] = int64_t(k);
  return pos;
}

/// Per arena, the end of the last of its bytes that a buffer this rank
/// touches occupies: the operands of the instructions `executed`, the
/// constants, the globals and the inputs.
std::vector<uint64_t> highWaterBytes(const Program &p,
                                     const std::vector<size_t> &executed) {
  std::vector<uint64_t> highWater(p.arenas.size(), 0);
  auto touch = [&](uint32_t b) {
    const BufferDesc &d = p.buffers[b];
    highWater[d.arena] = std::max(highWater[d.arena], d.offset + d.bytes());
  };
  for (size_t i : executed) {
    for (uint32_t b : p.instructions[i].inputs)
      touch(b);
    for (uint32_t b : p.instructions[i].outputs)
      touch(b);
  }
  for (const ConstantDesc &c : p.constants)
    touch(c.buffer);
  for (const GlobalDesc &g : p.globals)
    touch(g.buffer);
  for (const BindingDesc &b : p.inputs)
    touch(b.buffer);
  return highWater;
}
} // namespace

Status Executor::Impl::allocateArenas() {
  const Program &p = program;
  Allocator &alloc = backend.allocator();
  arenaBase.assign(p.arenas.size(), nullptr);
  swapFds.assign(p.arenas.size(), -1);
  for (size_t a = 0; a < p.arenas.size(); ++a) {
    if (!p.arenas[a].path.empty()) {
      Expected<void *> base = mapSwapFile(a);
      if (!base)
        return base.status();
      arenaBase[a] = *base;
      continue;
    }
    const std::string what =
        "arena " + std::to_string(a) + " \"" + p.arenas[a].name + "\" of " + p.path;
    Expected<void *> base = p.arenas[a].host ? alloc.allocateHost(p.arenas[a].size, what)
                                             : alloc.allocate(p.arenas[a].size, what);
    if (!base)
      return base.status();
    arenaBase[a] = *base;
  }
  for (const BufferDesc &b : p.buffers)
    buffers.push_back({static_cast<uint8_t *>(arenaBase[b.arena]) + b.offset,
                       b.dtype, b.shape});
  for (const ConstantDesc &c : p.constants)
    if (!c.data.empty()) // an empty vector's data() may be null
      ZRT_RETURN_IF_ERROR(alloc.copyFromHost(buffers[c.buffer].data,
                                             c.data.data(), c.data.size()));
  return Status::ok();
}

Status Executor::Impl::createStreamsAndEvents() {
  const Program &p = program;
  if (backend.allocator().hostAccessible() && options.prepareConstants)
    constants = std::make_unique<ConstantOperandCache>(p, arenaBase);
  for (size_t s = 0; s < p.streams.size(); ++s) {
    Expected<std::unique_ptr<Stream>> stream =
        backend.createStream(int(s), p.streams[s]);
    if (!stream)
      return stream.status();
    (*stream)->setConstantOperands(constants.get());
    streams.push_back(std::move(*stream));
  }
  for (uint32_t e = 0; e < p.numEvents; ++e) {
    Expected<std::unique_ptr<Event>> event = backend.createEvent();
    if (!event)
      return event.status();
    events.push_back(std::move(*event));
  }
  return Status::ok();
}

std::vector<size_t> Executor::Impl::buildSteps(int rank,
                                               const std::vector<int> &channelOf) {
  const Program &p = program;
  // Collectives run on the members of their group only (group -1: all).
  const std::vector<bool> member = groupMembership(p, rank);
  steps.assign(p.streams.size(), {});
  std::vector<size_t> executed;
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Instruction &inst = p.instructions[i];
    if (!inst.runsOn(rank))
      continue;
    if (isCollective(inst.kind) && inst.group >= 0 && !member[size_t(inst.group)])
      continue;
    Step step;
    step.index = i;
    step.inst = &inst;
    // Point-to-point calls match by peer and tag on one communicator, so a
    // pipeline stage's sends (communication stream) and the next stage's
    // receives (its compute stream) share channel 0.
    step.channel = inst.kind == OpKind::Send || inst.kind == OpKind::Recv
                       ? 0
                       : std::max(0, channelOf[inst.stream]);
    if (inst.kind == OpKind::Kernel)
      step.kernel = backend.kernels().lookup(inst.op);
    step.inEval = inst.eval || inst.kind == OpKind::Record || inst.kind == OpKind::Wait;
    if (inst.eval && inst.op == "TrainingDropout")
      step.evalKernel = backend.kernels().lookup("Identity");
    for (uint32_t b : inst.inputs)
      step.inputs.push_back(buffers[b]);
    for (uint32_t b : inst.outputs)
      step.outputs.push_back(buffers[b]);
    steps[inst.stream].push_back(std::move(step));
    executed.push_back(i);
  }
  return executed;
}

void Executor::Impl::startMemoryTracking(const std::vector<size_t> &executed) {
  const Program &p = program;
  liveBytes = std::make_unique<LiveBytesTracker>(p, executed);
  // In program order: a figure of the program, so taken with the main
  // plan's offsets (in the in-order plan a prefetched gather may share
  // bytes with a block still live in program order).
  Program main;
  if (p.inOrderPlanInUse) {
    main = p;
    main.useInOrderPlan(false);
  }
  stats.plannedPeakGatheredBytes =
      plannedPeakGatheredBytes(p.inOrderPlanInUse ? main : p, executed);
}

Status Executor::Impl::init() {
  const Program &p = program;
  int rank = comm.rank();
  if (p.worldSize != comm.worldSize())
    return Status::error(p.path + ": the program was compiled for " +
                         std::to_string(p.worldSize) + " ranks but runs on " +
                         std::to_string(comm.worldSize()));
  ZRT_RETURN_IF_ERROR(validateProgram(p, &backend.kernels()));
  ZRT_RETURN_IF_ERROR(checkEventOrder(p, rank));
  evaluable = p.evaluable();

  ZRT_RETURN_IF_ERROR(allocateArenas());
  // One communication channel per stream that issues collectives.
  const std::vector<int> channelOf = collectiveChannels(p, numChannels);
  ZRT_RETURN_IF_ERROR(createStreamsAndEvents());
  const std::vector<size_t> executed = buildSteps(rank, channelOf);
  commRecordPos = commRecordPositions(p, steps);
  stats.highWaterBytes = highWaterBytes(p, executed);
  if (options.trackMemory)
    startMemoryTracking(executed);
  return Status::ok();
}

Status Executor::Impl::connect(int numChannels) {
  return comm.setup(program.groups, numChannels);
}

void Executor::Impl::fail(Status error) {
  {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (!firstError.isOk())
      return;
    firstError = error;
  }
  cancelled = true;
  {
    std::lock_guard<std::mutex> lock(idleMutex);
  }
  idleCv.notify_all();
  for (auto &event : events)
    event->cancel();
  if (options.onError)
    options.onError(error);
}

Status Executor::Impl::timeoutError(size_t index) const {
  const Instruction &inst = program.instructions[index];
  std::ostringstream os;
  os << "rank " << comm.rank() << ": collective " << opKindName(inst.kind)
     << " (instruction " << index;
  if (!inst.loc.empty())
    os << ", \"" << inst.loc << "\"";
  os << ") did not complete within " << options.collectiveTimeoutSeconds
     << " s; a rank may have stopped or be running a different program";
  return Status::error(os.str());
}

/// A send's or receive's peer: `peer` names a pipeline stage, whose ranks
/// (like this instruction's) are `dp` consecutive world ranks, one per
/// data-parallel replica; the peer is the rank of the same replica there.
int Executor::Impl::peerRank(const Instruction &inst) const {
  const int peer = int(inst.attrs.getInt("peer", 0));
  const int dp = inst.ranks.empty() ? 1 : int(inst.ranks.size());
  return peer * dp + comm.rank() % dp;
}

Status Executor::Impl::execute(Step &step, Stream &stream) {
  const Instruction &inst = *step.inst;
  CommContext ctx{inst.group, step.channel, &stream, &cancelled};
  Watchdog::Scope watched(isCollective(inst.kind) ? watchdog.get() : nullptr,
                          inst.stream, step.index);
  switch (inst.kind) {
  case OpKind::Kernel:
    if (mode == RunMode::Eval && step.evalKernel)
      return stream.launch(step.evalKernel, {step.inputs[0]}, {step.outputs[0]}, inst.attrs);
    return stream.launch(step.kernel, step.inputs, step.outputs, inst.attrs);
  case OpKind::Record:
    return events[size_t(inst.event)]->record(stream);
  case OpKind::Wait:
    return events[size_t(inst.event)]->wait(stream);
  case OpKind::AllGather:
    // Input i into output i: one shard, or a bucket's members (each into its
    // part of the bucket's buffer), as DeepSpeed's coalesced all-gather.
    for (size_t i = 0; i < step.inputs.size(); ++i)
      ZRT_RETURN_IF_ERROR(comm.allGather(step.inputs[i], step.outputs[i], ctx));
    return Status::ok();
  case OpKind::ReduceScatter:
    return comm.reduceScatter(step.inputs[0], step.outputs[0], ctx);
  case OpKind::AllReduce:
    return comm.allReduce(step.inputs[0], step.outputs[0], ctx);
  case OpKind::Broadcast:
    return comm.broadcast(step.inputs[0], step.outputs[0],
                          int(inst.attrs.getInt("root", 0)), ctx);
  case OpKind::AllToAll:
    return comm.allToAll(step.inputs[0], step.outputs[0], ctx);
  case OpKind::Send:
    return comm.send(step.inputs[0], peerRank(inst), int(inst.attrs.getInt("tag", 0)), ctx);
  case OpKind::Recv:
    return comm.recv(step.outputs[0], peerRank(inst), int(inst.attrs.getInt("tag", 0)), ctx);
  }
  return Status::error("unknown instruction kind");
}

void Executor::Impl::runStream(size_t s,
                               std::chrono::steady_clock::time_point start) {
  using Clock = std::chrono::steady_clock;
  auto micros = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - start).count();
  };
  Stream &stream = *streams[s];
  const bool eval = mode == RunMode::Eval;
  for (Step &step : steps[s]) {
    if (cancelled.load(std::memory_order_relaxed))
      return;
    if (eval && !step.inEval)
      continue;
    if (liveBytes && !eval)
      liveBytes->instructionStarted(*step.inst);
    // Streams taking turns (ExecutorOptions::serializeStreams): a compute
    // stream runs its kernels whenever it can, and is idle while it waits
    // (an event, a receive); a communication stream's collectives and
    // kernels run only while every compute stream is idle, one at a time.
    // A prefetched gather then runs when compute first needs it: in order.
    // A communication step runs when compute waits for it (or for a later
    // one), not as soon as the pass pipeline's prefetch allows.
    const bool commStream = program.streams[s].kind == StreamKind::Comm;
    const OpKind kind = step.inst->kind;
    const int64_t position = int64_t(&step - steps[s].data());
    std::unique_lock<std::mutex> turn;
    bool idled = false, unbounded = false;
    if (options.serializeStreams) {
      // A send is buffered (it returns at once): it never waits its turn,
      // so a pipeline stage feeds the next one as soon as it can.
      if (commStream && kind != OpKind::Wait && kind != OpKind::Record &&
          kind != OpKind::Send) {
        std::unique_lock<std::mutex> lock(idleMutex);
        idleCv.wait(lock, [&] {
          return (busyComputeStreams.load() == 0 &&
                  (unboundedIdle.load() > 0 || position <= commNeeded.load())) ||
                 cancelled.load();
        });
        lock.unlock();
        turn = std::unique_lock<std::mutex>(turnMutex);
      } else if (!commStream && kind == OpKind::Kernel) {
        turn = std::unique_lock<std::mutex>(turnMutex);
      } else if (!commStream && (kind == OpKind::Wait || kind == OpKind::Recv)) {
        unbounded = kind == OpKind::Recv;
        int64_t needed = -1;
        if (kind == OpKind::Wait && step.inst->event >= 0)
          needed = commRecordPos[size_t(step.inst->event)];
        setComputeIdle(true, unbounded, needed);
        idled = true;
      }
    }
    Clock::time_point begin = Clock::now();
    Status status = execute(step, stream);
    const Clock::time_point end = Clock::now(); // inside the turn
    if (turn.owns_lock())
      turn.unlock();
    if (idled)
      setComputeIdle(false, unbounded);
    if (!status.isOk()) {
      if (cancelled.load())
        return; // a consequence of an earlier failure, not worth reporting
      std::string where = program.path + ": " +
                          program.describeInstruction(step.index) +
                          " on stream " + std::to_string(s) + " \"" +
                          program.streams[s].name + "\"";
      if (program.worldSize > 1)
        where += " of rank " + std::to_string(comm.rank());
      fail(Status::error(where + ": " + status.message()));
      return;
    }
    if (eval)
      continue;
    if (options.trace)
      trace[s].push_back({uint32_t(step.index), uint32_t(s), micros(begin),
                          micros(end) - micros(begin)});
    if (liveBytes)
      liveBytes->instructionFinished(*step.inst);
  }
  Status status = stream.synchronize();
  if (options.serializeStreams && program.streams[s].kind != StreamKind::Comm)
    setComputeIdle(true, /*unbounded=*/true); // done for this run
  if (!status.isOk())
    fail(Status::error(program.path + ": stream " + std::to_string(s) + " \"" +
                       program.streams[s].name + "\": " + status.message()));
}

Expected<std::unique_ptr<Executor>>
Executor::create(const Program &program, Backend &backend, Communicator &comm,
                 ExecutorOptions options) {
  auto impl = std::make_unique<Impl>(program, backend, comm, std::move(options));
  Status status = impl->init();
  // Agree before the collective setup, so that a rank that failed alone does
  // not leave the others waiting in it.
  std::vector<int> failed = comm.failedRanks(status.isOk());
  if (!status.isOk())
    return status;
  if (!failed.empty()) {
    std::string ranks;
    for (int r : failed)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return Status::error(program.path + ": stopped because rank(s) " + ranks +
                         " could not prepare the program");
  }
  ZRT_RETURN_IF_ERROR(impl->connect(impl->numChannels));
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

const Program &Executor::program() const { return impl_->program; }

TensorRef Executor::buffer(uint32_t index) const {
  return index < impl_->buffers.size() ? impl_->buffers[index] : TensorRef();
}

uint64_t Executor::offloadedBytes() const {
  uint64_t bytes = 0;
  for (const ArenaDesc &a : impl_->program.arenas)
    if (!a.path.empty())
      bytes += a.size;
  return bytes;
}

void Executor::swapOutOffloaded() {
  for (size_t a = 0; a < impl_->arenaBase.size(); ++a) {
    const ArenaDesc &arena = impl_->program.arenas[a];
    if (arena.path.empty() || !impl_->arenaBase[a] || arena.size == 0)
      continue;
    swapOutPages(impl_->arenaBase[a], size_t(arena.size));
  }
}

Executor::SwapStats Executor::swapStats() const {
  const SwapCounters c = swapCounters();
  return {c.bytesIn, c.bytesOut, c.streamSeconds, c.writerSeconds, c.readerSeconds};
}

void *Executor::hostAddress(uint32_t index) const {
  if (index >= impl_->buffers.size() ||
      !impl_->backend.allocator().hostAccessible())
    return nullptr;
  // The caller may write through it (weights bound in place).
  TensorRef &b = impl_->buffers[index];
  if (impl_->constants)
    impl_->constants->invalidate(b.data,
                                 static_cast<uint8_t *>(b.data) + b.bytes());
  return b.data;
}

Status Executor::Impl::checkRange(uint32_t index, uint64_t bytes,
                                  uint64_t offset) const {
  if (index >= buffers.size())
    return Status::error(program.path + ": no buffer " + std::to_string(index));
  uint64_t size = buffers[index].bytes();
  if (offset > size || bytes > size - offset)
    return Status::error(program.path + ": bytes [" + std::to_string(offset) +
                         ", " + std::to_string(offset + bytes) +
                         ") are outside " + program.describeBuffer(index));
  return Status::ok();
}

Status Executor::writeBuffer(uint32_t index, const void *src, uint64_t bytes,
                             uint64_t byteOffset) {
  ZRT_RETURN_IF_ERROR(impl_->checkRange(index, bytes, byteOffset));
  if (bytes == 0)
    return Status::ok();
  uint8_t *dst =
      static_cast<uint8_t *>(impl_->buffers[index].data) + byteOffset;
  if (impl_->constants)
    impl_->constants->invalidate(dst, dst + bytes);
  return impl_->backend.allocator().copyFromHost(dst, src, bytes);
}

Status Executor::readBuffer(uint32_t index, void *dst, uint64_t bytes,
                            uint64_t byteOffset) const {
  ZRT_RETURN_IF_ERROR(impl_->checkRange(index, bytes, byteOffset));
  if (bytes == 0)
    return Status::ok();
  return impl_->backend.allocator().copyToHost(
      dst, static_cast<const uint8_t *>(impl_->buffers[index].data) + byteOffset,
      bytes);
}

void Executor::Impl::runOnStreamThreads(const std::vector<size_t> &active,
                                        const std::function<void(size_t)> &work) {
  StreamThreads &t = streamThreads;
  if (t.streams != active) {
    stopStreamThreads();
    t.stop = false;
    t.streams = active;
    // A new thread waits for the next run, not one that has already been.
    for (size_t i = 0; i < active.size(); ++i)
      t.threads.emplace_back([&t, i, first = t.generation] {
        uint64_t seen = first;
        for (;;) {
          const std::function<void(size_t)> *job = nullptr;
          {
            std::unique_lock<std::mutex> lock(t.mutex);
            t.wake.wait(lock, [&] { return t.stop || t.generation != seen; });
            if (t.stop)
              return;
            seen = t.generation;
            job = t.work;
          }
          (*job)(t.streams[i]);
          std::lock_guard<std::mutex> lock(t.mutex);
          if (--t.remaining == 0)
            t.done.notify_all();
        }
      });
  }
  std::unique_lock<std::mutex> lock(t.mutex);
  t.work = &work;
  t.remaining = active.size();
  ++t.generation;
  t.wake.notify_all();
  t.done.wait(lock, [&] { return t.remaining == 0; });
  t.work = nullptr;
}

void Executor::Impl::stopStreamThreads() {
  StreamThreads &t = streamThreads;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.stop = true;
  }
  t.wake.notify_all();
  for (std::thread &th : t.threads)
    th.join();
  t.threads.clear();
  t.streams.clear();
}

Status Executor::run(RunMode mode) {
  Impl &impl = *impl_;
  if (mode == RunMode::Eval && !impl.evaluable)
    return Status::error(impl.program.path +
                         ": an evaluation step needs a training program whose "
                         "instructions say which compute the loss; compile it again "
                         "with this zero-opt");
  impl.mode = mode;
  for (auto &event : impl.events)
    event->reset();
  impl.cancelled = false;
  impl.firstError = Status::ok();
  // An evaluation step leaves the training step's trace and memory figures.
  if (mode == RunMode::Train) {
    impl.trace.assign(impl.streams.size(), {});
    if (impl.liveBytes)
      impl.liveBytes->reset();
  }

  if (impl.options.collectiveTimeoutSeconds > 0)
    impl.watchdog = std::make_unique<Watchdog>(
        impl.options.collectiveTimeoutSeconds, impl.streams.size(),
        [&impl](size_t, uint64_t index) {
          Status error = impl.timeoutError(size_t(index));
          if (impl.options.onTimeout)
            impl.options.onTimeout(error);
          else
            impl.fail(error);
        });
  impl.busyComputeStreams = 0;
  impl.commNeeded = -1;
  for (size_t s = 0; s < impl.streams.size(); ++s)
    if (!impl.steps[s].empty() && impl.program.streams[s].kind != StreamKind::Comm)
      ++impl.busyComputeStreams;
  // No compute on this rank: communication never waits for it.
  impl.unboundedIdle = impl.busyComputeStreams == 0 ? 1 : 0;
  auto start = std::chrono::steady_clock::now();
  if (impl.liveBytes && mode == RunMode::Train)
    impl.liveBytes->setStart(start);
  std::vector<size_t> active;
  for (size_t s = 0; s < impl.streams.size(); ++s)
    if (!impl.steps[s].empty())
      active.push_back(s);
  impl.runOnStreamThreads(active, [&impl, start](size_t s) { impl.runStream(s, start); });
  // Buffered sends (pipeline stages) finish before the run does.
  CommContext flushCtx;
  flushCtx.cancelled = &impl.cancelled;
  if (Status flushed = impl.comm.flushSends(flushCtx); !flushed.isOk())
    impl.fail(flushed);
  impl.watchdog.reset();
  if (mode == RunMode::Eval)
    return impl.firstError; // the training step's figures stay
  impl.stats.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  impl.stats.trace.clear();
  for (std::vector<TraceEvent> &events : impl.trace)
    impl.stats.trace.insert(impl.stats.trace.end(), events.begin(), events.end());
  impl.stats.memoryTimeline = impl.liveBytes ? impl.liveBytes->timeline()
                                             : std::vector<MemorySample>();
  impl.stats.peakLiveBytes = impl.liveBytes ? impl.liveBytes->peaks()
                                            : std::vector<uint64_t>();
  impl.stats.peakGatheredBytes =
      impl.liveBytes ? impl.liveBytes->peakGatheredBytes() : 0;
  impl.stats.preparedOperandBytes =
      impl.constants ? impl.constants->preparedBytes() : 0;
  return impl.firstError;
}

const RunStats &Executor::stats() const { return impl_->stats; }

} // namespace zrt
