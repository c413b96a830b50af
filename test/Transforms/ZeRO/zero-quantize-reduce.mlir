// RUN: zero-opt %s --zero-quantize-reduce="bits=4 block=2" | FileCheck %s
// RUN: zero-opt %s --zero-quantize-reduce="bits=8 block=2 group=2" | FileCheck %s --check-prefix=TWO
// RUN: zero-opt %s --zero-quantize-reduce="bits=8 block=2 group=2" --zero-lower-to-runtime=function=step | grep -v zrt.buffer | FileCheck %s --check-prefix=LOWER
// RUN: zero-opt %s --zero-quantize-reduce="bits=4 block=2" --zero-report 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not zero-opt %s --zero-quantize-reduce="group=3" 2>&1 | FileCheck %s --check-prefix=GROUP

// Tests that qgZ turns each fp32 gradient reduce-scatter into quantized
// all-to-alls, in one level or in ZeRO++'s two, and leaves other element
// types alone.
// A training step's gradient reduce-scatters over 4 ranks: 12 elements (3
// per rank) in fp32, and one of another element type.
func.func @step(%g: tensor<12xf32>, %h: tensor<8xf64>) -> (tensor<3xf32>, tensor<2xf64>) {
  %s = zero.reduce_scatter %g {world = 4} : tensor<12xf32> -> tensor<3xf32>
  %t = zero.reduce_scatter %h {world = 4} : tensor<8xf64> -> tensor<2xf64>
  return %s, %t : tensor<3xf32>, tensor<2xf64>
}

// One level: quantized with one chunk per destination (3 elements: 2 int4
// bytes and 2 scales each), one all-to-all of the bytes and one of the
// scales, dequantized per source, summed over the sources in rank order. The
// f64 reduce-scatter stays plain and is marked for zero-report.
// CHECK-LABEL: func.func @step
// CHECK-NEXT: %[[Q:.+]], %[[S:.+]] = zero.quantize %arg0 {bits = 4 : i64, block = 2 : i64, chunks = 4 : i64, zero.stream = "comm"} : tensor<12xf32> -> tensor<8xi8>, tensor<8xf32>
// CHECK-NEXT: %[[QA:.+]] = zero.all_to_all %[[Q]] {world = 4 : i64} : tensor<8xi8> -> tensor<8xi8>
// CHECK-NEXT: %[[SA:.+]] = zero.all_to_all %[[S]] {world = 4 : i64} : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[D:.+]] = zero.dequantize %[[QA]], %[[SA]] {bits = 4 : i64, block = 2 : i64, chunks = 4 : i64, zero.stream = "comm"} : tensor<8xi8>, tensor<8xf32> -> tensor<12xf32>
// CHECK-NEXT: %[[R:.+]] = onnx.Reshape %[[D]] {shape = array<i64: 4, 3>}
// CHECK-NEXT: %[[SUM:.+]] = onnx.ReduceSum %[[R]] {axes = array<i64: 0>, keepdims = 0 : i64, zero.stream = "comm"} : (tensor<4x3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[T:.+]] = zero.reduce_scatter %arg1 {world = 4 : i64, zero.qgz_fallback} : tensor<8xf64> -> tensor<2xf64>
// CHECK-NEXT: return %[[SUM]], %[[T]]

