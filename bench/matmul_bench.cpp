//===- matmul_bench.cpp - MatMul/Gemm kernels vs OpenBLAS sgemm -----------===//
//
// Times the runtime's MatMul and Gemm kernels at GPT-2-small's shapes
// (128 tokens) and reports their throughput as a fraction of a direct
// cblas_sgemm call on the same operands, in the same process.
// Usage: zrt-matmul-bench [threads] [repeats]
//
//===----------------------------------------------------------------------===//

#include "zrt/Kernel.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

double seconds(const std::function<void()> &fn, int repeats) {
  fn(); // warm up
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Case {
  std::string name;
  int64_t batch, m, k, n;
  bool gemmTransB; ///< run as Gemm(transB=1) with B stored [n, k]
};

} // namespace

int main(int argc, char **argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  zrt::KernelTable table;
  zrt::registerCpuKernels(table);
  zrt::KernelContext ctx;
  ctx.numThreads = threads;
  // The runtime's CPU backend hands kernels a pool of `threads` workers; a
  // fork/join over std::thread gives the kernel the same parallelism here.
  ctx.parallelFor = [threads](int64_t n,
                              const std::function<void(int64_t, int64_t)> &fn) {
    int parts = int(std::min<int64_t>(n, threads));
    std::vector<std::thread> workers;
    for (int i = 1; i < parts; ++i)
      workers.emplace_back([&, i] { fn(n * i / parts, n * (i + 1) / parts); });
    fn(0, n / parts);
    for (std::thread &t : workers)
      t.join();
  };
  std::vector<Case> cases = {
      {"c_attn  Gemm 128x768 * 768x2304", 1, 128, 768, 2304, false},
      {"c_proj  Gemm 128x768 * 768x768", 1, 128, 768, 768, false},
      {"c_fc    Gemm 128x768 * 768x3072", 1, 128, 768, 3072, false},
      {"mlp out Gemm 128x3072 * 3072x768", 1, 128, 3072, 768, false},
      {"lm_head Gemm 128x768 * (50257x768)^T", 1, 128, 768, 50257, true},
      {"scores  MatMul 12 x 128x64 * 64x128", 12, 128, 64, 128, false},
      {"context MatMul 12 x 128x128 * 128x64", 12, 128, 128, 64, false},
  };
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::printf("%-40s %10s %10s %9s\n", "shape", "kernel GF/s", "sgemm GF/s", "fraction");
  for (const Case &c : cases) {
    std::vector<float> a(c.batch * c.m * c.k), b(c.batch * c.k * c.n), y(c.batch * c.m * c.n);
    for (float &v : a) v = dist(rng);
    for (float &v : b) v = dist(rng);
    zrt::TensorRef ta{a.data(), zrt::DType::F32, {c.batch, c.m, c.k}};
    zrt::TensorRef tb{b.data(), zrt::DType::F32,
                      c.gemmTransB ? std::vector<int64_t>{c.n, c.k}
                                   : std::vector<int64_t>{c.batch, c.k, c.n}};
    zrt::TensorRef ty{y.data(), zrt::DType::F32, {c.batch, c.m, c.n}};
    zrt::AttrMap attrs;
    const char *op = "MatMul";
    if (c.batch == 1) {
      op = "Gemm";
      ta.shape = {c.m, c.k};
      ty.shape = {c.m, c.n};
      if (!c.gemmTransB)
        tb.shape = {c.k, c.n};
      attrs.set("transB", zrt::AttrValue{{c.gemmTransB ? 1 : 0}, {}, ""});
    }
    zrt::KernelFn fn = table.lookup(op);
    double tk = seconds([&] { (void)fn(ctx, {ta, tb}, {ty}, attrs); }, repeats);
    openblas_set_num_threads(threads);
    double tb_ = seconds(
        [&] {
          for (int64_t i = 0; i < c.batch; ++i)
            cblas_sgemm(CblasRowMajor, CblasNoTrans,
                        c.gemmTransB ? CblasTrans : CblasNoTrans, int(c.m), int(c.n),
                        int(c.k), 1.0f, a.data() + i * c.m * c.k, int(c.k),
                        b.data() + i * c.k * c.n, c.gemmTransB ? int(c.k) : int(c.n), 0.0f,
                        y.data() + i * c.m * c.n, int(c.n));
        },
        repeats);
    double flops = 2.0 * c.batch * c.m * c.n * c.k;
    std::printf("%-40s %10.1f %10.1f %9.2f\n", c.name.c_str(), flops / tk / 1e9,
                flops / tb_ / 1e9, tb_ / tk);
  }
  return 0;
}
