"""Online softmax on fragments, for any ownership that has a reduction plan (rows along axis 0,
the softmax along axis 1).

These helpers are written in the kernel language and inlined where they are
called (like ``@tylo.func``). Masked scores are ``-inf``; a row whose scores
are all ``-inf`` so far keeps ``m = -inf`` and ``l = 0`` and produces zero
weights, without branches: the exponent base is replaced by 0 where the
running max is still ``-inf`` (so ``-inf - -inf`` never happens).
"""
from . import core as tl

NEG_INF = float("-inf")

__all__ = ["online_softmax_update", "online_softmax_merge", "online_softmax_normalize", "log_sum_exp",
           "row_softmax", "NEG_INF"]


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
