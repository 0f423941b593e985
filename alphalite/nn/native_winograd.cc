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
//
// AlphaliteWinogradDw: the weight gradient from x and dy, B^T x B and
// A dy A^T fused in per block of tiles, in a fixed order (the same bits
// every run).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

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

// out[c0:c0+CB, k0:k0+KB] (+ if add)= rows n0..n1 of v[:, c0:c0+CB]^T d[:, k0:k0+KB].
template <int CB>
static void block(const float* v, const float* d, float* out, int64_t n0, int64_t n1, int64_t c, int64_t k,
                  int64_t c0, int64_t k0, bool add) {
  vec acc[CB][2] = {};
  if (add) {
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

// out (+ if add)= rows n0..n1 of v^T d, for all c x k outputs.
static void rows_tn(const float* v, const float* d, float* out, int64_t n0, int64_t n1, int64_t c, int64_t k,
                    bool add) {
  for (int64_t k0 = 0; k0 < k; k0 += KB) {
    int64_t c0 = 0;
    for (; c0 + CBMAX <= c; c0 += CBMAX) block<CBMAX>(v, d, out, n0, n1, c, k, c0, k0, add);
    switch (c - c0) {  // fewer than CBMAX rows left
      case 7: block<7>(v, d, out, n0, n1, c, k, c0, k0, add); break;
      case 6: block<6>(v, d, out, n0, n1, c, k, c0, k0, add); break;
      case 5: block<5>(v, d, out, n0, n1, c, k, c0, k0, add); break;
      case 4: block<4>(v, d, out, n0, n1, c, k, c0, k0, add); break;
      case 3: block<3>(v, d, out, n0, n1, c, k, c0, k0, add); break;
      case 2: block<2>(v, d, out, n0, n1, c, k, c0, k0, add); break;
      case 1: block<1>(v, d, out, n0, n1, c, k, c0, k0, add); break;
      default: break;
    }
  }
}

// One batch element; k is a multiple of KB.
static void product(const float* v, const float* d, float* out, int64_t n, int64_t c, int64_t k) {
  for (int64_t n0 = 0; n0 < n; n0 += CHUNK) rows_tn(v, d, out, n0, std::min(n0 + CHUNK, n), c, k, n0 > 0);
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

// Runs job->run() on the caller and up to tasks - 1 threads of XLA's pool;
// returns once job->done reaches tasks. The caller works too and waits only
// for the tasks to finish, never for a helper to start: a helper that starts
// late finds nothing left. The shared job outlives every helper's lambda.
template <typename Job>
static void share(ffi::ThreadPool& pool, const std::shared_ptr<Job>& job, int64_t tasks) {
  for (int64_t t = 1; t < pool.num_threads() && t < tasks; ++t) pool.Schedule([job] { job->run(); });
  job->run();
  while (job->done.load(std::memory_order_acquire) < tasks) {
  }
}

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
  share(pool, w, w->a);
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

  // Tile t's image, tile row and tile column (tiles run over images, then
  // rows, then columns, as winograd.input_transform lays them out).
  struct Tile {
    int64_t img, ti, tj;
  };
  Tile tile(int64_t t) const { return {t / (th * tw), (t / tw) % th, t % tw}; }
};

// The transform matrices B^T [N, N] and A^T [N - 2, N] that
// winograd.matrices(m) gives for m = 3 and 4 (N = m + 2), the tiles of
// 9x9 and 19x19, as constants: the compiler leaves out their zero terms
// (half of B^T) and turns their +-1 terms into adds. b6c64 training steps
// 6-7% faster on an Intel Xeon (9x9 and 19x19, batch 64, paired in one
// process). Other matrices (another m, or these changed in winograd.py;
// tests/test_winograd.py checks they agree) run the general code, which
// reads them.
template <int N>
struct Known {
  static constexpr bool has = false;
  static constexpr float bt[N * N] = {};
  static constexpr float at[(N - 2) * N] = {};
};
template <>
struct Known<5> {
  static constexpr bool has = true;
  static constexpr float bt[25] = {2, -1, -2, 1, 0, 0, -2, -1, 1, 0, 0, 2, -3, 1, 0, 0, -1, 0, 1, 0, 0, 2, -1, -2, 1};
  static constexpr float at[15] = {1, 1, 1, 1, 0, 0, 1, -1, 2, 0, 0, 1, 1, 4, 1};
};
template <>
struct Known<6> {
  static constexpr bool has = true;
  static constexpr float bt[36] = {4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
                                   0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0, 0, 4, 0, -5, 0, 1};
  static constexpr float at[24] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};
};

// Whether bt and at are the constants of Known<n>.
static bool known(int64_t n, const float* bt, const float* at) {
  auto same = [&](auto k) {
    using K = Known<decltype(k)::value>;
    return K::has && std::memcmp(bt, K::bt, sizeof(K::bt)) == 0 && std::memcmp(at, K::at, sizeof(K::at)) == 0;
  };
  switch (n) {
    case 5: return same(std::integral_constant<int, 5>{});
    case 6: return same(std::integral_constant<int, 6>{});
    default: return false;
  }
}

// f(std::integral_constant<int, n>, std::bool_constant<K>) for n = m + 2 of
// 4 to 7, so that the per-tile loops unroll for the board's tile size; K:
// the matrices are Known<n>'s.
template <typename F>
static void with_n(int64_t n, bool k, F&& f) {
  switch (n) {
    case 4: f(std::integral_constant<int, 4>{}, std::false_type{}); break;
    case 5: k ? f(std::integral_constant<int, 5>{}, std::true_type{})
              : f(std::integral_constant<int, 5>{}, std::false_type{}); break;
    case 6: k ? f(std::integral_constant<int, 6>{}, std::true_type{})
              : f(std::integral_constant<int, 6>{}, std::false_type{}); break;
    default: f(std::integral_constant<int, 7>{}, std::false_type{}); break;
  }
}

// acc = x c, or acc += x c once started; a zero c of the constant matrices
// (K) adds nothing and is left out (the loops around it are unrolled).
template <bool K, typename V>
static inline void madd(V& acc, bool& started, const V& x, float c) {
  if (K && c == 0.0f) return;
  if (started) {
    acc += x * c;
  } else {
    acc = x * c;
    started = true;
  }
}

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

// One tile's transform for a vector of channels (V: vec, or float for the
// channels left over), its n x n values held in registers: the tile is read
// and written once per vector. N is a template argument so that the loops
// unroll.

// v[a][b] = sum_r sum_j bt[a][r] bt[b][j] d[r][j]; d's rows and columns
// outside [lo, hi) are zero (the board's padding). src(r, j) points at d[r][j].
template <int N, bool K, typename V, typename Src>
static inline void input_vec(const float* bt_, int r_lo, int r_hi, int j_lo, int j_hi, Src src, float* const* dst) {
  const float* bt = K ? Known<N>::bt : bt_;
  V d[N][N];
#pragma GCC unroll 8
  for (int r = 0; r < N; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      if (r >= r_lo && r < r_hi && j >= j_lo && j < j_hi) {
        std::memcpy(&d[r][j], src(r, j), sizeof(V));
      } else {
        std::memset(&d[r][j], 0, sizeof(V));
      }
    }
  V t[N][N];
#pragma GCC unroll 8
  for (int a = 0; a < N; ++a)
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      V acc{};
      bool started = false;
#pragma GCC unroll 8
      for (int r = 0; r < N; ++r) madd<K>(acc, started, d[r][j], bt[a * N + r]);
      t[a][j] = acc;
    }
#pragma GCC unroll 8
  for (int a = 0; a < N; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < N; ++b) {
      V acc{};
      bool started = false;
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) madd<K>(acc, started, t[a][j], bt[b * N + j]);
      std::memcpy(dst[a * N + b], &acc, sizeof(V));
    }
}

