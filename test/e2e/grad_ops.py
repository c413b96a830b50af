#!/usr/bin/env python3
"""Per-operator checks of zero-opt's reverse-mode rules (`--train --optimizer none`).

For every case a tiny ONNX model (opset 20) is built with onnx.helper: the float
tensors to differentiate are INITIALIZERS (random, small shapes; 0-d ones too, a
module's learnable scalar; but not a 0-d float initializer under a name an exporter
makes up for a scalar it stored, "val_N" or "onnx::Mul_N": those are the exporter's
constants, 0.5 or sqrt(d), and the importer keeps them constants), and the output is
the scalar

    loss = ReduceSum(Mul(op_output, r))        (r: a float graph input, no gradient)

or, for the loss operators (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss), the
op's own output (their labels are an int64 graph input). Each case also has the same
function written independently in PyTorch.

Per case:
  1. onnx.checker (with shape inference) accepts the model;
  2. onnxruntime runs it, and its op outputs and loss match the PyTorch function
     (float64) to rtol 1e-4 / atol 1e-5: this validates the case itself;
  3. zero-opt model.onnx --train --optimizer none --emit=zrt -o m.zrt --weights-out w.safetensors
     zero-run m.zrt --weights w.safetensors --input in.safetensors --output out.safetensors
  4. every grad.<float initializer> equals torch.autograd's gradient in float64:
     |got - want| <= rtol*|want| + atol*max(1, max|want|)   (rtol 1e-4, atol 1e-5);
     integer / bool initializers (indices, masks), the exporter's 0-d scalars
     (e.g. the operand of Add_exporter_scalar_rhs) and initializers read only as
     BatchNormalization's mean / variance (running statistics) must have no grad.* output;
     a float initializer that does not reach the loss must have a zero gradient or none
     (which one the compiler does is reported; PyTorch gives None).

The PyTorch side (float64 op outputs, loss and gradients) is STORED: by default the
script needs numpy, onnx, onnxruntime and safetensors only (scripts/setup-pyenv.sh
test) and reads test/e2e/grad_ops.ref.safetensors, which holds for every case its
initializers, graph inputs (including the r weights), the torch float64 loss, op
outputs and gradients (keys CASE/init/NAME, CASE/input/NAME, CASE/loss, CASE/y/NAME,
CASE/grad/NAME). The graphs are built by this script either way; the stored values
replace the generated ones (so numpy's generator streams do not matter), and step 2
then checks the graph against the stored torch outputs: a case edited without
regenerating fails there. --live recomputes the references with torch (float64)
instead. Regenerate the file after adding or changing a case:
    scripts/setup-pyenv.sh full
    build/pyenv/bin/python test/e2e/grad_ops.py --write-ref

Cases of operators the importer does not support yet (none today: UNSUPPORTED) are
kept (and stored) but reported as SKIP with the reason; --include-unsupported runs
them anyway.

Options: --only OP[,OP...] (op types or case names), --bin-dir DIR, --forward-only
(steps 1-2 plus a plain compile/run of the forward program, comparing its loss with
onnxruntime: checks the cases and the importer without --train), --validate-only
(steps 1-2 only), --live, --write-ref, --list, --work DIR.
Exit status: 0 all passed (skips allowed), 1 a failure, 77 all skipped (printed why).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

from zerokit import mpi, tools

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SKIP = 77
OPSET = 20
RTOL, ATOL = 1e-4, 1e-5
REF_FILE = HERE / "grad_ops.ref.safetensors"
REGEN = "build/pyenv/bin/python test/e2e/grad_ops.py --write-ref"
# Op types whose cases are kept but skipped (reason printed): no importer support yet.
UNSUPPORTED: dict[str, str] = {}

# Allowed as root: Open MPI refuses to start as root otherwise (CI runs as root).
ENV = mpi.env(root=True, yield_when_idle=True)


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------
# Graph builder
# ---------------------------------------------------------------------------

class G:
    """A tiny graph: initializers (float ones are differentiated), graph inputs
    (besides the r weights), nodes; `ys` are the op outputs that feed the loss."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes, self.inits, self.inputs = [], {}, {}
        self.unused = set()      # float initializers that do not reach the loss
        self.state = set()       # float initializers the importer keeps as state (no gradient)
        self.ys = []
        self.direct = False      # the (single) op output is the loss itself
        self._n = 0

    def _name(self, p):
        self._n += 1
        return f"{p}{self._n}"

    def param(self, shape, name=None, low=None, high=None, scale=1.0):
        """A random float32 initializer: differentiated (0-d ones too)."""
        name = name or self._name("w")
        if low is not None:
            a = self.rng.uniform(low, high, size=shape)
        else:
            a = self.rng.standard_normal(shape) * scale
        self.inits[name] = np.asarray(a, dtype=np.float32)
        return name

    def exporter_name(self):
        """A name the way ONNX Script names a scalar it stores ("val_N")."""
        self._n += 1
        return f"val_{self._n}"

    def ints(self, values, name=None, dtype=np.int64):
        name = name or self._name("i")
        self.inits[name] = np.asarray(values, dtype=dtype)
        return name

    def const(self, value, dtype=np.float32):
        """A Constant node (not an initializer: never differentiated)."""
        from onnx import helper, numpy_helper
        name = self._name("c")
        self.nodes.append(helper.make_node("Constant", [], [name],
                                           value=numpy_helper.from_array(np.asarray(value, dtype=dtype), name)))
        return name

    def input(self, name, value):
        self.inputs[name] = np.asarray(value)
        return name

    def op(self, op_type, ins, n_out=1, **attrs):
        from onnx import helper
        outs = [self._name("y") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, ins, outs, name=self._name("n"), **attrs))
        return outs[0] if n_out == 1 else outs


# ---------------------------------------------------------------------------
# Cases: (case name, op type, build(g) -> torch function)
# The torch function gets {name: tensor} (float initializers as float64 leaves with
# requires_grad, integer ones as int64/bool, graph inputs as tensors) and returns the
# list of op outputs (or the loss for direct cases).
# ---------------------------------------------------------------------------

CASES = []


def case(name, op):
    def deco(fn):
        CASES.append((name, op, fn))
        return fn
    return deco


def _t():
    import torch
    return torch


def _F():
    import torch.nn.functional as F
    return F


# MatMul ---------------------------------------------------------------------

@case("MatMul_2d", "MatMul")
def _(g):
    a, b = g.param([3, 4]), g.param([4, 5])
    g.ys = [g.op("MatMul", [a, b])]
    return lambda T: [T[a] @ T[b]]


@case("MatMul_3dx2d", "MatMul")
def _(g):
    a, b = g.param([2, 3, 4]), g.param([4, 5])
    g.ys = [g.op("MatMul", [a, b])]
    return lambda T: [_t().einsum("bij,jk->bik", T[a], T[b])]


@case("MatMul_4d_broadcast", "MatMul")
def _(g):
    a, b = g.param([2, 1, 3, 4]), g.param([1, 3, 4, 5])
    g.ys = [g.op("MatMul", [a, b])]
    # [2,1,3,4] x [1,3,4,5] -> [2,3,3,5]
    return lambda T: [_t().einsum("xij,yjk->xyik", T[a][:, 0], T[b][0])]


# Gemm -------------------------------------------------------------------------

def _gemm(name, ta, tb, alpha, beta, cshape):
    @case(name, "Gemm")
    def _(g):
        a = g.param([4, 3] if ta else [3, 4])
        b = g.param([5, 4] if tb else [4, 5])
        ins = [a, b]
        c = None
        if cshape is not None:
            c = g.param(cshape)
            ins.append(c)
        attrs = dict(transA=ta, transB=tb, alpha=alpha, beta=beta)
        g.ys = [g.op("Gemm", ins, **attrs)]

        def f(T):
            A = T[a].t() if ta else T[a]
            B = T[b].t() if tb else T[b]
            y = alpha * (A @ B)
            if c is not None:
                y = y + beta * T[c]
            return [y]
        return f


_gemm("Gemm_plain_bias1d", 0, 0, 1.0, 1.0, [5])
_gemm("Gemm_transB_bias1d", 0, 1, 1.0, 1.0, [5])
_gemm("Gemm_transA_alpha_beta_bias2d", 1, 0, 0.7, 1.3, [3, 5])
_gemm("Gemm_transA_transB_bias_row", 1, 1, -1.5, 0.5, [1, 5])
_gemm("Gemm_bias_col", 0, 0, 1.0, 2.0, [3, 1])
_gemm("Gemm_no_bias", 0, 1, 2.0, 1.0, None)


# Binary arithmetic with broadcasting --------------------------------------------

BINARY = {"Add": lambda x, y: x + y, "Sub": lambda x, y: x - y,
          "Mul": lambda x, y: x * y, "Div": lambda x, y: x / y}
