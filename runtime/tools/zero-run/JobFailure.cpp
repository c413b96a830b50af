//===- JobFailure.cpp - How zero-run's job ends when a node is lost -------===//
//
// The termination note is written from a signal handler, so everything in it
// but the step is formatted beforehand, and the handler only copies bytes and
// calls write(2). The abort's fallback is a detached thread that sleeps: a
// blocking MPI_Abort leaves it free to end the process.
//
//===----------------------------------------------------------------------===//

#include "JobFailure.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>

namespace zrt {
namespace {

/// "0-1", "0, 2": a sorted list of ranks, runs of consecutive ranks joined.
std::string rankList(const std::vector<int> &ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!out.empty())
      out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i)
      out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

/// The termination note, but for the step: formatted by noteTermination().
std::string gNoteHead, gNoteTail;
const char kNoteStep[] = " at training step ";
const std::atomic<int64_t> *gNoteStep = nullptr;

void writeAll(const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(STDERR_FILENO, data, size);
    if (n <= 0)
      return;
    data += n;
    size -= size_t(n);
  }
}

void onTerminate(int signo) {
  writeAll(gNoteHead.data(), gNoteHead.size());
  int64_t step = gNoteStep ? gNoteStep->load() : 0;
  if (step > 0) { // none before training step 1, nor in a forward run
    char digits[24];
    size_t n = 0;
    for (; step > 0 && n < sizeof digits; step /= 10)
      digits[sizeof digits - 1 - n++] = char('0' + step % 10);
    writeAll(kNoteStep, sizeof kNoteStep - 1);
    writeAll(digits + sizeof digits - n, n);
  }
  writeAll(gNoteTail.data(), gNoteTail.size());
  std::signal(signo, SIG_DFL);
  std::raise(signo);
}

/// Seconds from Open MPI's oob_tcp_keepalive_NAME in the environment, else
/// its default `fallback`.
double keepaliveParameter(const char *name, double fallback) {
  const std::string var = std::string("OMPI_MCA_oob_tcp_keepalive_") + name;
  const char *value = std::getenv(var.c_str());
  if (!value || !*value)
    return fallback;
  char *end = nullptr;
  double v = std::strtod(value, &end);
  return end && *end == '\0' ? v : fallback;
}

} // namespace

JobPlacement JobPlacement::of(const Communicator &comm) {
  JobPlacement placement;
  placement.nodes_ = comm.nodeNames();
  if (placement.nodes_.size() != size_t(comm.worldSize()))
    placement.nodes_.assign(size_t(comm.worldSize()), "?");
  return placement;
}

size_t JobPlacement::numNodes() const {
  std::vector<std::string> seen;
  for (const std::string &node : nodes_)
    if (std::find(seen.begin(), seen.end(), node) == seen.end())
      seen.push_back(node);
  return seen.size();
}

std::string JobPlacement::describe(const std::string &except) const {
  std::vector<std::pair<std::string, std::vector<int>>> byNode;
  for (size_t r = 0; r < nodes_.size(); ++r) {
    auto it = std::find_if(byNode.begin(), byNode.end(),
                           [&](const auto &e) { return e.first == nodes_[r]; });
    if (it == byNode.end())
      it = byNode.insert(byNode.end(), {nodes_[r], {}});
    it->second.push_back(int(r));
  }
  std::string out;
  for (const auto &[node, ranks] : byNode)
    if (node != except)
      out += (out.empty() ? "" : "; ") + node + ": rank" +
             (ranks.size() > 1 ? "s " : " ") + rankList(ranks);
  return out;
}

void printError(const Communicator &comm, const std::string &message) {
  if (comm.worldSize() > 1)
    std::fprintf(stderr, "[rank %d] zero-run: error: %s\n", comm.rank(),
                 message.c_str());
  else
    std::fprintf(stderr, "zero-run: error: %s\n", message.c_str());
  std::fflush(stderr);
}

void endJob(Communicator &comm, int code, double graceSeconds) {
  std::thread([code, graceSeconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(graceSeconds));
    std::fflush(stderr);
    std::_Exit(code);
  }).detach();
  comm.abortJob(code);
  std::_Exit(code); // abortJob does not return; the compiler may not know it
}

void noteTermination(int rank, const JobPlacement &placement,
                     const std::atomic<int64_t> *currentStep) {
  gNoteHead = "[rank " + std::to_string(rank) +
              "] zero-run: ended by SIGTERM (mpirun ends the job)";
  gNoteTail = " on node " + placement.node(rank) +
              "; the job's ranks: " + placement.describe() + "\n";
  gNoteStep = currentStep;
  struct sigaction action = {};
  action.sa_handler = onTerminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

std::optional<std::string> lostNodeWarning(double timeoutSeconds,
                                           size_t numNodes) {
  if (numNodes < 2 || timeoutSeconds <= 0)
    return std::nullopt;
  // Open MPI 4.1's defaults: 300 s idle, then 9 probes 20 s apart.
  const double detect =
      keepaliveParameter("time", 300) +
      keepaliveParameter("intvl", 20) * keepaliveParameter("probes", 9);
  if (detect < timeoutSeconds)
    return std::nullopt;
  char text[512];
  std::snprintf(
      text, sizeof text,
      "warning: the job runs on %zu nodes, and mpirun would notice a lost "
      "node only %.0f s after its link went quiet (oob_tcp_keepalive_*), "
      "later than --timeout %g: a lost node could then leave mpirun "
      "waiting; add --mca oob_tcp_keepalive_time 5 --mca "
      "oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 4 to "
      "mpirun (docs/training.md, \"When a node is lost\")",
      numNodes, detect, timeoutSeconds);
  return std::string(text);
}

} // namespace zrt
