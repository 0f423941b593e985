// Native CPU kernels of the Winograd convolution (alphalite/nn/winograd.py),
// XLA FFI calls that share their work over XLA's own intra-op thread pool.
//
// AlphaliteTn: out[a, c, k] = sum_n v[a, n, c] * d[a, n, k], the weight
// gradient. XLA's CPU runtime runs this batched product (small C x K outputs,
// long N) on one thread at about half the speed of its other products.
//
// AlphaliteWinograd(V): the forward convolution F(m x m, 3x3) fused per block
// of tiles: input transform, the (m+2)^2 products with the transformed filter
// and the output transform run on a block that stays in the L2 cache, where
// XLA wrote the transformed input and products out to memory in between
// (the V variant also writes the transformed input, kept for the backward).
#include <algorithm>
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

// ---------------------------------------------------------------------------
// The fused forward convolution.

// Tiles per block: two register blocks of rows. A block's transformed input
// and products ((m+2)^2 x TB x C and x K floats, 147 KB each for m = 4, C = K
// = 64) stay in the L2 cache between the three stages.
constexpr int TB = 2 * CBMAX;

struct Shape {
  int64_t b, h, w, c, k, m, n, th, tw, tiles;
};

// mb[0:R, k0:k0+KB] = vb[0:R, :] u[:, k0:k0+KB] for one transformed point.
template <int R>
static void rows(const float* vb, const float* u, float* mb, int64_t c, int64_t k, int64_t k0) {
  vec acc[R][2] = {};
  for (int64_t j = 0; j < c; ++j) {
    vec u0, u1;
    std::memcpy(&u0, u + j * k + k0, sizeof(vec));
    std::memcpy(&u1, u + j * k + k0 + W, sizeof(vec));
    for (int r = 0; r < R; ++r) {
      acc[r][0] += vb[r * c + j] * u0;
      acc[r][1] += vb[r * c + j] * u1;
    }
  }
  for (int r = 0; r < R; ++r) {
    std::memcpy(mb + r * k + k0, &acc[r][0], sizeof(vec));
    std::memcpy(mb + r * k + k0 + W, &acc[r][1], sizeof(vec));
  }
}

static void products(const float* vb, const float* u, float* mb, int64_t nt, int64_t c, int64_t k) {
  for (int64_t k0 = 0; k0 < k; k0 += KB) {
    int64_t r0 = 0;
    for (; r0 + CBMAX <= nt; r0 += CBMAX) rows<CBMAX>(vb + r0 * c, u, mb + r0 * k, c, k, k0);
    const float* v = vb + r0 * c;
    float* o = mb + r0 * k;
    switch (nt - r0) {  // fewer than CBMAX tiles left
      case 7: rows<7>(v, u, o, c, k, k0); break;
      case 6: rows<6>(v, u, o, c, k, k0); break;
      case 5: rows<5>(v, u, o, c, k, k0); break;
      case 4: rows<4>(v, u, o, c, k, k0); break;
      case 3: rows<3>(v, u, o, c, k, k0); break;
      case 2: rows<2>(v, u, o, c, k, k0); break;
      case 1: rows<1>(v, u, o, c, k, k0); break;
      default: break;
    }
  }
}

// dst[0:len] (+)= coef * src[0:len]; the loops vectorise over channels.
static inline void axpy(float* dst, const float* src, float coef, int64_t len, bool first) {
  if (first) {
    for (int64_t i = 0; i < len; ++i) dst[i] = coef * src[i];
  } else {
    for (int64_t i = 0; i < len; ++i) dst[i] += coef * src[i];
  }
}

