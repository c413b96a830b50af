// RUN: zero-opt %s --zero-pipeline="stage=3 dp=2 qwz=8" | FileCheck %s
// RUN: zero-opt %s --zero-pipeline="stage=3 dp=2 qwz=8 prefetch=2 bucket-bytes=65536" | FileCheck %s --check-prefix=BUCKET
// RUN: zero-opt %s --zero-pipeline="stage=3 dp=2 qwz=8" --report 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT

// Tests that a buffer (zero.buffer: what the exporter records as a module's
// registered buffer, here an additive causal mask of -inf above the diagonal)
// is not a parameter for ZeRO-3: DeepSpeed partitions parameters only, so the
// mask stays whole on every rank, is read by its load directly, and is in no
// gather, bucket or qwZ quantize, where a -inf would have no scale. The tied
// embedding and the query weight around it are sharded and quantized as ever.
// CHECK:      ml_program.global private @emb({{.*}}) : tensor<16xf32> {zero.full_type = tensor<8x4xf32>, zero.shard = #zero.shard<world = 2, numel = 32, padded_numel = 32>, zero.tensor = "emb"}
// CHECK-NEXT: ml_program.global private @mask({{.*}}) : tensor<3x3xf32> {zero.buffer, zero.tensor = "mask"}
// CHECK-NEXT: ml_program.global private @wq({{.*}}) : tensor<8xf32> {zero.full_type = tensor<4x4xf32>, zero.shard = #zero.shard<world = 2, numel = 16, padded_numel = 16>, zero.tensor = "wq"}
// CHECK-LABEL: func.func @forward
// CHECK:      zero.quantize %emb {{.+}} : tensor<16xf32> -> tensor<16xi8>, tensor<1xf32>
// CHECK:      %[[MASK:.+]] = ml_program.global_load @mask : tensor<3x3xf32>
// CHECK-NEXT: %[[WQ:.+]] = ml_program.global_load @wq : tensor<8xf32>
// CHECK-NEXT: zero.quantize %[[WQ]] {{.+}} : tensor<8xf32> -> tensor<8xi8>, tensor<1xf32>
// CHECK:      %[[S:.+]] = onnx.MatMul {{.+}} : (tensor<1x3x4xf32>, tensor<1x4x3xf32>) -> tensor<1x3x3xf32>
// CHECK-NEXT: onnx.Add %[[S]], %[[MASK]] : (tensor<1x3x3xf32>, tensor<3x3xf32>) -> tensor<1x3x3xf32>
// CHECK-NOT:  zero.quantize
// CHECK:      return

// With prefetch and buckets, the mask's load sits between the parameters'
// and joins no bucket: the bucket's members are the embedding and the query
// weight, quantized, and nothing of 3x3 (9 elements) or its shard is gathered.
// BUCKET-LABEL: func.func @forward
// BUCKET-DAG:  %[[QE:.+]], %[[SE:.+]] = zero.quantize %emb {{.+}} : tensor<16xf32> -> tensor<16xi8>, tensor<1xf32>
// BUCKET-DAG:  %[[QW:.+]], %[[SW:.+]] = zero.quantize %wq {{.+}} : tensor<8xf32> -> tensor<8xi8>, tensor<1xf32>
// BUCKET:      zero.bucket_all_gather %[[QE]], %[[QW]] {world = 2 : i64} : tensor<16xi8>, tensor<8xi8> -> tensor<32xi8>, tensor<16xi8>
// BUCKET-NEXT: zero.bucket_all_gather %[[SE]], %[[SW]] {world = 2 : i64} : tensor<1xf32>, tensor<1xf32> -> tensor<2xf32>, tensor<2xf32>
// BUCKET:      %[[MASK:.+]] = ml_program.global_load @mask : tensor<3x3xf32>
// BUCKET-NOT:  zero.quantize
// BUCKET:      onnx.Add %{{.+}}, %[[MASK]] : (tensor<1x3x3xf32>, tensor<3x3xf32>) -> tensor<1x3x3xf32>
// BUCKET-NOT:  zero.quantize
// BUCKET:      return

// The report counts the mask among the bytes each rank holds whole
// (persistent): 9 x 4 = 36.
// REPORT: parameters: 3 tensors, 57 elements, 228 bytes (Psi); sharded 192 bytes (Psi_s), persistent 36 bytes
// REPORT: persistent parameters (bytes){{ +}}36
module {
  ml_program.global private @emb(#ml_program.extern : tensor<8x4xf32>) : tensor<8x4xf32> {zero.tensor = "emb"}
  ml_program.global private @mask(#ml_program.extern : tensor<3x3xf32>) : tensor<3x3xf32> {zero.buffer, zero.tensor = "mask"}
  ml_program.global private @wq(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {zero.tensor = "wq"}
  func.func @forward(%ids: tensor<1x3xi64>) -> tensor<1x3x8xf32> {
    %emb = ml_program.global_load @emb : tensor<8x4xf32>
    %h = onnx.Gather %emb, %ids : (tensor<8x4xf32>, tensor<1x3xi64>) -> tensor<1x3x4xf32>
    %mask = ml_program.global_load @mask : tensor<3x3xf32>
    %wq = ml_program.global_load @wq : tensor<4x4xf32>
    %q = onnx.MatMul %h, %wq : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
    %ht = onnx.Transpose %h {perm = array<i64: 0, 2, 1>} : (tensor<1x3x4xf32>) -> tensor<1x4x3xf32>
    %s = onnx.MatMul %q, %ht : (tensor<1x3x4xf32>, tensor<1x4x3xf32>) -> tensor<1x3x3xf32>
    %sm = onnx.Add %s, %mask : (tensor<1x3x3xf32>, tensor<3x3xf32>) -> tensor<1x3x3xf32>
    %p = onnx.Softmax %sm {axis = 2 : i64} : (tensor<1x3x3xf32>) -> tensor<1x3x3xf32>
    %c = onnx.MatMul %p, %h : (tensor<1x3x3xf32>, tensor<1x3x4xf32>) -> tensor<1x3x4xf32>
    %et = onnx.Transpose %emb {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %y = onnx.MatMul %c, %et : (tensor<1x3x4xf32>, tensor<4x8xf32>) -> tensor<1x3x8xf32>
    return %y : tensor<1x3x8xf32>
  }
}
