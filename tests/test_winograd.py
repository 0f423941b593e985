"""Winograd F(m x m, 3x3) convolution against XLA's, values and gradients."""

import functools
import os
import platform
import re
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from alphalite.nn import native, nets, winograd


def _inputs(b, h, w, c, k, seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((b, h, w, c)), jnp.float32)
    kern = jnp.asarray(rng.standard_normal((3, 3, c, k)) * 0.2, jnp.float32)
    return x, kern


def test_matrices_satisfy_the_winograd_identity():
    """A^T [(G g) * (B^T d)] is the correlation of d with g, for every m;
    m = 4 gives Lavin & Gray's B^T exactly."""
    rng = np.random.default_rng(5)
    for m in winograd.POINTS:
        at, g, bt = winograd.matrices(m)
        d, f = rng.standard_normal(m + 2), rng.standard_normal(3)
        want = np.array([d[i:i + 3] @ f for i in range(m)])
        np.testing.assert_allclose(at @ ((g @ f) * (bt @ d)), want, rtol=1e-5, atol=1e-5)
    lavin = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
             [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
    np.testing.assert_array_equal(winograd.matrices(4)[2], lavin)
    assert [winograd.tile_size(s, s) for s in (1, 5, 9, 13, 19)] == [2, 3, 3, 4, 4]


@pytest.mark.slow
@pytest.mark.parametrize("h,w,m", [(1, 1, 2), (2, 3, 3), (7, 9, 4), (9, 9, 3), (9, 9, 5), (13, 13, 4),
                                   (19, 19, 4), (19, 19, 2)])
def test_values_match_xla(h, w, m):
    x, kern = _inputs(2, h, w, 5, 6)
    got = jax.jit(lambda x, k: winograd.conv3x3(x, k, m))(x, kern)  # jitted, as training runs it
    want = jax.jit(winograd.reference_conv3x3)(x, kern)
    assert got.shape == want.shape == (2, h, w, 6)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(jnp.abs(want).max()))


@pytest.mark.slow
@pytest.mark.parametrize("size,m,c,k", [(5, 3, 4, 7), (9, 3, 4, 7), (19, 4, 4, 7), (7, 2, 4, 7),
                                         (9, 3, 13, 32), (19, 4, 32, 32)])
def test_gradients_match_xla(size, m, c, k):
    """K a multiple of 32 takes the native kernels on the CPU: the fused
    forward and the weight gradient (and, with C too, the input gradient's
    forward)."""
    x, kern = _inputs(3, size, size, c, k, seed=size)
    target = jnp.asarray(np.random.default_rng(1).standard_normal((3, size, size, k)), jnp.float32)

    def loss(conv):
        return lambda x, k: jnp.sum(jnp.tanh(conv(x, k)) * target)

    # jitted, as training runs them (op by op it took twice as long)
    gx, gk = jax.jit(jax.grad(loss(lambda x, k: winograd.conv3x3(x, k, m)), argnums=(0, 1)))(x, kern)
    rx, rk = jax.jit(jax.grad(loss(winograd.reference_conv3x3), argnums=(0, 1)))(x, kern)
    np.testing.assert_allclose(gx, rx, rtol=1e-4, atol=1e-4 * float(jnp.abs(rx).max()))
    np.testing.assert_allclose(gk, rk, rtol=1e-4, atol=1e-4 * float(jnp.abs(rk).max()))


