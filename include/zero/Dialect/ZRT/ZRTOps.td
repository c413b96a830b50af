//===- ZRTOps.td - The runtime program dialect -------------*- tablegen -*-===//
//
// `zrt` is what the runtime executes, one-to-one with the .zrt program file
// (runtime/schema/zrt.fbs): streams, arenas with the memory plan's sizes,
// buffers at fixed arena offsets, globals read from the weights file (whole or
// as this rank's shard), kernel and collective calls bound to a stream, and
// events that order work across streams. Nothing above this level reaches the
// runtime; zero-lower-to-runtime produces it and --emit=zrt serialises it.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ZRT_ZRTOPS_TD
#define ZERO_DIALECT_ZRT_ZRTOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/SymbolInterfaces.td"

def ZRT_Dialect : Dialect {
  let name = "zrt";
  let summary = "Runtime programs: buffers, streams, events, kernel and collective calls";
  let cppNamespace = "::zero::zrt";
}

class ZRT_Op<string mnemonic, list<Trait> traits = []>
    : Op<ZRT_Dialect, mnemonic, traits>;

def ZRT_ProgramOp : ZRT_Op<"program", [SymbolTable, Symbol, IsolatedFromAbove,
                                       NoTerminator, SingleBlock]> {
  let summary = "A runtime program: declarations, then instructions in order";
  let description = [{
    Each stream executes the instructions bound to it in the order they appear
    here; streams synchronise only through `zrt.record` / `zrt.wait`. A
    training step's program carries the module's settings as `training`
    (a `#zero.training<...>`, the runtime's Training table) and a pipeline's
    its replicas per stage as `pipeline_dp`.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$world_size);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `world_size` `=` $world_size attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def ZRT_StreamOp : ZRT_Op<"stream", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "An execution stream (a thread on CPU, a CUDA stream on GPU)";
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind);
  let assemblyFormat = "$sym_name $kind attr-dict";
}

def ZRT_GroupOp : ZRT_Op<"group", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "A process group: world ranks in group-rank order";
  let description = [{
    With `group_size` k, `ranks` is cut into consecutive groups of k and each
    rank uses the group that holds it (zero.process_group).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, DenseI64ArrayAttr:$ranks,
                   OptionalAttr<I64Attr>:$group_size);
  let assemblyFormat = "$sym_name $ranks attr-dict";
}

def ZRT_ArenaOp : ZRT_Op<"arena", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "A memory arena sized by the memory plan";
  let description = [{
    `size` is the planned peak with buffer reuse, `no_reuse_size` the sum of
    all buffers, `lower_bound` the largest set of simultaneously live bytes.
    `in_order` (optional) is the size the in-order plan needs: the buffers'
    `in_order` offsets, used when the streams take turns. `file in PATH`
    (the offload arena): the arena is a swap file in directory PATH, not
    memory (ZeRO-Offload to NVMe). `in host memory` (the host arena,
    ZeRO-Offload to the CPU): on a GPU backend the arena is pinned host
    memory that the kernels read and write over the bus; on the CPU backend
    it is memory like any other.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$size,
                   I64Attr:$no_reuse_size, I64Attr:$lower_bound,
                   OptionalAttr<I64Attr>:$in_order_size,
                   OptionalAttr<StrAttr>:$path, UnitAttr:$host);
  let assemblyFormat = "$sym_name `size` `=` $size `no_reuse` `=` $no_reuse_size `lower_bound` `=` $lower_bound (`in_order` `=` $in_order_size^)? (`file` `in` $path^)? (`in` `host` `memory` $host^)? attr-dict";
}

def ZRT_BufferOp : ZRT_Op<"buffer", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "A typed view at a fixed offset of an arena (views may alias)";
  let description = [{
    `in_order` (optional) is the buffer's offset in the in-order plan, which
    the runtime uses when its streams take turns: a communication step then
    runs only once compute waits for it, so a prefetched gather can take the
    bytes the previous layer just freed.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type,
                   FlatSymbolRefAttr:$arena, I64Attr:$offset,
                   OptionalAttr<I64Attr>:$in_order_offset);
  let assemblyFormat = "$sym_name `:` $type `at` $arena `[` $offset `]` (`in_order` `[` $in_order_offset^ `]`)? attr-dict";
}

def ZRT_BlockOp : ZRT_Op<"block", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "A block of memory some buffers are views of, before the memory plan";
  let description = [{
    What zero-lower-to-runtime's instruction selection produces and the
    passes after it refine, until zero-finalize-program places every buffer
    in its arena and erases the blocks: a buffer `at @blk[k]` is the view at
    byte `k` of the block. `gathered`: a gathered parameter, which lives until
    its last `zrt.release` (else to the end of the program).
    zero-plan-memory adds `def` and `last_use` (the first instruction writing
    it, -1 before the run; the last reading it), `stages` (a bit per pipeline
    stage whose ranks touch it; -1: every rank) and `offset` (in its arena);
    zero-plan-in-order adds `in_order_offset`.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$arena,
                   I64Attr:$bytes, UnitAttr:$gathered,
                   OptionalAttr<I64Attr>:$def, OptionalAttr<I64Attr>:$last_use,
                   OptionalAttr<I64Attr>:$stages, OptionalAttr<I64Attr>:$offset,
                   OptionalAttr<I64Attr>:$in_order_offset);
  let assemblyFormat = "$sym_name `in` $arena `bytes` `=` $bytes (`gathered` $gathered^)? attr-dict";
}

def ZRT_ReleaseOp : ZRT_Op<"release", [HasParent<"ProgramOp">]> {
  let summary = "A gathered parameter's block is free after the instruction before this";
  let description = [{
    Before the memory plan only: where a `zero.release` was among the
    instructions. zero-plan-memory ends the block's live interval at the
    instruction before its last release and erases these.
  }];
  let arguments = (ins FlatSymbolRefAttr:$block);
  let assemblyFormat = "$block attr-dict";
}

def ZRT_GlobalOp : ZRT_Op<"global", [HasParent<"ProgramOp">]> {
  let summary = "A parameter read from the weights file at start-up";
  let description = [{
    `tensor` names the tensor in the weights file and `type` is its full type.
    With `shard_world`, the tensor is flattened and zero-padded to
    `padded_numel` and rank r reads elements [r*s, (r+1)*s), s = padded/world.
    `role` (training programs): `parameter` (trained, from the weights file),
    `frozen` (from the weights file, never written), `optimizer_state` or
    `counter` (zero at start-up, not in the weights file).
    `gradient` (a trained parameter): the type of its gradient as a rank
    holds it over the step (whole at ZeRO stages 0-1, the rank's shard at
    2-3), for the report's model-state bytes. `widen_from` (an fp32 master):
    the name of the 16-bit global it starts as, widened (its shard, sharded).
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$tensor, TypeAttr:$type,
                   FlatSymbolRefAttr:$buffer,
                   OptionalAttr<I64Attr>:$shard_world,
                   OptionalAttr<I64Attr>:$padded_numel,
                   OptionalAttr<StrAttr>:$role,
                   OptionalAttr<TypeAttr>:$gradient,
                   OptionalAttr<StrAttr>:$widen_from);
  let assemblyFormat = "$name `tensor` $tensor `:` $type `into` $buffer attr-dict";
}

def ZRT_ConstantOp : ZRT_Op<"constant", [HasParent<"ProgramOp">]> {
  let summary = "Initial contents of a buffer";
  let arguments = (ins FlatSymbolRefAttr:$buffer, ElementsAttr:$value);
  let assemblyFormat = "$buffer `=` $value attr-dict";
}

def ZRT_InputOp : ZRT_Op<"input", [HasParent<"ProgramOp">]> {
  let summary = "Binds a graph input to a buffer";
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$buffer);
  let assemblyFormat = "$name `->` $buffer attr-dict";
}

def ZRT_OutputOp : ZRT_Op<"output", [HasParent<"ProgramOp">]> {
  let summary = "Binds a graph output to a buffer";
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$buffer);
  let assemblyFormat = "$name `from` $buffer attr-dict";
}

