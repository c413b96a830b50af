//===- matmul_bench.cpp - MatMul/Gemm kernels vs OpenBLAS sgemm -----------===//
//
// Times the runtime's MatMul and Gemm kernels at GPT-2-small's shapes
// (128 tokens by default) and reports their throughput as a fraction of a
// direct cblas_sgemm call on the same operands (OpenBLAS's own threading at
// the same thread count), in the same process.
//
// The kernel runs as in zero-run: on the CPU backend's persistent ThreadPool
// (cpu/ThreadPool.h), with OpenBLAS single-threaded. Both sides are warmed up
// (OpenBLAS's first call on a thread maps its buffers), then timed, `rounds`
// times `repeats` calls each; each figure is the median over all timed calls,
// fraction = sgemm median / kernel median. At one thread the kernel and sgemm
// calls alternate one by one, and a second fraction compares the calling
// thread's CPU time (robust to other processes sharing the cores). At more
// threads they alternate in blocks of `repeats` calls: OpenBLAS's workers spin
// for a while after a multi-threaded call (~0.1 s) and would take cores from
// the kernel, so the bench sleeps `settle_ms` after each sgemm block.
//
// Each product runs twice through the kernel (PackedGemm's, for the ISA of
// cpuIsa()): with B an ordinary operand (a gathered or trained weight: each
// task packs its panel of B just before using it) and with B a constant
// operand (KernelContext::constants: B packed once, as zero-run runs an
// inference program's weights; "packed" columns). Operands are hot in cache in both: the bench measures
// the kernels, not the cold weight reads of a whole model.
//
// Usage: zrt-matmul-bench [threads] [repeats] [rounds] [tokens] [settle_ms]
//                         [bf16]
//   (defaults: 2 threads, 10 repeats, 5 rounds, 128 tokens, 300 ms); tokens
//   > 128 also multiplies the attention products (tokens / 128 sequences).
//
// With `bf16` last it compares the kernel on bf16 operands (results in bf16,
// as a bf16 training step runs them) against the same kernel on f32 operands,
// call by call in the same process, at the forward shapes and at the
// backward ones of a training step (dX = dY W^T, dW = X^T dY): the column
// "bf16/f32" is the ratio of the medians (below 1: bf16 is faster).
//
//===----------------------------------------------------------------------===//

#include "cpu/ThreadPool.h"
#include "cpu/kernels/PackedGemm.h"
#include "zrt/Kernel.h"
#include "zrt/CpuBackend.h"

#include "KernelHarness.h" // TestConstants: a ConstantOperands keeping prepared forms
#include "kernels/KernelSupport.h" // narrowHalfRow

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" void openblas_set_num_threads(int);
extern "C" char *openblas_get_corename(void);

