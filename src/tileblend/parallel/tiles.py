"""The calls a model's own tiled pass makes to its per-tile callables, grouped into tiles and assigned to ranks.

`intercept` installs a handler on the callables a `Split` names (and a marker on the method that ends a tile), for
the length of a `with` block. `plan_pass` runs the model's pass once on the meta device (shapes only, no compute, no
memory) and records every call: which callable, which tile, and the shape and dtype of its output. `assign` gives
each tile to a rank, the costliest first to the least loaded rank.
"""

import contextlib
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..blend import BLEND_AXES
from .splits import Split


_MISSING = object()


@dataclass(frozen=True)
class Call:
    """One call of a per-tile callable, as the plan pass saw it.

    Args:
        path: the callable (a `Split` path).
        tile: the index of the tile the call belongs to.
        travels: whether its output is sent to the blending rank(s).
        shape, dtype: of its output tensor (the first item when it returns a tuple).
        tuple_length: the length of the tuple it returns, or None when it returns a tensor.
    """

    path: str
    tile: int
    travels: bool
    shape: tuple[int, ...]
    dtype: torch.dtype
    tuple_length: int | None

    @property
    def nbytes(self) -> int:
        return _numel(self.shape) * self.dtype.itemsize

    def structure(self, tensor: torch.Tensor):
        """`tensor` in the structure the callable returns: itself, or first in a tuple padded with None."""
        if self.tuple_length is None:
            return tensor
        return (tensor,) + (None,) * (self.tuple_length - 1)

    def placeholder(self, device: torch.device) -> torch.Tensor:
        """A tensor of the output's shape and dtype that holds no memory (a zero expanded to the shape)."""
        return torch.zeros((), dtype=self.dtype, device=device).expand(self.shape)


@dataclass(frozen=True)
class Plan:
    """Every per-tile call of one pass, in the order the model makes them, and the rank that computes each tile."""

    calls: tuple[Call, ...]
    owners: tuple[int, ...]

    @property
    def num_tiles(self) -> int:
        return len(self.owners)

    def owned(self, rank: int) -> list[int]:
        """The indices of the travelling calls that `rank` computes, in call order."""
        return [n for n, call in enumerate(self.calls) if call.travels and self.owners[call.tile] == rank]


def _numel(shape) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def payload(output) -> torch.Tensor:
    """The tensor a per-tile call returns (the first item of a tuple)."""
    return output if isinstance(output, torch.Tensor) else output[0]


def resolve(model, path: str) -> tuple[object, str]:
    """The object and attribute to wrap for `path`: a module's `forward`, or a method by its name."""
    *parents, name = path.split(".")
    owner = model
    for parent in parents:
        owner = getattr(owner, parent)
    target = getattr(owner, name)
    if isinstance(target, torch.nn.Module):
        return target, "forward"
    return owner, name


@contextlib.contextmanager
def _instance_attribute(owner, name: str, value):
    previous = owner.__dict__.get(name, _MISSING)
    owner.__dict__[name] = value
    try:
        yield
    finally:
        if previous is _MISSING:
            del owner.__dict__[name]
        else:
            owner.__dict__[name] = previous


@contextlib.contextmanager
def intercept(model, split: Split, handler, marker=None):
    """Route every call of `split`'s callables on `model` to `handler(path, original, args, kwargs)` in the block.

    `marker()` is called after each call of the model's `split.new_tile_after` method. Whatever was installed before
    (an instance attribute such as an offload hook's forward) is put back on exit.
    """
    with contextlib.ExitStack() as stack:
        for path in split.paths:
            owner, name = resolve(model, path)
            original = getattr(owner, name)

            def routed(*args, _path=path, _original=original, **kwargs):
                return handler(_path, _original, args, kwargs)

            stack.enter_context(_instance_attribute(owner, name, routed))
        if marker is not None and split.new_tile_after is not None:
            method = getattr(model, split.new_tile_after)

            def marked(*args, **kwargs):
                result = method(*args, **kwargs)
                marker()
                return result

            stack.enter_context(_instance_attribute(model, split.new_tile_after, marked))
        yield


@contextlib.contextmanager
def silent_blends(model):
    """Make `model`'s blend methods return their second argument untouched inside the block (instance attributes)."""
    silent = lambda a, b, blend_extent: b  # noqa: E731
    with contextlib.ExitStack() as stack:
        for name in BLEND_AXES:
            if hasattr(type(model), name):
                stack.enter_context(_instance_attribute(model, name, silent))
        yield


_SAME_DTYPE_POINTWISE = frozenset(
    "abs add clamp clamp_max clamp_min cos div erf exp gelu hardtanh leaky_relu log mul neg pow reciprocal relu "
    "rsqrt sigmoid silu sin sqrt square sub tanh".split()
)
"""Pointwise aten ops whose output, for operands of one floating dtype, has that dtype and the broadcast shape."""


