//===- MpiCommunicator.h - The world communicator over MPI ---------*- C++ -*-===//
//
// Library zrt_comm_mpi: the only part of the runtime that links MPI.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_MPICOMMUNICATOR_H
#define ZRT_MPICOMMUNICATOR_H

#include "zrt/Communicator.h"
#include "zrt/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace zrt {

/// The world communicator: MPI (initialised here with MPI_THREAD_MULTIPLE if
/// the library offers it, finalised when the object dies) when started by an MPI
/// launcher or when MPI is already initialised, else a single-process
/// communicator with copy semantics.
Expected<std::unique_ptr<Communicator>> createWorldCommunicator(int *argc,
                                                                char ***argv);

} // namespace zrt

#endif // ZRT_MPICOMMUNICATOR_H
