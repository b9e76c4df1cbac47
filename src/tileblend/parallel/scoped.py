"""`tileblend.parallel.tiled`: a model's own `decode`/`encode` calls run split over a group while a block runs.

The model instance is not touched: its class's `decode`/`encode` is wrapped (once, however many blocks use the class)
by a method that splits the call only for the instances registered by a running block, and calls the class's own
method for every other instance. So a copy made inside the block (`copy.deepcopy`) decodes on its own, with its own
weights, and the model pickles (`torch.save`) inside the block as outside. The wrapper is installed with
`tileblend.patch.wrapped_methods` and goes when the last block on the class ends, leaving the class as it was (a
class that inherited the method inherits it again), unless someone replaced the wrapper meanwhile (their method stays).
"""

import contextlib
import functools
import inspect
import threading
import weakref

from ..patch import wrapped_methods
from .passes import run_parallel, splitting
from .splits import DISPATCHERS


_lock = threading.RLock()
_active = weakref.WeakKeyDictionary()  # model -> (group, dst, timeout) of the block it runs in
# (cls, path) -> (the `wrapped_methods` block of its wrapper, the running blocks that use it)
_installed: dict[tuple[type, str], tuple[contextlib.ExitStack, int]] = {}


def _wrapper(cls: type, path: str, original):
    first = next(iter(list(inspect.signature(original).parameters)[1:]), "x")  # "z" for decode, "x" for encode

    @functools.wraps(original)
    def method(self, *args, **kwargs):
        settings = _active.get(self)
        if settings is None or splitting():  # inside a split call, this block's or `decode()`'s
            return original(self, *args, **kwargs)
        if not args and first not in kwargs:
            raise TypeError(f"{path}() missing the input argument {first!r}")
        x, args = (args[0], args[1:]) if args else (kwargs.pop(first), ())
        group, dst, timeout = settings
        return run_parallel(self, path, x, args, kwargs, group=group, dst=dst, timeout=timeout)[0]

    DISPATCHERS.add(method)
    return method


@contextlib.contextmanager
def split_calls(model, paths: list[str], group, dst, timeout):
    """Inside the block, `model.<path>(...)` for each of `paths` runs split over `group` (see `tileblend.parallel`)."""
    cls = type(model)
    with _lock:
        if model in _active:
            raise RuntimeError("tileblend.parallel.tiled() blocks on the same model do not nest")
        _active[model] = (group, dst, timeout)
        for path in paths:
            block, users = _installed.get((cls, path)) or (contextlib.ExitStack(), 0)
            if users == 0:
                block.enter_context(wrapped_methods([(cls, path)], _wrapper))
            _installed[(cls, path)] = (block, users + 1)
    try:
        yield model
    finally:
        with _lock:
            del _active[model]
            for path in paths:
                block, users = _installed.pop((cls, path))
                if users > 1:
                    _installed[(cls, path)] = (block, users - 1)
                else:
                    block.close()
