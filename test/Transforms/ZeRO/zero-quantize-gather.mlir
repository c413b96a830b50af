// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-release --zero-quantize-gather="bits=8 block=3" | FileCheck %s
// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-prefetch="depth=3" --zero-bucket="bytes=1000" --zero-release --zero-quantize-gather="bits=4 block=2" | FileCheck %s --check-prefix=BUCKET
// RUN: zero-opt %S/../Inputs/reuse.mlir --zero-partition="dp=4 max-reuse-distance=0 persistence-threshold=4" --zero-hierarchical="group=2" --zero-release --zero-quantize-gather | FileCheck %s --check-prefix=HPZ
// RUN: zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-release --zero-quantize-gather="bits=8 block=3" --zero-lower-to-runtime | grep -v zrt.buffer | FileCheck %s --check-prefix=LOWER
// RUN: not zero-opt %S/../Inputs/mlp.mlir --zero-partition="dp=4" --zero-quantize-gather="bits=3" 2>&1 | FileCheck %s --check-prefix=BITS

// Tests that qwZ turns every world gather of fp32 shards (single, bucketed)
// into quantize, gathers of the bytes and of the scales, and dequantize.
// qwZ around a single gather: the owner quantizes its 4-element shard in
// blocks of 3 (4 int8 bytes, 2 scales), the bytes and the scales are gathered
// (x4), and the dequantize sees one chunk per source rank. The views, the
// compute and the release now read the dequantized parameter.
// CHECK-LABEL: func.func @forward
// CHECK:      %[[W1:.+]] = ml_program.global_load @w1 : tensor<4xf32>
// CHECK-NEXT: %[[Q:.+]], %[[S:.+]] = zero.quantize %[[W1]] {bits = 8 : i64, block = 3 : i64, chunks = 1 : i64, zero.stream = "comm"} : tensor<4xf32> -> tensor<4xi8>, tensor<2xf32>
// CHECK-NEXT: %[[QG:.+]] = zero.all_gather %[[Q]] {world = 4 : i64} : tensor<4xi8> -> tensor<16xi8>
// CHECK-NEXT: %[[SG:.+]] = zero.all_gather %[[S]] {world = 4 : i64} : tensor<2xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[DQ:.+]] = zero.dequantize %[[QG]], %[[SG]] {bits = 8 : i64, block = 3 : i64, chunks = 4 : i64, zero.stream = "comm"} : tensor<16xi8>, tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[U:.+]] = onnx.Slice %[[DQ]]
// CHECK-NEXT: %[[R:.+]] = onnx.Reshape %[[U]]
// CHECK-NEXT: onnx.MatMul %{{.+}}, %[[R]]
// CHECK-NEXT: zero.release %[[R]]
// Every sharded parameter goes through it; no fp32 gather is left.
// CHECK-COUNT-2: zero.dequantize
// CHECK-NOT: zero.all_gather %{{.+}} : tensor<{{[0-9]+}}xf32> -> tensor<{{[0-9]+}}xf32>
// CHECK: return

