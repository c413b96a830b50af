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
    `stage3_param_persistence_threshold`. Buffers (`zero.buffer` globals: a
    module's registered buffers, running statistics, a mask or table folded
    from them) are not parameters and stay whole at any size, as DeepSpeed
    partitions parameters only; so no buffer is gathered, and qwZ never
    quantizes one. When two uses of a parameter are
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
    Option<"nvmePath", "nvme-path", "std::string", "\"\"",
           "ZeRO-Infinity's offload_param to NVMe: the parameter shards are "
           "marked zero.offload = \"nvme\" (swap files under this directory; "
           "empty: in memory)">,
    Option<"offloadBuffers", "offload-buffers", "int64_t", "4",
           "Gathers or updates whose shards are read ahead (buffer_count)">,
    Option<"maxInCpu", "max-in-cpu", "int64_t", "1000000000",
           "offload_param's max_in_cpu: the first shards (in the module's "
           "order) whose elements add up to at most this stay in host memory; "
           "the rest go to NVMe">,
    Option<"bufferSize", "offload-buffer-size", "int64_t", "100000000",
           "offload_param's buffer_size: the most elements of a shard on NVMe "
           "(a larger one is an error)">,
    Option<"offloadHost", "offload-host", "bool", "false",
           "offload_param device cpu: every parameter shard is marked "
           "zero.offload = \"cpu\" and lives in the host arena (pinned host "
           "memory on a GPU backend; the CPU backend's memory is host memory)">,
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
    while the bucket's gathered bytes stay within `bytes`: one buffer,
    each member gathered into its part of it by one coalesced collective, the
    members views of it. The pass never moves a gather across compute (that
    is zero-prefetch's decision). The buffer lives until the bucket's last
    member dies: with `max-live-bytes`, a bucket grows only while the
    block's peak of gathered bytes with it stays within the bound.
  }];
  let options = [
    Option<"bytes", "bytes", "int64_t", "0",
           "Largest gathered bucket in bytes (0: no bucketing)">,
    Option<"maxLiveBytes", "max-live-bytes", "int64_t", "0",
           "Bound on gathered bytes live at once, a bucket's buffer held "
           "until its last member dies (the prefetch budget; 0: no bound)">,
  ];
  let dependentDialects = ["::zero::dist::ZeroDialect"];
}

def ZeroHierarchicalPass : Pass<"zero-hierarchical", "mlir::ModuleOp"> {
  let summary = "hpZ: re-gather parameters from a secondary shard within a group of ranks";
  let description = [{
    ZeRO++'s hierarchical partitioning. The first gather of a sharded
    parameter stays a world all-gather; before the parameter's first use each
    rank keeps a secondary shard of it, partitioned over its group of `group`
    consecutive ranks (`zero.local_shard` over the `zero.process_group` @hpz:
    padded/group elements per rank, the memory hpZ costs). Every later gather
    of that parameter (the backward re-gathers of a stage-3 training step, a
    re-gather past max-reuse-distance) becomes an all-gather of the secondary
    shard inside the group: only the group's sub-communicator carries it.
    Parameters gathered once are unaffected. `group` must divide the
    data-parallel size; 1 turns the pass off.

    ```mlir
    %g = zero.all_gather %s {world = 4} : tensor<16xf32> -> tensor<64xf32>
    %sec = zero.local_shard %g {group = @hpz, world = 2} : tensor<64xf32> -> tensor<32xf32>
    ...
    %g2 = zero.all_gather %sec {group = @hpz, world = 2} : tensor<32xf32> -> tensor<64xf32>
    ```
  }];
  let options = [
    Option<"group", "group", "int64_t", "1",
           "Ranks per group (zero_hpz_partition_size; 1: off)">,
  ];
  let dependentDialects = ["::zero::dist::ZeroDialect"];
}

def ZeroQuantizeGatherPass : Pass<"zero-quantize-gather", "mlir::ModuleOp"> {
  let summary = "qwZ: all-gather parameters as blockwise-quantized bytes";
  let description = [{
    ZeRO++'s quantized weight communication. Every world all-gather of fp32
    parameter shards (forward gathers and backward re-gathers; buckets too)
    becomes: the owner quantizes its shard blockwise (`zero.quantize`,
    symmetric, one fp32 scale per `block` elements, int8 or packed int4), the
    data and the scales are all-gathered, and each rank dequantizes what
    arrived (`zero.dequantize`, one chunk per source rank). Persistent
    parameters are not gathered and stay exact; hpZ's in-group gathers are not
    quantized. The quantize and dequantize run on the communication stream,
    so prefetch still overlaps the whole transfer with compute.

    ```mlir
    %q, %sc = zero.quantize %s {bits = 8, block = 2048, chunks = 1}
    %qg = zero.all_gather %q {world = 4}
    %sg = zero.all_gather %sc {world = 4}
    %g = zero.dequantize %qg, %sg {bits = 8, block = 2048, chunks = 4}
    ```
  }];
  let options = [
    Option<"bits", "bits", "int64_t", "8", "8 or 4">,
    Option<"block", "block", "int64_t", "2048", "Elements per scale">,
  ];
  let dependentDialects = ["::zero::dist::ZeroDialect"];
}

