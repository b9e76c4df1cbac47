"""Record the blend calls a model makes: which method, the extent asked for and the extent the blend really used.

A tiling check proves nothing unless the blends ran, so tests and `tileblend verify` run tiled encode and decode inside
`record_blends(cls)`, which wraps whatever `blend_v`, `blend_h` and `blend_t` the class has at that moment (diffusers'
loops, or tileblend's replacements inside `tileblend.enabled()`) and restores them on exit
(`tileblend.patch.wrapped_methods`).
"""

import contextlib
import functools
from collections import Counter
from dataclasses import dataclass

from .blend import BLEND_AXES
from .patch import wrapped_methods


@dataclass(frozen=True)
class BlendCall:
    """One call of a blend method.

    `extent` is the `blend_extent` argument; `effective` is the extent after the loop's clamp,
    `min(a.shape[axis], b.shape[axis], extent)`: smaller than `extent` when an edge tile is narrower than the overlap
    (clipped), zero or negative when the blend is a no-op.
    """

    method: str
    extent: int
    effective: int

    @property
    def clipped(self) -> bool:
        return 0 < self.effective < self.extent

    @property
    def zero(self) -> bool:
        return self.effective <= 0


class BlendCalls(list):
    """The `BlendCall`s recorded by `record_blends`, in call order."""

    def counts(self) -> dict[str, int]:
        """Calls per method name, e.g. `{"blend_v": 2, "blend_h": 2}`."""
        return dict(Counter(call.method for call in self))

    def methods(self) -> set[str]:
        return {call.method for call in self}

    @property
    def clipped(self) -> bool:
        """Whether any call had an edge tile narrower than the overlap."""
        return any(call.clipped for call in self)

    @property
    def zero(self) -> bool:
        """Whether any call had an effective extent of zero or less."""
        return any(call.zero for call in self)


@contextlib.contextmanager
def record_blends(cls: type):
    """Record every call of `cls`'s blend methods inside the block; yields the `BlendCalls` list it fills.

    The methods installed on `cls` when the block starts still do the work; they are put back when it ends.
    """
    calls = BlendCalls()

    def recorder(cls, name, method):
        axis = BLEND_AXES[name]

        @functools.wraps(method)
        def recorded(self, a, b, blend_extent):
            effective = min(a.shape[axis], b.shape[axis], blend_extent)
            calls.append(BlendCall(method=name, extent=blend_extent, effective=effective))
            return method(self, a, b, blend_extent)

        return recorded

    with wrapped_methods([(cls, name) for name in BLEND_AXES if name in vars(cls)], recorder):
        yield calls