// y[q][r] = sum_a sum_b at[q][a] at[r][b] M[a][b] for q < q_hi, r < r_hi
// (the tile's part inside the board); M[a][b] at mb + (a N + b) stride,
// y[q][r] at y + q row + r col.
template <int N, bool K>
static inline void output_vec(const float* at_, int q_hi, int r_hi, const float* mb, int64_t stride, float* y,
                              int64_t row, int64_t col) {
  const float* at = K ? Known<N>::at : at_;
  vec mm[N][N];
#pragma GCC unroll 8
  for (int a = 0; a < N; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < N; ++b) std::memcpy(&mm[a][b], mb + (a * N + b) * stride, sizeof(vec));
#pragma GCC unroll 8
  for (int q = 0; q < N - 2; ++q) {
    if (q >= q_hi) break;
    vec t[N];
#pragma GCC unroll 8
    for (int b = 0; b < N; ++b) {
      vec acc{};
      bool started = false;
#pragma GCC unroll 8
      for (int a = 0; a < N; ++a) madd<K>(acc, started, mm[a][b], at[q * N + a]);
      t[b] = acc;
    }
#pragma GCC unroll 8
    for (int r = 0; r < N - 2; ++r) {
      if (r >= r_hi) break;
      vec acc{};
      bool started = false;
#pragma GCC unroll 8
      for (int b = 0; b < N; ++b) madd<K>(acc, started, t[b], at[r * N + b]);
      std::memcpy(y + q * row + r * col, &acc, sizeof(vec));
    }
  }
}