# scalar_*: a trained 0-d operand (a module's learnable scalar; its gradient is the
# full reduction); exporter_scalar_*: a 0-d operand stored under an exporter's name
# ("val_N"), a constant for the importer, so only the tensor is trained;
# one_*: a trained single-element [1] operand.
BROADCASTS = [("same", [3, 4], [3, 4]), ("rowvec", [2, 3, 4], [4]), ("rowvec_rev", [4], [2, 3, 4]),
              ("1xN_Mx1", [1, 4], [3, 1]), ("Mx1_1xN", [3, 1], [1, 4]),
              ("scalar_rhs", [3, 4], []), ("scalar_lhs", [], [3, 4]),
              ("exporter_scalar_rhs", [3, 4], None), ("exporter_scalar_lhs", None, [3, 4]),
              ("one_rhs", [3, 4], [1]), ("one_lhs", [1], [3, 4]),
              ("mid", [2, 3, 4], [3, 1])]
for _op in BINARY:
    for _tag, _sa, _sb in BROADCASTS:
        def _mk(op=_op, sa=_sa, sb=_sb, tag=_tag):
            @case(f"{op}_{tag}", op)
            def _(g):
                a = g.param([], name=g.exporter_name()) if sa is None else g.param(sa)
                if sb is None:
                    b = g.param([], name=g.exporter_name(), low=0.5, high=2.0)
                else:
                    b = g.param(sb, low=0.5, high=2.0) if op == "Div" else g.param(sb)
                if op == "Div":  # denominators away from 0, both signs
                    g.inits[b] *= np.where(g.rng.random([] if sb is None else sb) < 0.5, -1, 1).astype(np.float32)
                g.ys = [g.op(op, [a, b])]
                return lambda T: [BINARY[op](T[a], T[b])]
        _mk()


# Pow with a constant exponent ------------------------------------------------------

for _e in (2.0, 3.0):
    def _mk(e=_e):
        @case(f"Pow_const{int(e)}", "Pow")
        def _(g):
            x = g.param([3, 4])
            g.ys = [g.op("Pow", [x, g.const(e)])]
            return lambda T: [T[x] ** int(e)]
    _mk()


# Unary ------------------------------------------------------------------------------

UNARY = {
    "Neg": (dict(), lambda x: -x),
    "Sqrt": (dict(low=0.2, high=2.0), lambda x: _t().sqrt(x)),
    "Reciprocal": (dict(low=0.5, high=2.0, signs=True), lambda x: 1.0 / x),
    "Exp": (dict(), lambda x: _t().exp(x)),
    "Log": (dict(low=0.2, high=3.0), lambda x: _t().log(x)),
    "Tanh": (dict(), lambda x: _t().tanh(x)),
    "Erf": (dict(), lambda x: _t().erf(x)),
    "Sigmoid": (dict(), lambda x: _t().sigmoid(x)),
    "Relu": (dict(away_from_zero=True), lambda x: _t().relu(x)),
    "Identity": (dict(), lambda x: x),
    "Abs": (dict(low=0.2, high=2.0, signs=True), lambda x: _t().abs(x)),
    "Sin": (dict(low=-3.0, high=3.0), lambda x: _t().sin(x)),
    "Cos": (dict(low=-3.0, high=3.0), lambda x: _t().cos(x)),
    "Tan": (dict(low=-1.2, high=1.2), lambda x: _t().tan(x)),
    "Asin": (dict(low=-0.9, high=0.9), lambda x: _t().asin(x)),
    "Acos": (dict(low=-0.9, high=0.9), lambda x: _t().acos(x)),
    "Atan": (dict(low=-3.0, high=3.0), lambda x: _t().atan(x)),
    "Sinh": (dict(), lambda x: _t().sinh(x)),
    "Cosh": (dict(), lambda x: _t().cosh(x)),
    "Asinh": (dict(low=-3.0, high=3.0), lambda x: _t().asinh(x)),
    "Acosh": (dict(low=1.1, high=4.0), lambda x: _t().acosh(x)),
    "Atanh": (dict(low=-0.9, high=0.9), lambda x: _t().atanh(x)),
    "Softsign": (dict(low=-3.0, high=3.0), lambda x: _F().softsign(x)),
}
for _op, (_kw, _fn) in UNARY.items():
    def _mk(op=_op, kw=_kw, fn=_fn):
        @case(op, op)
        def _(g):
            if "low" in kw:
                x = g.param([3, 5], low=kw["low"], high=kw["high"])
            else:
                x = g.param([3, 5])
            if kw.get("signs"):
                g.inits[x] *= np.where(g.rng.random([3, 5]) < 0.5, -1, 1).astype(np.float32)
            if kw.get("away_from_zero"):  # no element at Relu's kink
                v = g.inits[x]
                g.inits[x] = np.where(np.abs(v) < 0.1, v + np.sign(v + 1e-9) * 0.2, v).astype(np.float32)
            g.ys = [g.op(op, [x])]
            return lambda T: [fn(T[x])]
    _mk()


# Piecewise activations and clamps: x spread over both sides of every kink, none on one.
def _spread(g, x, kinks):
    v = g.inits[x]
    for k in kinks:
        v = np.where(np.abs(v - k) < 0.05, v + 0.1, v)
    g.inits[x] = v.astype(np.float32)


PIECEWISE = {
    "Elu": (dict(alpha=0.7), [0.0], lambda x: _F().elu(x, alpha=0.7)),
    "HardSigmoid": (dict(alpha=0.25, beta=0.4), [-1.6, 2.4],
                    lambda x: _t().clamp(0.25 * x + 0.4, 0.0, 1.0)),
    "HardSwish": (dict(), [-3.0, 3.0], lambda x: _F().hardswish(x)),
}
for _op, (_attrs, _kinks, _fn) in PIECEWISE.items():
    def _mk(op=_op, attrs=_attrs, kinks=_kinks, fn=_fn):
        @case(op, op)
        def _(g):
            x = g.param([4, 6], scale=3.0)
            _spread(g, x, kinks)
            g.ys = [g.op(op, [x], **attrs)]
            return lambda T: [fn(T[x])]
    _mk()

for _tag, _lo, _hi in (("min_max", -0.5, 0.8), ("min", 0.0, None), ("max", None, 6.0)):
    def _mk(tag=_tag, lo=_lo, hi=_hi):
        @case(f"Clip_{tag}", "Clip")
        def _(g):
            x = g.param([4, 6], scale=4.0 if hi == 6.0 else 1.0)
            _spread(g, x, [k for k in (lo, hi) if k is not None])
            ins = [x, g.const(lo) if lo is not None else "", g.const(hi) if hi is not None else ""]
            while ins[-1] == "":
                ins.pop()
            g.ys = [g.op("Clip", ins)]
            return lambda T: [_t().clamp(T[x], lo, hi)]
    _mk()

for _op in ("Floor", "Sign"):
    def _mk(op=_op):
        @case(op, op)   # piecewise constant: a zero gradient, as PyTorch's
        def _(g):
            x = g.param([3, 5], scale=2.0)
            _spread(g, x, [-2.0, -1.0, 0.0, 1.0, 2.0])
            y = g.op(op, [x])
            g.ys = [g.op("Mul", [y, x])]
            return lambda T: [getattr(_t(), op.lower())(T[x]) * T[x]]
    _mk()

for _op, _fn in (("Max", lambda a, b: _t().maximum(a, b)), ("Min", lambda a, b: _t().minimum(a, b))):
    for _tag, _sa, _sb, _ties in (("same", [3, 4], [3, 4], False), ("rowvec", [3, 4], [4], False),
                                  ("ties", [3, 4], [3, 4], True)):
        def _mk(op=_op, fn=_fn, tag=_tag, sa=_sa, sb=_sb, ties=_ties):
            @case(f"{op}_{tag}", op)   # equal operands: half the gradient to each
            def _(g):
                a, b = g.param(sa), g.param(sb)
                if ties:
                    g.inits[b] = np.where(g.rng.random(sb) < 0.5, g.inits[a], g.inits[b]).astype(np.float32)
                g.ys = [g.op(op, [a, b])]
                return lambda T: [fn(T[a], T[b])]
        _mk()


@case("Dropout_inference", "Dropout")
def _(g):
    x = g.param([3, 5])
    g.ys = [g.op("Dropout", [x])]
    return lambda T: [T[x]]


for _approx in ("none", "tanh"):
    def _mk(ap=_approx):
        @case(f"Gelu_{ap}", "Gelu")
        def _(g):
            x = g.param([3, 5], scale=1.5)
            g.ys = [g.op("Gelu", [x], approximate=ap)]
            return lambda T: [_F().gelu(T[x], approximate=ap)]
    _mk()


# Softmax / LogSoftmax -----------------------------------------------------------------

for _op in ("Softmax", "LogSoftmax"):
    for _axis in (-1, 1):
        def _mk(op=_op, axis=_axis):
            @case(f"{op}_axis{axis}", op)
            def _(g):
                x = g.param([2, 3, 4], scale=2.0)
                g.ys = [g.op(op, [x], axis=axis)]
                return lambda T: [(_F().softmax if op == "Softmax" else _F().log_softmax)(T[x], dim=axis)]
        _mk()


