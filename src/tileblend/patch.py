"""Swap diffusers' loop blends for `tileblend.blend` at runtime, and back.

`enable()` imports every module of `diffusers.models.autoencoders`, finds each class whose own `blend_v`, `blend_h`
or `blend_t` is the row loop (`tileblend.recognize`), and replaces those methods on the class. `disable()` puts the
original function objects back. Methods named like blends that are not the loop are left alone and reported in a
warning. The state is guarded by a lock: `enable()`, `disable()` and `enabled()` blocks may run in several threads.

A patched method keeps the original's `__module__`, name and qualified name (tracebacks and pickling name diffusers'
class), while `inspect.getsource` shows tileblend's method (not diffusers' loop); `is_enabled()` says whether the
blends are patched, and `original_method(cls, name)` returns the loop.

`wrapped_methods` is the one way tileblend swaps methods on a class and puts them back: `enable()` installs the
replacements with it, `tileblend.calls.record_blends` and the benchmarks' blend timers wrap whatever is installed, and
`tileblend.parallel.tiled` installs its dispatching `decode`/`encode` (which a model's class may inherit).
"""

import ast
import contextlib
import functools
import importlib
import inspect
import pkgutil
import textwrap
import threading
import warnings
from dataclasses import dataclass

from .blend import BLEND_AXES, BLEND_FUNCTIONS
from .recognize import recognize


AUTOENCODERS_PACKAGE = "diffusers.models.autoencoders"


@dataclass(frozen=True)
class PatchedMethod:
    """One method swapped by `enable()`: the class, the method name, the blended axis and the rank it expects."""

    cls: type
    method: str
    axis: int
    rank: int


# (class, method name) -> the original function, while enabled.
_originals: dict[tuple[type, str], object] = {}
_patched: list[PatchedMethod] = []
_installed = contextlib.ExitStack()  # holds the `wrapped_methods` block of the replacements while enabled
_lock = threading.RLock()
_scopes = 0  # `enabled()` blocks running, in any thread
_enabled_outside_scopes = False  # whether the blends stay enabled once no `enabled()` block runs


@contextlib.contextmanager
def wrapped_methods(methods, wrap):
    """Inside the block, each method `name` of `cls` in `methods` ((cls, name) pairs) is `wrap(cls, name, function)`,
    set on `cls` itself, where `function` is what `cls` resolved `name` to when the block began: its own attribute, or
    the one it inherits from a base class (`inspect.getattr_static`; AttributeError if it has none).

    On exit each class is as before: its own function object is put back, and a wrapper of an inherited method is
    deleted (so the class inherits again, with no attribute of its own), except where someone else has replaced the
    wrapper meanwhile (their method stays).
    """
    installed = [(cls, name, inspect.getattr_static(cls, name), name in vars(cls)) for cls, name in methods]
    wrappers = []
    try:
        for cls, name, function, _ in installed:
            wrappers.append(wrap(cls, name, function))
            setattr(cls, name, wrappers[-1])
        yield
    finally:
        for (cls, name, function, own), wrapper in zip(installed, wrappers):
            if vars(cls).get(name) is not wrapper:
                continue
            if own:
                setattr(cls, name, function)
            else:
                delattr(cls, name)


def autoencoder_classes() -> list[type]:
    """Every class defined in a module of `diffusers.models.autoencoders`, in module order."""
    package = importlib.import_module(AUTOENCODERS_PACKAGE)
    classes = []
    for module_info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        try:
            module = importlib.import_module(f"{AUTOENCODERS_PACKAGE}.{module_info.name}")
        except ImportError as error:  # optional dependencies of unrelated models
            warnings.warn(f"tileblend: skipped {AUTOENCODERS_PACKAGE}.{module_info.name}: {error}", stacklevel=3)
            continue
        classes += [
            value for value in vars(module).values() if inspect.isclass(value) and value.__module__ == module.__name__
        ]
    return classes


@functools.cache
def _loop_of(function):
    """What `recognize` makes of `function`'s source (None: not the loop, or no source). Only a plain function can be
    the loop: `inspect.getsource` follows `__wrapped__`, so a wrapper (`functools.wraps`, a decorator's result) would
    show the loop it wraps and be replaced, and its own work lost. Cached per function object: a function's source
    does not change while the process runs, and reading and parsing it for the 44 methods took about 150 ms per
    outermost `enabled()` block."""
    if not inspect.isfunction(function) or hasattr(function, "__wrapped__"):
        return None
    try:
        return recognize(ast.parse(textwrap.dedent(inspect.getsource(function))).body[0])
    except (OSError, TypeError, SyntaxError, IndexError):
        return None