def ZeroQuantizeReducePass : Pass<"zero-quantize-reduce", "mlir::ModuleOp"> {
  let summary = "qgZ: gradient reduce-scatter through quantized all-to-alls";
  let description = [{
    ZeRO++'s quantized gradient communication. Each fp32 `zero.reduce_scatter`
    over the world becomes: quantize (`bits`, blocks of `block` inside each
    destination's slice), all-to-all, dequantize and sum the arrivals in rank
    order. With `group` = K (1 < K < world, K dividing it) it is ZeRO++'s
    hierarchical form: the slices are reordered so that one all-to-all inside
    each group of K consecutive ranks, a dequantize-sum-requantize, and one
    all-to-all across the groups (the ranks with the same position) leave
    rank r with the sum of every rank's slice r. The sum is averaged where the
    plain reduce-scatter's was (zero-optimizer). A reduce-scatter of another
    element type stays plain (zero-report lists it).
  }];
  let options = [
    Option<"bits", "bits", "int64_t", "4", "4 or 8">,
    Option<"block", "block", "int64_t", "2048", "Elements per scale">,
    Option<"group", "group", "int64_t", "1",
           "Ranks per group of the hierarchical form (1 or the world: one level)">,
  ];
  let dependentDialects = ["::zero::dist::ZeroDialect", "::zero::onnx::ONNXDialect"];
}

def ZeroPipelineSplitPass : Pass<"zero-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Plan pipeline stages over the model's layers (DeepSpeed's partition methods)";
  let description = [{
    Recovers the model's layers from the module paths the exporter recorded
    (the importer keeps them on each op's location: the dynamo exporter's
    name_scopes metadata, the TorchScript exporter's `/transformer/h.3/...`
    node names): the repeated blocks (`transformer.h.3`) and their siblings
    (`transformer.wte`, `transformer.ln_f`, `lm_head`), in program order.
    Then assigns them to `pp` contiguous stages with DeepSpeed's
    PipelineModule methods: `parameters` balances parameter counts,
    `uniform` layer counts, `type:REGEX` the layers whose class or module
    path matches REGEX (case-insensitive search), each with DeepSpeed's
    partition_balanced / partition_uniform. The plan is recorded on the module
    (`zero.pipeline_plan`: stages, method, layer names, parameter counts and
    the first layer of each stage) and shown by zero-report.

    Then cuts the function: every op gets `zero.pipeline_stage` (a layer's ops
    its layer's stage; other ops the earliest stage using them), loads and
    constants are repeated where read, every other value a later stage reads
    is sent once per consumer stage (`zero.send` after its definition,
    `zero.recv` before the first use there), and the outputs are received by
    stage 0. Stage s runs on world rank s (the module's world size becomes
    `pp`); the lowering gives each instruction its stage's rank. One
    function with stage-annotated ops, not one function per stage yet.

    With `micro-batches=M` (the model imported at the micro-batch shape) the
    program takes M micro-batches stacked along dim 0 of every input: one
    copy of the cut body per micro-batch, in order, each reading its rows (a
    view) and with its own send/recv tags; stage 0 stacks the outputs. Each
    rank runs its stage's copies in order, so stage s computes micro-batch m
    while stage s+1 computes m-1: the fill/drain (GPipe forward) schedule,
    with a bubble of (S-1)/(M+S-1).
  }];
  let options = [
    Option<"stages", "pp", "int64_t", "1", "Pipeline stages (zero-pipeline's pp)">,
    Option<"partition", "partition", "std::string", "\"parameters\"",
           "parameters | uniform | type:REGEX (DeepSpeed's) | compute (the layers' "
           "multiply-accumulates)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per forward: the model is imported at the micro-batch "
           "shape and the program takes this many stacked along dim 0">,
    Option<"dp", "dp", "int64_t", "1",
           "Data-parallel replicas of the pipeline (a training step compiled for "
           "dp ranks): stage s runs on world ranks [s*dp, (s+1)*dp), its "
           "collectives over the group of those ranks">,
    Option<"schedule", "schedule", "::zero::PipelineSchedule",
           "::zero::PipelineSchedule::OneFOneB",
           "A training step's order of micro-batch forwards and backwards on "
           "each stage",
           [{::llvm::cl::values(
             ZERO_ENUM_VALUE(::zero::PipelineSchedule::OneFOneB, "DeepSpeed's TrainSchedule: one forward, one backward"),
             ZERO_ENUM_VALUE(::zero::PipelineSchedule::GPipe, "every forward, then every backward"))}]>,
    Option<"tiedGrads", "tied-grads", "::zero::TiedGrads",
           "::zero::TiedGrads::MicroBatch",
           "A tied parameter's gradient over its stages",
           [{::llvm::cl::values(
             ZERO_ENUM_VALUE(::zero::TiedGrads::MicroBatch, "its parts summed each micro-batch in the 1-rank order "
                        "(the 1-rank step's bits)"),
             ZERO_ENUM_VALUE(::zero::TiedGrads::Step, "DeepSpeed's: each stage accumulates its part over the "
                        "micro-batches, the parts are summed once per step"))}]>,
  ];
  let dependentDialects = ["::zero::dist::ZeroDialect"];
}

def ZeroTruncateLayersPass : Pass<"zero-truncate-layers", "mlir::ModuleOp"> {
  let summary = "Keep the imported model's first repeated blocks (a planning proxy)";
  let description = [{
    `zero-opt --plan auto` compiles and simulates a deep model's layouts on
    proxies of it at two depths and extrapolates (a stack of equal blocks
    costs a constant plus a per-block part; docs/simulate.md). This pass
    makes such a proxy from the imported (forward) model: the repeated blocks
    are Layers.h's (module paths ending in an index); the activation leaving
    block `keep` - 1 replaces the one leaving the last block, the later blocks
    are erased, then what only they read (loads, constants) and the globals
    no longer loaded. The module's `zero.truncated_from` holds how many blocks
    the model had. A
    model whose blocks do not hand on exactly one activation is an error; one
    with no more than `keep` blocks is left as it is.
  }];
  let options = [
    Option<"keep", "keep", "int64_t", "1", "Blocks to keep (the first ones)">,
  ];
}

def ZeroReportPass : Pass<"zero-report", "mlir::ModuleOp"> {
  let summary = "Print per-rank memory and communication of the sharded program";
  let description = [{
    Prints per-rank bytes of parameter shards, persistent parameters and the
    peak of gathered parameters, and communication bytes per rank per forward by
    collective, next to the ZeRO paper's closed forms (Psi/N shard bytes,
    Psi(N-1)/N gathered per forward). With `nodes`, also the bytes a step
    sends across nodes and inside them, summed over the ranks, per collective
    next to the least its data needs, modelled as zero-run's MPI communicator
    runs each collective (so equal to its `bytes_sent_across_nodes` per step).
  }];
  let options = [
    Option<"output", "output", "std::string", "\"-\"",
           "Where to print the report (- for stderr)">,
    Option<"nodes", "nodes", "std::string", "\"\"",
           "The nodes the ranks run on: N (the world split evenly) or the ranks "
           "of each node (3,1); adds the bytes per step that cross nodes and "
           "stay inside them, per collective">,
  ];
}

