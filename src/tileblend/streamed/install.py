"""Turn the streamed decode on: for every covered diffusers class (`tileblend.enable(streamed_decode=True)`, undone by
`tileblend.disable()`), or for one model inside a `with tileblend.streamed_decode(vae):` block.

Either way the model's `tiled_decode` is swapped for its streamed version; `vae.decode(...)`, `enable_slicing()`,
`return_dict` and the pipelines that call them are unchanged. A class whose `tiled_decode` source is not one a
streamed version was written for (`tileblend.streamed.source`) keeps its own and is named in a `UserWarning`.
"""

import contextlib
import inspect
import threading
import types
import warnings

import torch

from ..patch import autoencoder_classes, wrapped_methods
from .source import COVERED, streamed_version


_lock = threading.RLock()
_installed = contextlib.ExitStack()  # the `wrapped_methods` block of the class-wide replacements while enabled
_classes: list[type] = []


def streamed_method(stock, streamed):
    """`streamed` as a method in place of the stock `tiled_decode` `stock`: its name, qualified name and module are
    the stock method's, it runs accelerate's offload hook where the stock method does (`apply_forward_hook`), and
    `stock_method(method)` gives `stock` back.

    Under autograd (grad mode on, and the latent or a parameter requiring grad) the method runs `stock`: the walk
    reuses its tile buffers, which backward would need as they were.
    """

    def method(self, *args, **kwargs):
        if torch.is_grad_enabled() and (
            any(isinstance(value, torch.Tensor) and value.requires_grad for value in (*args, *kwargs.values()))
            or any(parameter.requires_grad for parameter in self.parameters())
        ):
            return stock(self, *args, **kwargs)
        return streamed(self, *args, **kwargs)

    method.__name__, method.__qualname__, method.__module__ = stock.__name__, stock.__qualname__, stock.__module__
    method.__doc__ = f"tileblend's row-streamed {stock.__qualname__}: the same bits, bounded memory."
    method.stock = stock
    if hasattr(stock, "__wrapped__"):  # decorated by diffusers' apply_forward_hook
        from diffusers.utils.accelerate_utils import apply_forward_hook

        wrapped = apply_forward_hook(method)
        wrapped.stock = stock
        return wrapped
    return method


def stock_method(function):
    """The stock `tiled_decode` behind `function` (itself when it is not a streamed method)."""
    return getattr(function, "stock", function)


def is_streamed(function) -> bool:
    return stock_method(function) is not function


def find_streamed(classes) -> tuple[dict[type, object], list[str]]:
    """The classes among `classes` that define a `tiled_decode` tileblend streams (class -> streamed function), and
    the qualified names of the covered classes whose own `tiled_decode` it no longer recognises."""
    found, refused = {}, []
    for cls in classes:
        function = vars(cls).get("tiled_decode")
        if function is None:
            continue
        streamed = streamed_version(stock_method(function))
        if streamed is not None:
            found[cls] = streamed
        elif cls.__name__ in COVERED:
            refused.append(f"{cls.__module__}.{cls.__qualname__}")
    return found, refused


def enable(stacklevel: int = 2) -> list[type]:
    """Stream the tiled decode of every covered diffusers class until `disable()`; idempotent. Returns the classes."""
    with _lock:
        if _classes:
            return list(_classes)
        found, refused = find_streamed(autoencoder_classes())
        if refused:
            warnings.warn(_refusal(refused), stacklevel=stacklevel + 1)
        _installed.enter_context(
            wrapped_methods(
                [(cls, "tiled_decode") for cls in found], lambda cls, _, stock: streamed_method(stock, found[cls])
            )
        )
        _classes.extend(found)
        return list(_classes)


def disable() -> None:
    """Put every class's own `tiled_decode` back; idempotent."""
    with _lock:
        _installed.close()
        _classes.clear()


def streamed_classes() -> list[type]:
    """The classes whose tiled decode `enable()` streams now (empty when it is off)."""
    with _lock:
        return list(_classes)


@contextlib.contextmanager
def streamed_decode(model):
    """Inside the block, `model`'s tiled decode is the streamed one (same bits as its own, bounded memory); yields
    `model`. A model whose class tileblend does not cover decodes as written, and a `UserWarning` names its class.

    Only this model changes (its instance gets a `tiled_decode` attribute until the block ends); blocks nest.
    """
    cls = type(model)
    function = inspect.getattr_static(cls, "tiled_decode", None)
    if function is not None and is_streamed(function):  # the class streams already (`enable()`)
        yield model
        return
    streamed = None if function is None else streamed_version(function)
    if streamed is None:
        warnings.warn(_refusal([f"{cls.__module__}.{cls.__qualname__}"]), stacklevel=3)
        yield model
        return
    missing = object()
    previous = vars(model).get("tiled_decode", missing)
    model.tiled_decode = types.MethodType(streamed_method(function, streamed), model)
    try:
        yield model
    finally:
        if previous is missing:
            del model.tiled_decode
        else:
            model.tiled_decode = previous


def _refusal(names: list[str]) -> str:
    return (
        "tileblend: no streamed tiled decode for " + ", ".join(names) + " (its tiled_decode is not a source tileblend "
        "knows); it decodes as written"
    )
