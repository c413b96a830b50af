// RUN: zero-opt %S/../Inputs/reuse.mlir --zero-partition="dp=4 max-reuse-distance=0" --zero-hierarchical="group=2" --zero-release | FileCheck %s
// RUN: zero-opt %S/../Inputs/reuse.mlir --zero-partition="dp=4 max-reuse-distance=0" --zero-prefetch="depth=4" --zero-hierarchical="group=2" --zero-bucket="bytes=10000" --zero-release | FileCheck %s --check-prefix=PREFETCH
// RUN: zero-opt %S/../Inputs/reuse.mlir --zero-partition="dp=4 max-reuse-distance=0" --zero-hierarchical="group=2" --zero-release --zero-lower-to-runtime | grep -v zrt.buffer | FileCheck %s --check-prefix=LOWER
// RUN: zero-opt %S/../Inputs/reuse.mlir --zero-partition="dp=4" --zero-hierarchical="group=2" | FileCheck %s --check-prefix=ONCE
// RUN: not zero-opt %S/../Inputs/reuse.mlir --zero-partition="dp=4" --zero-hierarchical="group=3" 2>&1 | FileCheck %s --check-prefix=BAD

// Tests that hpZ keeps a secondary shard per group of ranks and re-gathers a
// parameter from it inside the group, its first gather staying a world gather.
// hpZ over 4 ranks in groups of 2: @w is used at both ends of the function
// and re-gathered for its second use (max-reuse-distance=0). Its first
// gather stays a world all-gather; before the first use each rank keeps its
// half of its group's copy (8 of 16 elements: the memory hpZ costs), and the
// re-gather gathers those halves inside the group. @v, gathered once, is
// left alone.
// CHECK: zero.process_group @hpz {group_size = 2 : i64, ranks = array<i64: 0, 1, 2, 3>}
// CHECK-LABEL: func.func @forward
// CHECK:      %[[W:.+]] = zero.all_gather %w {world = 4 : i64} : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[WV:.+]] = onnx.Reshape %[[W]]
// CHECK-NEXT: %[[SEC:.+]] = zero.local_shard %[[W]] {group = @hpz, world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: onnx.MatMul %arg0, %[[WV]]
// CHECK-NEXT: zero.release %[[WV]]
// CHECK:      zero.all_gather %v {world = 4 : i64}
// CHECK:      %[[RE:.+]] = zero.all_gather %[[SEC]] {group = @hpz, world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[REV:.+]] = onnx.Reshape %[[RE]]
// CHECK-NEXT: onnx.MatMul %{{.+}}, %[[REV]]
// CHECK-NEXT: zero.release %[[REV]]
// CHECK-NOT:  zero.all_gather

// With prefetch hoisting every gather to the start, the secondary shard is
// taken before the hoisted re-gather, and the in-group gather is never
// coalesced into the bucket of world gathers.
// PREFETCH:      %[[B:.+]]:3 = zero.bucket_all_gather %w, %b, %v {world = 4 : i64}
// PREFETCH-NEXT: %[[SEC:.+]] = zero.local_shard %[[B]]#0 {group = @hpz, world = 2 : i64}
// PREFETCH-NEXT: zero.all_gather %[[SEC]] {group = @hpz, world = 2 : i64}

// Lowered: the group goes to the program (each rank uses its half of the
// rank list), the secondary shard is the LocalShard at position
// (rank / 1) % 2, and the re-gather runs over @hpz.
// LOWER:      zrt.group @world [0, 1, 2, 3]
// LOWER-NEXT: zrt.group @hpz [0, 1, 2, 3] {group_size = 2 : i64}
// LOWER:      zrt.kernel "LocalShard" on @compute [@{{.+}}] -> [@[[SEC:.+]]] {stride = 1 : i64, world = 2 : i64}
// LOWER:      zrt.collective "AllGather" on @comm group @hpz [@[[SEC]]]

// Without re-gathers there is nothing to keep.
// ONCE-NOT: zero.local_shard
// ONCE-NOT: group = @hpz

// BAD: zero-hierarchical: a group of 3 ranks does not divide the data-parallel world of 4 (zero_hpz_partition_size must divide it)