def find_loop_blends(classes) -> tuple[list[PatchedMethod], list[str]]:
    """Split the blend-named methods of `classes` into recognised loops and the names of the rest."""
    found, skipped = [], []
    for cls in classes:
        for name in BLEND_AXES:
            function = vars(cls).get(name)
            if function is None:
                continue
            loop = _loop_of(function)
            if loop is None:
                skipped.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
            else:
                found.append(PatchedMethod(cls=cls, method=name, axis=loop.axis, rank=loop.rank))
    return found, skipped


def vectorized_method(original, rank: int):
    """The replacement for a loop method written for tensors of `rank` dimensions.

    Inputs of that rank (the only ones diffusers passes) take `tileblend.blend`; any other rank calls the original, so
    the method stays exact for every input. The method keeps the original's name, qualified name and module (so that
    pickle finds it where the original was), but not its docstring or source: it has no `__wrapped__`, so `inspect`
    shows this code.
    """
    blend = BLEND_FUNCTIONS[original.__name__]

    def method(self, a, b, blend_extent):
        if a.dim() != rank or b.dim() != rank:
            return original(self, a, b, blend_extent)
        return blend(a, b, blend_extent)

    method.__name__, method.__qualname__ = original.__name__, original.__qualname__
    method.__module__ = original.__module__
    method.__doc__ = (
        f"tileblend.{original.__name__} in place of diffusers' loop for {rank}D tensors (the loop for other ranks). "
        f"The loop: tileblend.patch.original_method(cls, {original.__name__!r})."
    )
    return method


def original_method(cls: type, name: str):
    """The loop function of `cls.name` as diffusers defines it, whether or not tileblend is enabled."""
    with _lock:
        return _originals.get((cls, name), vars(cls)[name])


def _patch(stacklevel: int) -> list[PatchedMethod]:
    if _patched:
        return list(_patched)
    found, skipped = find_loop_blends(autoencoder_classes())
    if skipped:
        warnings.warn(
            "tileblend left these methods alone (not the loop blend): " + ", ".join(skipped), stacklevel=stacklevel
        )
    ranks = {(patched.cls, patched.method): patched.rank for patched in found}

    def vectorize(cls, name, original):
        _originals[(cls, name)] = original
        return vectorized_method(original, ranks[(cls, name)])

    _installed.enter_context(wrapped_methods(ranks, vectorize))
    _patched.extend(found)
    return list(_patched)


def _unpatch() -> None:
    _installed.close()
    _originals.clear()
    _patched.clear()


def enable(streamed_decode: bool = False) -> list[PatchedMethod]:
    """Replace every loop blend in diffusers' autoencoders with the vectorized blend; idempotent. It stays in effect
    until `disable()`, also after `enabled()` blocks end.

    Args:
        streamed_decode: also stream the tiled decode of every class `tileblend.streamed` covers (the same bits at a
            fraction of the memory), until `disable()`; a covered class whose source it no longer recognises keeps
            its own and is named in a `UserWarning`.

    Returns:
        The patched methods, one `PatchedMethod` each. Blend-named methods that are not the loop are left alone and
        named in a `UserWarning`.
    """
    global _enabled_outside_scopes
    with _lock:
        _enabled_outside_scopes = True
        patched = _patch(stacklevel=3)
    if streamed_decode:
        from .streamed import install

        install.enable(stacklevel=3)
    return patched


def disable() -> None:
    """Restore the original methods (the same function objects) now, also inside `enabled()` blocks, and the stock
    tiled decodes; idempotent."""
    global _enabled_outside_scopes
    with _lock:
        _enabled_outside_scopes = False
        _unpatch()
    from .streamed import install

    install.disable()


def is_enabled() -> bool:
    """Whether the vectorized blends are in effect."""
    with _lock:
        return bool(_patched)


@contextlib.contextmanager
def enabled():
    """Enable tileblend inside a `with` block. Blocks nest, also across threads: the blends stay enabled while any
    block runs, and when the last one ends the state is restored to what it was before the first one began (enabled
    only if `enable()` was called and not undone by `disable()`)."""
    global _scopes
    with _lock:
        _scopes += 1
        try:
            patched = _patch(stacklevel=4)
        except BaseException:
            _scopes -= 1
            raise
    try:
        yield patched
    finally:
        with _lock:
            _scopes -= 1
            if _scopes == 0 and not _enabled_outside_scopes:
                _unpatch()