# LayerNormalization ---------------------------------------------------------------------

def _ln(name, shape, axis, bias, eps=1e-5):
    @case(name, "LayerNormalization")
    def _(g):
        x = g.param(shape, scale=2.0)
        norm_shape = shape[axis:]
        w = g.param(norm_shape, low=0.5, high=1.5)
        ins = [x, w]
        b = None
        if bias:
            b = g.param(norm_shape, scale=0.3)
            ins.append(b)
        g.ys = [g.op("LayerNormalization", ins, axis=axis, epsilon=eps)]

        def f(T):
            dims = tuple(range(axis % len(shape), len(shape)))
            X = T[x]
            mu = X.mean(dim=dims, keepdim=True)
            var = ((X - mu) ** 2).mean(dim=dims, keepdim=True)
            y = (X - mu) / _t().sqrt(var + eps) * T[w]
            if b is not None:
                y = y + T[b]
            return [y]
        return f


_ln("LayerNorm_last_bias", [3, 6], -1, True)
_ln("LayerNorm_last_nobias", [2, 3, 6], -1, False)
_ln("LayerNorm_axis1_2dims_bias", [2, 3, 4], 1, True)
_ln("LayerNorm_axis1_2dims_nobias", [2, 3, 4], 1, False)


# Reductions -----------------------------------------------------------------------------

for _op in ("ReduceMean", "ReduceSum"):
    for _axes in ([1], [0, 2], [-1], None):
        for _keep in (0, 1):
            def _mk(op=_op, axes=_axes, keep=_keep):
                tag = "all" if axes is None else "_".join(str(x).replace("-", "m") for x in axes)
                @case(f"{op}_axes{tag}_keep{keep}", op)
                def _(g):
                    x = g.param([2, 3, 4])
                    ins = [x] + ([g.ints(axes)] if axes is not None else [])
                    g.ys = [g.op(op, ins, keepdims=keep)]

                    def f(T):
                        X = T[x]
                        dims = tuple(range(3)) if axes is None else tuple(a % 3 for a in axes)
                        y = X.mean(dim=dims, keepdim=bool(keep)) if op == "ReduceMean" \
                            else X.sum(dim=dims, keepdim=bool(keep))
                        return [y]
                    return f
            _mk()


for _op in ("ReduceMax", "ReduceMin"):
    for _axes, _keep, _ties in (([1], 0, False), ([0, 2], 1, False), ([-1], 1, True)):
        def _mk(op=_op, axes=_axes, keep=_keep, ties=_ties):
            tag = "_".join(str(x).replace("-", "m") for x in axes) + ("_ties" if ties else "")
            @case(f"{op}_axes{tag}_keep{keep}", op)   # ties: the gradient split evenly (amax)
            def _(g):
                x = g.param([2, 3, 4], scale=1.5)
                if ties:
                    g.inits[x] = np.round(g.inits[x]).astype(np.float32)
                g.ys = [g.op(op, [x, g.ints(axes)], keepdims=keep)]
                dims = tuple(a % 3 for a in axes)
                fn = "amax" if op == "ReduceMax" else "amin"
                return lambda T: [getattr(_t(), fn)(T[x], dim=dims, keepdim=bool(keep))]
        _mk()


@case("ReduceL2_axes1_keep0", "ReduceL2")
def _(g):
    x = g.param([2, 3, 4])
    g.ys = [g.op("ReduceL2", [x, g.ints([1])], keepdims=0)]
    return lambda T: [T[x].norm(dim=1)]


@case("ReduceLogSumExp_axesm1_keep1", "ReduceLogSumExp")
def _(g):
    x = g.param([2, 3, 4], scale=2.0)
    g.ys = [g.op("ReduceLogSumExp", [x, g.ints([-1])], keepdims=1)]
    return lambda T: [_t().logsumexp(T[x], dim=-1, keepdim=True)]


@case("Tile", "Tile")
def _(g):
    x = g.param([2, 3, 2])
    g.ys = [g.op("Tile", [x, g.ints([2, 1, 3])])]
    return lambda T: [T[x].repeat(2, 1, 3)]


# Shape ops --------------------------------------------------------------------------------

@case("Reshape", "Reshape")
def _(g):
    x = g.param([2, 3, 4])
    g.ys = [g.op("Reshape", [x, g.ints([4, -1, 2])])]
    return lambda T: [T[x].reshape(4, 3, 2)]


@case("Reshape_zero_copies_dim", "Reshape")
def _(g):
    x = g.param([2, 3, 4])
    g.ys = [g.op("Reshape", [x, g.ints([0, 12])])]
    return lambda T: [T[x].reshape(2, 12)]


@case("Transpose_perm", "Transpose")
def _(g):
    x = g.param([2, 3, 4])
    g.ys = [g.op("Transpose", [x], perm=[2, 0, 1])]
    return lambda T: [T[x].permute(2, 0, 1)]


@case("Transpose_default", "Transpose")
def _(g):
    x = g.param([2, 3, 4])
    g.ys = [g.op("Transpose", [x])]
    return lambda T: [T[x].permute(2, 1, 0)]


def _slice(name, shape, starts, ends, axes, steps, index_lists):
    """index_lists: {axis: explicit python list of kept indices} (written by hand)."""
    @case(name, "Slice")
    def _(g):
        x = g.param(shape)
        ins = [x, g.ints(starts), g.ints(ends)]
        if axes is not None:
            ins.append(g.ints(axes))
        if steps is not None:
            ins.append(g.ints(steps))
        g.ys = [g.op("Slice", ins)]

        def f(T):
            y = T[x]
            for ax, idx in index_lists.items():
                y = _t().index_select(y, ax, _t().tensor(idx, dtype=_t().int64))
            return [y]
        return f


_slice("Slice_basic", [6, 5], [1], [4], [0], None, {0: [1, 2, 3]})
_slice("Slice_steps", [6, 5, 4], [1, 0], [6, 4], [0, 2], [2, 3], {0: [1, 3, 5], 2: [0, 3]})
_slice("Slice_negative_step", [6, 5], [-1], [-7], [1], [-2], {1: [4, 2, 0]})
_slice("Slice_negative_step_clamped", [6, 5], [4, 10], [0, -100], [0, 1], [-1, -3],
       {0: [4, 3, 2, 1], 1: [4, 1]})
_slice("Slice_negative_bounds", [6, 5], [-4], [-1], None, None, {0: [2, 3, 4]})


@case("Concat_axis1_three", "Concat")
def _(g):
    a, b, c = g.param([2, 3, 4]), g.param([2, 1, 4]), g.param([2, 2, 4])
    g.ys = [g.op("Concat", [a, b, c], axis=1)]
    return lambda T: [_t().cat([T[a], T[b], T[c]], dim=1)]


@case("Concat_axis_neg_same_input_twice", "Concat")
def _(g):
    a, b = g.param([3, 2]), g.param([3, 4])
    g.ys = [g.op("Concat", [a, b, a], axis=-1)]
    return lambda T: [_t().cat([T[a], T[b], T[a]], dim=1)]


@case("Split_sizes", "Split")
def _(g):
    x = g.param([2, 5, 3])
    g.ys = list(g.op("Split", [x, g.ints([2, 3])], n_out=2, axis=1))
    return lambda T: [T[x][:, 0:2], T[x][:, 2:5]]


@case("Split_num_outputs", "Split")
def _(g):
    x = g.param([6, 4])
    g.ys = list(g.op("Split", [x], n_out=3, axis=0, num_outputs=3))
    return lambda T: [T[x][0:2], T[x][2:4], T[x][4:6]]


@case("Split_one_output_unused", "Split")
def _(g):
    x = g.param([6, 4])
    outs = list(g.op("Split", [x, g.ints([1, 3])], n_out=2, axis=1))
    g.ys = [outs[1]]   # the first part does not reach the loss: its gradient is zero
    return lambda T: [T[x][:, 1:4]]


@case("Squeeze", "Squeeze")
def _(g):
    x = g.param([2, 1, 3, 1])
    g.ys = [g.op("Squeeze", [x, g.ints([1, -1])])]
    return lambda T: [T[x].reshape(2, 3)]


@case("Unsqueeze", "Unsqueeze")
def _(g):
    x = g.param([2, 3])
    g.ys = [g.op("Unsqueeze", [x, g.ints([0, 3])])]
    return lambda T: [T[x].reshape(1, 2, 3, 1)]


@case("Expand_broadcast", "Expand")
def _(g):
    x = g.param([3, 1])
    g.ys = [g.op("Expand", [x, g.ints([2, 3, 4])])]
    return lambda T: [T[x].expand(2, 3, 4)]


@case("Expand_rank_kept", "Expand")
def _(g):
    x = g.param([1, 4])
    g.ys = [g.op("Expand", [x, g.ints([3, 1])])]
    return lambda T: [T[x].expand(3, 4)]