def ZRT_KernelOp : ZRT_Op<"kernel", [HasParent<"ProgramOp">]> {
  let summary = "Runs a kernel (docs/kernels.md) on a stream";
  let arguments = (ins StrAttr:$kernel, FlatSymbolRefAttr:$stream,
                   SymbolRefArrayAttr:$ins, SymbolRefArrayAttr:$outs,
                   DictionaryAttr:$params, OptionalAttr<DenseI64ArrayAttr>:$ranks,
                   UnitAttr:$eval, OptionalAttr<I64Attr>:$flops);
  let assemblyFormat = "$kernel `on` $stream $ins `->` $outs $params attr-dict";
}

def ZRT_CollectiveOp : ZRT_Op<"collective", [HasParent<"ProgramOp">]> {
  let summary = "Runs a collective (AllGather, ReduceScatter, ...) on a stream";
  let arguments = (ins StrAttr:$kind, FlatSymbolRefAttr:$stream,
                   FlatSymbolRefAttr:$group, SymbolRefArrayAttr:$ins,
                   SymbolRefArrayAttr:$outs, DictionaryAttr:$params,
                   OptionalAttr<DenseI64ArrayAttr>:$ranks, UnitAttr:$eval);
  let assemblyFormat = "$kind `on` $stream `group` $group $ins `->` $outs $params attr-dict";
}

def ZRT_RecordOp : ZRT_Op<"record", [HasParent<"ProgramOp">]> {
  let summary = "Marks an event as reached on a stream";
  let arguments = (ins I64Attr:$event, FlatSymbolRefAttr:$stream,
                   OptionalAttr<DenseI64ArrayAttr>:$ranks);
  let assemblyFormat = "$event `on` $stream attr-dict";
}

def ZRT_WaitOp : ZRT_Op<"wait", [HasParent<"ProgramOp">]> {
  let summary = "Blocks a stream until an event is recorded";
  let arguments = (ins I64Attr:$event, FlatSymbolRefAttr:$stream,
                   OptionalAttr<DenseI64ArrayAttr>:$ranks);
  let assemblyFormat = "$event `on` $stream attr-dict";
}

#endif // ZERO_DIALECT_ZRT_ZRTOPS_TD
