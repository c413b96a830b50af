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
include "mlir/IR/SymbolInterfaces.td"
include "zero/Dialect/Zero/ZeroBase.td"


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
  let arguments = (ins AnyRankedTensor:$shard, I64Attr:$world,
                   OptionalAttr<FlatSymbolRefAttr>:$group);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$shard attr-dict `:` type($shard) `->` type($result)";
  let builders = [
    // Over the world (no process group).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$shard, "int64_t":$world), [{
      build($_builder, $_state, result, shard, world, nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

def Zero_BucketAllGatherOp : Zero_Op<"bucket_all_gather", [CollectiveEffects]> {
  let summary = "One coalesced all-gather for several flat shards";
  let description = [{
    Result i is shard i's gathered padded tensor (world * s_i elements),
    as DeepSpeed's coalesced all-gather: the runtime gathers every member
    into its part of one buffer of world * sum(s_i) elements (member after
    member), so the results are views of that buffer.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$shards, I64Attr:$world,
                   OptionalAttr<FlatSymbolRefAttr>:$group);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$shards attr-dict `:` type($shards) `->` type($results)";
  let builders = [
    // Over the world (no process group).
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::ValueRange":$shards,
                   "int64_t":$world), [{
      build($_builder, $_state, results, shards, world, nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

def Zero_ReduceScatterOp : Zero_Op<"reduce_scatter", [CollectiveEffects]> {
  let summary = "Sums world*s flat elements across ranks; rank r keeps slice r";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world,
                   OptionalAttr<FlatSymbolRefAttr>:$group);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [
    // Over the world (no process group).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "int64_t":$world), [{
      build($_builder, $_state, result, input, world, nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

def Zero_AllReduceOp : Zero_Op<"all_reduce", [CollectiveEffects]> {
  let summary = "Elementwise sum across ranks";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world,
                   OptionalAttr<FlatSymbolRefAttr>:$group);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [
    // Over the world (no process group).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "int64_t":$world), [{
      build($_builder, $_state, result, input, world, nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

def Zero_BroadcastOp : Zero_Op<"broadcast", [CollectiveEffects]> {
  let summary = "Every rank receives the root's tensor";
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world, I64Attr:$root);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Zero_LocalShardOp : Zero_Op<"local_shard", [Pure]> {
  let summary = "This rank's block of a replicated flat tensor";
  let description = [{
    The input holds world*s elements, the same on every rank; rank r's result
    is elements [r*s, (r+1)*s). ZeRO-1/2 training takes each rank's shard of
    a replicated parameter with it, next to its gradient's reduce-scatter.

    ```mlir
    %shard = zero.local_shard %flat {world = 4} : tensor<64xf32> -> tensor<16xf32>
    ```

    With `group`, r is the rank's position in its group of the named
    `zero.process_group` (hpZ's secondary shard within a node).
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world,
                   OptionalAttr<FlatSymbolRefAttr>:$group);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [
    // Over the world (no process group).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "int64_t":$world), [{
      build($_builder, $_state, result, input, world, nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

def Zero_AllToAllOp : Zero_Op<"all_to_all", [CollectiveEffects]> {
  let summary = "Block j of the input goes to group rank j";
  let description = [{
    The input holds `world` equal blocks; block j is sent to rank j (of the
    world, or of this rank's group of `group`), and block i of the result is
    what rank i sent here. Same type in and out.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world,
                   OptionalAttr<FlatSymbolRefAttr>:$group);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [
    // Over the world (no process group).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$input, "int64_t":$world), [{
      build($_builder, $_state, result, input, world, nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

def Zero_SendOp : Zero_Op<"send", [CollectiveEffects]> {
  let summary = "Sends a tensor to world rank `peer` (a pipeline stage boundary)";
  let description = [{
    Matched, in order, with the `zero.recv` of the same `tag` on `peer`.

    ```mlir
    zero.send %h {peer = 1, tag = 0, zero.stage = 0} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Zero_RecvOp : Zero_Op<"recv", [CollectiveEffects]> {
  let summary = "Receives a tensor from world rank `peer`";
  let arguments = (ins I64Attr:$peer, I64Attr:$tag);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Zero_ProcessGroupOp : Zero_Op<"process_group", [Symbol]> {
  let summary = "Sub-communicators of the world: the ranks cut into groups";
  let description = [{
    `ranks` lists world ranks; with `group_size` k they are cut into
    consecutive groups of k and every rank uses the group that holds it (the
    program is the same on every rank). Collectives and `zero.local_shard`
    name it with `group = @name`; their `world` is k.

    ```mlir
    // hpZ over 4 ranks, 2 per node: {0,1} and {2,3}
    zero.process_group @hpz {ranks = array<i64: 0, 1, 2, 3>, group_size = 2}
    // the ranks with the same local index: {0,2} and {1,3}
    zero.process_group @across {ranks = array<i64: 0, 2, 1, 3>, group_size = 2}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, DenseI64ArrayAttr:$ranks,
                   I64Attr:$group_size);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether rank r's position in its group is (r / stride) % group_size
    /// for every rank, i.e. the groups are "every stride-th rank": the form
    /// the runtime's LocalShard kernel computes a position from.
    std::optional<int64_t> positionStride();
  }];
}

//===----------------------------------------------------------------------===//
// Quantization (ZeRO++ qwZ / qgZ)
//===----------------------------------------------------------------------===//

def Zero_QuantizeOp : Zero_Op<"quantize"> {
  let summary = "Blockwise symmetric quantization: int8 or packed int4, fp32 scales";
  let description = [{
    The input (n elements) is `chunks` consecutive chunks of m = n/chunks
    elements, each cut into blocks of `block` elements from its start (the
    last one may be shorter; B = ceil(m/block) per chunk). Per block,
    scale = max|x| / qmax (qmax 127 for 8 bits, 7 for 4) and q =
    round(x/scale). `data` holds chunks x D bytes (D = m for int8, ceil(m/2)
    for int4, two per byte, low nibble first); `scales` chunks x B floats.
    Chunks keep blocks from straddling the pieces a collective moves apart.
    Every dequantized element is within scale/2 (plus the fp32 rounding of
    q*scale) of the original; NaN or Inf is a runtime error.

    ```mlir
    %q, %s = zero.quantize %shard {bits = 8, block = 2048, chunks = 1}
        : tensor<5000xf32> -> tensor<5000xi8>, tensor<3xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$bits, I64Attr:$block,
                   I64Attr:$chunks);
  let results = (outs AnyRankedTensor:$data, AnyRankedTensor:$scales);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($data) `,` type($scales)";
  let hasVerifier = 1;
}

def Zero_DequantizeOp : Zero_Op<"dequantize"> {
  let summary = "The inverse of zero.quantize: q * scale per block";
  let description = [{
    `data` and `scales` as zero.quantize laid them out for a result of n
    elements in `chunks` chunks; after an all-gather of per-rank quantized
    shards, chunks = world (each rank's shard was quantized on its own).
  }];
  let arguments = (ins AnyRankedTensor:$data, AnyRankedTensor:$scales,
                   I64Attr:$bits, I64Attr:$block, I64Attr:$chunks);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$data `,` $scales attr-dict `:` type($data) `,` type($scales) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes of data and number of scales for n elements in `chunks` chunks.
    static std::pair<int64_t, int64_t> quantizedSizes(int64_t n, int64_t bits,
                                                      int64_t block, int64_t chunks);
  }];
}

def Zero_ReleaseOp : Zero_Op<"release", [MemoryEffects<[MemFree]>]> {
  let summary = "The gathered copy is no longer needed; its memory may be reused";
  let arguments = (ins AnyRankedTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Training: optimizer updates and the learning-rate schedule
//===----------------------------------------------------------------------===//

// Optimizer updates are elementwise over a parameter (or its flat shard) and
// its state, so the ZeRO passes can run them on shards unchanged. `step` is
// the 1-based step number (i64 scalar), `lr` and `grad_scale` f32 scalars
// (grad_scale: the global-norm clipping coefficient, 1 without clipping).
// zero-lower-to-runtime binds each updated value to its global's storage when
// its only use stores it there, so the update runs in place.

def Zero_AdamWOp : Zero_Op<"adamw", [Pure]> {
  let summary = "One Adam / AdamW step (torch.optim semantics) on a parameter";
  let description = [{
    g = grad * grad_scale; with `decoupled` (AdamW) param *= 1 - lr * wd,
    otherwise (Adam) g += wd * param; m = lerp(m, g, 1 - beta1);
    v = beta2 * v + (1 - beta2) * g * g;
    param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).

    ```mlir
    %p1, %m1, %v1 = zero.adamw %p, %g, %t, %lr, %scale, %m, %v
        {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.01, decoupled = 1}
        : tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<f32>, tensor<f32>,
          tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$param, AnyRankedTensor:$grad,
                   AnyRankedTensor:$step, AnyRankedTensor:$lr,
                   AnyRankedTensor:$grad_scale, AnyRankedTensor:$exp_avg,
                   AnyRankedTensor:$exp_avg_sq, F64Attr:$beta1, F64Attr:$beta2,
                   F64Attr:$eps, F64Attr:$weight_decay, I64Attr:$decoupled);
  let results = (outs AnyRankedTensor:$param_out, AnyRankedTensor:$exp_avg_out,
                  AnyRankedTensor:$exp_avg_sq_out);
  let assemblyFormat = "operands attr-dict `:` type(operands) `->` type(results)";
  let hasVerifier = 1;
}

def Zero_SGDOp : Zero_Op<"sgd", [Pure]> {
  let summary = "One SGD step (torch.optim.SGD semantics) on a parameter";
  let description = [{
    d = grad * grad_scale + wd * param; with momentum the buffer becomes d at
    step 1 and momentum * buf + (1 - dampening) * d after, and d is the buffer
    (or d + momentum * buf with `nesterov`); param -= lr * d. Without
    momentum there is no buffer operand or result.
  }];
  let arguments = (ins AnyRankedTensor:$param, AnyRankedTensor:$grad,
                   AnyRankedTensor:$step, AnyRankedTensor:$lr,
                   AnyRankedTensor:$grad_scale,
                   Optional<AnyRankedTensor>:$momentum_buffer, F64Attr:$momentum,
                   F64Attr:$dampening, F64Attr:$weight_decay, I64Attr:$nesterov);
  let results = (outs AnyRankedTensor:$param_out,
                  Optional<AnyRankedTensor>:$momentum_buffer_out);
  let assemblyFormat = "operands attr-dict `:` type(operands) `->` type(results)";
  let hasVerifier = 1;
}

def Zero_LrScheduleOp : Zero_Op<"lr_schedule", [Pure]> {
  let summary = "The learning rate of step t (DeepSpeed's schedulers)";
  let description = [{
    `schedule` is `constant` (attribute `lr`) or one of DeepSpeed's `WarmupLR`,
    `WarmupDecayLR`, `WarmupCosineLR`, `OneCycle`, `LRRangeTest`, whose parameters are further
    attributes with DeepSpeed's names (warmup_min_lr, warmup_max_lr,
    warmup_num_steps, warmup_type, total_num_steps, cos_min_ratio,
    warmup_min_ratio, lr; cycle_min_lr, cycle_max_lr, decay_lr_rate,
    cycle_first_step_size, cycle_second_step_size, decay_step_size,
    cycle_first_stair_count, cycle_second_stair_count (absent: 0, continuous);
    lr_range_test_min_lr, lr_range_test_step_size, lr_range_test_step_rate,
    lr_range_test_staircase). The
    result is the rate DeepSpeed's engine uses for its t-th optimizer step.
  }];
  let arguments = (ins AnyRankedTensor:$step, StrAttr:$schedule);
  let results = (outs AnyRankedTensor:$lr);
  let assemblyFormat = "$step attr-dict `:` type($step) `->` type($lr)";
  let hasVerifier = 1;
}

#endif // ZERO_DIALECT_ZERO_ZEROOPS_TD
