//===- NcclCommunicator.cpp - Collectives over NCCL, loaded at run time ---===//
//
// NCCL is opened with dlopen("libnccl.so.2") so the runtime builds and runs
// (on the CPU) where NCCL is absent; the few types and entry points used are
// declared here with NCCL's ABI values. Every (channel, process group) pair
// gets its own NCCL communicator: the group's first rank creates a unique id,
// which is broadcast over the MPI control communicator, and the members join
// with ncclCommInitRank. Collectives are enqueued on the CUDA stream of the
// executor stream that issues them and return at once; ordering with other
// streams comes from the program's events. Host-side coordination (agreement,
// gathers, abort) is delegated to the MPI communicator. Each part of a
// partitioned process group is a communicator of its own, with the unique id of
// its first rank.
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaBackend.h"
#include "zrt/Communicator.h"
#include "zrt/CudaBackend.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <type_traits>

namespace zrt {
namespace {

// The subset of nccl.h this file uses (ABI-stable since NCCL 2.0).
using ncclResult_t = int;
using ncclComm_t = struct ncclComm *;
struct ncclUniqueId {
  char internal[128];
};
enum ncclDataType : int {
  ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt64 = 4,
  ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9,
};
constexpr int ncclSum = 0;

struct NcclApi {
  void *handle = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId *);
  ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*commDestroy)(ncclComm_t);
  ncclResult_t (*commAbort)(ncclComm_t);
  const char *(*getErrorString)(ncclResult_t);
  ncclResult_t (*allGather)(const void *, void *, size_t, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*reduceScatter)(const void *, void *, size_t, int, int,
                                ncclComm_t, cudaStream_t);
  ncclResult_t (*allReduce)(const void *, void *, size_t, int, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*broadcast)(const void *, void *, size_t, int, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*send)(const void *, size_t, int, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, int, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();

  Status load() {
    handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return Status::error(std::string("cannot load NCCL (libnccl.so.2): ") +
                           dlerror());
    bool ok = true;
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(handle, name));
      ok = ok && fn;
    };
    sym(getUniqueId, "ncclGetUniqueId");
    sym(commInitRank, "ncclCommInitRank");
    sym(commDestroy, "ncclCommDestroy");
    sym(commAbort, "ncclCommAbort");
    sym(getErrorString, "ncclGetErrorString");
    sym(allGather, "ncclAllGather");
    sym(reduceScatter, "ncclReduceScatter");
    sym(allReduce, "ncclAllReduce");
    sym(broadcast, "ncclBroadcast");
    sym(send, "ncclSend");
    sym(recv, "ncclRecv");
    sym(groupStart, "ncclGroupStart");
    sym(groupEnd, "ncclGroupEnd");
    if (!ok)
      return Status::error("libnccl.so.2 lacks an entry point zero-run needs "
                           "(NCCL 2.7 or newer is required)");
    return Status::ok();
  }
};

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Communicator &control, int device)
      : control_(control), device_(device) {}
  ~NcclCommunicator() override {
    freeComms();
    if (api_.handle)
      dlclose(api_.handle);
  }
  Status init() { return api_.load(); }

  std::string name() const override { return "nccl"; }
  int rank() const override { return control_.rank(); }
  int worldSize() const override { return control_.worldSize(); }
  int localSize() const override { return control_.localSize(); }
  int localRank() const override { return control_.localRank(); }
  /// The nodes and the renumbering are the MPI control communicator's: the
  /// NCCL communicators are made after it (setup), over the renumbered
  /// world, so the program's node groups land on nodes as they do on CPUs.
  /// Each process keeps its device (chosen by its place on its host).
  std::vector<std::string> nodeNames() const override {
    return control_.nodeNames();
  }
  Status reorder(const std::vector<int> &rankOf) override {
    freeComms();
    return control_.reorder(rankOf);
  }

  Status setup(const std::vector<ProcessGroupDesc> &groups,
               int numChannels) override {
    freeComms();
    setGroups(groups);
    ZRT_RETURN_IF_ERROR(control_.setup(groups, 1));
    ZRT_RETURN_IF_ERROR(cuda::check(cudaSetDevice(device_), "cudaSetDevice"));
    comms_.assign(size_t(std::max(1, numChannels)),
                  std::vector<ncclComm_t>(groups.size() + 1, nullptr));
    for (std::vector<ncclComm_t> &comms : comms_) {
      for (int g = -1; g < int(groups.size()); ++g) {
        // Every rank takes part in the broadcast of every part's id, and
        // keeps the id of the part that holds it.
        const int parts = g < 0 ? 1
                                : int(groups[size_t(g)].ranks.size()) /
                                      groups[size_t(g)].size();
        ncclUniqueId mine{};
        for (int part = 0; part < parts; ++part) {
          std::vector<int> ranks =
              g < 0 ? groupRanks(g) : groups[size_t(g)].part(part);
          ncclUniqueId id{};
          if (control_.rank() == ranks[0])
            ZRT_RETURN_IF_ERROR(
                check(api_.getUniqueId(&id), "ncclGetUniqueId"));
          ZRT_RETURN_IF_ERROR(
              control_.broadcastBytes(&id, sizeof id, ranks[0]));
          if (g < 0 || groups[size_t(g)].partOf(rank()) == part)
            mine = id;
        }
        int me = groupRank(g);
        if (me >= 0)
          ZRT_RETURN_IF_ERROR(
              check(api_.commInitRank(&comms[size_t(g + 1)],
                                      int(groupRanks(g).size()), mine, me),
                    "ncclCommInitRank"));
      }
    }
    return Status::ok();
  }

  Status allGather(const TensorRef &in, const TensorRef &out,
                   const CommContext &ctx) override {
    Call c;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::AllGather, in, out, ctx, c));
    ZRT_RETURN_IF_ERROR(check(api_.allGather(in.data, out.data, in.bytes(),
                                             ncclUint8, c.comm, c.stream),
                              "ncclAllGather"));
    countCall(OpKind::AllGather, ctx.group, in.bytes() * uint64_t(c.size - 1));
    return Status::ok();
  }
  Status reduceScatter(const TensorRef &in, const TensorRef &out,
                       const CommContext &ctx) override {
    Call c;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::ReduceScatter, in, out, ctx, c));
    int type;
    ZRT_RETURN_IF_ERROR(sumType(OpKind::ReduceScatter, in.dtype, type));
    ZRT_RETURN_IF_ERROR(check(api_.reduceScatter(in.data, out.data,
                                                 size_t(out.numel()), type,
                                                 ncclSum, c.comm, c.stream),
                              "ncclReduceScatter"));
    countCall(OpKind::ReduceScatter, ctx.group,
              out.bytes() * uint64_t(c.size - 1));
    return Status::ok();
  }
  Status allReduce(const TensorRef &in, const TensorRef &out,
                   const CommContext &ctx) override {
    Call c;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::AllReduce, in, out, ctx, c));
    int type;
    ZRT_RETURN_IF_ERROR(sumType(OpKind::AllReduce, in.dtype, type));
    ZRT_RETURN_IF_ERROR(check(api_.allReduce(in.data, out.data,
                                             size_t(out.numel()), type, ncclSum,
                                             c.comm, c.stream),
                              "ncclAllReduce"));
    countCall(OpKind::AllReduce, ctx.group,
              2 * uint64_t(c.size - 1) * out.bytes() / uint64_t(c.size));
    return Status::ok();
  }
  Status broadcast(const TensorRef &in, const TensorRef &out, int root,
                   const CommContext &ctx) override {
    Call c;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::Broadcast, in, out, ctx, c));
    if (root < 0 || root >= c.size)
      return Status::error("Broadcast: root " + std::to_string(root) +
                           " is not a rank of a group of " + std::to_string(c.size));
    ZRT_RETURN_IF_ERROR(check(api_.broadcast(in.data, out.data, out.bytes(),
                                             ncclUint8, root, c.comm, c.stream),
                              "ncclBroadcast"));
    countCall(OpKind::Broadcast, ctx.group,
              c.rank == root ? out.bytes() * uint64_t(c.size - 1) : 0);
    return Status::ok();
  }
  Status allToAll(const TensorRef &in, const TensorRef &out,
                  const CommContext &ctx) override {
    Call c;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::AllToAll, in, out, ctx, c));
    size_t block = in.bytes() / size_t(c.size);
    auto *src = static_cast<const char *>(in.data);
    auto *dst = static_cast<char *>(out.data);
    ZRT_RETURN_IF_ERROR(check(api_.groupStart(), "ncclGroupStart"));
    Status st;
    for (int p = 0; p < c.size && st.isOk(); ++p) {
      st = check(api_.send(src + p * block, block, ncclUint8, p, c.comm, c.stream),
                 "ncclSend");
      if (st.isOk())
        st = check(api_.recv(dst + p * block, block, ncclUint8, p, c.comm, c.stream),
                   "ncclRecv");
    }
    Status end = check(api_.groupEnd(), "ncclGroupEnd");
    ZRT_RETURN_IF_ERROR(st);
    ZRT_RETURN_IF_ERROR(end);
    countCall(OpKind::AllToAll, ctx.group, block * uint64_t(c.size - 1));
    return Status::ok();
  }
  Status send(const TensorRef &in, int peer, int tag,
              const CommContext &ctx) override {
    Call c;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::Send, in, in, ctx, c));
    ZRT_RETURN_IF_ERROR(checkPeer(OpKind::Send, peer, c));
    ZRT_RETURN_IF_ERROR(check(api_.send(in.data, in.bytes(), ncclUint8, peer,
                                        c.comm, c.stream),
                              "ncclSend"));
    countCall(OpKind::Send, ctx.group, in.bytes());
    return Status::ok();
  }
  Status recv(const TensorRef &out, int peer, int tag,
              const CommContext &ctx) override {
    Call c;
    ZRT_RETURN_IF_ERROR(prepare(OpKind::Recv, out, out, ctx, c));
    ZRT_RETURN_IF_ERROR(checkPeer(OpKind::Recv, peer, c));
    ZRT_RETURN_IF_ERROR(check(api_.recv(out.data, out.bytes(), ncclUint8, peer,
                                        c.comm, c.stream),
                              "ncclRecv"));
    countCall(OpKind::Recv, ctx.group, 0);
    return Status::ok();
  }

  std::vector<int> failedRanks(bool localOk) override {
    return control_.failedRanks(localOk);
  }
  std::vector<std::string> gatherToRoot(const std::string &text) override {
    return control_.gatherToRoot(text);
  }
  Status broadcastBytes(void *data, uint64_t bytes, int root) override {
    return control_.broadcastBytes(data, bytes, root);
  }
  void barrier() override { control_.barrier(); }
  /// Aborts the NCCL communicators first (ncclCommAbort: kernels still
  /// waiting in a collective with a failed or stopped rank are released,
  /// which ncclCommDestroy would wait for), then the job.
  [[noreturn]] void abortJob(int code) override {
    abortComms();
    control_.abortJob(code);
    std::_Exit(code); // not reached
  }