// A bucket of three shards: each quantized on its own (int4: ceil(s/2)
// bytes, ceil(s/2) scales with blocks of 2), one bucketed gather of the bytes
// and one of the scales, one dequantize per member.
// BUCKET:      %[[Q1:.+]], %[[S1:.+]] = zero.quantize %w1 {bits = 4 : i64, block = 2 : i64, chunks = 1 : i64, zero.stream = "comm"} : tensor<4xf32> -> tensor<2xi8>, tensor<2xf32>
// BUCKET-NEXT: %[[Q2:.+]], %[[S2:.+]] = zero.quantize %b1 {{.+}} : tensor<2xf32> -> tensor<1xi8>, tensor<1xf32>
// BUCKET-NEXT: %[[Q3:.+]], %[[S3:.+]] = zero.quantize %w2 {{.+}} : tensor<3xf32> -> tensor<2xi8>, tensor<2xf32>
// BUCKET-NEXT: %[[QB:.+]]:3 = zero.bucket_all_gather %[[Q1]], %[[Q2]], %[[Q3]] {world = 4 : i64} : tensor<2xi8>, tensor<1xi8>, tensor<2xi8> -> tensor<8xi8>, tensor<4xi8>, tensor<8xi8>
// BUCKET-NEXT: %[[SB:.+]]:3 = zero.bucket_all_gather %[[S1]], %[[S2]], %[[S3]] {world = 4 : i64} : tensor<2xf32>, tensor<1xf32>, tensor<2xf32> -> tensor<8xf32>, tensor<4xf32>, tensor<8xf32>
// BUCKET-NEXT: zero.dequantize %[[QB]]#0, %[[SB]]#0 {bits = 4 : i64, block = 2 : i64, chunks = 4 : i64, zero.stream = "comm"} : tensor<8xi8>, tensor<8xf32> -> tensor<16xf32>
// BUCKET-NEXT: zero.dequantize %[[QB]]#1, %[[SB]]#1 {{.+}} -> tensor<8xf32>
// BUCKET-NEXT: zero.dequantize %[[QB]]#2, %[[SB]]#2 {{.+}} -> tensor<12xf32>

// Persistent parameters are not gathered and stay exact; hpZ's in-group
// re-gather of @w stays fp32 (only world gathers are quantized); the
// secondary shard is taken from the dequantized parameter before its first
// use. Default format: int8, blocks of 2048.
// HPZ: zero.process_group @hpz {group_size = 2 : i64, ranks = array<i64: 0, 1, 2, 3>}
// HPZ-LABEL: func.func @forward
// HPZ:      zero.quantize %w {bits = 8 : i64, block = 2048 : i64, chunks = 1 : i64, zero.stream = "comm"} : tensor<4xf32> -> tensor<4xi8>, tensor<1xf32>
// HPZ:      %[[W:.+]] = zero.dequantize
// HPZ:      %[[SEC:.+]] = zero.local_shard %[[W]] {group = @hpz, world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// HPZ-NEXT: onnx.MatMul
// HPZ:      %[[B:.+]] = ml_program.global_load @b : tensor<4xf32>
// HPZ-NEXT: onnx.Add %{{.+}}, %[[B]]
// HPZ:      zero.quantize %v
// HPZ:      %[[RE:.+]] = zero.all_gather %[[SEC]] {group = @hpz, world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// HPZ-NEXT: %[[RV:.+]] = onnx.Reshape %[[RE]]
// HPZ-NEXT: onnx.MatMul %{{.+}}, %[[RV]]
// HPZ-NEXT: zero.release %[[RV]]
// HPZ-NOT: zero.quantize

// Lowered, the quantize and dequantize run on the communication stream next
// to the gathers: compute waits only where it reads the parameter.
// LOWER:      zrt.kernel "Quantize" on @comm [@[[SH:.+]]] -> [@[[QB:.+]], @[[SB:.+]]] {bits = 8 : i64, block = 3 : i64, chunks = 1 : i64}
// LOWER-NEXT: zrt.collective "AllGather" on @comm group @world [@[[QB]]] -> [@[[QG:.+]]] {}
// LOWER-NEXT: zrt.collective "AllGather" on @comm group @world [@[[SB]]] -> [@[[SG:.+]]] {}
// LOWER-NEXT: zrt.kernel "Dequantize" on @comm [@[[QG]], @[[SG]]] -> [@{{.+}}] {bits = 8 : i64, block = 3 : i64, chunks = 4 : i64}
// LOWER-NEXT: zrt.record [[E:[0-9]+]] on @comm
// LOWER-NEXT: zrt.wait [[E]] on @compute
// LOWER-NEXT: zrt.kernel "MatMul" on @compute

// BITS: zero-quantize-gather: bits must be 8 or 4, got 3
