//===- ProgramModel.h - A zrt.program before it is finalized ----*- C++ -*-===//
//
// The passes after zero-lower-to-runtime's instruction selection
// (zero-plan-memory, zero-insert-events, zero-plan-in-order,
// zero-finalize-program) read a zrt.program whose buffers are views of
// zrt.blocks into these tables, work on them, and write what they decide
// back as attributes and ops. Internal to lib/Transforms/Lowering.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_LIB_TRANSFORMS_LOWERING_PROGRAMMODEL_H
#define ZERO_LIB_TRANSFORMS_LOWERING_PROGRAMMODEL_H

#include "RuntimeLowering.h"

#include "llvm/ADT/StringMap.h"

namespace zero {
namespace lowering {

/// One kernel or collective of the program, in program order.
struct ModelInstr {
  Operation *op = nullptr;
  bool isCollective = false;
  StringRef name;
  int stream = kCompute;
  SmallVector<int64_t> ranks; ///< empty: every rank
  /// The block each operand is a view of (-1: a buffer placed in an arena).
  SmallVector<int> ins, outs;
  /// Each operand's type, as the instruction reads or writes it.
  SmallVector<Type> inTypes, outTypes;
};

/// A zrt.program's blocks, instructions and bindings (see the file comment).
struct ProgramModel {
  ::zero::zrt::ProgramOp program;
  /// Blocks in program order; Storage::release is the block's last
  /// zrt.release, Storage::released the instruction before it.
  std::vector<Storage> blocks;
  std::vector<::zero::zrt::BlockOp> blockOps;
  llvm::StringMap<int> blockIndex;
  std::vector<ModelInstr> instrs;
  /// The blocks of the program's inputs, outputs, globals and constants, in
  /// the order of their ops.
  std::vector<int> inputs, outputs, globals, constants;
  /// zrt.release marks, in order.
  SmallVector<Operation *> releases;
  /// Per instruction: the instructions whose events it waits for (after
  /// zero-insert-events), and the event it records (-1: none).
  std::vector<std::vector<int64_t>> waits;
  std::vector<int64_t> eventOf;
  /// The arenas by kind (null where the program has none).
  ::zero::zrt::ArenaOp arenas[kNumArenas] = {};

  /// Reads `program`; fails (naming `pass`) on a buffer of an unknown block
  /// or an arena of an unknown kind.
  static FailureOr<ProgramModel> read(::zero::zrt::ProgramOp program,
                                      StringRef pass);

  /// The block a buffer symbol is a view of, or -1.
  int blockOfBuffer(FlatSymbolRefAttr buffer) const;

private:
  /// Per buffer: the block it is a view of (-1: none) and its type.
  llvm::StringMap<std::pair<int, Type>> bufferView_;
};

/// The name of stream `s` (StreamKind's spelling) and of the arenas, by
/// ArenaKind.
inline llvm::StringRef streamName(int s) {
  return ::zero::attrs::stringifyEnum(::zero::attrs::StreamKind(s));
}
inline constexpr const char *kArenaNames[kNumArenas] = {
    "params", "constants", "activations", "offload", "host"};

} // namespace lowering
} // namespace zero

#endif // ZERO_LIB_TRANSFORMS_LOWERING_PROGRAMMODEL_H
