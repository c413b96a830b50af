//===- Agreement.h - What the ranks of a job agree on before they run -*- C++ -*-===//
//
// Library zrt_comm. A job whose ranks disagree (one failed to read its
// weights, two loaded different programs, one runs other collectives) would
// leave the others waiting in a collective forever. These checks run over
// the world communicator before the program's first collective (and, for
// --check-collectives, after every step) so that every rank ends with an
// error that names what differs and where.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_AGREEMENT_H
#define ZRT_AGREEMENT_H

#include "zrt/Communicator.h"
#include "zrt/Program.h"
#include "zrt/Status.h"

#include <cstdint>
#include <string>

namespace zrt {

/// Every rank's `local` outcome, agreed: ok when every rank succeeded; else
/// a failed rank gets its own error and every other rank "stopped because
/// rank(s) R failed". Every rank must call it.
Status agreeOnOutcome(Communicator &comm, const Status &local);

/// Checks that this rank loaded the program and the weights layout rank 0
/// loaded: rank 0's hashes are broadcast and every rank compares its own;
/// the error names this rank, the file and both hashes. `programPath` and
/// `weightsPath` only name the files in the error.
Status checkSameProgram(Communicator &comm, const std::string &programPath,
                        uint64_t programHash, const std::string &weightsPath,
                        uint64_t weightsHash);

/// Every rank's sequence of world collectives (kind and bytes, in program
/// order) must be rank 0's; the first that differs is named with both
/// ranks' instruction. Rank 0 returns the error; the others return ok.
Status checkCollectiveSequence(Communicator &comm, const Program &program,
                               const std::string &path);

/// Each rank's collective calls and bytes by kind so far, counted by
/// `counted`, must be rank 0's after optimizer step `step`. Rank 0 returns
/// the error; the others return ok.
Status checkCollectiveCounts(Communicator &comm, const Communicator &counted,
                             int64_t step);

} // namespace zrt

#endif // ZRT_AGREEMENT_H