@case("Where_broadcast", "Where")
def _(g):
    cond = g.ints(g.rng.random([3, 4]) < 0.5, dtype=bool)
    a, b = g.param([3, 4]), g.param([4])
    g.ys = [g.op("Where", [cond, a, b])]
    return lambda T: [_t().where(T[cond], T[a], T[b].expand(3, 4))]


@case("Where_scalar_branch", "Where")
def _(g):
    cond = g.ints(g.rng.random([2, 3]) < 0.5, dtype=bool)
    a, b = g.param([]), g.param([2, 3])     # a: 0-d, trained
    g.ys = [g.op("Where", [cond, a, b])]
    return lambda T: [_t().where(T[cond], T[a].expand(2, 3), T[b])]


@case("Where_one_elem_branch", "Where")
def _(g):
    cond = g.ints(g.rng.random([2, 3]) < 0.5, dtype=bool)
    a, b = g.param([1]), g.param([2, 3])    # a: [1], trained
    g.ys = [g.op("Where", [cond, a, b])]
    return lambda T: [_t().where(T[cond], T[a].expand(2, 3), T[b])]


@case("Cast_f32_f32", "Cast")
def _(g):
    x = g.param([3, 4])
    g.ys = [g.op("Cast", [x], to=1)]
    return lambda T: [T[x]]


@case("Cast_through_f64", "Cast")
def _(g):
    x = g.param([3, 4])
    d = g.op("Cast", [x], to=11)
    g.ys = [g.op("Cast", [g.op("Mul", [d, d])], to=1)]
    return lambda T: [T[x] * T[x]]


@case("Gather_axis0_repeated", "Gather")
def _(g):
    data = g.param([10, 4])
    idx = g.ints([[1, 3, 1], [7, 1, 0]])
    g.ys = [g.op("Gather", [data, idx], axis=0)]
    return lambda T: [T[data][T[idx].reshape(-1)].reshape(2, 3, 4)]


@case("Gather_axis1_negative", "Gather")
def _(g):
    data = g.param([3, 6, 2])
    idx = g.ints([4, 0, -1, 4])
    g.ys = [g.op("Gather", [data, idx], axis=1)]
    return lambda T: [_t().index_select(T[data], 1, T[idx] % 6)]


@case("Gather_scalar_index", "Gather")
def _(g):
    data = g.param([5, 3])
    idx = g.ints(2)
    g.ys = [g.op("Gather", [data, idx], axis=0)]
    return lambda T: [T[data][2]]


@case("GatherND_repeated", "GatherND")
def _(g):
    data = g.param([4, 3, 2])
    idx = g.ints([[1, 2], [3, 0], [1, 2], [-1, 1]])      # a repeated tuple, a negative index
    g.ys = [g.op("GatherND", [data, idx])]
    return lambda T: [_t().stack([T[data][1, 2], T[data][3, 0], T[data][1, 2], T[data][3, 1]])]


@case("GatherND_batch_dims", "GatherND")
def _(g):
    data = g.param([2, 5, 3])
    idx = g.ints([[[4], [0], [4]], [[2], [1], [3]]])      # [2, 3, 1], batch_dims 1
    g.ys = [g.op("GatherND", [data, idx], batch_dims=1)]

    def f(T):
        rows = [[4, 0, 4], [2, 1, 3]]
        return [_t().stack([_t().stack([T[data][b, r] for r in rows[b]]) for b in range(2)])]
    return f


@case("TopK_largest_axis1", "TopK")
def _(g):
    x = g.param([3, 6])
    vals, _idx = g.op("TopK", [x, g.ints([2])], n_out=2, axis=1)
    g.ys = [vals]
    return lambda T: [_t().topk(T[x], 2, dim=1).values]


@case("TopK_smallest_axis0_router", "TopK")
def _(g):
    # A mixture-of-experts router: softmax over the k chosen logits.
    x = g.param([5, 4])
    vals, _idx = g.op("TopK", [x, g.ints([3])], n_out=2, axis=0, largest=0)
    g.ys = [g.op("Softmax", [vals], axis=0)]
    return lambda T: [_t().softmax(_t().topk(T[x], 3, dim=0, largest=False).values, dim=0)]


@case("ScatterND_none", "ScatterND")
def _(g):
    data, upd = g.param([5, 3]), g.param([2, 3])
    idx = g.ints([[3], [0]])
    g.ys = [g.op("ScatterND", [data, idx, upd])]

    def f(T):
        out = T[data].clone()
        out[3], out[0] = T[upd][0], T[upd][1]
        return [out]
    return f


@case("ScatterND_add_elements", "ScatterND")
def _(g):
    data, upd = g.param([3, 4]), g.param([3])
    idx = g.ints([[0, 1], [2, 3], [0, 1]])                # a repeated tuple adds twice
    g.ys = [g.op("ScatterND", [data, idx, upd], reduction="add")]

    def f(T):
        out = T[data].clone()
        out[0, 1] = out[0, 1] + T[upd][0] + T[upd][2]
        out[2, 3] = out[2, 3] + T[upd][1]
        return [out]
    return f


# Loss ops: their output is the loss; labels are an int64 graph input -----------------------

def _sce(name, shape, labels, reduction, ignore):
    @case(name, "SoftmaxCrossEntropyLoss")
    def _(g):
        scores = g.param(shape, scale=2.0)
        lab = g.input("labels", np.asarray(labels, dtype=np.int64))
        attrs = dict(reduction=reduction)
        if ignore is not None:
            attrs["ignore_index"] = ignore
        g.ys = [g.op("SoftmaxCrossEntropyLoss", [scores, lab], **attrs)]
        g.direct = True

        def f(T):
            X, L = T[scores], T[lab]
            # independent of F.cross_entropy: -log_softmax at the label, masked
            C = X.shape[1]
            logp = X - _t().logsumexp(X, dim=1, keepdim=True)
            keep = (L != ignore) if ignore is not None else _t().ones_like(L, dtype=bool)
            safe = _t().where(keep, L, _t().zeros_like(L))
            onehot = _t().nn.functional.one_hot(safe, C).movedim(-1, 1).to(X.dtype)
            nll = -(logp * onehot).sum(dim=1) * keep.to(X.dtype)
            s = nll.sum()
            return [s / keep.sum() if reduction == "mean" else s]
        return f


_sce("SCE_mean", [5, 4], [0, 3, 1, 1, 2], "mean", None)
_sce("SCE_sum", [5, 4], [0, 3, 1, 1, 2], "sum", None)
_sce("SCE_mean_ignore", [6, 4], [0, -100, 3, 1, -100, 2], "mean", -100)
_sce("SCE_sum_ignore", [6, 4], [0, -100, 3, 1, -100, 2], "sum", -100)
_sce("SCE_mean_ignore_3d", [2, 5, 3], [[0, 4, -100], [2, -100, 1]], "mean", -100)


def _nll(name, labels, reduction, ignore):
    @case(name, "NegativeLogLikelihoodLoss")
    def _(g):
        x = g.param([5, 4])
        lab = g.input("labels", np.asarray(labels, dtype=np.int64))
        attrs = dict(reduction=reduction)
        if ignore is not None:
            attrs["ignore_index"] = ignore
        g.ys = [g.op("NegativeLogLikelihoodLoss", [x, lab], **attrs)]
        g.direct = True

        def f(T):
            X, L = T[x], T[lab]
            keep = (L != ignore) if ignore is not None else _t().ones_like(L, dtype=bool)
            safe = _t().where(keep, L, _t().zeros_like(L))
            picked = X.gather(1, safe[:, None])[:, 0] * keep.to(X.dtype)
            s = -picked.sum()
            return [s / keep.sum() if reduction == "mean" else s]
        return f


_nll("NLL_mean", [1, 0, 3, 3, 2], "mean", None)
_nll("NLL_mean_ignore", [1, -100, 3, 3, -100], "mean", -100)
_nll("NLL_sum_ignore", [1, -100, 3, 0, 2], "sum", -100)


# Convolution, pooling, batch norm (channels first) ---------------------------------------------

def _torch_pads(pads):
    """ONNX pads (begins, then ends) as F.pad's (last dim first)."""
    k = len(pads) // 2
    out = []
    for d in reversed(range(k)):
        out += [pads[d], pads[k + d]]
    return out


def _conv(name, xs, ws, bias, strides, pads, dilations, groups):
    @case(name, "Conv")
    def _(g):
        x, w = g.param(xs), g.param(ws, scale=0.5)
        b = g.param([ws[0]]) if bias else None
        g.ys = [g.op("Conv", [x, w] + ([b] if bias else []), strides=strides, pads=pads,
                     dilations=dilations, group=groups)]
        k = len(xs) - 2

        def f(T):
            conv = getattr(_F(), f"conv{k}d")
            xp = _F().pad(T[x], _torch_pads(pads))
            return [conv(xp, T[w], T[b] if bias else None, stride=strides, dilation=dilations,
                         groups=groups)]
        return f