def ZeroInlinePipelineStagesPass
    : Pass<"zero-inline-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Inline pipeline stage functions at their calls, each op marked with its stage";
  let description = [{
    A program cut by zero-pipeline-split has a driver that calls one function
    per stage (`zero.pipeline_stage = s`). The runtime runs one instruction
    stream in which each instruction names its ranks, so each call of a stage
    function is replaced by the stage's body, every op of it marked with the
    stage; a stage function no call is left to is erased. Calls of other
    functions stay. The first step of zero-lower-to-runtime, which names the
    function it lowers as `function`.

    ```mlir
    // Before
    func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = call @forward_stage0(%x) : (tensor<4xf32>) -> tensor<4xf32>
      call @forward_stage1(%x) : (tensor<4xf32>) -> ()
      return %y : tensor<4xf32>
    }
    func.func private @forward_stage0(%x: tensor<4xf32>) -> tensor<4xf32>
        attributes {zero.pipeline_stage = 0 : i64} {
      %r = onnx.Relu %x : (tensor<4xf32>) -> tensor<4xf32>
      zero.send %r {peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
      %y = zero.recv {peer = 1 : i64, tag = 1 : i64} : tensor<4xf32>
      return %y : tensor<4xf32>
    }
    func.func private @forward_stage1(%x: tensor<4xf32>)
        attributes {zero.pipeline_stage = 1 : i64} { ... }
    // After
    func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
      %r = onnx.Relu %x {zero.pipeline_stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      zero.send %r {peer = 1 : i64, tag = 0 : i64, zero.pipeline_stage = 0 : i64} : tensor<4xf32>
      %y = zero.recv {peer = 1 : i64, tag = 1 : i64, zero.pipeline_stage = 0 : i64} : tensor<4xf32>
      ... (@forward_stage1's ops, each with zero.pipeline_stage = 1)
      return %y : tensor<4xf32>
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", "\"\"",
           "The function whose stage calls are inlined (default: every function "
           "that is not a stage)">,
  ];
}

def ZeroFuseElementwisePass : Pass<"zero-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Mark groups of elementwise ops that become one FusedElementwise kernel";
  let description = [{
    Finds the groups of f32, f16 and bf16 elementwise ops (Add Sub Mul Div,
    Pow by a scalar constant, Neg Abs Relu Sqrt Reciprocal Exp Log Tanh Erf
    Sigmoid, and the Casts between those types) of one output shape whose
    intermediate results are read only inside the group (never by another op,
    a view or the function's return), with the same `zero.stream`,
    `zero.pipeline_stage` and `zero.pipeline_step`, and no `zero.release`,
    `ml_program.global_store` or in-place optimizer update between the
    group's first op and its last. Each member of a group of two or more is
    marked `zero.fusion_group = g` (groups numbered in program order);
    marks from an earlier run are replaced. zero-lower-to-runtime runs it on
    the function it lowers (unless `fuse-elementwise=false`) and lowers each
    group to one `FusedElementwise` kernel at its last member, whose result is
    the only one read outside the group: GPT-2's tanh GELU (8 ops) and its
    attention's scale + mask are one kernel each.

    ```mlir
    // After (y = x * sigmoid(x): Sigmoid and Mul are one group)
    %s = onnx.Sigmoid %x {zero.fusion_group = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %y = onnx.Mul %x, %s {zero.fusion_group = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::zero::onnx::ONNXDialect"];
}

def ZeroSimplifyKernelsPass : Pass<"zero-simplify-kernels"> {
  let summary = "Rewrite kernels into cheaper equivalents, in program order";
  let description = [{
    Applies the onnx kernels' rewrites, without folding, constant CSE or
    region simplification: program order is the schedule, so every op not
    rewritten stays where it is. `onnx.MatMul` of a 2-D weight's
    `onnx.Transpose` (perm [1, 0]) becomes an `onnx.Gemm` with `transB = 1`
    that reads the weight as stored (between reshapes to and from 2-D when the
    other operand is not 2-D), keeping the MatMul's `zero.*` marks: no
    transposed copy of the weight (tied LM heads, PyTorch Linear layers).

    A rewritten op can read a gathered parameter where only its transpose was
    read before (the tied LM head's Gemm reads the embedding): a
    `zero.release` of it moves after the last op the rewrite created that
    reads it, so nothing reads a released parameter. Run by
    zero-lower-to-runtime on the function it lowers.

    ```mlir
    // Before
    %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    zero.release %w : tensor<2x4xf32>
    %y = onnx.MatMul %x, %t : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    // After
    %y = onnx.Gemm %x, %w {beta = 0.0 : f32, transB = 1 : i64}
        : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
    zero.release %w : tensor<2x4xf32>
    ```
  }];
  let dependentDialects = ["::zero::onnx::ONNXDialect"];
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
    size, the no-reuse total and the live-bytes lower bound. Chains and DAGs
    of f32 elementwise ops whose intermediates are read only inside the group
    (GPT-2's tanh GELU, attention's scale + mask) become one
    `FusedElementwise` kernel, so the intermediates get no buffers
    (`fuse-elementwise=false` keeps one kernel per op).

    It runs as a pipeline, each step a pass shown by
    `--mlir-print-ir-after-all`: on the module zero-inline-pipeline-stages,
    on the function zero-simplify-kernels and zero-fuse-elementwise, then the
    instruction selection and stream assignment (this pass: a `zrt.program`
    whose buffers are views of `zrt.block`s, with `zrt.release` marks), and
    on the program zero-plan-memory, zero-insert-events, zero-plan-in-order
    and zero-finalize-program.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"\"",
           "Function to lower (default: the only function, else @forward)">,
    Option<"fuseElementwise", "fuse-elementwise", "bool", "true",
           "Lower groups of f32 elementwise ops whose intermediates are read "
           "only inside the group to one FusedElementwise kernel">,
  ];
  let dependentDialects = ["::zero::zrt::ZRTDialect"];
}

def ZeroPlanMemoryPass : Pass<"zero-plan-memory", "::zero::zrt::ProgramOp"> {
  let summary = "Place a zrt.program's blocks in its arenas by their live intervals";
  let description = [{
    On a `zrt.program` from zero-lower-to-runtime's instruction selection:
    each `zrt.block`'s live interval (from the first instruction writing it
    to the last reading it; a collective's input until the next collective of
    its stream is issued; the program's outputs to the end, its inputs from
    before the run; a gathered parameter until its last `zrt.release`, or to
    the end without one) and the pipeline stages that touch it, then its
    offset: parameters and constants packed in order (offloaded state
    page-aligned in the swap file), activations greedily by size at the
    lowest offset free over their interval on the stages they share. Sets each
    arena's size, no-reuse total and live-bytes lower bound, and erases the
    `zrt.release` marks. Fails on a release before a use.
  }];
  let dependentDialects = ["::zero::zrt::ZRTDialect"];
}

def ZeroInsertEventsPass : Pass<"zero-insert-events", "::zero::zrt::ProgramOp"> {
  let summary = "Order a zrt.program's cross-stream dependencies with events";
  let description = [{
    After zero-plan-memory: for each instruction, the earlier instructions on
    the other stream it must follow (read-after-write on its inputs' blocks,
    write-after-read and write-after-write on arena bytes its outputs reuse,
    and program order before a communication step: a gather starts where the
    pass pipeline put it), each pipeline stage's schedule on its own. A
    `zrt.record` after the producing instruction (one event each) and a
    `zrt.wait` before the consumer, only for the latest event its stream has
    not yet waited for.
  }];
  let dependentDialects = ["::zero::zrt::ZRTDialect"];
}

def ZeroPlanInOrderPass : Pass<"zero-plan-in-order", "::zero::zrt::ProgramOp"> {
  let summary = "Place the activations again for a runtime whose streams take turns";
  let description = [{
    After zero-insert-events: each activation block's interval in
    turn-taking order (a communication step runs only when compute waits for
    it or a later one) and its offset there, `in_order_offset`, with the
    activations arena's `in_order` size, when that plan differs from the main
    one. A program cut into pipeline stages, or whose compute stream
    receives, keeps one plan. See zero-lower-to-runtime in docs/passes.md.
  }];
  let dependentDialects = ["::zero::zrt::ZRTDialect"];
}

def ZeroFinalizeProgramPass : Pass<"zero-finalize-program", "::zero::zrt::ProgramOp"> {
  let summary = "Place every buffer of a zrt.program in its arena and erase the blocks";
  let description = [{
    The last step of zero-lower-to-runtime: a buffer that is a view at byte
    k of a planned `zrt.block` becomes the view at the block's offset + k of
    the block's arena (and its `in_order` offset likewise), and the blocks
    are erased: the program zero-run reads. Fails on a block without an
    offset (run zero-plan-memory first) or a `zrt.release` left.
  }];
  let dependentDialects = ["::zero::zrt::ZRTDialect"];
}

//===----------------------------------------------------------------------===//
// Training: loss, reverse-mode autodiff, optimizer
//===----------------------------------------------------------------------===//

def ZeroAddLossPass : Pass<"zero-add-loss", "mlir::ModuleOp"> {
  let summary = "Attach a cross-entropy loss to a logits output";
  let description = [{
    The function's logits output [..., C] is replaced by the scalar
    `SoftmaxCrossEntropyLoss` (mean over the tokens whose label is not
    `ignore-index`, PyTorch's `F.cross_entropy`) against integer labels of
    shape [...]: the input named `labels` (added when the function has none).
    `kind=causal-lm` first shifts by one token as Hugging Face causal LMs do:
    logits[:, :-1] against labels[:, 1:].
  }];
  let options = [
    Option<"kind", "kind", "::zero::LossKind", "::zero::LossKind::CrossEntropy",
           "The loss",
           [{::llvm::cl::values(
             ZERO_ENUM_VALUE(::zero::LossKind::CrossEntropy, "PyTorch's cross_entropy over the last dimension"),
             ZERO_ENUM_VALUE(::zero::LossKind::CausalLM, "the same after shifting labels by one token"))}]>,
    Option<"labels", "labels", "std::string", "\"labels\"",
           "Name of the integer labels input">,
    Option<"output", "output", "std::string", "\"\"",
           "The logits output (default: the only output)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "Label value that contributes no loss">,
  ];
  let dependentDialects = ["::zero::onnx::ONNXDialect"];
}

def ZeroMixedPrecisionPass : Pass<"zero-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Run the forward in 16 bits (bf16 or fp16), as DeepSpeed's bf16/fp16 modes do";
  let description = [{
    DeepSpeed's `"bf16"` / `"fp16"` modes convert the model to 16 bits
    (`module.bfloat16()`) and keep an fp32 master copy of the parameters in
    the optimizer. This pass does the first half on the function zero-autodiff
    will differentiate: every f32 global (parameters and buffers) becomes a
    16-bit global (the runtime rounds the f32 weights file to nearest even
    when it loads it), every f32 value of the function becomes 16-bit
    (constants converted, `Cast` to f32 casts to the 16-bit type), and f32
    inputs are cast to 16 bits on entry. Each kernel still computes in f32
    (16-bit operands are widened, the result rounded once): the type is the
    storage. A loss (`SoftmaxCrossEntropyLoss`, `NegativeLogLikelihoodLoss`)
    computes as the model computes it: in 16 bits on 16-bit operands, as a
    model's own loss module does after `.half()` (its value and fp16's
    gradient seed, the scale, are then 16-bit: 2^16 overflows in fp16), or in
    f32 where the op is marked `zero.compute_f32` (the model casts its logits
    to f32 first; the importer marks transformers' language-model losses, a
    cast the export drops) or with f32-loss; an f32 loss's 16-bit operands are
    cast up, and what is computed from its results stays f32. zero-autodiff
    then produces 16-bit gradients, and zero-optimizer steps an fp32 master copy of each 16-bit
    parameter (docs/training.md, "Mixed precision"). With fp16 it adds
    DeepSpeed's loss scaler (`zero.loss_scaler` and, dynamic, its state
    globals): zero-autodiff seeds the backward with the scale, zero-optimizer
    unscales, skips a step whose gradients overflow and updates the scale.
    With bf16 and check-grad-overflow it marks the module
    `zero.skip_nonfinite`: zero-optimizer skips a step whose gradients are
    not finite, without a scale.
  }];
  let options = [
    Option<"precision", "precision", "::zero::Precision", "::zero::Precision::BF16",
           "The 16-bit type",
           [{::llvm::cl::values(
             ZERO_ENUM_VALUE(::zero::Precision::BF16, "bfloat16 (DeepSpeed's \"bf16\")"),
             ZERO_ENUM_VALUE(::zero::Precision::FP16, "IEEE half (DeepSpeed's \"fp16\")"))}]>,
    Option<"function", "function", "std::string", "\"\"",
           "The function (default: the only one, else @forward)">,
    Option<"lossScale", "loss-scale", "double", "0",
           "fp16: a static loss scale (DeepSpeed's loss_scale); 0: the dynamic scaler">,
    Option<"initialScalePower", "initial-scale-power", "int64_t", "16",
           "fp16, dynamic: the first scale is 2^this">,
    Option<"lossScaleWindow", "loss-scale-window", "int64_t", "1000",
           "fp16, dynamic: clean steps before the scale doubles">,
    Option<"hysteresis", "hysteresis", "int64_t", "2",
           "fp16, dynamic: overflows before the scale halves">,
    Option<"minLossScale", "min-loss-scale", "double", "1",
           "fp16, dynamic: the scale's floor (the halved scale is at least this)">,
    Option<"consecutiveHysteresis", "consecutive-hysteresis", "bool", "false",
           "fp16, dynamic: a clean step restores the hysteresis">,
    Option<"checkGradOverflow", "check-grad-overflow", "bool", "false",
           "bf16: skip a step whose gradients are not finite (DeepSpeed's "
           "bf16.check_grad_overflow; zero.skip_nonfinite on the module)">,
    Option<"f32Loss", "f32-loss", "bool", "false",
           "Compute every loss in f32 (torch.autocast's list), whatever the "
           "model does; default: as the model computes it (zero.compute_f32)">,
  ];
  let dependentDialects = ["::zero::onnx::ONNXDialect"];
}