def test_large_batches_take_the_fused_weight_gradient():
    """From FUSED_WEIGHT_GRAD_TILES tiles the backward pass takes the weight
    gradient with the transforms of x and dy fused in (and below it the
    forward's V, XLA's transform of dy and the product), with the same
    gradients either way."""
    for b in (2, 21):  # 50 and 525 tiles of 19x19
        x, kern = _inputs(b, 19, 19, 32, 32, seed=b)
        f = jax.jit(jax.grad(lambda x, k: jnp.sum(jnp.sin(winograd.conv3x3(x, k))), argnums=(0, 1)))
        gx, gk = f(x, kern)
        rx, rk = jax.grad(lambda x, k: jnp.sum(jnp.sin(winograd.reference_conv3x3(x, k))), argnums=(0, 1))(x, kern)
        np.testing.assert_allclose(gx, rx, rtol=1e-4, atol=1e-4 * float(jnp.abs(rx).max()))
        np.testing.assert_allclose(gk, rk, rtol=1e-4, atol=1e-4 * float(jnp.abs(rk).max()))
        fused = b * 25 >= winograd.FUSED_WEIGHT_GRAD_TILES and native.available()
        assert (native.TARGET + "_winograd_dw" in f.lower(x, kern).as_text()) == fused


def test_native_constant_matrices_are_winograd_matrices():
    """The kernels' compile-time copies of B^T and A^T for m = 3 and 4 (the
    9x9 and 19x19 tiles) are the matrices winograd.matrices gives: were they
    to drift, the kernels would take the general code, right but slower."""
    src = native.SOURCE.read_text()
    for m in (3, 4):
        at, _, bt = winograd.matrices(m)
        body = re.search(r"struct Known<%d> \{(.*?)\n\};" % (m + 2), src, re.S).group(1)
        for name, want in (("bt", bt), ("at", at)):
            values = re.search(r"float %s\[\d+\] = \{([^}]*)\}" % name, body).group(1)
            np.testing.assert_array_equal(np.array([float(v) for v in values.split(",")]), want.ravel())


def _native_expected() -> bool:
    return os.environ.get("ALPHALITE_NATIVE", "1") != "0" and shutil.which(os.environ.get("CXX", "c++")) is not None