_conv("Conv_1d_pad_bias", [2, 3, 9], [4, 3, 3], True, [1], [1, 1], [1], 1)
_conv("Conv_2d_stride_pad", [2, 3, 7, 8], [4, 3, 3, 3], True, [2, 2], [1, 0, 1, 2], [1, 1], 1)
_conv("Conv_2d_stride_floor", [1, 2, 8, 9], [3, 2, 3, 2], False, [3, 2], [0, 0, 0, 0], [1, 1], 1)
_conv("Conv_2d_dilation_groups", [2, 4, 9, 9], [6, 2, 3, 3], True, [1, 2], [2, 1, 2, 1], [2, 1], 2)
_conv("Conv_2d_depthwise", [2, 3, 6, 6], [3, 1, 3, 3], False, [1, 1], [1, 1, 1, 1], [1, 1], 3)
_conv("Conv_2d_patch_embed", [2, 3, 8, 8], [5, 3, 4, 4], True, [4, 4], [0, 0, 0, 0], [1, 1], 1)
_conv("Conv_3d", [1, 2, 4, 5, 4], [3, 2, 2, 3, 2], True, [1, 2, 1], [0, 1, 1, 0, 0, 0],
      [1, 1, 1], 1)


def _conv_transpose(name, xs, ws, bias, strides, pads, dilations, groups, output_padding):
    @case(name, "ConvTranspose")
    def _(g):
        x, w = g.param(xs), g.param(ws, scale=0.5)
        b = g.param([ws[1] * groups]) if bias else None
        attrs = dict(strides=strides, pads=pads, dilations=dilations, group=groups)
        if output_padding:
            attrs["output_padding"] = output_padding
        g.ys = [g.op("ConvTranspose", [x, w] + ([b] if bias else []), **attrs)]
        k = len(xs) - 2

        def f(T):
            conv = getattr(_F(), f"conv_transpose{k}d")
            return [conv(T[x], T[w], T[b] if bias else None, stride=strides, padding=pads[:k],
                         output_padding=output_padding or 0, groups=groups,
                         dilation=dilations)]
        return f


_conv_transpose("ConvTranspose_1d", [2, 3, 5], [3, 2, 3], True, [2], [1, 1], [1], 1, None)
_conv_transpose("ConvTranspose_2d_output_padding", [1, 4, 3, 4], [4, 3, 3, 2], True, [2, 3],
                [1, 0, 1, 0], [1, 1], 1, [1, 2])
_conv_transpose("ConvTranspose_2d_groups_dilation", [2, 4, 4, 3], [4, 1, 2, 3], False, [1, 2],
                [0, 1, 0, 1], [2, 1], 2, None)


def _avg_pool(name, xs, kernel, strides, pads, ceil, include):
    @case(name, "AveragePool")
    def _(g):
        x = g.param(xs)
        g.ys = [g.op("AveragePool", [x], kernel_shape=kernel, strides=strides, pads=pads,
                     ceil_mode=ceil, count_include_pad=include)]
        k = len(xs) - 2

        def f(T):
            pool = getattr(_F(), f"avg_pool{k}d")
            return [pool(T[x], kernel, stride=strides, padding=pads[:k], ceil_mode=bool(ceil),
                         count_include_pad=bool(include))]
        return f


_avg_pool("AveragePool_2d", [2, 3, 6, 6], [2, 2], [2, 2], [0, 0, 0, 0], 0, 0)
_avg_pool("AveragePool_2d_overlap_pad", [1, 2, 7, 6], [3, 3], [2, 1], [1, 1, 1, 1], 0, 0)
_avg_pool("AveragePool_2d_count_pad", [1, 2, 5, 6], [3, 2], [2, 2], [1, 1, 1, 1], 0, 1)
_avg_pool("AveragePool_2d_ceil", [1, 2, 7, 8], [3, 3], [2, 3], [0, 0, 0, 0], 1, 0)
_avg_pool("AveragePool_1d", [2, 3, 9], [3], [2], [1, 1], 0, 0)


def _max_pool(name, xs, kernel, strides, pads, dilations, ceil, ties=False):
    @case(name, "MaxPool")
    def _(g):
        x = g.param(xs)
        if ties:   # values on a coarse grid: windows with equal maxima (the first one wins)
            g.inits[x] = np.round(g.inits[x] * 2.0).astype(np.float32) / 2.0
        g.ys = [g.op("MaxPool", [x], kernel_shape=kernel, strides=strides, pads=pads,
                     dilations=dilations, ceil_mode=ceil)]
        k = len(xs) - 2

        def f(T):
            pool = getattr(_F(), f"max_pool{k}d")
            return [pool(T[x], kernel, stride=strides, padding=pads[:k], dilation=dilations,
                         ceil_mode=bool(ceil))]
        return f


_max_pool("MaxPool_2d", [2, 3, 6, 6], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], 0)
_max_pool("MaxPool_2d_overlap_pad", [1, 2, 7, 6], [3, 3], [2, 1], [1, 1, 1, 1], [1, 1], 0)
_max_pool("MaxPool_2d_ties", [2, 2, 6, 7], [3, 3], [1, 2], [1, 1, 1, 1], [1, 1], 0, ties=True)
_max_pool("MaxPool_2d_ceil_dilation", [1, 2, 9, 8], [2, 3], [2, 2], [0, 1, 0, 1], [2, 1], 1)
_max_pool("MaxPool_1d", [2, 3, 10], [3], [2], [1, 1], [1], 0)


@case("BatchNormalization_4d", "BatchNormalization")
def _(g):
    # The statistics reach BatchNormalization through an Identity, so they are
    # parameters here (read by another node) and their rules are checked too.
    x = g.param([2, 3, 4, 5])
    s, b = g.param([3], low=0.5, high=1.5), g.param([3])
    m, v = g.param([3], scale=0.3), g.param([3], low=0.5, high=2.0)
    g.ys = [g.op("BatchNormalization", [x, s, b, g.op("Identity", [m]), g.op("Identity", [v])],
                 epsilon=1e-3)]
    c = lambda t: t.reshape(3, 1, 1)
    return lambda T: [(T[x] - c(T[m])) / _t().sqrt(c(T[v]) + 1e-3) * c(T[s]) + c(T[b])]


@case("BatchNormalization_2d", "BatchNormalization")
def _(g):
    x = g.param([6, 4])
    s, b = g.param([4], low=0.5, high=1.5), g.param([4])
    # Read only as the statistics: running_mean / running_var, buffers in
    # PyTorch, not trained.
    m, v = g.param([4], scale=0.3), g.param([4], low=0.5, high=2.0)
    g.state |= {m, v}
    g.ys = [g.op("BatchNormalization", [x, s, b, m, v])]
    return lambda T: [(T[x] - T[m]) / _t().sqrt(T[v] + 1e-5) * T[s] + T[b]]


# Piecewise activations with attributes: x on both sides of the kink, none on it.
NEW_PIECEWISE = {
    "Celu": (dict(alpha=0.7), [0.0], lambda x: _F().celu(x, alpha=0.7)),
    "Celu_default": (dict(), [0.0], lambda x: _F().celu(x, alpha=1.0)),
    "Selu": (dict(), [0.0], lambda x: _F().selu(x)),
    "Selu_alpha_gamma": (dict(alpha=1.5, gamma=2.0), [0.0],
                         lambda x: 2.0 * _t().where(x > 0, x, 1.5 * (_t().exp(x) - 1.0))),
    # ThresholdedRelu: y = x for x > alpha, else 0 (the gradient jumps at alpha).
    "ThresholdedRelu": (dict(alpha=0.5), [0.5], lambda x: _t().where(x > 0.5, x, _t().zeros_like(x))),
}
for _name, (_attrs, _kinks, _fn) in NEW_PIECEWISE.items():
    def _mk(name=_name, attrs=_attrs, kinks=_kinks, fn=_fn):
        op = name.split("_")[0]

        @case(name, op)
        def _(g):
            x = g.param([4, 6], scale=2.0)
            _spread(g, x, kinks)
            g.ys = [g.op(op, [x], **attrs)]
            return lambda T: [fn(T[x])]
    _mk()


# Mish (decomposed: X * Tanh(Softplus(X))) --------------------------------------------

@case("Mish", "Mish")
def _(g):
    x = g.param([3, 5], scale=2.5)
    g.ys = [g.op("Mish", [x])]
    return lambda T: [_F().mish(T[x])]


# PRelu (decomposed: Where(X < 0, X * slope, X)); the slope a per-channel or a last-dim
# parameter -------------------------------------------------------------------------------

@case("PRelu_channel", "PRelu")
def _(g):
    x = g.param([2, 3, 4], scale=2.0)
    s = g.param([3, 1], scale=0.5)
    g.ys = [g.op("PRelu", [x, s])]
    return lambda T: [_t().where(T[x] < 0, T[x] * T[s], T[x])]