namespace {

using Clock = std::chrono::steady_clock;

double threadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// Wall and calling-thread CPU seconds of each timed call.
struct Times {
  std::vector<double> wall, cpu;
  /// Times one call of fn.
  void time(const std::function<void()> &fn) {
    const double c0 = threadCpuSeconds();
    const auto start = Clock::now();
    fn();
    wall.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    cpu.push_back(threadCpuSeconds() - c0);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Case {
  std::string name;
  int64_t batch, m, k, n;
  bool gemmTransB; ///< run as Gemm(transB=1) with B stored [n, k]
  bool bias;       ///< Gemm with C = a [n] bias (beta 1)
  bool gemmTransA = false; ///< Gemm(transA=1) with A stored [k, m]
};

/// `v` rounded to bf16 (round to nearest even, as narrowHalfRow).
std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  zrt::kernels::narrowHalfRow(zrt::DType::BF16, v.data(), out.data(), int64_t(v.size()));
  return out;
}

/// The bf16 comparison: for each case the Gemm kernel on bf16 operands and
/// on f32 ones, alternating call by call, medians of the wall times.
int compareBf16(const zrt::KernelTable &table, const zrt::KernelContext &ctx,
                int threads, int repeats, int rounds, int64_t t) {
  const std::string tk = std::to_string(t);
  const std::vector<Case> cases = {
      {"fwd c_attn  " + tk + "x768 * 768x2304 +bias", 1, t, 768, 2304, false, true},
      {"fwd c_fc    " + tk + "x768 * 768x3072 +bias", 1, t, 768, 3072, false, true},
      {"fwd mlp out " + tk + "x3072 * 3072x768 +bias", 1, t, 3072, 768, false, true},
      {"fwd lm_head " + tk + "x768 * (50257x768)^T", 1, t, 768, 50257, true, false},
      {"dX  c_fc    " + tk + "x3072 * (768x3072)^T", 1, t, 3072, 768, true, false},
      {"dX  lm_head " + tk + "x50257 * 50257x768", 1, t, 50257, 768, false, false},
      {"dW  c_fc    (" + tk + "x768)^T * " + tk + "x3072", 1, 768, t, 3072, false,
       false, true},
      {"dW  lm_head (" + tk + "x50257)^T * " + tk + "x768", 1, 50257, t, 768, false,
       false, true},
  };
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::printf("threads %d, %d rounds x %d calls each side, medians; kernel ISA %s\n",
              threads, rounds, repeats, zrt::cpu::cpuIsaName(zrt::cpu::cpuIsa()));
  std::printf("%-44s %9s %9s %9s\n", "shape", "f32 ms", "bf16 ms", "bf16/f32");
  for (const Case &c : cases) {
    std::vector<float> a(size_t(c.m * c.k)), b(size_t(c.k * c.n)),
        y(size_t(c.m * c.n)), bias(size_t(c.n));
    for (auto *v : {&a, &b, &bias})
      for (float &x : *v)
        x = dist(rng);
    std::vector<uint16_t> ah = toBf16(a), bh = toBf16(b), biash = toBf16(bias),
                          yh(y.size());
    const std::vector<int64_t> aShape = c.gemmTransA ? std::vector<int64_t>{c.k, c.m}
                                                     : std::vector<int64_t>{c.m, c.k};
    const std::vector<int64_t> bShape = c.gemmTransB ? std::vector<int64_t>{c.n, c.k}
                                                     : std::vector<int64_t>{c.k, c.n};
    zrt::AttrMap attrs;
    attrs.set("transA", zrt::AttrValue{{c.gemmTransA ? 1 : 0}, {}, ""});
    attrs.set("transB", zrt::AttrValue{{c.gemmTransB ? 1 : 0}, {}, ""});
    auto operands = [&](zrt::DType dt, void *pa, void *pb, void *pbias, void *py) {
      std::vector<zrt::TensorRef> in = {{pa, dt, aShape}, {pb, dt, bShape}};
      if (c.bias)
        in.push_back(zrt::TensorRef{pbias, dt, {c.n}});
      return std::make_pair(in, zrt::TensorRef{py, dt, {c.m, c.n}});
    };
    const auto f32 = operands(zrt::DType::F32, a.data(), b.data(), bias.data(), y.data());
    const auto half =
        operands(zrt::DType::BF16, ah.data(), bh.data(), biash.data(), yh.data());
    zrt::KernelFn fn = table.lookup("Gemm");
    auto call = [&](const std::pair<std::vector<zrt::TensorRef>, zrt::TensorRef> &io) {
      zrt::Status s = fn(ctx, io.first, {io.second}, attrs);
      if (!s.isOk()) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), s.message().c_str());
        std::exit(1);
      }
    };
    for (int i = 0; i < 2; ++i) {
      call(f32);
      call(half);
    }
    Times tf, th;
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < repeats; ++i) {
        tf.time([&] { call(f32); });
        th.time([&] { call(half); });
      }
    const double mf = median(tf.wall), mh = median(th.wall);
    std::printf("%-44s %9.3f %9.3f %9.3f\n", c.name.c_str(), mf * 1e3, mh * 1e3,
                mh / mf);
    std::fflush(stdout);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  const int64_t t = argc > 4 ? std::atoll(argv[4]) : 128;
  const int settleMs = argc > 5 ? std::atoi(argv[5]) : 300;
  zrt::KernelTable table;
  zrt::registerCpuKernels(table);
  // The CPU backend's pool, as zero-run builds it for --threads.
  zrt::cpu::ThreadPool pool(threads);
  zrt::KernelContext ctx;
  ctx.numThreads = threads;
  ctx.parallelFor = [&pool](int64_t n,
                            const std::function<void(int64_t, int64_t)> &fn) {
    pool.parallelFor(n, fn);
  };
  if (argc > 6 && std::string(argv[6]) == "bf16")
    return compareBf16(table, ctx, threads, repeats, rounds, t);
  zrt::test::TestConstants constants; // every operand constant
  zrt::KernelContext packedCtx = ctx;
  packedCtx.constants = &constants;
  const std::string tk = std::to_string(t);
  std::vector<Case> cases = {
      {"c_attn  Gemm " + tk + "x768 * 768x2304", 1, t, 768, 2304, false, false},
      {"c_attn  Gemm " + tk + "x768 * 768x2304 +bias", 1, t, 768, 2304, false,
       true},
      {"c_proj  Gemm " + tk + "x768 * 768x768", 1, t, 768, 768, false, false},
      {"c_fc    Gemm " + tk + "x768 * 768x3072", 1, t, 768, 3072, false, false},
      {"mlp out Gemm " + tk + "x3072 * 3072x768", 1, t, 3072, 768, false,
       false},
      {"lm_head Gemm " + tk + "x768 * (50257x768)^T", 1, t, 768, 50257, true,
       false},
      {"scores  MatMul 12 x 128x64 * 64x128", 12 * (t / 128 > 0 ? t / 128 : 1),
       128, 64, 128, false, false},
      {"context MatMul 12 x 128x128 * 128x64",
       12 * (t / 128 > 0 ? t / 128 : 1), 128, 128, 64, false, false},
  };
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::printf("threads %d, %d rounds x %d calls each side, medians; kernel ISA "
              "%s (ZRT_CPU_ISA lowers it), OpenBLAS core %s (OPENBLAS_CORETYPE "
              "sets it)\n",
              threads, rounds, repeats,
              zrt::cpu::cpuIsaName(zrt::cpu::cpuIsa()), openblas_get_corename());
  std::printf("%-44s %9s %9s %9s %9s %9s %8s %8s%s\n", "shape", "kernel ms",
              "packed ms", "sgemm ms", "kern GF/s", "pack GF/s", "fraction",
              "packed", threads == 1 ? " cpu frac cpu pack" : "");
  for (const Case &c : cases) {
    std::vector<float> a(size_t(c.batch * c.m * c.k)),
        b(size_t(c.batch * c.k * c.n)), y(size_t(c.batch * c.m * c.n)),
        bias(size_t(c.n));
    for (float &v : a)
      v = dist(rng);
    for (float &v : b)
      v = dist(rng);
    for (float &v : bias)
      v = dist(rng);
    zrt::TensorRef ta{a.data(), zrt::DType::F32, {c.batch, c.m, c.k}};
    zrt::TensorRef tb{b.data(), zrt::DType::F32, {c.batch, c.k, c.n}};
    zrt::TensorRef ty{y.data(), zrt::DType::F32, {c.batch, c.m, c.n}};
    std::vector<zrt::TensorRef> inputs = {ta, tb};
    zrt::AttrMap attrs;
    const char *op = "MatMul";
    if (c.batch == 1) {
      op = "Gemm";
      inputs[0].shape = {c.m, c.k};
      inputs[1].shape = c.gemmTransB ? std::vector<int64_t>{c.n, c.k}
                                     : std::vector<int64_t>{c.k, c.n};
      ty.shape = {c.m, c.n};
      attrs.set("transB", zrt::AttrValue{{c.gemmTransB ? 1 : 0}, {}, ""});
      if (c.bias)
        inputs.push_back(zrt::TensorRef{bias.data(), zrt::DType::F32, {c.n}});
    }
    zrt::KernelFn fn = table.lookup(op);
    auto call = [&](const zrt::KernelContext &context) {
      zrt::Status s = fn(context, inputs, {ty}, attrs);
      if (!s.isOk()) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), s.message().c_str());
        std::exit(1);
      }
    };
    auto kernel = [&] { call(ctx); };
    auto packed = [&] { call(packedCtx); };
    // The reference: OpenBLAS at `threads` threads, the whole product in one
    // call per batch matrix (beta 1 for the bias case: C's adds, no copy).
    auto sgemm = [&] {
      openblas_set_num_threads(threads);
      for (int64_t i = 0; i < c.batch; ++i)
        cblas_sgemm(CblasRowMajor, CblasNoTrans,
                    c.gemmTransB ? CblasTrans : CblasNoTrans, int(c.m),
                    int(c.n), int(c.k), 1.0f, a.data() + i * c.m * c.k,
                    int(c.k), b.data() + i * c.k * c.n,
                    c.gemmTransB ? int(c.k) : int(c.n), c.bias ? 1.0f : 0.0f,
                    y.data() + i * c.m * c.n, int(c.n));
    };
    auto settle = [&] {
      if (threads > 1) // let OpenBLAS's workers stop spinning
        std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
    };
    for (int i = 0; i < 3; ++i) {
      kernel();
      packed(); // the first call packs B
    }
    for (int i = 0; i < 3; ++i)
      sgemm();
    settle();
    Times tk, tp, ts;
    for (int r = 0; r < rounds; ++r) {
      if (threads == 1) { // nothing spins: alternate call by call
        for (int i = 0; i < repeats; ++i) {
          tk.time(kernel);
          tp.time(packed);
          ts.time(sgemm);
        }
        continue;
      }
      for (int i = 0; i < repeats; ++i) {
        tk.time(kernel);
        tp.time(packed);
      }
      for (int i = 0; i < repeats; ++i)
        ts.time(sgemm);
      settle();
    }
    const double mk = median(tk.wall), mp = median(tp.wall),
                 ms = median(ts.wall);
    const double flops = 2.0 * double(c.batch * c.m * c.n * c.k);
    std::printf("%-44s %9.3f %9.3f %9.3f %9.1f %9.1f %8.2f %8.2f",
                c.name.c_str(), mk * 1e3, mp * 1e3, ms * 1e3, flops / mk / 1e9,
                flops / mp / 1e9, ms / mk, ms / mp);
    // At one thread all of both runs on this thread: its CPU time is immune
    // to other processes taking the core (their cache traffic still counts).
    if (threads == 1)
      std::printf(" %8.2f %8.2f", median(ts.cpu) / median(tk.cpu),
                  median(ts.cpu) / median(tp.cpu));
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