// B^T d B of tile t of x [B, H, W, C] into vb[p ps + i C] (p the
// transformed point, ps the stride between points, i the tile's row in its
// block).
template <int N, bool K>
static void input_tile(const Shape& s, const float* x, const float* bt, int64_t t, int64_t i, float* vb,
                       int64_t ps) {
  const int64_t c = s.c;
  const auto [img, ti, tj] = s.tile(t);
  const int64_t r0 = ti * s.m - 1, c0 = tj * s.m - 1;
  const int r_lo = r0 < 0 ? -r0 : 0, r_hi = (int)std::min<int64_t>(N, s.h - r0);
  const int j_lo = c0 < 0 ? -c0 : 0, j_hi = (int)std::min<int64_t>(N, s.w - c0);
  // pixel (r0 + r, c0 + j) of the image, only read inside the board
  const float* base = x + (img * s.h * s.w) * c;
  const int64_t row = s.w * c;
  float* dst[N * N];
  int64_t k = 0;
  for (; k + W <= c; k += W) {
    for (int p = 0; p < N * N; ++p) dst[p] = vb + p * ps + i * c + k;
    input_vec<N, K, vec>(bt, r_lo, r_hi, j_lo, j_hi,
                         [&](int r, int j) { return base + (r0 + r) * row + (c0 + j) * c + k; }, dst);
  }
  for (; k < c; ++k) {  // channels left over, one at a time
    for (int p = 0; p < N * N; ++p) dst[p] = vb + p * ps + i * c + k;
    input_vec<N, K, float>(bt, r_lo, r_hi, j_lo, j_hi,
                           [&](int r, int j) { return base + (r0 + r) * row + (c0 + j) * c + k; }, dst);
  }
}