@case("PRelu_lastdim", "PRelu")
def _(g):
    x = g.param([3, 5], scale=2.0)
    s = g.param([5], scale=0.5)
    g.ys = [g.op("PRelu", [x, s])]
    return lambda T: [_t().where(T[x] < 0, T[x] * T[s], T[x])]


# Einsum (decomposed into Transpose/Reshape/MatMul/Mul/ReduceSum/Slice) ------------------

EINSUMS = [
    # (case tag, equation, operand shapes)
    ("attention_scores", "bhqd,bhkd->bhqk", [[2, 2, 3, 4], [2, 2, 5, 4]]),
    ("transpose", "ij->ji", [[3, 4]]),
    ("batched_matmul_ellipsis", "...ij,...jk->...ik", [[2, 3, 4], [2, 4, 5]]),
    ("ellipsis_broadcast", "...ij,...jk->...ik", [[1, 3, 4], [2, 4, 5]]),
    ("rowwise_dot", "bi,bi->b", [[3, 6], [3, 6]]),
    ("outer", "i,j->ij", [[3], [4]]),
    ("sum_all", "ijk->", [[2, 3, 4]]),
    ("implicit_matmul", "ij,jk", [[3, 4], [4, 5]]),
    ("sum_one_side", "ij,jk->k", [[3, 4], [4, 5]]),
    ("chain3", "ij,jk,kl->il", [[2, 3], [3, 4], [4, 2]]),
    ("batch_out_of_order", "bij,bjk->kbi", [[2, 3, 4], [2, 4, 5]]),
    ("diagonal", "ii->i", [[4, 4]]),
    ("trace_times", "ii,ij->j", [[3, 3], [3, 4]]),
    ("hadamard", "ij,ij->ij", [[3, 4], [3, 4]]),
    ("bilinear", "bn,anm,bm->ba", [[2, 3], [4, 3, 5], [2, 5]]),
]
for _tag, _eq, _shapes in EINSUMS:
    def _mk(tag=_tag, eq=_eq, shapes=_shapes):
        @case(f"Einsum_{tag}", "Einsum")
        def _(g):
            ps = [g.param(s) for s in shapes]
            g.ys = [g.op("Einsum", ps, equation=eq)]
            return lambda T: [_t().einsum(eq, *[T[p] for p in ps])]
    _mk()


# InstanceNormalization (decomposed: LayerNormalization over [2, rank), Mul, Add) ------

def _instance_norm(name, shape, eps):
    @case(name, "InstanceNormalization")
    def _(g):
        x = g.param(shape, scale=2.0)
        s = g.param([shape[1]], low=0.5, high=1.5)
        b = g.param([shape[1]], scale=0.3)
        g.ys = [g.op("InstanceNormalization", [x, s, b], epsilon=eps)]
        return lambda T: [_F().instance_norm(T[x], weight=T[s], bias=T[b], eps=eps)]


_instance_norm("InstanceNormalization_1d", [2, 3, 5], 1e-5)
_instance_norm("InstanceNormalization_2d", [2, 3, 4, 4], 1e-3)
_instance_norm("InstanceNormalization_3d", [1, 2, 2, 3, 4], 1e-5)


# Parameters that get no gradient -------------------------------------------------------------

@case("Unused_initializers", "Unused")
def _(g):
    x = g.param([3, 4])
    free = g.param([5], name="unused_free")          # used by no node
    dead = g.param([3, 4], name="unused_dead")       # feeds a node whose result is dropped
    g.op("Mul", [dead, dead])
    g.unused |= {free, dead}
    g.ys = [g.op("Tanh", [x])]
    return lambda T: [_t().tanh(T[x])]


# A small composite: several rules chained (residual, shared parameter) ------------------------

@case("Chain_mlp_layernorm_residual", "Chain")
def _(g):
    x = g.param([4, 6])
    w1, b1 = g.param([6, 8], scale=0.5), g.param([8])
    w2 = g.param([8, 6], scale=0.5)
    s, b = g.param([6], low=0.5, high=1.5), g.param([6])
    h = g.op("Gelu", [g.op("Add", [g.op("MatMul", [x, w1]), b1])])
    r = g.op("Add", [g.op("MatMul", [h, w2]), x])
    y = g.op("LayerNormalization", [r, s, b], axis=-1, epsilon=1e-5)
    g.ys = [g.op("Mul", [y, y])]

    def f(T):
        H = _F().gelu(T[x] @ T[w1] + T[b1])
        R = H @ T[w2] + T[x]
        Y = _F().layer_norm(R, (6,), T[s], T[b], 1e-5)
        return [Y * Y]
    return f


# ---------------------------------------------------------------------------
# Building, validating and running one case
# ---------------------------------------------------------------------------

ONNX_TYPES = {np.dtype(np.float32): 1, np.dtype(np.int64): 7, np.dtype(bool): 9}


class Stale(Exception):
    """The stored reference does not fit the case as this script builds it."""


def scalar_consts(g):
    """Float initializers the importer does not train, so no gradient: 0-d ones under
    an exporter's name (constants) and the case's `state` (BatchNormalization's
    running statistics)."""
    return {k for k, v in g.inits.items()
            if v.dtype == np.float32 and v.ndim == 0 and k.startswith(("val_", "onnx::"))} | g.state


def r_names(g):
    return [f"r{i}" if len(g.ys) > 1 else "r" for i in range(len(g.ys))]


def torch_reference(g, tfn, rng):
    """The case's float64 PyTorch reference: dict(inputs (graph inputs and r weights),
    loss, ys, grads); trained initializers are float64 leaves."""
    import torch
    consts = scalar_consts(g)
    T, leaves = {}, {}
    for k, v in g.inits.items():
        if v.dtype == np.float32:
            t = torch.tensor(v.astype(np.float64), requires_grad=k not in consts)
            if k not in consts:
                leaves[k] = t
        else:
            t = torch.tensor(v)
        T[k] = t
    for k, v in g.inputs.items():
        T[k] = torch.tensor(v)
    ys = tfn(T)
    if len(ys) != len(g.ys):
        raise RuntimeError(f"torch gives {len(ys)} outputs, the graph {len(g.ys)}")
    inputs = dict(g.inputs)
    if g.direct:
        loss_t = ys[0]
    else:
        loss_t = 0
        for rn, y in zip(r_names(g), ys):
            r = rng.standard_normal(tuple(y.shape)).astype(np.float32)
            inputs[rn] = r
            loss_t = loss_t + (y * torch.tensor(r.astype(np.float64))).sum()
    loss_t.backward()
    return dict(inputs=inputs, loss=float(loss_t.detach()),
                ys={} if g.direct else {yn: y.detach().numpy() for yn, y in zip(g.ys, ys)},
                grads={k: (t.grad.numpy() if t.grad is not None else None) for k, t in leaves.items()})


def stored_reference(name, g, stored):
    """The case's reference from the stored file; its initializer and input values
    replace the generated ones (names, dtypes and shapes must agree)."""
    pre = f"{name}/"
    mine = {k[len(pre):]: v for k, v in stored.items() if k.startswith(pre)}
    if not mine:
        raise Stale("no stored reference for this case (a new case?)")

    def part(p):
        return {k[len(p):]: v for k, v in mine.items() if k.startswith(p)}
    inits, inputs = part("init/"), part("input/")
    want_inputs = set(g.inputs) | (set() if g.direct else set(r_names(g)))
    if set(inits) != set(g.inits) or set(inputs) != want_inputs:
        raise Stale(f"stored initializers {sorted(inits)} / inputs {sorted(inputs)}, the case has "
                    f"{sorted(g.inits)} / {sorted(want_inputs)}")
    for k, v in inits.items():
        if v.dtype != g.inits[k].dtype or v.shape != g.inits[k].shape:
            raise Stale(f"initializer {k}: stored {v.dtype}{list(v.shape)}, the case builds "
                        f"{g.inits[k].dtype}{list(g.inits[k].shape)}")
        g.inits[k] = v
    for k in g.inputs:
        if inputs[k].dtype != g.inputs[k].dtype or inputs[k].shape != g.inputs[k].shape:
            raise Stale(f"input {k}: stored {inputs[k].dtype}{list(inputs[k].shape)}, the case builds "
                        f"{g.inputs[k].dtype}{list(g.inputs[k].shape)}")
    ys = part("y/")
    if not g.direct and set(ys) != set(g.ys):
        raise Stale(f"stored op outputs {sorted(ys)}, the case has {sorted(g.ys)}")
    grads = part("grad/")
    consts = scalar_consts(g)
    trained = {k for k, v in g.inits.items() if v.dtype == np.float32 and k not in consts}
    if set(grads) - trained:
        raise Stale(f"stored gradients of {sorted(set(grads) - trained)}, not trained in the case")
    return dict(inputs=inputs, loss=float(mine["loss"]), ys=ys,
                grads={k: grads.get(k) for k in trained})


