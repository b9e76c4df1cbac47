"""Count the aten operators a call dispatches: a deterministic proxy for kernel launches, used by tests and benchmarks."""

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class AtenOpCounter(TorchDispatchMode):
    """A dispatch mode that counts the aten operators called inside it that return a tensor, by name (e.g.
    `aten.mul.out`; not `aten.promote_types`, which computes a dtype); with `views=False` only those that are not
    views (which launch no kernel, and which torch versions dispatch differently: a slice over a whole dimension is
    elided by some and not by others)."""

    def __init__(self, views: bool = True):
        super().__init__()
        self.views = views
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        returns_tensor = any(isinstance(leaf, torch.Tensor) for leaf in tree_leaves(result))
        if returns_tensor and (self.views or not func.is_view):
            self.counts[str(func)] += 1
        return result


def count_aten_ops(function, *args, views: bool = True, **kwargs) -> Counter:
    """Call `function(*args, **kwargs)` once and return the aten operators it dispatched (without view operators
    when `views` is False), by name."""
    with AtenOpCounter(views) as counter:
        function(*args, **kwargs)
    return counter.counts
