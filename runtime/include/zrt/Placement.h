//===- Placement.h - The program's ranks on the launcher's nodes --*- C++
//-*-===//
//
// Library zrt_comm. The compiler lays some process groups out to sit inside one
// node (hpZ's secondary partition, qgZ's first level, a pipeline stage's
// data-parallel replicas: consecutive blocks of group-size ranks), but the
// launcher decides which process runs on which node (mpirun --map-by slot
// fills a node first, --map-by node deals the ranks out round-robin). This is
// the pure decision zero-run takes before anything depends on a rank: which
// program rank each process becomes, or why no numbering fits. The
// communicator supplies the nodes (Communicator::nodeNames) and applies the
// answer (Communicator::reorder).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_PLACEMENT_H
#define ZRT_PLACEMENT_H

#include "zrt/Program.h"
#include "zrt/Status.h"

#include <string>
#include <vector>

namespace zrt {

/// The program rank of each process, indexed by its launcher (MPI world) rank,
/// given the node each process runs on (`nodeOfRank`, by launcher rank) and the
/// program's process groups. A group that must sit inside one node (hpZ's
/// "hpz", qgZ's "qgz_inside") is required to; a pipeline's stage replicas
/// ("dp") are placed inside one node when some numbering does it. With
/// several nodes the numbering is the node-major one (the nodes in order of
/// their first launcher rank, each node's processes in launcher-rank order),
/// where the collectives of zrt_comm_mpi cross the nodes least, and the
/// launcher's own only where that alone keeps a pipeline's replicas together;
/// with one node it is the launcher's.
/// When neither puts every required group inside one node, the error says
/// which ranks, on which nodes, and how to place them.
Expected<std::vector<int>>
placeRanks(const std::vector<std::string> &nodeOfRank,
           const std::vector<ProcessGroupDesc> &groups);

/// One line per node, in order of first appearance: "node n0: ranks 0, 1",
/// the program ranks it runs, followed by " (launcher ranks 0, 2)" where
/// those differ from the program's.
std::vector<std::string>
describePlacement(const std::vector<std::string> &nodeOfRank,
                  const std::vector<int> &programRank);

} // namespace zrt

#endif // ZRT_PLACEMENT_H
