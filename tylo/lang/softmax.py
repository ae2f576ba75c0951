"""Online softmax on fragments, for any ownership that has a reduction plan (rows along axis 0,
the softmax along axis 1).

These helpers are written in the kernel language and inlined where they are
called (like ``@tylo.func``). Masked scores are ``-inf``; a row whose scores
are all ``-inf`` so far keeps ``m = -inf`` and ``l = 0`` and produces zero
weights, without branches: the exponent base is replaced by 0 where the
running max is still ``-inf`` (so ``-inf - -inf`` never happens).

The ``_exp2`` family is FlashAttention's form: scores stay raw, the softmax scale is folded
into one ``fma`` per score with ``scale_log2 = scale * log2(e)``, exponentials are
``ex2.approx.ftz``, and the row sum stays a per-thread partial (``s.sum(axis=1, lanes=False)``,
no shuffles per block) until ``online_softmax_finish_exp2`` reduces it once and gives the
log-sum-exp in natural-log units.
"""
from ..layouts import reduction_plan
from . import core as tl
from .base import LangError, builtin
from .fragment import Fragment, full, lane_partial_ownership

NEG_INF = float("-inf")
LN2 = 0.6931471805599453
LOG2E = 1.4426950408889634

__all__ = ["online_softmax_update", "online_softmax_merge", "online_softmax_normalize", "log_sum_exp",
           "row_softmax", "NEG_INF", "LN2", "LOG2E", "online_softmax_start", "online_softmax_update_exp2",
           "online_softmax_finish_exp2", "online_softmax_normalize_fast"]


def _inline(fn):
    fn.__tylo_func__ = fn
    return fn


@_inline
def online_softmax_update(m, l, s):
    """Fold a block of scores ``s`` into the running max ``m`` and sum ``l`` (both reduced along axis 1).

    Returns ``(m_new, l_new, rescale, p)``: multiply earlier accumulators by ``rescale``
    and add the contribution of the weights ``p``.
    """
    m_new = tl.maximum(m, s.max(axis=1))
    base = tl.where(m_new == NEG_INF, 0.0, m_new)
    rescale = tl.exp(m - base)
    p = tl.exp(s - base)
    l_new = l * rescale + p.sum(axis=1)
    return m_new, l_new, rescale, p


@_inline
def online_softmax_merge(m1, l1, m2, l2):
    """Combine two partial softmax states over disjoint column sets."""
    m = tl.maximum(m1, m2)
    base = tl.where(m == NEG_INF, 0.0, m)
    return m, l1 * tl.exp(m1 - base) + l2 * tl.exp(m2 - base)


@_inline
def online_softmax_normalize(acc, l):
    """``acc / l`` row by row; rows with ``l == 0`` (everything masked) give 0."""
    return acc / tl.where(l == 0.0, 1.0, l)


@_inline
def log_sum_exp(m, l):
    """``log(sum(exp(s)))`` per row from the running state (``-inf`` for empty rows)."""
    return tl.where(l == 0.0, NEG_INF, m + tl.log(tl.where(l == 0.0, 1.0, l)))


@_inline
def row_softmax(s):
    """Softmax along axis 1 of a fragment (rows of ``-inf`` give zeros)."""
    m = s.max(axis=1)
    base = tl.where(m == NEG_INF, 0.0, m)
    p = tl.exp(s - base)
    total = p.sum(axis=1)
    return p / tl.where(total == 0.0, 1.0, total)


@builtin
def online_softmax_start(scores, *, _ctx):
    """``(m, l)`` for ``online_softmax_update_exp2`` over fragments like ``scores`` (a Fragment or its
    Ownership): ``m = -inf`` per row (the reduced ownership) and ``l = 0`` per thread and row
    (``lane_partial_ownership``)."""
    from ..ir import types as T

    own = scores.ownership if isinstance(scores, Fragment) else scores
    try:
        rows = reduction_plan(own, 1).result
        partial = lane_partial_ownership(own, 1)
    except (ValueError, AttributeError, TypeError) as exc:
        raise LangError(f"online_softmax_start: {exc}") from None
    return full(T.f32, rows, NEG_INF, _ctx=_ctx), full(T.f32, partial, 0.0, _ctx=_ctx)


@_inline
def online_softmax_update_exp2(m, l, s, scale_log2):
    """Fold raw scores ``s`` into the state; the weights are ``exp(scale * (s - m))`` computed as
    ``exp2(fma(s, scale_log2, -m * scale_log2))`` with ``ex2.approx.ftz``.

    ``m``: running row max of the raw scores (reduced, exact: shuffles per block); ``l``: per-thread
    partial row sums (no shuffles). Returns ``(m_new, l_new, rescale, p)``: multiply earlier
    accumulators by ``rescale`` and add the contribution of the weights ``p``.
    """
    m_new = tl.maximum(m, s.max(axis=1))
    base = tl.where(m_new == NEG_INF, 0.0, m_new * scale_log2)
    rescale = tl.exp2(m * scale_log2 - base, fast=True)
    p = tl.exp2(tl.fma(s, scale_log2, -base), fast=True)
    l_new = l * rescale + p.sum(axis=1, lanes=False)
    return m_new, l_new, rescale, p


@_inline
def online_softmax_finish_exp2(m, l, scale_log2):
    """``(row_sum, lse)``: the per-thread partial sums reduced across lanes (the only shuffles of the
    sum), and ``log(sum(exp(scale * s)))`` per row in natural-log units (``-inf`` for empty rows)."""
    total = l.sum(axis=1)
    safe = tl.where(total == 0.0, 1.0, total)
    lse = tl.where(total == 0.0, NEG_INF, (m * scale_log2 + tl.log2(safe)) * LN2)
    return total, lse


@_inline
def online_softmax_normalize_fast(acc, l):
    """``acc / l`` row by row with one ``rcp.approx.ftz`` per row (no IEEE division, which would make
    ptxas serialise the kernel's WGMMAs); rows with ``l == 0`` give 0."""
    return acc * tl.rcp(tl.where(l == 0.0, 1.0, l), fast=True)