@pytest.mark.parametrize("a,n,c,k", [(36, 1600, 64, 64), (25, 700, 18, 32), (3, 1, 13, 96), (1, 257, 1, 32)])
def test_native_weight_gradient_matches_einsum(a, n, c, k):
    """The native kernel (alphalite/nn/native.py) is built and used wherever a
    C++ compiler is, and agrees with the einsum it replaces; shapes cover row
    chunks, channel remainders and a single row."""
    assert native.available() == _native_expected()
    rng = np.random.default_rng(a + n)
    v = rng.standard_normal((a, n, c)).astype(np.float32)
    d = rng.standard_normal((a, n, k)).astype(np.float32)
    f = jax.jit(native.batched_tn)
    got = np.asarray(f(v, d))
    want = np.einsum("anc,ank->ack", v.astype(np.float64), d.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert (native.TARGET in f.lower(v, d).as_text()) == native.available()


AVX2 = "x86-64-v3"  # AVX2 + FMA: AMD Zen 1-3, Intel Haswell on; no AVX-512


@pytest.mark.subprocess
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64-v3 is an x86 target")
@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler")
@pytest.mark.parametrize("a,n,c,k", [(36, 1600, 64, 64), (3, 1, 13, 96), (1, 257, 1, 32)])
def test_native_kernel_built_for_avx2_matches_einsum(a, n, c, k):
    """The kernel compiled for x86-64-v3, as -march=native builds it on an
    AVX2-only host, agrees with the einsum on any x86 host, and holds no
    AVX-512 instruction (no zmm register), so a host with AVX-512 tests the
    code an AVX2 host runs."""
    rng = np.random.default_rng(a + n)
    v = rng.standard_normal((a, n, c)).astype(np.float32)
    d = rng.standard_normal((a, n, k)).astype(np.float32)
    f = jax.jit(functools.partial(native.batched_tn, march=AVX2))
    got = np.asarray(f(v, d))
    want = np.einsum("anc,ank->ack", v.astype(np.float64), d.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert native.load(AVX2) in f.lower(v, d).as_text() and native.load(AVX2) != native.TARGET
    # objdump comes with the compiler's binutils: a host that built the kernel can read it back
    asm = subprocess.run(["objdump", "-d", str(native.build(AVX2))], capture_output=True, text=True).stdout
    assert "ymm" in asm and "zmm" not in asm


def _forward_pair(x, kern, m, march="native"):
    """(y, v) by the fused native forward for ``march``, and by XLA."""
    at, _, bt = winograd._MATS[m]
    u = winograd.filter_transform(kern, m)

    def xla(x, u):
        v = winograd.input_transform(x, m)
        return winograd.output_transform(jnp.einsum("anc,ack->ank", v, u), *x.shape[:3], m), v

    f = jax.jit(lambda x, u: native.winograd_forward(x, u, bt, at, keep_v=True, fallback=xla, march=march))
    return f(x, u), jax.jit(xla)(x, u), f.lower(x, u).as_text()


# batch, board, C, K, m: blocks of tiles with a remainder (33 x 25 tiles),
# tiles past the board's edge (7 x 11), one point (1 x 1), 9x9 by F(3x3)
FORWARD_SHAPES = [(3, 19, 19, 64, 64, 4), (33, 19, 19, 17, 32, 4), (2, 9, 9, 18, 32, 3), (1, 7, 11, 5, 64, 4),
                  (2, 1, 1, 3, 32, 2), (1, 3, 3, 32, 32, 3)]  # the last: one tile


@pytest.mark.parametrize("b,h,w,c,k,m", FORWARD_SHAPES)
def test_native_forward_matches_xla(b, h, w, c, k, m):
    """The fused forward (input transform, products and output transform per
    block of tiles) gives XLA's convolution and transformed input, and the
    Winograd convolution uses it on the CPU where a compiler is."""
    x, kern = _inputs(b, h, w, c, k, seed=b + h)
    (y, v), (ry, rv), hlo = _forward_pair(x, kern, m)
    np.testing.assert_allclose(y, ry, rtol=1e-4, atol=1e-5 * float(jnp.abs(ry).max()))
    np.testing.assert_allclose(v, rv, rtol=1e-5, atol=1e-6 * float(jnp.abs(rv).max()))
    np.testing.assert_allclose(y, winograd.reference_conv3x3(x, kern), rtol=1e-4, atol=1e-4 * float(jnp.abs(ry).max()))
    assert (native.TARGET + "_winograd_v" in hlo) == native.available() == _native_expected()
    assert (native.TARGET + "_winograd" in jax.jit(winograd.conv3x3).lower(x, kern).as_text()) == native.available()


@pytest.mark.subprocess
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64-v3 is an x86 target")
@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler")
@pytest.mark.parametrize("b,h,w,c,k,m", FORWARD_SHAPES)
def test_native_forward_built_for_avx2_matches_xla(b, h, w, c, k, m):
    """The fused forward as an AVX2-only host builds it (the row blocks are
    6 tiles there, not 8) agrees with XLA on any x86 host."""
    x, kern = _inputs(b, h, w, c, k, seed=b + h)
    (y, v), (ry, rv), hlo = _forward_pair(x, kern, m, march=AVX2)
    np.testing.assert_allclose(y, ry, rtol=1e-4, atol=1e-5 * float(jnp.abs(ry).max()))
    np.testing.assert_allclose(v, rv, rtol=1e-5, atol=1e-6 * float(jnp.abs(rv).max()))
    assert native.load(AVX2) + "_winograd_v" in hlo


def _weight_grad_pair(b, h, w, c, k, m, march="native"):
    """du by the native weight gradient (the transforms of x and dy fused
    in) for ``march``, the float64 einsum of XLA's transforms, and the HLO."""
    rng = np.random.default_rng(b * h + c)
    x = jnp.asarray(rng.standard_normal((b, h, w, c)), jnp.float32)
    dy = jnp.asarray(rng.standard_normal((b, h, w, k)), jnp.float32)
    v = winograd.input_transform(x, m)
    dm = winograd.output_transform_t(dy, m)
    want = np.einsum("anc,ank->ack", np.asarray(v, np.float64), np.asarray(dm, np.float64))
    at, _, bt = winograd._MATS[m]
    f = jax.jit(lambda x, dy: native.winograd_weight_grad(x, dy, bt, at, march=march,
                                                          fallback=lambda x, dy: jnp.zeros(((m + 2) ** 2, c, k))))
    return np.asarray(f(x, dy)), want, f.lower(x, dy).as_text()


@pytest.mark.parametrize("b,h,w,c,k,m", FORWARD_SHAPES)
def test_native_weight_gradient_from_dy_matches_xla(b, h, w, c, k, m):
    """The weight gradient with the transforms of x and dy fused in, summed
    over fixed runs of tiles in blocks of at most 64 (33 x 25 tiles: six runs
    of 137 or 138, three blocks each) and then over the runs, agrees with
    XLA's transforms and the product, to the same bits every time whichever
    thread took which run."""
    if not native.available():
        pytest.skip("no native kernels here (ALPHALITE_NATIVE=0 or no C++ compiler)")
    got, want, hlo = _weight_grad_pair(b, h, w, c, k, m)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert native.TARGET + "_winograd_dw" in hlo
    for _ in range(3):
        np.testing.assert_array_equal(_weight_grad_pair(b, h, w, c, k, m)[0], got)


@pytest.mark.subprocess
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64-v3 is an x86 target")
@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler")
@pytest.mark.parametrize("b,h,w,c,k,m", FORWARD_SHAPES)
def test_native_weight_gradient_from_dy_built_for_avx2_matches_xla(b, h, w, c, k, m):
    got, want, hlo = _weight_grad_pair(b, h, w, c, k, m, march=AVX2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert native.load(AVX2) + "_winograd_dw" in hlo


@pytest.mark.subprocess
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64-v4 is an x86 target")
@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler")
def test_native_kernels_build_for_avx512():
    """The AVX-512 build compiles on any x86 host (an AVX2-only host cannot
    run it, but must not be the first to find it broken) and uses the zmm
    registers its row blocks are sized for."""
    lib = native.build("x86-64-v4")
    asm = subprocess.run(["objdump", "-d", str(lib)], capture_output=True, text=True).stdout
    assert "zmm" in asm


def test_native_kernel_falls_back_where_it_cannot_run():
    """K not a multiple of 32, or bfloat16: XLA's product, same values."""
    rng = np.random.default_rng(0)
    v, d = rng.standard_normal((4, 50, 8)).astype(np.float32), rng.standard_normal((4, 50, 24)).astype(np.float32)
    f = jax.jit(native.batched_tn)
    assert native.TARGET not in f.lower(v, d).as_text()
    np.testing.assert_allclose(f(v, d), np.einsum("anc,ank->ack", v, d), rtol=1e-4, atol=1e-4)
    vb, db = jnp.asarray(v, jnp.bfloat16), jnp.asarray(np.pad(d, ((0, 0), (0, 0), (0, 8))), jnp.bfloat16)
    assert native.TARGET not in f.lower(vb, db).as_text()


@pytest.mark.subprocess
def test_native_kernel_without_a_compiler_warns_once_and_falls_back(tmp_path):
    probe = ("import numpy as np, jax\n"
             "from alphalite.nn import native\n"
             "v, d = np.ones((2, 3, 4), np.float32), np.ones((2, 3, 32), np.float32)\n"
             "out = jax.jit(native.batched_tn)(v, d); jax.jit(native.batched_tn)(v * 2, d)\n"
             "print(native.available(), float(out.sum()))\n")
    env = dict(os.environ, CXX=str(tmp_path / "no-such-compiler"), ALPHALITE_CACHE=str(tmp_path / "cache"))
    env.pop("ALPHALITE_NATIVE", None)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", str(2 * 4 * 32 * 3.0)]
    warnings = [ln for ln in out.stderr.splitlines() if ln.startswith("alphalite:")]
    assert len(warnings) == 1 and "native CPU kernel unavailable" in warnings[0], out.stderr


@pytest.mark.slow
def test_transposes_are_adjoints():
    """<T x, y> == <x, T^T y> for the output and filter transforms."""
    rng = np.random.default_rng(2)
    n, h, w, k = 2, 9, 7, 3
    for t in (3, 4):
        tiles = n * -(-h // t) * -(-w // t)
        m = jnp.asarray(rng.standard_normal(((t + 2) ** 2, tiles, k)), jnp.float32)
        dy = jnp.asarray(rng.standard_normal((n, h, w, k)), jnp.float32)
        lhs = jnp.vdot(winograd.output_transform(m, n, h, w, t), dy)
        rhs = jnp.vdot(m, winograd.output_transform_t(dy, t))
        assert float(lhs) == pytest.approx(float(rhs), rel=1e-4)
        g = jnp.asarray(rng.standard_normal((3, 3, 4, k)), jnp.float32)
        du = jnp.asarray(rng.standard_normal(((t + 2) ** 2, 4, k)), jnp.float32)
        assert float(jnp.vdot(winograd.filter_transform(g, t), du)) == pytest.approx(
            float(jnp.vdot(g, winograd.filter_transform_t(du, t))), rel=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["b2c16", "b2c16_value"])
def test_resnet_conv_impls_share_parameters_and_outputs(name):
    """conv=xla and conv=winograd build the same parameter tree (so any
    checkpoint loads under either) and compute the same function."""
    xla = nets.make_model(name, 7, 17, conv="xla")
    wino = nets.make_model(name, 7, 17, conv="winograd")
    variables = nets.init_variables(xla, jax.random.key(0))
    assert jax.tree_util.tree_structure(variables) == jax.tree_util.tree_structure(
        nets.init_variables(wino, jax.random.key(0)))
    x = jnp.asarray(np.random.default_rng(3).random((4, 7, 7, 17)) < 0.3, jnp.float32)
    np.testing.assert_allclose(wino.apply(variables, x), xla.apply(variables, x), rtol=1e-4, atol=1e-4)
    # forced methods stay forced; auto keeps XLA on test-sized boards (and,
    # untuned as in this test session, everywhere; tuning is tested in
    # test_convtune.py)
    assert nets.conv_method("winograd", False, (4, 5, 5, 8), 8) == "winograd"
    assert nets.conv_method("winograd", True, (4, 19, 19, 8), 8) == "winograd"
    assert nets.conv_method("xla", True, (4, 19, 19, 8), 8) == "xla"
    assert nets.conv_method("auto", True, (4, 7, 7, 8), 8) == "xla"
    assert nets.conv_method("auto", True, (4, 19, 19, 8), 8) == "xla"
    assert nets.conv_method("auto", False, (4, 19, 19, 8), 8) == "xla"


def test_auto_keeps_xla_below_float32(monkeypatch):
    """Where tuning picks Winograd, a bfloat16 layer still gets XLA's
    convolution (Winograd's transforms lose accuracy there)."""
    if jax.default_backend() != "cpu":
        pytest.skip("auto is XLA on accelerators whatever the dtype")
    from alphalite.nn import convtune

    monkeypatch.setattr(convtune, "choose", lambda shape, **kw: "winograd")
    assert nets.conv_method("auto", True, (4, 19, 19, 8), 8) == "winograd"
    assert nets.conv_method("auto", True, (4, 19, 19, 8), 8, jnp.bfloat16) == "xla"


def test_unknown_conv_impl_is_rejected():
    model = nets.make_model("b2c16", 5, 3, conv="fft")
    with pytest.raises(ValueError, match="conv must be one of"):
        nets.init_variables(model, jax.random.key(0))
