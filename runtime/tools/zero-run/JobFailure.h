//===- JobFailure.h - How zero-run's job ends when a node is lost -*- C++
//-*-===//
//
// A job across nodes must end, and say where, when one node is lost: its link
// cut, its processes killed, the machine gone. Open MPI's launcher notices a
// killed process by itself, and a lost daemon once the TCP keepalive of its
// out-of-band link gives up (oob_tcp_keepalive_*, docs/training.md); zero-run's
// part is on the ranks: the placement (which node holds which rank, as the
// communicator gathered it at start-up) for the messages, a note printed when
// mpirun ends a rank (SIGTERM: the rank, its node, the training step), and an
// abort that ends this process even when MPI_Abort cannot reach mpirun through
// a cut link.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TOOLS_ZERORUN_JOBFAILURE_H
#define ZRT_TOOLS_ZERORUN_JOBFAILURE_H

#include "zrt/Communicator.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zrt {

/// The node (host name) of every rank of the world.
class JobPlacement {
public:
  /// Every rank's node as the communicator learnt them at start-up, by the
  /// program's rank (after any renumbering); "?" for all when it knows none.
  static JobPlacement of(const Communicator &comm);
  /// The host name of `rank`.
  const std::string &node(int rank) const { return nodes_[size_t(rank)]; }
  /// How many distinct nodes the ranks run on.
  size_t numNodes() const;
  /// "node-a: ranks 0-1; node-b: ranks 2-3", nodes in the order of their
  /// lowest rank; all but node `except` when one is named.
  std::string describe(const std::string &except = "") const;

private:
  std::vector<std::string> nodes_;
};

/// Prints one rank's error line ("[rank R] zero-run: error: ..." in a world
/// of several ranks, "zero-run: error: ..." alone).
void printError(const Communicator &comm, const std::string &message);

/// Ends the whole job with exit code `code` (MPI_Abort through `comm`). When
/// the abort cannot reach the launcher (this node's link is cut) and this
/// process is still alive `graceSeconds` later, it exits by itself.
[[noreturn]] void endJob(Communicator &comm, int code,
                         double graceSeconds = 10);

/// From now on, a SIGTERM (mpirun ending the job, on another rank's failure
/// or a lost node) prints "[rank R] zero-run: ended by SIGTERM (mpirun ends
/// the job) at training step N on node H; the job's ranks: <placement>"
/// before the process dies of it (no step before training step 1 or in a
/// forward run). `currentStep` must outlive the process.
void noteTermination(int rank, const JobPlacement &placement,
                     const std::atomic<int64_t> *currentStep);

/// A warning (nothing when there is nothing to say) for a job on several
/// nodes whose launcher would notice a lost node only after the collective
/// timeout `timeoutSeconds` has ended the ranks: then the launcher's message
/// to the lost daemon waits in TCP's retransmissions and mpirun waits on it
/// (15 minutes and more). Reads Open MPI's oob_tcp_keepalive_* from this
/// process's environment, where mpirun puts the --mca parameters.
std::optional<std::string> lostNodeWarning(double timeoutSeconds,
                                           size_t numNodes);

} // namespace zrt

#endif // ZRT_TOOLS_ZERORUN_JOBFAILURE_H
