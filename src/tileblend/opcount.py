"""Count the aten operators a call dispatches: a deterministic proxy for kernel launches, used by tests and benchmarks."""

from collections import Counter

from torch.utils._python_dispatch import TorchDispatchMode


class AtenOpCounter(TorchDispatchMode):
    """A dispatch mode that counts every aten operator called inside it, by name (e.g. `aten.mul.out`)."""

    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


def count_aten_ops(function, *args, **kwargs) -> Counter:
    """Call `function(*args, **kwargs)` once and return the aten operators it dispatched, by name."""
    with AtenOpCounter() as counter:
        function(*args, **kwargs)
    return counter.counts