def ZeroAutodiffPass : Pass<"zero-autodiff", "mlir::ModuleOp"> {
  let summary = "Build the training step: forward, then reverse-mode backward";
  let description = [{
    From a function returning a scalar loss, builds `@train_step`: the
    forward ops, then for each active op in reverse order its reverse rule
    (one per onnx op, in the table of GradientRules.cpp), summing the
    contributions of a value used more than once and reducing gradients over
    broadcast axes. Its results are the loss and, for every trainable
    parameter global, the gradient of the loss (`onnx.name = "grad.<tensor>"`,
    `zero.grad_of = @global`). Trainable: every floating-point parameter
    global except those marked `zero.buffer` by the importer and those whose
    tensor name matches `freeze` (a regex); integers and inputs get no
    gradient. With `accumulation=K` the inputs hold K micro-batches along
    dim 0; the step runs forward and backward per micro-batch, its loss is
    the mean of theirs and its gradients the sum of theirs divided by K.

    Each parameter's gradient is summed over the micro-batches in one
    running sum: micro-batch k's gradient added to the sum of the ones
    before (an `onnx.Add`; an embedding's rows `onnx.ScatterND`-added into
    the sum), and the module records K (`zero.accumulation_steps`). The step
    is one rank's: zero-autodiff inserts no collective (ZeRO-2's per
    micro-step reduce-scatter is zero-reduce-micro-steps, the averaging over
    ranks zero-optimizer).
  }];
  let options = [
    Option<"function", "function", "std::string", "\"\"",
           "The loss function (default: the only function, else @forward)">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "Regex on tensor names: matching parameters are not trained">,
    Option<"lossOutput", "loss-output", "std::string", "\"\"",
           "The output that is the loss, when the function returns several "
           "(default: the one named loss, else the only floating-point scalar); "
           "the others are dropped">,
    Option<"accumulation", "accumulation", "int64_t", "1",
           "Micro-batches per step (gradient accumulation)">,
    Option<"accumF32", "accum-f32", "bool", "false",
           "Sum 16-bit gradients over the micro-batches in f32 (DeepSpeed's "
           "data_types.grad_accum_dtype fp32): each micro-batch's gradient "
           "widened, the step's gradient f32">,
    Option<"accumDtype", "accum-dtype", "std::string", "\"\"",
           "The type 16-bit gradients are summed in over the micro-batches "
           "(DeepSpeed's grad_accum_dtype): fp32 (as accum-f32), fp16 or bf16; "
           "empty: their own">,
    Option<"microBatchSize", "micro-batch-size", "int64_t", "0",
           "The rows of one micro-batch the config promises "
           "(train_micro_batch_size_per_gpu; 0: not checked): the model's "
           "batch (its inputs' largest dim 0) must equal it">,
    Option<"microBatchOrigin", "micro-batch-origin", "std::string", "\"\"",
           "Where micro-batch-size comes from when DeepSpeed derives it (named in "
           "the error; empty: the config's train_micro_batch_size_per_gpu)">,
    Option<"tagMicroBatches", "tag-micro-batches", "bool", "false",
           "Mark each op with its micro-batch (zero.micro_batch) and phase "
           "(zero.phase = forward | backward), for zero-pipeline-split to "
           "schedule the micro-batches of a training step">,
  ];
  let dependentDialects = ["::zero::onnx::ONNXDialect", "::zero::dist::ZeroDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def ZeroReduceMicroStepsPass : Pass<"zero-reduce-micro-steps", "mlir::ModuleOp"> {
  let summary = "Reduce-scatter each micro-batch's gradients where they are final (ZeRO-2)";
  let description = [{
    DeepSpeed's ZeRO-2 reduces gradients at every micro-step of gradient
    accumulation, so no full-size gradient outlives its micro-batch. On
    zero-autodiff's `@train_step` with K = `zero.accumulation_steps` > 1,
    `dp`=N > 1 and `stage=2`: each gradient result (`zero.grad_of`) is
    the running sum of its micro-batches' gradients; walking that chain back
    from the result (K - 1 links: `onnx.Add`s, or `onnx.ScatterND` adds of an
    embedding's rows into the sum, whose micro-batch gradient is materialized
    again as the reverse rule made it, the rows scatter-added into zeros),
    each micro-batch's gradient is flattened, zero-padded to a multiple of N
    and `zero.reduce_scatter`ed right after it is final. The rank sums its K
    shards in micro-batch order at the end of the step, in the order the
    first micro-batch's backward finalized the gradients; the result becomes
    that shard (padded/N elements, result attribute `zero.grad_shard = N`),
    which zero-optimizer averages without another collective, and the
    running sum is erased. On a step tagged by zero-autodiff's
    tag-micro-batches, the new ops of micro-batch k carry its tags (the
    shard sums, after the last micro-batch, none). Other stages, one rank or
    one micro-batch: the step is left as it is (stage 1 reduces the summed
    gradient once, in zero-optimizer).

    ```mlir
    // Before (K = 2): micro-batch 0's gradient of @w, then 1's, then the sum
    %g0 = onnx.MatMul %a0, %d0 : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
    ...
    %g1 = onnx.MatMul %a1, %d1 : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
    %sum = onnx.Add %g0, %g1 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    return %loss, %sum  // -> (..., tensor<3x5xf32> {zero.grad_of = @w})
    // After (dp = 2)
    %g0 = onnx.MatMul %a0, %d0 : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
    %f0 = onnx.Reshape %g0 {shape = array<i64: 15>} : (tensor<3x5xf32>) -> tensor<15xf32>
    %p0 = onnx.Pad %f0 {pads = array<i64: 0, 1>} : (tensor<15xf32>) -> tensor<16xf32>
    %s0 = zero.reduce_scatter %p0 {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
    ...
    %g1 = onnx.MatMul %a1, %d1 : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
    %f1 = onnx.Reshape %g1 {shape = array<i64: 15>} : (tensor<3x5xf32>) -> tensor<15xf32>
    %p1 = onnx.Pad %f1 {pads = array<i64: 0, 1>} : (tensor<15xf32>) -> tensor<16xf32>
    %s1 = zero.reduce_scatter %p1 {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
    %sum = onnx.Add %s0, %s1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    return %loss, %sum  // -> (..., tensor<8xf32> {zero.grad_of = @w, zero.grad_shard = 2})
    ```
  }];
  let options = [
    Option<"world", "dp", "int64_t", "1",
           "Data-parallel ranks the step is compiled for (zero-optimizer's dp)">,
    Option<"stage", "stage", "int64_t", "0",
           "ZeRO stage (zero-optimizer's stage): 2 reduce-scatters every "
           "micro-step; 0, 1 and 3 leave the step as it is">,
    Option<"gradientSum", "gradient-sum", "bool", "false",
           "The gradients are summed over the ranks (zero-optimizer's "
           "gradient-sum); else each micro-step's gradient is divided by the "
           "world size before its reduce-scatter">,
  ];
  let dependentDialects = ["::zero::onnx::ONNXDialect", "::zero::dist::ZeroDialect"];
}