struct Fwd {
  const float *x, *u, *bt, *at;
  float *y, *v;  // v may be null
  Shape s;
  bool consts;  // bt and at are Known<n>'s
  int64_t blocks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};

  // A^T M A of the block's row i, cropped into y (K is a multiple of W).
  template <int N, bool K>
  void output_tile(int64_t t, int64_t i, const float* mb) const {
    const int64_t k = s.k, m = s.m;
    const auto [img, ti, tj] = s.tile(t);
    const int q_hi = (int)std::min<int64_t>(m, s.h - ti * m), r_hi = (int)std::min<int64_t>(m, s.w - tj * m);
    float* out = y + ((img * s.h + ti * m) * s.w + tj * m) * k;
    for (int64_t kk = 0; kk < k; kk += W)
      output_vec<N, K>(at, q_hi, r_hi, mb + i * k + kk, TB * k, out + kk, s.w * k, k);
  }

  // The transformed input goes straight to v when it is kept (its rows are
  // laid out as the block's, a point's tiles apart), else to the block's vb.
  template <int N, bool K>
  void tiles(int64_t t0, int64_t nt, float* vb, float* mb) const {
    const int64_t c = s.c, k = s.k;
    float* in = v ? v + t0 * c : vb;
    const int64_t ps = v ? s.tiles * c : TB * c;
    for (int64_t i = 0; i < nt; ++i) input_tile<N, K>(s, x, bt, t0 + i, i, in, ps);
    for (int64_t p = 0; p < N * N; ++p) products(in + p * ps, u + p * c * k, mb + p * TB * k, nt, c, k);
    for (int64_t i = 0; i < nt; ++i) output_tile<N, K>(t0 + i, i, mb);
  }

  void run() {
    const int64_t nn = s.n * s.n;
    std::unique_ptr<float[]> vb(new float[nn * TB * s.c]), mb(new float[nn * TB * s.k]);
    for (int64_t blk; (blk = next.fetch_add(1)) < blocks;) {
      const int64_t t0 = blk * TB, nt = std::min<int64_t>(TB, s.tiles - t0);
      with_n(s.n, consts, [&](auto n, auto k) { tiles<decltype(n)::value, decltype(k)::value>(t0, nt, vb.get(), mb.get()); });
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
  if (bd[0] != s.n || bd[1] != s.n || s.n != s.m + 2 || ud[0] != s.n * s.n || ud[1] != s.c || s.k % 32 != 0 ||
      s.n < 4 || s.n > 7)
    return ffi::Error::InvalidArgument(
        "alphalite_winograd: shapes do not agree, K is not a multiple of 32, or m is not 2 to 5");
  s.th = (s.h + s.m - 1) / s.m, s.tw = (s.w + s.m - 1) / s.m, s.tiles = s.b * s.th * s.tw;
  w->x = x.typed_data(), w->u = u.typed_data(), w->bt = bt.typed_data(), w->at = at.typed_data();
  w->y = y, w->v = v;
  w->consts = known(s.n, w->bt, w->at);
  w->blocks = (s.tiles + TB - 1) / TB;
  share(pool, w, w->blocks);
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

// ---------------------------------------------------------------------------
// The weight gradient from x and dy, fused: du[p] = sum over tiles of V[p]^T
// dM[p], with V = B^T x B and dM = A dy A^T of each tile computed per block
// of tiles in the cache. Transforming x again costs less than writing V out
// in the forward pass and reading it back here (2.5 times x's size; the
// transforms wait on memory, not on arithmetic). The tiles are split into
// GROUPS runs in a fixed way; a worker takes a whole run and sums its blocks, in order, into
// the run's own du; the caller adds the runs' sums in order at the end. So
// the result does not depend on which thread took what (the same bits every
// time, as XLA's product gave).

constexpr int64_t DW_TILES = 64;  // tiles a block, at most
// Runs of tiles: two per 400 tiles, at most 8. An even count, so that two
// threads take equal shares (three runs of a 9x9 batch of 64 left one
// thread waiting a third of the time).
constexpr int64_t GROUPS = 8;

// dM[a][b] = sum_q sum_r at[q][a] at[r][b] dy[q][r] for one vector of
// output channels; dy is zero past the board (q >= q_hi or r >= r_hi).
template <int N, bool K>
static inline void dm_vec(const float* at_, int q_hi, int r_hi, const float* dy, int64_t row, int64_t col,
                          float* dm, int64_t stride) {
  constexpr int M = N - 2;
  const float* at = K ? Known<N>::at : at_;
  vec s[N][M];  // s[a][r] = sum_q at[q][a] dy[q][r]
#pragma GCC unroll 8
  for (int a = 0; a < N; ++a)
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) std::memset(&s[a][r], 0, sizeof(vec));
#pragma GCC unroll 8
  for (int q = 0; q < M; ++q) {
    if (q >= q_hi) break;
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      if (r >= r_hi) break;
      vec d;
      std::memcpy(&d, dy + q * row + r * col, sizeof(vec));
#pragma GCC unroll 8
      for (int a = 0; a < N; ++a)
        if (!K || at[q * N + a] != 0.0f) s[a][r] += d * at[q * N + a];
    }
  }
#pragma GCC unroll 8
  for (int a = 0; a < N; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < N; ++b) {
      vec acc{};
      bool started = false;
#pragma GCC unroll 8
      for (int r = 0; r < M; ++r) madd<K>(acc, started, s[a][r], at[r * N + b]);
      std::memcpy(dm + (a * N + b) * stride, &acc, sizeof(vec));
    }
}