// Two levels (ZeRO++'s hierarchy, groups of 2): the [group][position][3]
// slices are reordered to [position][group][3]; an all-to-all inside
// {0,1},{2,3} and a sum leave each rank its group's partial sums for its
// two destinations (one per group), re-quantized and exchanged across
// {0,2},{1,3}, then summed.
// TWO-DAG: zero.process_group @qgz_across {group_size = 2 : i64, ranks = array<i64: 0, 2, 1, 3>}
// TWO-DAG: zero.process_group @qgz_inside {group_size = 2 : i64, ranks = array<i64: 0, 1, 2, 3>}
// TWO-LABEL: func.func @step
// TWO-NEXT: %[[G:.+]] = onnx.Reshape %arg0 {shape = array<i64: 2, 2, 3>}
// TWO-NEXT: %[[T:.+]] = onnx.Transpose %[[G]] {perm = array<i64: 1, 0, 2>, zero.stream = "comm"}
// TWO-NEXT: %[[F:.+]] = onnx.Reshape %[[T]] {shape = array<i64: 12>}
// TWO-NEXT: %[[Q:.+]], %[[S:.+]] = zero.quantize %[[F]] {bits = 8 : i64, block = 2 : i64, chunks = 4 : i64, zero.stream = "comm"} : tensor<12xf32> -> tensor<12xi8>, tensor<8xf32>
// TWO-NEXT: %[[QA:.+]] = zero.all_to_all %[[Q]] {group = @qgz_inside, world = 2 : i64} : tensor<12xi8> -> tensor<12xi8>
// TWO-NEXT: %[[SA:.+]] = zero.all_to_all %[[S]] {group = @qgz_inside, world = 2 : i64} : tensor<8xf32> -> tensor<8xf32>
// TWO-NEXT: %[[D:.+]] = zero.dequantize %[[QA]], %[[SA]] {{.+}} chunks = 4 {{.+}} -> tensor<12xf32>
// TWO-NEXT: %[[R:.+]] = onnx.Reshape %[[D]] {shape = array<i64: 2, 6>}
// TWO-NEXT: %[[P:.+]] = onnx.ReduceSum %[[R]] {{.+}} : (tensor<2x6xf32>) -> tensor<6xf32>
// TWO-NEXT: %[[Q2:.+]], %[[S2:.+]] = zero.quantize %[[P]] {bits = 8 : i64, block = 2 : i64, chunks = 2 : i64, zero.stream = "comm"} : tensor<6xf32> -> tensor<6xi8>, tensor<4xf32>
// TWO-NEXT: %[[QA2:.+]] = zero.all_to_all %[[Q2]] {group = @qgz_across, world = 2 : i64} : tensor<6xi8> -> tensor<6xi8>
// TWO-NEXT: %[[SA2:.+]] = zero.all_to_all %[[S2]] {group = @qgz_across, world = 2 : i64}
// TWO-NEXT: %[[D2:.+]] = zero.dequantize %[[QA2]], %[[SA2]] {{.+}} chunks = 2 {{.+}} -> tensor<6xf32>
// TWO-NEXT: %[[R2:.+]] = onnx.Reshape %[[D2]] {shape = array<i64: 2, 3>}
// TWO-NEXT: %[[SUM:.+]] = onnx.ReduceSum %[[R2]] {{.+}} : (tensor<2x3xf32>) -> tensor<3xf32>
// TWO: return %[[SUM]]

// Lowered: every piece on the communication stream, the all-to-alls over the
// two partitioned groups (each rank uses the group that holds it).
// LOWER-DAG: zrt.group @qgz_across [0, 2, 1, 3] {group_size = 2 : i64}
// LOWER-DAG: zrt.group @qgz_inside [0, 1, 2, 3] {group_size = 2 : i64}
// LOWER:      zrt.kernel "Transpose" on @comm
// LOWER-NEXT: zrt.kernel "Quantize" on @comm
// LOWER-NEXT: zrt.collective "AllToAll" on @comm group @qgz_inside
// LOWER-NEXT: zrt.collective "AllToAll" on @comm group @qgz_inside
// LOWER-NEXT: zrt.kernel "Dequantize" on @comm
// LOWER-NEXT: zrt.kernel "ReduceSum" on @comm
// LOWER-NEXT: zrt.kernel "Quantize" on @comm
// LOWER-NEXT: zrt.collective "AllToAll" on @comm group @qgz_across
// LOWER-NEXT: zrt.collective "AllToAll" on @comm group @qgz_across
// LOWER-NEXT: zrt.kernel "Dequantize" on @comm
// LOWER-NEXT: zrt.kernel "ReduceSum" on @comm
// LOWER-NEXT: zrt.collective "ReduceScatter" on @comm group @world

// GROUP: zero-quantize-reduce: group 3 must divide the world of 4 ranks (1 or the world: one level)

// zero-report counts the all-to-alls' bytes (each rank keeps 1/4 of what it
// quantized: 3/4 of 8 int4 bytes and of 8 scales x 4 bytes = 6 + 24) and
// names the reduce-scatter that stayed plain.
// REPORT: all_to_all (qgZ) x2                            30
// REPORT: qgZ: 1 reduce-scatter(s) kept plain (not fp32 over the world)
