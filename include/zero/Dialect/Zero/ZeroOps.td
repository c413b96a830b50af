//===- ZeroOps.td - Collectives and parameter life cycle ---*- tablegen -*-===//
//
// The ops the ZeRO passes add to an onnx-dialect program: collectives over the
// data-parallel group and the life-cycle marker `release`. Unlike upstream
// `shard` collectives these are side-effecting and ordered: CSE never merges a
// re-gather with an earlier gather and DCE never drops a gather whose result is
// only released, because in a sharded program those are real communication and
// real memory decisions.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_DIALECT_ZERO_ZEROOPS_TD
#define ZERO_DIALECT_ZERO_ZEROOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Zero_Dialect : Dialect {
  let name = "zero";
  let summary = "ZeRO collectives and parameter life cycle";
  let cppNamespace = "::zero::dist";
}

class Zero_Op<string mnemonic, list<Trait> traits = []>
    : Op<Zero_Dialect, mnemonic, traits>;

// Collectives read and write communication state: ordered, never CSE'd or
// erased as dead.
defvar CollectiveEffects = MemoryEffects<[MemRead, MemWrite]>;

def Zero_AllGatherOp : Zero_Op<"all_gather", [CollectiveEffects]> {
  let summary = "Gathers equal flat shards from every rank, rank-major";
  let description = [{
    Each of `world` ranks contributes `shard` (1-D, s elements); the result is
    the world*s elements ordered by rank. With ZeRO-3 sharding the result is
    the parameter flattened and zero-padded to a multiple of `world`.

    ```mlir
    %full = zero.all_gather %shard {world = 4} : tensor<16xf32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$shard, I64Attr:$world);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$shard attr-dict `:` type($shard) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_BucketAllGatherOp : Zero_Op<"bucket_all_gather", [CollectiveEffects]> {
  let summary = "One coalesced all-gather for several flat shards";
  let description = [{
    Rank r contributes the concatenation of its shards; the collective moves
    one flat buffer of world * sum(s_i) elements (rank-major, as DeepSpeed's
    coalesced all-gather) and result i is shard i's gathered padded tensor,
    rebuilt from the per-rank slices.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$shards, I64Attr:$world);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$shards attr-dict `:` type($shards) `->` type($results)";
  let hasVerifier = 1;
}

def Zero_ReduceScatterOp : Zero_Op<"reduce_scatter", [CollectiveEffects]> {
  let summary = "Sums world*s flat elements across ranks; rank r keeps slice r";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_AllReduceOp : Zero_Op<"all_reduce", [CollectiveEffects]> {
  let summary = "Elementwise sum across ranks";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_BroadcastOp : Zero_Op<"broadcast", [CollectiveEffects]> {
  let summary = "Every rank receives the root's tensor";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world, I64Attr:$root);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_ReleaseOp : Zero_Op<"release", [MemoryEffects<[MemFree]>]> {
  let summary = "The gathered copy is no longer needed; its memory may be reused";
  let arguments = (ins AnyRankedTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // ZERO_DIALECT_ZERO_ZEROOPS_TD