private:
  struct Call {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    int rank = 0, size = 1;
  };

  /// An error of an NCCL call aborts every communicator of this rank: a
  /// collective that failed here leaves the other ranks' halves waiting, and
  /// the communicators are unusable afterwards (the job is ended by the
  /// executor's error path).
  Status check(ncclResult_t r, const char *what) {
    if (r == 0)
      return Status::ok();
    Status error =
        Status::error(std::string(what) + " failed: " +
                      (api_.getErrorString ? api_.getErrorString(r) : "?"));
    abortComms();
    return error;
  }

  /// ncclCommAbort on every communicator, once; may be called from any
  /// thread (the watchdog's) while streams are inside collectives.
  void abortComms() {
    std::lock_guard<std::mutex> lock(abortMutex_);
    if (aborted_)
      return;
    aborted_ = true;
    for (std::vector<ncclComm_t> &comms : comms_)
      for (ncclComm_t c : comms)
        if (c && api_.commAbort)
          api_.commAbort(c);
  }

  Status prepare(OpKind kind, const TensorRef &in, const TensorRef &out,
                 const CommContext &ctx, Call &c) {
    std::string what = opKindName(kind);
    if (comms_.empty() || ctx.channel < 0 || size_t(ctx.channel) >= comms_.size())
      return Status::error(what + ": channel " + std::to_string(ctx.channel) +
                           " is not set up");
    if (ctx.group < -1 || ctx.group >= int(groups_.size()))
      return Status::error(what + ": unknown process group " +
                           std::to_string(ctx.group));
    c.comm = comms_[size_t(ctx.channel)][size_t(ctx.group + 1)];
    c.rank = groupRank(ctx.group);
    c.size = int(groupRanks(ctx.group).size());
    if (!c.comm || c.rank < 0)
      return Status::error(what + ": rank " + std::to_string(rank()) +
                           " is not a member of process group " +
                           std::to_string(ctx.group));
    c.stream = cuda::streamOf(ctx.stream);
    if (!c.stream)
      return Status::error(what + ": NCCL collectives need a CUDA stream");
    return checkShapes(kind, in, out, c.size);
  }

  static Status checkPeer(OpKind kind, int peer, const Call &c) {
    if (peer < 0 || peer >= c.size || peer == c.rank)
      return Status::error(std::string(opKindName(kind)) + ": peer " +
                           std::to_string(peer) + " is not another rank of a "
                           "group of " + std::to_string(c.size));
    return Status::ok();
  }

  static Status sumType(OpKind kind, DType dtype, int &type) {
    switch (dtype) {
    case DType::F32: type = ncclFloat32; return Status::ok();
    case DType::F16: type = ncclFloat16; return Status::ok();
    case DType::BF16: type = ncclBfloat16; return Status::ok();
    case DType::F64: type = ncclFloat64; return Status::ok();
    case DType::I8: type = ncclInt8; return Status::ok();
    case DType::U8: type = ncclUint8; return Status::ok();
    case DType::I32: type = ncclInt32; return Status::ok();
    case DType::I64: type = ncclInt64; return Status::ok();
    case DType::Bool: break;
    }
    return Status::error(std::string(opKindName(kind)) + ": cannot sum " +
                         dtypeName(dtype) + " tensors");
  }

  void freeComms() {
    std::lock_guard<std::mutex> lock(abortMutex_);
    if (!aborted_) // an aborted communicator is freed by the abort
      for (std::vector<ncclComm_t> &comms : comms_)
        for (ncclComm_t c : comms)
          if (c)
            api_.commDestroy(c);
    comms_.clear();
    aborted_ = false;
  }

  Communicator &control_;
  int device_;
  NcclApi api_;
  std::vector<std::vector<ncclComm_t>> comms_; // [channel][group + 1]
  std::mutex abortMutex_;
  bool aborted_ = false;
};

} // namespace

Expected<std::unique_ptr<Communicator>>
createNcclCommunicator(Communicator &control, int device) {
  auto comm = std::make_unique<NcclCommunicator>(control, device);
  ZRT_RETURN_IF_ERROR(comm->init());
  return std::unique_ptr<Communicator>(std::move(comm));
}

} // namespace zrt
