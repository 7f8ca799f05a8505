"""Ranking metrics of TpuGraphs, computed by the library as `tpugraphs evaluate` does.

Scores: lower = predicted faster. Runtimes: lower = faster (use Graph.normalized_runtime for
tile graphs, which divides by the normalizers as the official metric does). Inputs are any 1-D
array-likes of equal length, converted to float64; NaN raises tpugraphs.Error. See
docs/metrics.md for the definitions and the tie rules.
"""

from ._tpugraphs import _metrics as _m


def kendall_tau(scores, runtimes):
    """Kendall's tau-b of scores against runtimes (scipy.stats.kendalltau's default, ties
    counted). NaN when fewer than 2 values or when all scores or all runtimes are equal."""
    return _m.kendall_tau(scores, runtimes)


def opa(scores, runtimes):
    """Ordered-pair accuracy: the share of pairs with different runtimes that the scores order
    the same way (pairs tied in score count as wrong). NaN when all runtimes are equal."""
    return _m.opa(scores, runtimes)


def top_k_slowdown(scores, runtimes, k=10):
    """min runtime among the k best-scored configurations / min runtime - 1 (layout's
    slowdown@k). 0 when the fastest configuration is among them; ties by position."""
    return _m.top_k_error(scores, runtimes, k)


def tile_top_k_error(scores, runtimes, k=5):
    """The tile task's top-k error (the official metric uses k=5; Kaggle's tile score is 1 minus
    it): same formula as top_k_slowdown, on normalized runtimes."""
    return _m.top_k_error(scores, runtimes, k)


__all__ = ["kendall_tau", "opa", "top_k_slowdown", "tile_top_k_error"]
