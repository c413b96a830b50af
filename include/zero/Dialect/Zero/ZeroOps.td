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

def Zero_LocalShardOp : Zero_Op<"local_shard", [Pure]> {
  let summary = "This rank's block of a replicated flat tensor";
  let description = [{
    The input holds world*s elements, the same on every rank; rank r's result
    is elements [r*s, (r+1)*s). ZeRO-1/2 training takes each rank's shard of
    a replicated parameter with it, next to its gradient's reduce-scatter.

    ```mlir
    %shard = zero.local_shard %flat {world = 4} : tensor<64xf32> -> tensor<16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$world);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
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
    `WarmupDecayLR`, `WarmupCosineLR`, whose parameters are further attributes
    with DeepSpeed's names (warmup_min_lr, warmup_max_lr, warmup_num_steps,
    warmup_type, total_num_steps, cos_min_ratio, warmup_min_ratio, lr). The
    result is the rate DeepSpeed's engine uses for its t-th optimizer step.
  }];
  let arguments = (ins AnyRankedTensor:$step, StrAttr:$schedule);
  let results = (outs AnyRankedTensor:$lr);
  let assemblyFormat = "$step attr-dict `:` type($step) `->` type($lr)";
  let hasVerifier = 1;
}

#endif // ZERO_DIALECT_ZERO_ZEROOPS_TD
