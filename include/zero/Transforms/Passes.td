//===- Passes.td - The zero passes -------------------------*- tablegen -*-===//
//
// Every transformation of the compiler, each one pass with a `zero-<verb>` flag.
// The ZeRO family (partition, release, prefetch, bucket, report) rewrites the
// onnx-dialect program of a model; zero-lower-to-runtime turns the result into
// the zrt program the runtime executes.
//
//===----------------------------------------------------------------------===//
#ifndef ZERO_TRANSFORMS_PASSES_TD
#define ZERO_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ZeroPartitionPass : Pass<"zero-partition", "mlir::ModuleOp"> {
  let summary = "Shard parameters across data-parallel ranks (ZeRO stage 3)";
  let description = [{
    Every parameter global with more than `persistence-threshold` elements is
    replaced by its flat shard: flattened, zero-padded to a multiple of `dp`,
    rank r owning elements [r*s, (r+1)*s) (DeepSpeed's ZeRO-3 rule). Each load
    becomes shard load + `zero.all_gather` + (slice off the padding) + reshape.
    Smaller parameters stay whole on every rank, like DeepSpeed's
    `stage3_param_persistence_threshold`. When two uses of a parameter are
    further apart than `max-reuse-distance` gathered elements (DeepSpeed's
    `stage3_max_reuse_distance`), the later use gets its own gather, so the
    first copy can be released in between (tied embedding / LM head).

    ```mlir
    // Before
    %w = ml_program.global_load @w : tensor<3x5xf32>
    // After (dp = 4): @w is tensor<4xf32> {zero.shard = ...}
    %s = ml_program.global_load @w : tensor<4xf32>
    %g = zero.all_gather %s {world = 4} : tensor<4xf32> -> tensor<16xf32>
    %u = onnx.Slice %g {starts = array<i64: 0>, ends = array<i64: 15>, ...}
    %w = onnx.Reshape %u {shape = array<i64: 3, 5>}
    ```
  }];
  let options = [
    Option<"stage", "stage", "int64_t", "3",
           "ZeRO stage (only 3 partitions parameters for inference)">,
    Option<"dp", "dp", "int64_t", "1", "Data-parallel world size">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t", "0",
           "Parameters with at most this many elements stay whole">,
    Option<"maxReuseDistance", "max-reuse-distance", "int64_t", "-1",
           "Re-gather a parameter for a later use when more than this many "
           "parameter elements are gathered in between (-1: never)">,
  ];
  let dependentDialects = ["::zero::dist::ZeroDialect", "::zero::onnx::ONNXDialect"];
}

def ZeroReleasePass : Pass<"zero-release", "mlir::ModuleOp"> {
  let summary = "Release each gathered parameter right after its last use";
  let description = [{
    Inserts `zero.release` after the last user of every all-gathered value (or
    of the view it was reshaped into), so the memory plan can reuse its space.
  }];
  let dependentDialects = ["::zero::dist::ZeroDialect"];
}

def ZeroPrefetchPass : Pass<"zero-prefetch", "mlir::ModuleOp"> {
  let summary = "Hoist all-gathers ahead of the compute that precedes their use";
  let description = [{
    Moves each gather (with its shard load) earlier so it runs on the
    communication stream while compute proceeds: at most `depth` gathers are
    in flight ahead of the compute that needs them, and gathered bytes live at
    once stay under `bytes` (0 = unbounded), like DeepSpeed's
    `stage3_prefetch_bucket_size` / `stage3_max_live_parameters`.
  }];
  let options = [
    Option<"depth", "depth", "int64_t", "1", "Gathers in flight ahead of use">,
    Option<"bytes", "bytes", "int64_t", "0",
           "Bound on gathered bytes live at once (0: no bound)">,
  ];
}

def ZeroBucketPass : Pass<"zero-bucket", "mlir::ModuleOp"> {
  let summary = "Coalesce neighbouring all-gathers into one collective";
  let description = [{
    `zero.all_gather` ops that already sit together (nothing but shard loads
    and parameter views between them) become one `zero.bucket_all_gather`
    while the bucket's gathered bytes stay within `bytes`: one flat
    rank-major buffer moved by one collective. The pass never moves a gather
    across compute (that is zero-prefetch's decision). While a bucket's
    results are rebuilt, its flat receive buffer is live too: with
    `max-live-bytes`, a bucket grows only while the gathered bytes live at its
    position, that buffer included, stay within the bound.
  }];
  let options = [
    Option<"bytes", "bytes", "int64_t", "0",
           "Largest gathered bucket in bytes (0: no bucketing)">,
    Option<"maxLiveBytes", "max-live-bytes", "int64_t", "0",
           "Bound on gathered bytes live at once, the bucket's flat receive "
           "buffer included (the prefetch budget; 0: no bound)">,
  ];
  let dependentDialects = ["::zero::dist::ZeroDialect"];
}

def ZeroReportPass : Pass<"zero-report", "mlir::ModuleOp"> {
  let summary = "Print per-rank memory and communication of the sharded program";
  let description = [{
    Prints per-rank bytes of parameter shards, persistent parameters and the
    peak of gathered parameters, and communication bytes per rank per forward by
    collective, next to the ZeRO paper's closed forms (Psi/N shard bytes,
    Psi(N-1)/N gathered per forward).
  }];
  let options = [
    Option<"output", "output", "std::string", "\"-\"",
           "Where to print the report (- for stderr)">,
  ];
}

def ZeroLowerToRuntimePass : Pass<"zero-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower the program to zrt: streams, events and a memory plan";
  let description = [{
    Turns the `forward` function into a `zrt.program`: compute ops become
    kernel calls on the compute stream, collectives go to the communication
    stream, events order every cross-stream dependency (including reuse of
    memory freed by another stream), and a liveness-based plan places every
    buffer in an arena, reusing the space of dead values. Reshape-like ops
    become aliasing views and cost nothing. Each arena records its planned
    size, the no-reuse total and the live-bytes lower bound.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"\"",
           "Function to lower (default: the only function, else @forward)">,
  ];
  let dependentDialects = ["::zero::zrt::ZRTDialect"];
}

#endif // ZERO_TRANSFORMS_PASSES_TD