def build_case(name, fn, seed, stored=None):
    """Builds the case's graph; its reference from torch (stored None) or from the
    stored tensors."""
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(seed)
    g = G(rng)
    tfn = fn(g)
    ref = torch_reference(g, tfn, rng) if stored is None else stored_reference(name, g, stored)
    inputs = ref["inputs"]
    nodes = list(g.nodes)
    if g.direct:
        nodes.append(helper.make_node("Identity", [g.ys[0]], ["loss"], name="loss_out"))
    else:
        terms = []
        for yname, rn in zip(g.ys, r_names(g)):
            prod = f"{rn}_prod"
            nodes.append(helper.make_node("Mul", [yname, rn], [prod], name=f"{rn}_mul"))
            out = "loss" if len(g.ys) == 1 else f"{rn}_sum"
            nodes.append(helper.make_node("ReduceSum", [prod], [out], name=f"{rn}_sum", keepdims=0))
            terms.append(out)
        while len(terms) > 1:
            out = "loss" if len(terms) == 2 else f"acc{len(terms)}"
            nodes.append(helper.make_node("Add", terms[:2], [out], name=f"add_{out}"))
            terms = [out] + terms[2:]

    def vi(n, arr):
        return helper.make_tensor_value_info(n, ONNX_TYPES[np.asarray(arr).dtype], list(np.shape(arr)))

    def model(extra_outputs):
        outs = [helper.make_tensor_value_info("loss", 1, [])]
        for yname, y in extra_outputs:
            outs.append(helper.make_tensor_value_info(yname, 1, list(y.shape)))
        graph = helper.make_graph(
            nodes, f"grad_{name}", [vi(k, v) for k, v in inputs.items()], outs,
            initializer=[numpy_helper.from_array(v, k) for k, v in g.inits.items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="grad_ops.py")
        m.ir_version = 10
        return m

    train_m = model([])
    check_m = model([(yn, ref["ys"][yn]) for yn in g.ys] if not g.direct else [])
    return dict(g=g, train=train_m, check=check_m, inputs=inputs, loss=ref["loss"], ys=ref["ys"],
                grads=ref["grads"], consts=scalar_consts(g))


def validate_with_ort(name, c, path):
    """The model is valid ONNX and onnxruntime agrees with the torch function."""
    import onnx
    import onnxruntime as ort
    onnx.checker.check_model(c["check"], full_check=True)
    onnx.save(c["check"], str(path))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    outs = dict(zip(names, sess.run(names, c["inputs"])))
    problems = []
    want = {"loss": np.float64(c["loss"]), **c["ys"]}
    worst = 0.0
    for k, w in want.items():
        got = outs[k]
        if got.shape != np.shape(w):
            problems.append(f"{k}: onnxruntime shape {got.shape}, torch {np.shape(w)}")
            continue
        err = np.abs(got.astype(np.float64) - w)
        tol = RTOL * np.abs(w) + ATOL * max(1.0, float(np.max(np.abs(w))) if np.size(w) else 1.0)
        worst = max(worst, float(np.max(err / tol)) if np.size(w) else 0.0)
        if np.any(err > tol):
            problems.append(f"{k}: onnxruntime vs torch max abs error {float(err.max()):.3g}")
    return problems, outs, worst


def run(cmd):
    return tools.call(cmd, ENV)


def invalid_case(a, problems):
    why = "; ".join(problems)
    if a.live or a.write_ref:
        return "invalid case (onnxruntime and the torch function disagree): " + why
    return (f"invalid case: onnxruntime on the graph disagrees with the torch outputs stored in "
            f"{REF_FILE.name} ({why}); if the case was changed on purpose, regenerate: {REGEN}")


def check_case(a, name, fn, work, seed, stats, stored=None):
    """Returns ('PASS'|'FAIL'|'SKIP', message)."""
    import onnx
    from safetensors.numpy import load_file, save_file
    c = build_case(name, fn, seed, stored)
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    problems, ort_outs, ort_worst = validate_with_ort(name, c, d / "check.onnx")
    if problems:
        return "FAIL", invalid_case(a, problems)
    onnx.checker.check_model(c["train"], full_check=True)
    model_path = d / "model.onnx"
    onnx.save(c["train"], str(model_path))
    zrt, w, inp, out = d / "m.zrt", d / "w.safetensors", d / "in.safetensors", d / "out.safetensors"
    if c["inputs"]:
        save_file({k: np.array(v, order="C") for k, v in c["inputs"].items()}, str(inp))
    train_args = [] if a.forward_only else ["--train", "--optimizer", "none"]
    cmd = tools.zero_opt(a.zero_opt, model_path, {}, train_args, zrt, w)
    r = run(cmd)
    if r.returncode != 0:
        msg = (r.stdout + r.stderr).strip()
        if "Unknown command line argument '--train'" in msg:
            return "SKIP", "zero-opt does not support --train yet"
        return "FAIL", f"zero-opt failed: {' '.join(cmd)}\n{msg[-2000:]}"
    rcmd = [a.zero_run, str(zrt), "--weights", str(w), "--output", str(out)]
    if c["inputs"]:
        rcmd += ["--input", str(inp)]
    r = run(rcmd)
    if r.returncode != 0:
        return "FAIL", f"zero-run failed: {' '.join(rcmd)}\n{(r.stdout + r.stderr).strip()[-2000:]}"
    got = load_file(str(out))
    msgs, bad = [], False
    if "loss" not in got:
        return "FAIL", "no 'loss' output"
    lerr = abs(float(got["loss"]) - float(ort_outs["loss"]))
    if not lerr <= RTOL * abs(float(ort_outs["loss"])) + ATOL:
        bad = True
        msgs.append(f"loss {float(got['loss']):.7g} vs onnxruntime {float(ort_outs['loss']):.7g}")
    if a.forward_only:
        return ("FAIL" if bad else "PASS"), "; ".join(msgs) or f"forward loss matches onnxruntime (abs {lerr:.2g})"
    g = c["g"]
    worst = (0.0, "")
    for k, v in g.inits.items():
        key = f"grad.{k}"
        if v.dtype != np.float32:
            if key in got:
                bad = True
                msgs.append(f"{key}: a gradient for a {v.dtype} initializer")
            continue
        if k in c["consts"]:
            if key in got:
                bad = True
                msgs.append(f"{key}: a gradient for an exporter's 0-d scalar or a running "
                            f"statistic (the importer does not train those, so none is expected)")
            continue
        if k in g.unused:
            if key not in got:
                stats.setdefault("unused", set()).add("no output")
            elif got[key].shape == v.shape and not np.any(got[key]):
                stats.setdefault("unused", set()).add("zero output")
            else:
                bad = True
                msgs.append(f"{key}: not on the path to the loss, but the output is not zeros")
            continue
        want = c["grads"][k]
        if want is None:
            want = np.zeros(v.shape)
        if key not in got:
            bad = True
            msgs.append(f"{key}: missing")
            continue
        gk = got[key]
        if gk.shape != want.shape:
            bad = True
            msgs.append(f"{key}: shape {list(gk.shape)}, expected {list(want.shape)}")
            continue
        err = np.abs(gk.astype(np.float64) - want)
        tol = RTOL * np.abs(want) + ATOL * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        ratio = float(np.max(err / tol)) if want.size else 0.0
        if not np.all(np.isfinite(gk)) or ratio > 1:
            bad = True
            i = np.unravel_index(np.argmax(err / tol), want.shape) if want.size else ()
            msgs.append(f"{key}: max abs error {float(err.max()):.3g} (worst at {[int(j) for j in i]}: got "
                        f"{float(gk[i]):.7g}, torch {float(want[i]):.7g})")
        if ratio > worst[0]:
            worst = (ratio, key)
        if ratio > stats.get("worst", (0.0, ""))[0]:
            stats["worst"] = (ratio, f"{name} {key}: max abs error {float(err.max()):.3g}")
    extra = sorted(k for k in got if k.startswith("grad.") and k[5:] not in g.inits)
    if extra:
        bad = True
        msgs.append(f"gradients of unknown tensors: {extra}")
    if bad:
        return "FAIL", "; ".join(msgs)
    n_const = len(c["consts"])
    return "PASS", f"{sum(1 for k, v in g.inits.items() if v.dtype == np.float32 and k not in g.unused and k not in c['consts'])} " \
                   f"gradients, worst error/tolerance {worst[0]:.2g}" + (f" ({worst[1]})" if worst[1] else "") + \
                   (f"; no gradient for the untrained {'ones' if n_const > 1 else 'one'} "
                    f"{', '.join(sorted(c['consts']))}" if n_const else "")


def case_seed(base, name):
    """The case's generator seed: from its name, so adding a case changes no other."""
    return zlib.crc32(f"{base}:{name}".encode()) & 0x7FFFFFFF


def save_sorted(path, tensors, metadata):
    """safetensors.numpy.save_file, then the JSON header rewritten with sorted keys (the
    Rust writer emits the metadata in hash-map order): re-runs are byte-identical."""
    from safetensors.numpy import save_file
    save_file(tensors, str(path), metadata=metadata)
    raw = bytearray(Path(path).read_bytes())
    n = int.from_bytes(raw[:8], "little")
    new = json.dumps(json.loads(raw[8:8 + n]), separators=(",", ":"), sort_keys=True).encode()
    if len(new) <= n:
        raw[8:8 + n] = new + b" " * (n - len(new))
        Path(path).write_bytes(bytes(raw))
    os.chmod(path, 0o644)


def write_ref(a, work, seed):
    """Builds every case with its torch reference, checks it with onnxruntime and writes
    REF_FILE. Returns the exit status."""
    import onnx
    import onnxruntime
    import torch
    tensors, bad = {}, []
    for name, op, fn in CASES:
        c = build_case(name, fn, case_seed(seed, name))
        (work / name).mkdir(parents=True, exist_ok=True)
        problems, _, w = validate_with_ort(name, c, work / name / "check.onnx")
        if problems:
            bad.append(name)
            log(f"FAIL {op:26s} {name}: " + invalid_case(a, problems))
            continue
        for k, v in c["g"].inits.items():
            tensors[f"{name}/init/{k}"] = v
        for k, v in c["inputs"].items():
            tensors[f"{name}/input/{k}"] = np.asarray(v)
        tensors[f"{name}/loss"] = np.asarray(c["loss"], dtype=np.float64)
        for k, v in c["ys"].items():
            tensors[f"{name}/y/{k}"] = np.asarray(v, dtype=np.float64)
        for k, v in c["grads"].items():
            if v is not None:
                tensors[f"{name}/grad/{k}"] = np.asarray(v, dtype=np.float64)
        log(f"ok   {op:26s} {name}: onnxruntime matches torch (worst error/tolerance {w:.2g})")
    if bad:
        log(f"not written: {len(bad)} invalid case(s): {', '.join(bad)}")
        return 1
    meta = {"format": "zero grad_ops reference 1 (test/e2e/grad_ops.py)",
            "cases": json.dumps([n for n, _, _ in CASES]),
            "seed": str(seed), "opset": str(OPSET),
            "torch_version": torch.__version__, "onnx_version": onnx.__version__,
            "onnxruntime_version": onnxruntime.__version__, "numpy_version": np.__version__,
            "python_version": platform.python_version(),
            "regenerate": "scripts/setup-pyenv.sh full && " + REGEN}
    save_sorted(a.ref, {k: np.array(v, order="C") for k, v in tensors.items()}, meta)
    log(f"wrote {a.ref} ({Path(a.ref).stat().st_size} bytes, {len(CASES)} cases, {len(tensors)} tensors)")
    return 0


def read_stored(path):
    """(tensors, metadata) of the stored reference file."""
    from safetensors import safe_open
    with safe_open(str(path), "np") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default=str(ROOT / "build" / "bin"))
    ap.add_argument("--zero-opt", default=None)
    ap.add_argument("--zero-run", default=None)
    ap.add_argument("--only", default="", help="comma-separated op types or case names")
    ap.add_argument("--skip", default="", help="comma-separated op types or case names to leave out "
                    "(reported as SKIP)")
    ap.add_argument("--include-unsupported", action="store_true",
                    help="also run the cases of operators listed as unsupported (" +
                         (", ".join(sorted(UNSUPPORTED)) or "none") + ")")
    ap.add_argument("--work", default=None, help="scratch directory (default: temporary, removed on success)")
    ap.add_argument("--ref", default=str(REF_FILE), help=f"the stored reference (default {REF_FILE.name} "
                    "next to this script)")
    ap.add_argument("--live", action="store_true",
                    help="compute the references with torch (float64) instead of reading --ref")
    ap.add_argument("--write-ref", action="store_true",
                    help="build every case with torch, check it with onnxruntime and write --ref "
                         f"(needs torch; `{REGEN}`)")
    ap.add_argument("--seed", type=int, default=None,
                    help="base of the cases' generator seeds (--live / --write-ref; default 0)")
    ap.add_argument("--forward-only", action="store_true",
                    help="no --train: compile the forward program and compare its loss with onnxruntime")
    ap.add_argument("--validate-only", action="store_true",
                    help="only build the cases and compare the torch reference with onnxruntime (no zero-opt)")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    a.zero_opt = a.zero_opt or str(Path(a.bin_dir) / "zero-opt")
    a.zero_run = a.zero_run or str(Path(a.bin_dir) / "zero-run")
    only = {s for s in a.only.split(",") if s}
    cases = [(n, op, fn) for n, op, fn in CASES if not only or n in only or op in only]
    if a.list:
        for n, op, _ in cases:
            print(f"{op:28s} {n}" + (f"   (skipped: {UNSUPPORTED[op]})" if op in UNSUPPORTED else ""))
        return 0
    if only and not cases:
        ap.error(f"--only {a.only}: no such op or case")
    if a.write_ref and (only or a.skip):
        ap.error("--write-ref writes every case: no --only / --skip")
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        log(f"SKIP: grad_ops needs onnx, onnxruntime and safetensors in this Python ({e}); "
            "scripts/setup-pyenv.sh test installs them")
        return SKIP
    if a.live or a.write_ref:
        try:
            import torch
            torch.set_num_threads(1)
        except ImportError as e:
            if a.write_ref:
                log(f"FAIL: --write-ref needs torch ({e}); scripts/setup-pyenv.sh full installs it")
                return 1
            log(f"SKIP: --live needs torch in this Python ({e}); scripts/setup-pyenv.sh full installs "
                f"it (without --live the stored {REF_FILE.name} is the reference)")
            return SKIP
    stored = None
    seed = 0 if a.seed is None else a.seed
    if not (a.live or a.write_ref):
        if not Path(a.ref).exists():
            log(f"FAIL: {a.ref} not found: write it with `{REGEN}` (needs torch), or pass --live")
            return 1
        stored, meta = read_stored(a.ref)
        seed = int(meta.get("seed", 0))
        if a.seed is not None and a.seed != seed:
            ap.error(f"--seed {a.seed}: {Path(a.ref).name} was written with seed {seed}; use --live")
        log(f"references: {a.ref} (torch {meta.get('torch_version', '?')}, float64)")
    if not (a.validate_only or a.write_ref):
        for t in (a.zero_opt, a.zero_run):
            if not os.path.exists(t):
                log(f"SKIP: {t} not found (build it, or pass --bin-dir)")
                return SKIP
    tmp = None
    if a.work:
        work = Path(a.work)
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
    else:
        tmp = work = Path(tempfile.mkdtemp(prefix="grad-ops-"))
    if a.write_ref:
        rc = write_ref(a, work, seed)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return rc
    results, stats = {}, {}
    skip = {s for s in a.skip.split(",") if s}
    for name, op, fn in cases:
        seed_i = case_seed(seed, name)
        if name in skip or op in skip:
            results[name] = "SKIP"
            log(f"SKIP {op:26s} {name}: left out by --skip")
            continue
        if op in UNSUPPORTED and not (a.include_unsupported or a.validate_only):
            results[name] = "SKIP"
            log(f"SKIP {op:26s} {name}: {UNSUPPORTED[op]}")
            continue
        try:
            if a.validate_only:
                c = build_case(name, fn, seed_i, stored)
                (work / name).mkdir(parents=True, exist_ok=True)
                problems, _, w = validate_with_ort(name, c, work / name / "check.onnx")
                st, msg = ("FAIL", invalid_case(a, problems)) if problems else \
                    ("PASS", f"onnxruntime matches torch (worst error/tolerance {w:.2g})")
            else:
                st, msg = check_case(a, name, fn, work, seed_i, stats, stored)
        except Stale as e:
            st, msg = "FAIL", f"{Path(a.ref).name} does not fit this case ({e}): regenerate with `{REGEN}`"
        except Exception as e:  # a broken case is a failure of this script, reported as such
            st, msg = "FAIL", f"{type(e).__name__}: {e}"
        results[name] = st
        log(f"{st} {op:26s} {name}: {msg}")
    if stored is not None:
        extra = sorted({k.split("/")[0] for k in stored} - {n for n, _, _ in CASES})
        if extra:
            log(f"note: {Path(a.ref).name} also holds cases this script no longer has: {extra}")
    n = {s: sum(1 for v in results.values() if v == s) for s in ("PASS", "FAIL", "SKIP")}
    if "worst" in stats:
        log(f"worst gradient over all cases: error/tolerance {stats['worst'][0]:.3g} at {stats['worst'][1]}")
    if "unused" in stats:
        log(f"float initializers off the path to the loss: the compiler gives "
            f"{' and '.join(sorted(stats['unused']))} (PyTorch: None; both accepted)")
    mode = "validate-only" if a.validate_only else "forward-only" if a.forward_only else "gradients"
    src = "torch, live" if a.live else "stored"
    log(f"grad_ops ({mode}, {src} references): {n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped")
    if n["FAIL"]:
        log(f"(scratch files kept in {work})")
        return 1
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    if n["PASS"] == 0 and n["SKIP"]:
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