def ZeroActivationCheckpointPass : Pass<"zero-activation-checkpoint", "mlir::ModuleOp"> {
  let summary = "Recompute each segment of layers' forward in backward";
  let description = [{
    DeepSpeed's PipelineModule `activation_checkpoint_interval=K`: the
    model's layers (the exporter's module paths, as zero-pipeline-split
    finds them) in consecutive segments of K; in @train_step (built by
    zero-autodiff with tag-micro-batches), each micro-batch's backward reads
    no activation from inside a segment's forward: right before the first
    backward op that would, the segment's forward ops that it needs are
    cloned (reading the kept segment inputs, the parameters and the
    constants) and the backward reads the clones. The forward's values then
    die at the end of their segment's forward, so a micro-batch keeps only
    its segments' inputs until backward. Results are unchanged bit for bit
    (the same kernels on the same operands; dropout masks are drawn from
    their seed, stream and step).
  }];
  let options = [
    Option<"interval", "interval", "int64_t", "1",
           "Layers per checkpointed segment (DeepSpeed's "
           "activation_checkpoint_interval)">,
  ];
}

def ZeroOptimizerPass : Pass<"zero-optimizer", "mlir::ModuleOp"> {
  let summary = "Add clipping, the learning-rate schedule and the optimizer update";
  let description = [{
    Consumes `@train_step`'s gradients: the global gradient norm (and, with
    `clip` > 0, torch.nn.utils.clip_grad_norm_'s coefficient), the step
    counter global, the learning rate of the step (`zero.lr_schedule`), and
    one `zero.adamw` / `zero.sgd` per parameter whose results are stored back
    into the parameter and its optimizer-state globals (zero-initialised).
    The step then returns `loss`, `grad_norm` and `lr`.

    With `dp` = N > 1 ranks of data parallelism (each rank runs the step on
    its slice of the global batch), each gradient is averaged over the ranks
    right after its last contribution in backward, so the communication
    overlaps the rest of backward:
    - `stage=0`: `zero.all_reduce` of the gradient, times 1/N; every rank
      steps every parameter (DDP).
    - `stage=1|2|3`: the gradient flattened and zero-padded to a multiple of N,
      `zero.reduce_scatter`, times 1/N: rank r keeps elements [r*s, (r+1)*s)
      (s = padded / N), as does its optimizer state (globals of s elements
      marked `zero.shard`). The rank steps its shard of the parameter
      (`zero.local_shard`) and `zero.all_gather` rebuilds the parameter on
      every rank. The global norm is the all-reduced sum of the ranks' local
      squared norms. At stage 3, zero-partition then makes each parameter
      global that shard: the shard is the load, the update is stored as is.
  }];
  let options = [
    Option<"world", "dp", "int64_t", "1",
           "Data-parallel ranks the step is compiled for">,
    Option<"bucket", "bucket", "int64_t", "0",
           "Reduce gradients in buckets of at most this many elements, in the "
           "order they become final (DeepSpeed's reduce_bucket_size); 0: each "
           "gradient alone">,
    Option<"bucketAlign", "bucket-align", "int64_t", "1",
           "Pad each sharded gradient's slice in a bucket to a multiple of this "
           "many elements (qgZ's quantization block: no block then spans two "
           "gradients, each quantized as alone, as DeepSpeed's per-tensor qgZ)">,
    Option<"commF32", "comm-fp32", "bool", "false",
           "16-bit gradients are reduced in f32 (DeepSpeed's communication_data_type "
           "\"fp32\"): twice the bytes, the sums not rounded to 16 bits">,
    Option<"stage", "stage", "int64_t", "0",
           "ZeRO stage for dp > 1: 0 (all-reduce), 1, 2 or 3 (reduce-scatter, "
           "partitioned optimizer state; 3: zero-partition shards the parameters)">,
    Option<"type", "type", "std::string", "\"adamw\"", "adamw, adam or sgd">,
    Option<"lr", "lr", "double", "1e-3", "Learning rate (the schedule's base)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"eps", "eps", "double", "1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.01",
           "Weight decay (decoupled for adamw, L2 for adam and sgd)">,
    Option<"momentum", "momentum", "double", "0", "SGD momentum">,
    Option<"dampening", "dampening", "double", "0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"clip", "clip", "double", "0",
           "Global-norm gradient clipping (0: none)">,
    Option<"biasCorrection", "bias-correction", "bool", "true",
           "Adam: correct the moments' bias (DeepSpeed's bias_correction)">,
    Option<"gradientSum", "gradient-sum", "bool", "false",
           "Sum the gradients over the data-parallel ranks instead of averaging "
           "them (DeepSpeed's gradient_allreduce_op \"sum\"; not at stage 3)">,
    Option<"lastBatchIteration", "last-batch-iteration", "int64_t", "-1",
           "DeepSpeed's scheduler last_batch_iteration: -1 starts the schedule; "
           "L leaves the optimizer's lr (and betas) for the first step and "
           "resumes the schedule at L + 1">,
    Option<"schedule", "schedule", "::zero::LRSchedule", "::zero::LRSchedule::Constant",
           "The learning-rate schedule (DeepSpeed's scheduler.type)",
           [{::llvm::cl::values(
             ZERO_ENUM_VALUE(::zero::LRSchedule::Constant, "lr every step"),
             ZERO_ENUM_VALUE(::zero::LRSchedule::WarmupLR, "warmup, then constant"),
             ZERO_ENUM_VALUE(::zero::LRSchedule::WarmupDecayLR, "warmup, then linear decay to 0"),
             ZERO_ENUM_VALUE(::zero::LRSchedule::WarmupCosineLR, "warmup, then cosine decay"),
             ZERO_ENUM_VALUE(::zero::LRSchedule::OneCycle, "one triangular cycle of lr (and Adam's beta1), then decay"),
             ZERO_ENUM_VALUE(::zero::LRSchedule::LRRangeTest, "lr rising linearly (or by stairs) from a minimum"))}]>,
    Option<"warmupMinLr", "warmup-min-lr", "double", "0", "DeepSpeed warmup_min_lr">,
    Option<"warmupMaxLr", "warmup-max-lr", "double", "1e-3", "DeepSpeed warmup_max_lr">,
    Option<"warmupNumSteps", "warmup-num-steps", "int64_t", "1000",
           "DeepSpeed warmup_num_steps">,
    Option<"warmupType", "warmup-type", "::zero::WarmupType", "::zero::WarmupType::Log",
           "DeepSpeed warmup_type",
           [{::llvm::cl::values(
             ZERO_ENUM_VALUE(::zero::WarmupType::Log, "logarithmic warmup"),
             ZERO_ENUM_VALUE(::zero::WarmupType::Linear, "linear warmup"))}]>,
    Option<"totalNumSteps", "total-num-steps", "int64_t", "0",
           "DeepSpeed total_num_steps (WarmupDecayLR, WarmupCosineLR)">,
    Option<"cosMinRatio", "cos-min-ratio", "double", "0.0001",
           "DeepSpeed cos_min_ratio (WarmupCosineLR)">,
    Option<"warmupMinRatio", "warmup-min-ratio", "double", "0",
           "DeepSpeed warmup_min_ratio (WarmupCosineLR)">,
    Option<"cycleMinLr", "cycle-min-lr", "double", "0", "DeepSpeed cycle_min_lr (OneCycle)">,
    Option<"cycleMaxLr", "cycle-max-lr", "double", "0", "DeepSpeed cycle_max_lr (OneCycle)">,
    Option<"decayLrRate", "decay-lr-rate", "double", "0", "DeepSpeed decay_lr_rate (OneCycle)">,
    Option<"cycleFirstStepSize", "cycle-first-step-size", "double", "2000",
           "DeepSpeed cycle_first_step_size (OneCycle)">,
    Option<"cycleSecondStepSize", "cycle-second-step-size", "double", "-1",
           "DeepSpeed cycle_second_step_size (OneCycle; -1: the first's)">,
    Option<"cycleFirstStairCount", "cycle-first-stair-count", "int64_t", "0",
           "DeepSpeed cycle_first_stair_count (OneCycle; 0: continuous): the first "
           "half's lr (and momentum) held flat in this many stairs">,
    Option<"cycleSecondStairCount", "cycle-second-stair-count", "int64_t", "-1",
           "DeepSpeed cycle_second_stair_count (OneCycle; -1: the first's)">,
    Option<"decayStepSize", "decay-step-size", "double", "0",
           "DeepSpeed decay_step_size (OneCycle; 0: no decay after the cycle)">,
    Option<"cycleMomentum", "cycle-momentum", "bool", "true",
           "DeepSpeed cycle_momentum (OneCycle): Adam's beta1 cycles against the "
           "lr and beta2 is 0.99, as DeepSpeed sets betas = (momentum, 0.99)">,
    Option<"cycleMinMom", "cycle-min-mom", "double", "0.8", "DeepSpeed cycle_min_mom">,
    Option<"cycleMaxMom", "cycle-max-mom", "double", "0.9", "DeepSpeed cycle_max_mom">,
    Option<"decayMomRate", "decay-mom-rate", "double", "0", "DeepSpeed decay_mom_rate">,
    Option<"lrRangeTestMinLr", "lr-range-test-min-lr", "double", "1e-3",
           "DeepSpeed lr_range_test_min_lr (LRRangeTest)">,
    Option<"lrRangeTestStepSize", "lr-range-test-step-size", "double", "2000",
           "DeepSpeed lr_range_test_step_size (LRRangeTest)">,
    Option<"lrRangeTestStepRate", "lr-range-test-step-rate", "double", "1",
           "DeepSpeed lr_range_test_step_rate (LRRangeTest)">,
    Option<"lrRangeTestStaircase", "lr-range-test-staircase", "bool", "false",
           "DeepSpeed lr_range_test_staircase (LRRangeTest)">,
    Option<"nvmePath", "nvme-path", "std::string", "\"\"",
           "ZeRO-Offload to NVMe (offload_optimizer device nvme): the optimizer "
           "state globals are marked zero.offload = \"nvme\" and live in swap "
           "files under this directory (empty: in memory)">,
    Option<"offloadBuffers", "offload-buffers", "int64_t", "4",
           "Offloaded updates whose state is read ahead (buffer_count)">,
    Option<"offloadHost", "offload-host", "bool", "false",
           "offload_optimizer device cpu: the optimizer state globals are "
           "marked zero.offload = \"cpu\" and live in the host arena (pinned "
           "host memory on a GPU backend; the CPU backend's memory is host "
           "memory)">,
    Option<"noDecay", "no-decay", "std::string", "\"\"",
           "Parameters whose initializer name matches this regex (searched, as "
           "--freeze) form the group with weight decay 0 (the Hugging Face "
           "Trainer's bias and norm group); empty: one group">,
    Option<"stepsPerPrint", "steps-per-print", "int64_t", "0",
           "DeepSpeed steps_per_print: zero-run's --log-every default (0: every step)">,
    Option<"csvMonitor", "csv-monitor", "std::string", "\"\"",
           "DeepSpeed csv_monitor's output_path/job_name: zero-run writes its CSV "
           "files there (empty: none)">,
  ];
  let dependentDialects = ["::zero::onnx::ONNXDialect", "::zero::dist::ZeroDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def ZeroVerifyPass : Pass<"zero-verify", "mlir::ModuleOp"> {
  let summary = "Check the invariants of one phase, where the phase ends";
  let description = [{
    Runs between the phases of zero-opt's pipeline (as IREE's verify passes
    do), so a broken invariant is reported by the phase that made it, not by
    a later pass that trips over it:

    - `imported`: the importer's output holds only onnx, func and ml_program
      ops, and every global names its ONNX initializer (`zero.tensor`).
    - `sharded`: after the ZeRO passes, every sharded global follows
      DeepSpeed's flatten-pad-split rule: a flat shard of ceil(full / world)
      elements of its `zero.full_type`, on a module that says its
      `zero.world_size`.
    - `lowered`: after zero-lower-to-runtime, every op inside a zrt.program is
      a zrt op.

    ```mlir
    // zero-verify{phase=sharded} refuses a shard too small for its parameter:
    module attributes {zero.world_size = 2 : i64} {
      ml_program.global private mutable @w(dense<0.0> : tensor<2xf32>)
          : tensor<2xf32> {zero.full_type = tensor<3x2xf32>, zero.shard = {}}
    }
    ```
  }];
  let options = [
    Option<"phase", "phase", "::zero::VerifyPhase", "::zero::VerifyPhase::Imported",
           "The phase whose end this is",
           [{::llvm::cl::values(
             ZERO_ENUM_VALUE(::zero::VerifyPhase::Imported, "after the ONNX import"),
             ZERO_ENUM_VALUE(::zero::VerifyPhase::Sharded, "after the ZeRO passes"),
             ZERO_ENUM_VALUE(::zero::VerifyPhase::Lowered, "after zero-lower-to-runtime"))}]>,
  ];
}

#endif // ZERO_TRANSFORMS_PASSES_TD