class _FastMeta(TorchDispatchMode):
    """Answers the ops a VAE's meta pass spends most of its time in with their output shapes, without the meta
    device's Python reference code: pointwise ops on operands of one floating dtype (`_SAME_DTYPE_POINTWISE`, and
    their in-place forms), `native_group_norm` and `linalg_vector_norm`. Any other op runs as usual.

    A shape or dtype this gets wrong cannot go unnoticed: the rank that computes a tile checks its output against
    the plan.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if func is torch.ops.aten.native_group_norm.default:
            x, batch, groups = args[0], args[3], args[6]
            return torch.empty_like(x), x.new_empty((batch, groups)), x.new_empty((batch, groups))
        linalg_vector_norm = torch.ops.aten.linalg_vector_norm.default
        if func is linalg_vector_norm and not kwargs and len(args) == 4 and args[2] is not None:
            x, _, dims, keepdim = args
            dims = {dim % x.dim() for dim in dims}
            shape = [1 if dim in dims else size for dim, size in enumerate(x.shape) if keepdim or dim not in dims]
            return x.new_empty(shape)
        if name.rstrip("_") in _SAME_DTYPE_POINTWISE and "out" not in kwargs:
            tensors = [arg for arg in args if isinstance(arg, torch.Tensor)]
            dtypes = {tensor.dtype for tensor in tensors}
            if len(dtypes) == 1 and tensors[0].dtype.is_floating_point and all(tensor.is_meta for tensor in tensors):
                if name.endswith("_"):
                    return args[0]
                return tensors[0].new_empty(torch.broadcast_shapes(*(tensor.shape for tensor in tensors)))
        return func(*args, **kwargs)


class _StaleState(Exception):
    """A tile replayed from the memo made a call the memo has not seen: its state was never computed."""


class _Pass(torch.nn.Module):
    """Holds the model so that `torch.func.functional_call` can swap its weights for meta tensors around `run`."""

    def __init__(self, model, run):
        super().__init__()
        self.model, self.run = model, run

    def forward(self, x):
        return self.run(x)


def signature(args, kwargs) -> tuple:
    """What a call's output shape depends on besides the tile's state: tensor shapes and dtypes, plain values."""

    def describe(value):
        if isinstance(value, torch.Tensor):
            return ("tensor", tuple(value.shape), value.dtype)
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return type(value).__name__  # state (a cache list or dict) or an object: by kind only

    return tuple(describe(arg) for arg in args) + tuple((key, describe(kwargs[key])) for key in sorted(kwargs))


def plan_pass(model, split: Split, run, x: torch.Tensor, memo: bool = True) -> list[Call]:
    """Run `run(x)` (the model's pass) on the meta device and return its per-tile calls, grouped into tiles.

    The model's weights and `x` are swapped for meta tensors (`torch.func.functional_call`), so nothing is computed
    or allocated. A tile whose calls have the same signatures as an earlier tile's (tensor shapes, plain arguments)
    reuses that tile's outputs instead of running again: its state was reset at the tile start (what makes tiles
    independent). If such a tile then makes a call no earlier tile made, the pass is run again without the memo.
    """
    calls: list[Call] = []
    state = {"tile": -1, "new": True, "prefix": (), "replayed": False}
    seen: dict[tuple, object] = {}

    def mark():
        state["new"] = True

    def record(path, original, args, kwargs):
        starts = (
            state["new"]
            or (split.state_argument is not None and kwargs.get(split.state_argument) is None)
            or path == split.new_tile_at
            or (split.new_tile_after is None and split.state_argument is None and split.new_tile_at is None)
        )
        if starts:
            state.update(tile=state["tile"] + 1, new=False, prefix=(), replayed=False)
        state["prefix"] += ((path, signature(args, kwargs)),)
        if memo and state["prefix"] in seen:
            output = seen[state["prefix"]]
            state["replayed"] = True
        elif state["replayed"]:
            raise _StaleState
        else:
            output = original(*args, **kwargs)
            seen[state["prefix"]] = output
        tensor = payload(output)
        calls.append(
            Call(
                path=path,
                tile=state["tile"],
                travels=path in split.travel,
                shape=tuple(tensor.shape),
                dtype=tensor.dtype,
                tuple_length=None if isinstance(output, torch.Tensor) else len(output),
            )
        )
        return output

    module = _Pass(model, run)
    weights = {name: tensor.to("meta") for name, tensor in (*module.named_parameters(), *module.named_buffers())}
    try:
        with intercept(model, split, record, mark), silent_blends(model), _FastMeta():
            torch.func.functional_call(module, weights, (x.to("meta"),))
    except _StaleState:
        return plan_pass(model, split, run, x, memo=False)
    return calls


def tile_costs(calls: list[Call]) -> list[int]:
    """The work of each tile, measured by the elements its calls output."""
    costs = [0] * (calls[-1].tile + 1 if calls else 0)
    for call in calls:
        costs[call.tile] += _numel(call.shape)
    return costs


def assign(costs: list[int], world_size: int) -> tuple[int, ...]:
    """Give each tile to a rank: costliest tile first, to the least loaded rank (the lower rank on a tie)."""
    loads = [0] * world_size
    owners = [0] * len(costs)
    for tile in sorted(range(len(costs)), key=lambda tile: (-costs[tile], tile)):
        rank = min(range(world_size), key=lambda rank: (loads[rank], rank))
        owners[tile] = rank
        loads[rank] += costs[tile]
    return tuple(owners)