struct Dw {
  const float *x, *dy, *bt, *at;
  float* out;
  Shape s;
  bool consts;  // bt and at are Known<n>'s
  int64_t groups;
  std::unique_ptr<float[]> sums;  // groups x (n n C K)
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};

  template <int N, bool K>
  void block_dm(int64_t t0, int64_t nt, float* dmb) const {
    const int64_t k = s.k, m = s.m;
    for (int64_t i = 0; i < nt; ++i) {
      const auto [img, ti, tj] = s.tile(t0 + i);
      const int q_hi = (int)std::min<int64_t>(m, s.h - ti * m), r_hi = (int)std::min<int64_t>(m, s.w - tj * m);
      const float* src = dy + ((img * s.h + ti * m) * s.w + tj * m) * k;
      for (int64_t kk = 0; kk < k; kk += W)
        dm_vec<N, K>(at, q_hi, r_hi, src + kk, s.w * k, k, dmb + i * k + kk, DW_TILES * k);
    }
  }

  void run() {
    const int64_t nn = s.n * s.n, c = s.c, k = s.k;
    std::unique_ptr<float[]> vb, dmb;
    for (int64_t g; (g = next.fetch_add(1)) < groups;) {
      if (!dmb) vb.reset(new float[nn * DW_TILES * c]), dmb.reset(new float[nn * DW_TILES * k]);
      float* du = sums.get() + g * nn * c * k;
      const int64_t first = g * s.tiles / groups, last = (g + 1) * s.tiles / groups;
      // blocks of even size, at most DW_TILES
      const int64_t nb = (last - first + DW_TILES - 1) / DW_TILES, step = (last - first + nb - 1) / nb;
      for (int64_t t0 = first; t0 < last; t0 += step) {
        const int64_t nt = std::min<int64_t>(step, last - t0);
        with_n(s.n, consts, [&](auto n, auto kn) {
          constexpr int N = decltype(n)::value;
          constexpr bool K = decltype(kn)::value;
          for (int64_t i = 0; i < nt; ++i) input_tile<N, K>(s, x, bt, t0 + i, i, vb.get(), DW_TILES * c);
          block_dm<N, K>(t0, nt, dmb.get());
        });
        for (int64_t p = 0; p < nn; ++p)
          rows_tn(vb.get() + p * DW_TILES * c, dmb.get() + p * DW_TILES * k, du + p * c * k, 0, nt, c, k,
                  t0 > first);
      }
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

static ffi::Error WinogradDw(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> dy,
                             ffi::Buffer<ffi::F32> bt, ffi::Buffer<ffi::F32> at, ffi::ResultBuffer<ffi::F32> du) {
  auto xd = x.dimensions(), yd = dy.dimensions(), bd = bt.dimensions(), ad = at.dimensions();
  if (xd.size() != 4 || yd.size() != 4 || bd.size() != 2 || ad.size() != 2)
    return ffi::Error::InvalidArgument(
        "alphalite_winograd_dw: want x [B, H, W, C], dy [B, H, W, K], bt [N, N], at [M, N]");
  auto w = std::make_shared<Dw>();
  Shape& s = w->s;
  s.b = yd[0], s.h = yd[1], s.w = yd[2], s.k = yd[3], s.c = xd[3], s.m = ad[0], s.n = ad[1];
  if (s.n != s.m + 2 || s.n < 4 || s.n > 7 || bd[0] != s.n || bd[1] != s.n || s.k % 32 != 0 || xd[0] != s.b ||
      xd[1] != s.h || xd[2] != s.w)
    return ffi::Error::InvalidArgument(
        "alphalite_winograd_dw: shapes do not agree, K is not a multiple of 32, or m is not 2 to 5");
  s.th = (s.h + s.m - 1) / s.m, s.tw = (s.w + s.m - 1) / s.m, s.tiles = s.b * s.th * s.tw;
  const int64_t size = s.n * s.n * s.c * s.k;
  w->x = x.typed_data(), w->dy = dy.typed_data(), w->bt = bt.typed_data(), w->at = at.typed_data();
  w->out = du->typed_data();
  w->consts = known(s.n, w->bt, w->at);
  // the caller adds the runs' sums alone: few runs for few tiles
  w->groups = std::min<int64_t>({GROUPS, 2 * ((s.tiles + 399) / 400), s.tiles});  // no empty run
  if (w->groups == 0) {
    std::memset(w->out, 0, sizeof(float) * size);
    return ffi::Error::Success();
  }
  w->sums.reset(new float[w->groups * size]);
  share(pool, w, w->groups);
  const float* sums = w->sums.get();
  std::memcpy(w->out, sums, sizeof(float) * size);
  for (int64_t g = 1; g < w->groups; ++g)
    for (int64_t i = 0; i < size; ++i) w->out[i] += sums[g * size + i];
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(AlphaliteWinogradDw, WinogradDw,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
