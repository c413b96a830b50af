//===- Communicator.cpp - What every communicator shares ------------------===//
//
// Group bookkeeping, the operand-size rules of each collective (the same rules
// the loader applies to programs, here for direct callers), and the
// single-process communicator used when zero-run runs without an MPI launcher:
// with one rank every collective degenerates to a copy.
//
//===----------------------------------------------------------------------===//

#include "zrt/Backend.h"
#include "zrt/Communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace zrt {

std::vector<int> Communicator::groupRanks(int group) const {
  if (group >= 0 && size_t(group) < groups_.size()) {
    int part = groups_[size_t(group)].partOf(rank());
    return part >= 0 ? groups_[size_t(group)].part(part) : std::vector<int>();
  }
  std::vector<int> world(worldSize());
  for (int r = 0; r < worldSize(); ++r)
    world[r] = r;
  return world;
}

int Communicator::groupRank(int group) const {
  std::vector<int> ranks = groupRanks(group);
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == rank())
      return int(i);
  return -1;
}

Status Communicator::checkShapes(OpKind kind, const TensorRef &in,
                                 const TensorRef &out, int groupSize) {
  std::string what = opKindName(kind);
  if (kind == OpKind::Send || kind == OpKind::Recv)
    return Status::ok();
  if (in.dtype != out.dtype)
    return Status::error(what + ": input is " + dtypeName(in.dtype) +
                         " but output is " + dtypeName(out.dtype));
  int64_t ni = in.numel(), no = out.numel(), g = groupSize;
  bool ok = true;
  switch (kind) {
  case OpKind::AllGather: ok = no == ni * g; break;
  case OpKind::ReduceScatter: ok = ni == no * g; break;
  case OpKind::AllToAll: ok = ni == no && ni % g == 0; break;
  default: ok = ni == no; break;
  }
  if (!ok)
    return Status::error(what + ": input of " + std::to_string(ni) +
                         " elements and output of " + std::to_string(no) +
                         " do not fit a group of " + std::to_string(g));
  if ((kind == OpKind::AllReduce || kind == OpKind::ReduceScatter) &&
      in.dtype == DType::Bool)
    return Status::error(what + ": cannot sum bool tensors");
  return Status::ok();
}

namespace {

/// World size 1: every collective copies its input to its output.
class LocalCommunicator final : public Communicator {
public:
  std::string name() const override { return "local"; }
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  int localSize() const override { return 1; }
  Status setup(const std::vector<ProcessGroupDesc> &groups, int) override {
    for (const ProcessGroupDesc &g : groups)
      if (g.size() != 1 || g.partOf(0) < 0)
        return Status::error("process group \"" + g.name + "\" of " +
                             std::to_string(g.size()) +
                             " ranks in a single-process run");
    setGroups(groups);
    return Status::ok();
  }
  Status allGather(const TensorRef &in, const TensorRef &out,
                   const CommContext &ctx) override {
    return copy(OpKind::AllGather, in, out, ctx);
  }
  Status reduceScatter(const TensorRef &in, const TensorRef &out,
                       const CommContext &ctx) override {
    return copy(OpKind::ReduceScatter, in, out, ctx);
  }
  Status allReduce(const TensorRef &in, const TensorRef &out,
                   const CommContext &ctx) override {
    return copy(OpKind::AllReduce, in, out, ctx);
  }
  Status broadcast(const TensorRef &in, const TensorRef &out, int root,
                   const CommContext &ctx) override {
    if (root != 0)
      return Status::error("Broadcast: root " + std::to_string(root) +
                           " in a single-process run");
    return copy(OpKind::Broadcast, in, out, ctx);
  }
  Status allToAll(const TensorRef &in, const TensorRef &out,
                  const CommContext &ctx) override {
    return copy(OpKind::AllToAll, in, out, ctx);
  }
  Status send(const TensorRef &, int peer, int, const CommContext &) override {
    return Status::error("Send to rank " + std::to_string(peer) +
                         ": a single-process run has no peers (run under "
                         "mpirun with the program's world size)");
  }
  Status recv(const TensorRef &, int peer, int, const CommContext &) override {
    return Status::error("Recv from rank " + std::to_string(peer) +
                         ": a single-process run has no peers (run under "
                         "mpirun with the program's world size)");
  }
  std::vector<int> failedRanks(bool localOk) override {
    return localOk ? std::vector<int>() : std::vector<int>{0};
  }
  std::vector<std::string> gatherToRoot(const std::string &text) override {
    return {text};
  }
  Status broadcastBytes(void *, uint64_t, int root) override {
    return root == 0 ? Status::ok()
                     : Status::error("broadcast from rank " +
                                     std::to_string(root) +
                                     " in a single-process run");
  }
  void barrier() override {}
  [[noreturn]] void abortJob(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }

private:
  Status copy(OpKind kind, const TensorRef &in, const TensorRef &out,
              const CommContext &ctx) {
    if (ctx.group >= int(groups_.size()))
      return Status::error(std::string(opKindName(kind)) + ": unknown group " +
                           std::to_string(ctx.group));
    ZRT_RETURN_IF_ERROR(checkShapes(kind, in, out, 1));
    if (in.data != out.data)
      std::memmove(out.data, in.data, in.bytes());
    countCall(kind, ctx.group, 0);
    return Status::ok();
  }
};

} // namespace

std::vector<std::string> Communicator::nodeNames() const {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    std::strcpy(host, "localhost");
  return std::vector<std::string>(size_t(worldSize()), host);
}

Status Communicator::reorder(const std::vector<int> &rankOf) {
  for (size_t r = 0; r < rankOf.size(); ++r)
    if (rankOf[r] != int(r))
      return Status::error("the " + name() +
                           " communicator cannot renumber its ranks");
  return Status::ok();
}

std::unique_ptr<Communicator> createLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

bool launchedByMpiLauncher() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK",
                          "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(var))
      return true;
  return false;
}

} // namespace zrt