struct Fwd {
  const float *x, *u, *bt, *at;
  float *y, *v;  // v may be null
  Shape s;
  int64_t blocks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};

  // B^T d B of tile t into vb[p * TB + i] (p the transformed point, i the
  // tile's row in the block); tmp holds n x n x C floats.
  void input_tile(int64_t t, int64_t i, float* vb, float* tmp) const {
    const int64_t n = s.n, c = s.c;
    const int64_t img = t / (s.th * s.tw), ti = (t / s.tw) % s.th, tj = t % s.tw;
    const int64_t r0 = ti * s.m - 1, c0 = tj * s.m - 1;
    // tmp[a, j] = sum_r bt[a, r] d[r, j] over the rows inside the board
    for (int64_t a = 0; a < n; ++a) {
      float* ta = tmp + a * n * c;
      std::fill(ta, ta + n * c, 0.0f);
      for (int64_t r = 0; r < n; ++r) {
        const float coef = bt[a * n + r];
        const int64_t row = r0 + r;
        if (coef == 0.0f || row < 0 || row >= s.h) continue;
        const int64_t j0 = std::max<int64_t>(0, -c0), j1 = std::min<int64_t>(n, s.w - c0);
        const float* src = x + ((img * s.h + row) * s.w + c0) * c;
        for (int64_t j = j0; j < j1; ++j) axpy(ta + j * c, src + j * c, coef, c, false);
      }
    }
    // vb[a * n + b] = sum_j tmp[a, j] bt[b, j]
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = 0; b < n; ++b) {
        float* dst = vb + ((a * n + b) * TB + i) * c;
        bool first = true;
        for (int64_t j = 0; j < n; ++j) {
          const float coef = bt[b * n + j];
          if (coef == 0.0f) continue;
          axpy(dst, tmp + (a * n + j) * c, coef, c, first);
          first = false;
        }
        if (first) std::fill(dst, dst + c, 0.0f);
      }
    }
  }

  // A^T M A of the block's row i, cropped into y; tmp holds m x n x K floats.
  void output_tile(int64_t t, int64_t i, const float* mb, float* tmp) const {
    const int64_t n = s.n, m = s.m, k = s.k;
    const int64_t img = t / (s.th * s.tw), ti = (t / s.tw) % s.th, tj = t % s.tw;
    // tmp[q, b] = sum_a at[q, a] M[a * n + b]
    for (int64_t q = 0; q < m; ++q) {
      for (int64_t b = 0; b < n; ++b) {
        float* dst = tmp + (q * n + b) * k;
        bool first = true;
        for (int64_t a = 0; a < n; ++a) {
          const float coef = at[q * n + a];
          if (coef == 0.0f) continue;
          axpy(dst, mb + ((a * n + b) * TB + i) * k, coef, k, first);
          first = false;
        }
        if (first) std::fill(dst, dst + k, 0.0f);
      }
    }
    // y[q, r] = sum_b tmp[q, b] at[r, b]
    for (int64_t q = 0; q < m; ++q) {
      const int64_t row = ti * m + q;
      if (row >= s.h) break;
      for (int64_t r = 0; r < m; ++r) {
        const int64_t col = tj * m + r;
        if (col >= s.w) break;
        float* dst = y + ((img * s.h + row) * s.w + col) * k;
        bool first = true;
        for (int64_t b = 0; b < n; ++b) {
          const float coef = at[r * n + b];
          if (coef == 0.0f) continue;
          axpy(dst, tmp + (q * n + b) * k, coef, k, first);
          first = false;
        }
        if (first) std::fill(dst, dst + k, 0.0f);
      }
    }
  }

  void run() {
    const int64_t nn = s.n * s.n, c = s.c, k = s.k;
    std::unique_ptr<float[]> vb(new float[nn * TB * c]), mb(new float[nn * TB * k]);
    std::unique_ptr<float[]> tmp(new float[std::max(nn * c, s.m * s.n * k)]);
    for (int64_t blk; (blk = next.fetch_add(1)) < blocks;) {
      const int64_t t0 = blk * TB, nt = std::min<int64_t>(TB, s.tiles - t0);
      for (int64_t i = 0; i < nt; ++i) input_tile(t0 + i, i, vb.get(), tmp.get());
      for (int64_t p = 0; p < nn; ++p) {
        products(vb.get() + p * TB * c, u + p * c * k, mb.get() + p * TB * k, nt, c, k);
        if (v) std::memcpy(v + (p * s.tiles + t0) * c, vb.get() + p * TB * c, sizeof(float) * nt * c);
      }
      for (int64_t i = 0; i < nt; ++i) output_tile(t0 + i, i, mb.get(), tmp.get());
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

static ffi::Error WinogradImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> u,
                               ffi::Buffer<ffi::F32> bt, ffi::Buffer<ffi::F32> at, float* y, float* v) {
  auto xd = x.dimensions(), ud = u.dimensions(), bd = bt.dimensions(), ad = at.dimensions();
  if (xd.size() != 4 || ud.size() != 3 || bd.size() != 2 || ad.size() != 2)
    return ffi::Error::InvalidArgument("alphalite_winograd: want x [B, H, W, C], u [N*N, C, K], bt [N, N], at [M, N]");
  auto w = std::make_shared<Fwd>();
  Shape& s = w->s;
  s.b = xd[0], s.h = xd[1], s.w = xd[2], s.c = xd[3], s.k = ud[2], s.m = ad[0], s.n = ad[1];
  if (bd[0] != s.n || bd[1] != s.n || s.n != s.m + 2 || ud[0] != s.n * s.n || ud[1] != s.c || s.k % KB != 0)
    return ffi::Error::InvalidArgument("alphalite_winograd: shapes do not agree (or K is not a multiple of 32)");
  s.th = (s.h + s.m - 1) / s.m, s.tw = (s.w + s.m - 1) / s.m, s.tiles = s.b * s.th * s.tw;
  w->x = x.typed_data(), w->u = u.typed_data(), w->bt = bt.typed_data(), w->at = at.typed_data();
  w->y = y, w->v = v;
  w->blocks = (s.tiles + TB - 1) / TB;
  for (int64_t t = 1; t < pool.num_threads() && t < w->blocks; ++t) pool.Schedule([w] { w->run(); });
  w->run();
  while (w->done.load(std::memory_order_acquire) < w->blocks) {
  }
  return ffi::Error::Success();
}

static ffi::Error WinogradY(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> u,
                            ffi::Buffer<ffi::F32> bt, ffi::Buffer<ffi::F32> at, ffi::ResultBuffer<ffi::F32> y) {
  return WinogradImpl(pool, x, u, bt, at, y->typed_data(), nullptr);
}

static ffi::Error WinogradYV(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> u,
                             ffi::Buffer<ffi::F32> bt, ffi::Buffer<ffi::F32> at, ffi::ResultBuffer<ffi::F32> y,
                             ffi::ResultBuffer<ffi::F32> v) {
  return WinogradImpl(pool, x, u, bt, at, y->typed_data(), v->typed_data());
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(AlphaliteWinograd, WinogradY,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(AlphaliteWinogradV, WinogradYV,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
