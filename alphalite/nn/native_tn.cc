// out[a, c, k] = sum_n v[a, n, c] * d[a, n, k], the weight gradient of the
// Winograd convolution (alphalite/nn/winograd.py). XLA's CPU runtime runs this
// batched product (small C x K outputs, long N) on one thread at about half
// the speed of its other products; here the batch is shared over XLA's own
// intra-op thread pool and each product is register-blocked.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// A block of outputs is CB rows by two vectors, all held in registers: 8 x 2
// of 16 floats with AVX-512's 32 registers; 6 x 2 of 8 floats with AVX2's 16
// (the AVX-512 shape compiled for AVX2 spills to the stack and ran 30x
// slower). tests/test_winograd.py builds both.
#ifdef __AVX512F__
typedef float vec __attribute__((vector_size(64)));
constexpr int CBMAX = 8;
#else
typedef float vec __attribute__((vector_size(32)));
constexpr int CBMAX = 6;
#endif
constexpr int W = sizeof(vec) / sizeof(float);
constexpr int KB = 2 * W;  // output columns per block; K % 32 == 0 makes it whole

// Rows go in chunks so that both inputs' rows stay in the L2 cache while
// every output block passes over them.
constexpr int64_t CHUNK = 256;

// out[c0:c0+CB, k0:k0+KB] (+)= rows n0..n1 of v[:, c0:c0+CB]^T d[:, k0:k0+KB].
template <int CB>
static void block(const float* v, const float* d, float* out, int64_t n0, int64_t n1, int64_t c, int64_t k,
                  int64_t c0, int64_t k0) {
  vec acc[CB][2] = {};
  if (n0 > 0) {
    for (int r = 0; r < CB; ++r) {
      std::memcpy(&acc[r][0], out + (c0 + r) * k + k0, sizeof(vec));
      std::memcpy(&acc[r][1], out + (c0 + r) * k + k0 + W, sizeof(vec));
    }
  }
  for (int64_t i = n0; i < n1; ++i) {
    vec d0, d1;
    std::memcpy(&d0, d + i * k + k0, sizeof(vec));
    std::memcpy(&d1, d + i * k + k0 + W, sizeof(vec));
    const float* vr = v + i * c + c0;
    for (int r = 0; r < CB; ++r) {
      acc[r][0] += vr[r] * d0;
      acc[r][1] += vr[r] * d1;
    }
  }
  for (int r = 0; r < CB; ++r) {
    std::memcpy(out + (c0 + r) * k + k0, &acc[r][0], sizeof(vec));
    std::memcpy(out + (c0 + r) * k + k0 + W, &acc[r][1], sizeof(vec));
  }
}

// One batch element; k is a multiple of KB.
static void product(const float* v, const float* d, float* out, int64_t n, int64_t c, int64_t k) {
  for (int64_t n0 = 0; n0 < n; n0 += CHUNK) {
    int64_t n1 = n0 + CHUNK < n ? n0 + CHUNK : n;
    for (int64_t k0 = 0; k0 < k; k0 += KB) {
      int64_t c0 = 0;
      for (; c0 + CBMAX <= c; c0 += CBMAX) block<CBMAX>(v, d, out, n0, n1, c, k, c0, k0);
      switch (c - c0) {  // fewer than CBMAX rows left
        case 7: block<7>(v, d, out, n0, n1, c, k, c0, k0); break;
        case 6: block<6>(v, d, out, n0, n1, c, k, c0, k0); break;
        case 5: block<5>(v, d, out, n0, n1, c, k, c0, k0); break;
        case 4: block<4>(v, d, out, n0, n1, c, k, c0, k0); break;
        case 3: block<3>(v, d, out, n0, n1, c, k, c0, k0); break;
        case 2: block<2>(v, d, out, n0, n1, c, k, c0, k0); break;
        case 1: block<1>(v, d, out, n0, n1, c, k, c0, k0); break;
        default: break;
      }
    }
  }
  if (n == 0) std::memset(out, 0, sizeof(float) * c * k);
}

struct Work {
  const float* v;
  const float* d;
  float* out;
  int64_t a, n, c, k;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};

  void run() {
    for (int64_t i; (i = next.fetch_add(1)) < a;) {
      product(v + i * n * c, d + i * n * k, out + i * c * k, n, c, k);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

static ffi::Error Impl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> v, ffi::Buffer<ffi::F32> d,
                       ffi::ResultBuffer<ffi::F32> out) {
  auto vd = v.dimensions(), dd = d.dimensions();
  if (vd.size() != 3 || dd.size() != 3 || vd[0] != dd[0] || vd[1] != dd[1] || dd[2] % 32 != 0)
    return ffi::Error::InvalidArgument("alphalite_tn: want v [A, N, C], d [A, N, K] with K % 32 == 0");
  auto w = std::make_shared<Work>();
  w->v = v.typed_data();
  w->d = d.typed_data();
  w->out = out->typed_data();
  w->a = vd[0];
  w->n = vd[1];
  w->c = vd[2];
  w->k = dd[2];
  // The caller works too and waits only for the products to finish, never
  // for a helper to start: a helper that starts late finds nothing left.
  for (int64_t t = 1; t < pool.num_threads() && t < w->a; ++t) pool.Schedule([w] { w->run(); });
  w->run();
  while (w->done.load(std::memory_order_acquire) < w->a) {
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(AlphaliteTn, Impl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
