// RUN: zero-opt %s --zero-report="nodes=2" 2>&1 >/dev/null | FileCheck %s --check-prefix=EVEN
// RUN: zero-opt %s --zero-report="nodes=1,3" 2>&1 >/dev/null | FileCheck %s --check-prefix=UNEVEN
// RUN: not zero-opt %s --zero-report="nodes=3" 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not zero-opt %s --zero-report="nodes=2,1" 2>&1 | FileCheck %s --check-prefix=SUM
// RUN: not zero-opt %s --zero-report="nodes=two" 2>&1 | FileCheck %s --check-prefix=SPEC
// RUN: not zero-opt %s --nodes=2 2>&1 | FileCheck %s --check-prefix=NOREPORT

// Tests zero-report's bytes across nodes: 4 ranks, each collective's sends
// worked out by hand for ranks numbered node by node. Over 4 ranks an
// all-gather or reduce-scatter runs in bit-reversed order (positions 0 2 1 3):
// the exchange one position apart (one block) is between nodes, the one two
// positions apart (two blocks) inside. An all-reduce doubles with the partner
// r^1 (inside), then r^2 (across), the whole buffer each time. The gathers
// gather arguments, not parameter shards: one row, "all_gather (updates)".

module attributes {zero.world_size = 4 : i64} {
  // hpZ-style groups {0,1} {2,3}; the across groups {0,2} {1,3}.
  zero.process_group @inside {group_size = 2 : i64, ranks = array<i64: 0, 1, 2, 3>}
  zero.process_group @across {group_size = 2 : i64, ranks = array<i64: 0, 2, 1, 3>}
  func.func @forward(%s: tensor<4xf32>, %g: tensor<16xf32>, %n: tensor<2xf32>,
                     %h: tensor<2xf32>, %a: tensor<4xf32>) -> (tensor<16xf32>, tensor<4xf32>, tensor<2xf32>, tensor<4xf32>, tensor<4xf32>) {
    // Blocks of 16 bytes; per rank 16 across, 32 inside.
    %0 = zero.all_gather %s {world = 4} : tensor<4xf32> -> tensor<16xf32>
    // The same exchanges for a 64-byte input (16-byte results).
    %1 = zero.reduce_scatter %g {world = 4} : tensor<16xf32> -> tensor<4xf32>
    // 8 bytes to r^1 (inside) and to r^2 (across).
    %2 = zero.all_reduce %n {world = 4} : tensor<2xf32> -> tensor<2xf32>
    // Inside the node: 8 bytes to the other member.
    %3 = zero.all_gather %h {world = 2, group = @inside} : tensor<2xf32> -> tensor<4xf32>
    // Across: block 8 bytes to the member on the other node.
    %4 = zero.all_to_all %a {world = 2, group = @across} : tensor<4xf32> -> tensor<4xf32>
    return %0, %1, %2, %3, %4 : tensor<16xf32>, tensor<4xf32>, tensor<2xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// Per step, all ranks: the world's all-gather 4 x 16 across, 4 x 32 inside,
// least D(m-1) = 64 x 1; the group's 4 x 8 inside. All-reduce 4 x 8 each
// way; least 2D(m-1) = 16.
// EVEN: == zero-report: across nodes, 2 nodes x 2 ranks
// EVEN:      all_gather (updates)       8     64    160     64
// EVEN-NEXT: all_reduce                 4     32     32     16
// EVEN-NEXT: all_to_all (qgZ, across)   4     32      0     32
// EVEN-NEXT: reduce_scatter             4     64    128     64
// EVEN-NEXT: total                            192    320    176
// EVEN-NEXT: across nodes per rank {{.*}}: 48 48 48 48

// Node 0 holds rank 0, node 1 ranks 1-3. Positions 0 2 1 3: rank 0 sends a
// block to rank 2 and two to rank 1, all across (48 bytes per gather); rank
// 1 one block to rank 3 and two to rank 0 (16 inside, 32 across); rank 2 one
// to rank 0 and two to 3 (16 across, 32 inside); rank 3 one to 1 and two to 2
// (48 inside). All-gather: 96 across, 96 inside; least D(m-1) = 64.
// All-reduce: 0->1 and 0->2 across, 1->0 across, 1->3, 2->3, 2->0 across,
// 3->2, 3->1: 32 across, 32 inside. Group {0,1} spans both nodes (8 + 8
// across, least 8), {2,3} one. All-to-all {0,2}: 16 across, {1,3}: 16 inside.
// Rank 0: 48 + 48 + 16 + 8 + 8 = 128; rank 1: 32 + 32 + 8 + 8 = 80;
// rank 2: 16 + 16 + 8 + 8 = 48; rank 3: 0.
// UNEVEN: == zero-report: across nodes, 2 nodes of 1, 3 ranks
// UNEVEN:      all_gather (updates)       8    112    112     80
// UNEVEN-NEXT: all_reduce                 4     32     32     16
// UNEVEN-NEXT: all_to_all (qgZ, across)   4     16     16     16
// UNEVEN-NEXT: reduce_scatter             4     96     96     64
// UNEVEN-NEXT: total                            256    256    176
// UNEVEN-NEXT: across nodes per rank {{.*}}: 128 80 48 0

// SPLIT: error: zero-report: nodes=3 does not split the program's 4 ranks evenly; give the ranks of each node instead, e.g. 3,1
// SUM: error: zero-report: nodes="2,1" places 3 ranks; the program runs on 4
// SPEC: error: zero-report: nodes="two": expected N (nodes) or the ranks of each node (3,1), each a positive integer
// NOREPORT: zero-opt: error: --nodes needs --report (it places the ranks for the report's bytes across nodes)
