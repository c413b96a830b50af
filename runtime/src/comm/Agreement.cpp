//===- Agreement.cpp - What the ranks of a job agree on before they run ---===//
//
// The checks zrt/Agreement.h declares, over the world communicator.
//
//===----------------------------------------------------------------------===//

#include "zrt/Agreement.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace zrt {
namespace {

std::string hexString(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "%016llx", (unsigned long long)value);
  return text;
}

} // namespace

Status agreeOnOutcome(Communicator &comm, const Status &local) {
  std::vector<int> failed = comm.failedRanks(local.isOk());
  if (failed.empty())
    return Status::ok();
  if (!local.isOk())
    return local;
  std::string ranks;
  for (int r : failed)
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return Status::error("stopped because rank(s) " + ranks + " failed");
}

Status checkSameProgram(Communicator &comm, const std::string &programPath,
                        uint64_t programHash, const std::string &weightsPath,
                        uint64_t weightsHash) {
  uint64_t root[2] = {programHash, weightsHash};
  ZRT_RETURN_IF_ERROR(comm.broadcastBytes(root, sizeof root, 0));
  const std::string rank = "rank " + std::to_string(comm.rank());
  const std::string advice = "; every rank must run the same .zrt and weights";
  if (root[0] != programHash)
    return Status::error(rank + " loaded a different program than rank 0 (" +
                         programPath + ": hash " + hexString(programHash) +
                         ", rank 0's: " + hexString(root[0]) + ")" + advice);
  if (root[1] != weightsHash)
    return Status::error(rank + " reads a different weights layout than rank "
                         "0 (" + weightsPath + ": hash " +
                         hexString(weightsHash) + ", rank 0's: " +
                         hexString(root[1]) + ")" + advice);
  return Status::ok();
}

Status checkCollectiveSequence(Communicator &comm, const Program &program,
                               const std::string &path) {
  struct Desc {
    std::string kind;
    uint64_t bytes = 0;
    int group = -1;
    size_t index = 0;
    std::string loc;
  };
  auto describe = [](const Desc &d) {
    return d.kind + " of " + std::to_string(d.bytes) + " bytes in group " +
           std::to_string(d.group) + " (instruction " + std::to_string(d.index) +
           (d.loc.empty() ? "" : ", " + d.loc) + ")";
  };
  std::string mine;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &in = program.instructions[i];
    if (!isCollective(in.kind) || !in.runsOn(comm.rank()))
      continue;
    uint64_t bytes = in.inputs.empty() ? 0 : program.buffers[in.inputs[0]].bytes();
    mine += std::string(opKindName(in.kind)) + '\t' + std::to_string(bytes) + '\t' +
            std::to_string(in.group) + '\t' + std::to_string(i) + '\t' + in.loc + '\n';
  }
  std::vector<std::string> all = comm.gatherToRoot(mine);
  if (comm.rank() != 0)
    return Status::ok();
  auto parse = [](const std::string &text) {
    std::vector<Desc> out;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream f(line);
      Desc d;
      std::string bytes, group, index;
      std::getline(f, d.kind, '\t');
      std::getline(f, bytes, '\t');
      std::getline(f, group, '\t');
      std::getline(f, index, '\t');
      std::getline(f, d.loc);
      d.bytes = std::strtoull(bytes.c_str(), nullptr, 10);
      d.group = std::atoi(group.c_str());
      d.index = size_t(std::strtoull(index.c_str(), nullptr, 10));
      out.push_back(d);
    }
    return out;
  };
  std::vector<Desc> root = parse(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    std::vector<Desc> theirs = parse(all[r]);
    // Groups other than the world are compared among their members only:
    // here, the world's collectives.
    auto world = [](const std::vector<Desc> &v) {
      std::vector<Desc> w;
      for (const Desc &d : v)
        if (d.group == -1)
          w.push_back(d);
      return w;
    };
    std::vector<Desc> a = world(root), b = world(theirs);
    for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
      bool same = k < a.size() && k < b.size() && a[k].kind == b[k].kind &&
                  a[k].bytes == b[k].bytes;
      if (same)
        continue;
      return Status::error(
          "--check-collectives: collective #" + std::to_string(k + 1) + " of " + path +
          " differs between ranks: rank 0 runs " +
          (k < a.size() ? describe(a[k]) : std::string("none (its program ends)")) +
          ", rank " + std::to_string(r) + " runs " +
          (k < b.size() ? describe(b[k]) : std::string("none (its program ends)")) +
          "; the ranks would hang or exchange mismatched buffers. Every rank must run "
          "the same program");
    }
  }
  return Status::ok();
}

Status checkCollectiveCounts(Communicator &comm, const Communicator &counted,
                             int64_t step) {
  std::string mine;
  for (OpKind k : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce,
                   OpKind::Broadcast, OpKind::AllToAll, OpKind::Send, OpKind::Recv})
    mine += std::string(opKindName(k)) + ' ' + std::to_string(counted.callCount(k)) + ' ' +
            std::to_string(counted.bytesSent(k)) + '\n';
  std::vector<std::string> all = comm.gatherToRoot(mine);
  if (comm.rank() != 0)
    return Status::ok();
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      return Status::error("--check-collectives: after step " + std::to_string(step) +
                           " rank " + std::to_string(r) +
                           " has run other collectives than rank 0 (kind, calls, bytes "
                           "sent):\nrank 0:\n" + all[0] + "rank " + std::to_string(r) +
                           ":\n" + all[r]);
  return Status::ok();
}

} // namespace zrt
