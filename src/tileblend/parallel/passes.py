"""Run a model's own tiled encode or decode across the ranks of a process group.

Every rank runs the model's public `decode` (or `encode`) three times, with the per-tile callables of its `Split`
intercepted (`tileblend.parallel.tiles.intercept`):

1. plan (on the group's first rank, then sent to all; cached per model and input shape): on the meta device, to
   learn the calls, their tiles and output shapes; tiles are assigned to ranks;
2. compute: a rank runs the calls of its own tiles and gets a memory-free placeholder for the others; the blends
   are no-ops in this pass, so placeholders are never written and computed outputs stay as the callable returned them;
3. replay (on the blending ranks only, after the outputs travelled): every per-tile call returns the output computed
   for it, so the model's own blends (`tileblend.blend`), crops and concatenations build the result.

The random generators (the global ones and a `generator` argument) are set back before each pass and left as one
single-device pass leaves them.
"""

import contextlib
import datetime
import hashlib
import threading
import weakref
import zlib

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_flatten, tree_map

from ..patch import enabled
from . import exchange
from .splits import split_of
from .tiles import Plan, assign, intercept, payload, plan_pass, signature, silent_blends, tile_costs


DEFAULT_TIMEOUT = datetime.timedelta(minutes=10)


class _RandomState:
    """The state of the generators a pass may draw from: the CPU's, `device`'s (CUDA) and a `generator` argument."""

    def __init__(self, device: torch.device, generator: torch.Generator | None):
        self.device, self.generator = device, generator
        self.saved = self.read()

    def read(self):
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        return torch.get_rng_state(), cuda, None if self.generator is None else self.generator.get_state()

    def write(self, state) -> None:
        cpu, cuda, generator = state
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, self.device)
        if generator is not None:
            self.generator.set_state(generator)


def _run(model, path: str, x: torch.Tensor, args, kwargs):
    """The class's own `encode`/`decode` (not an instance attribute that `tileblend.parallel.tiled` installs)."""
    return getattr(type(model), path)(model, x, *args, **kwargs)


_splitting = threading.local()  # `depth` > 0 while this thread runs `run_parallel`


def splitting() -> bool:
    """Whether this thread runs a split call (`run_parallel`) now: a `decode`/`encode` that `tileblend.parallel.tiled`
    installed runs the model's own method then, so that a split call inside a `tiled()` block is split once."""
    return getattr(_splitting, "depth", 0) > 0


@contextlib.contextmanager
def _split_call():
    _splitting.depth = getattr(_splitting, "depth", 0) + 1
    try:
        yield
    finally:
        _splitting.depth -= 1


def run_parallel(model, path: str, x: torch.Tensor, args, kwargs, *, group, dst, timeout):
    """Run `model.<path>(x, *args, **kwargs)` ("encode" or "decode") split over `group`; see `tileblend.parallel`.

    Returns:
        The output (None on a rank other than `dst`), and this rank's `ParallelTraffic` (None in a group of one,
        which runs the plain path).
    """
    with _split_call():
        return _run_parallel(model, path, x, args, kwargs, group=group, dst=dst, timeout=timeout)


def _run_parallel(model, path: str, x: torch.Tensor, args, kwargs, *, group, dst, timeout):
    deadline = exchange.Deadline.after(timeout)
    split = split_of(model, path)
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    tiling = bool(getattr(model, "use_tiling", False))
    valid_dst = dst is None or (type(dst) is int and 0 <= dst < world_size)
    if world_size > 1:
        # Every rank checks the same facts before any work, so that a mismatch or a bad argument raises on all of
        # them at once instead of leaving the others waiting.
        with torch.no_grad():
            facts = {
                "inputs (shape or values)": exchange.fingerprint(x),
                "arguments besides the input": _arguments_digest(args, kwargs),
                "dst": torch.tensor([-1.0 if dst is None else float(dst) if valid_dst else -2.0]),
                "tiling switches": torch.tensor([float(tiling)]),
                "model classes or tile settings": _model_digest(model),
                "weights": _weights_fingerprint(model),
            }
            exchange.agree(facts, group, exchange.comm_device(group, x.device), deadline)
    if not tiling:
        raise ValueError(
            f"tiling is disabled on this {type(model).__name__}: call enable_tiling() before a parallel tiled {path}"
        )
    if not valid_dst:
        raise ValueError(f"dst must be a rank of the group (an int from 0 to {world_size - 1}), got {dst!r}")
    if world_size == 1:
        with torch.no_grad():
            return _run(model, path, x, args, kwargs), None
    random_state = _RandomState(x.device, kwargs.get("generator"))

    with torch.no_grad():
        device = exchange.comm_device(group, x.device)
        calls = _shared_plan(model, split, path, x, args, kwargs, group, device, deadline)
        plan = Plan(calls=tuple(calls), owners=assign(tile_costs(calls), world_size))

        random_state.write(random_state.saved)
        outputs, error = {}, None
        try:
            outputs = _compute_pass(model, split, plan, rank, x.device, lambda: _run(model, path, x, args, kwargs))
        except Exception as caught:  # every rank must reach the status check, or the others would wait for it
            error = caught
        after = random_state.read()
        exchange.check_status(error, group, device, deadline, "finish its tiles", "computing their tiles")

        received, traffic = exchange.send_outputs(plan, outputs, group, x.device, dst, deadline)
        result, error = None, None
        if dst is None or rank == dst:
            random_state.write(random_state.saved)
            try:
                result = _replay_pass(
                    model, split, plan, received, x.device, lambda: _run(model, path, x, args, kwargs)
                )
            except Exception as caught:
                error = caught
            random_state.write(after)
        # Every rank returns, or every rank raises: a rank that failed to blend, or is late, fails the call on all.
        exchange.check_status(error, group, device, deadline, "finish the call", "blending the tiles")
        return result, traffic


def _arguments_digest(args, kwargs) -> torch.Tensor:
    """A SHA-256 (its first 128 bits, as four float64 numbers) of the call's arguments besides the input: their
    structure, each tensor's `exchange.fingerprint`, each generator's state's, each plain value, the type of anything
    else. Keyword order does not count."""
    leaves, structure = tree_flatten((tuple(args), dict(sorted(kwargs.items()))))
    digest = hashlib.sha256(repr(structure).encode())
    for leaf in leaves:
        if isinstance(leaf, torch.Generator):
            leaf = leaf.get_state()
        if isinstance(leaf, torch.Tensor):
            digest.update(exchange.fingerprint(leaf).numpy().tobytes())
        elif leaf is None or isinstance(leaf, (bool, int, float, str)):
            digest.update(repr(leaf).encode())
        else:
            digest.update(f"{type(leaf).__module__}.{type(leaf).__qualname__}".encode())
        digest.update(b"\0")
    words = digest.digest()[:16]
    return torch.tensor([int.from_bytes(words[n : n + 4], "little") for n in range(0, 16, 4)], dtype=torch.float64)


def _model_digest(model) -> torch.Tensor:
    """A CRC of the model's class and tiling settings (its `tile_*` and `use_*` attributes: sizes, strides, overlap,
    switches), as a float64 tensor. Other attributes may legitimately differ: a pass leaves caches on the rank that ran
    it."""
    attributes = sorted(
        (name, value)
        for name, value in vars(model).items()
        if name.startswith(("tile_", "use_")) and isinstance(value, (bool, int, float, str))
    )
    text = f"{type(model).__module__}.{type(model).__qualname__}:{attributes!r}"
    return torch.tensor([float(zlib.crc32(text.encode()))], dtype=torch.float64)


def _weights_fingerprint(model) -> torch.Tensor:
    """Two float64 sums over the parameters and buffers (position-weighted sums, sums of squares): equal weights give
    equal numbers; a cheap check (one read of the weights), not a hash."""
    tensors = [tensor.detach() for tensor in (*model.parameters(), *model.buffers()) if tensor.is_floating_point()]
    if not tensors:
        return torch.zeros(2, dtype=torch.float64)
    sums = torch.stack([tensor.to(torch.float64).sum() for tensor in tensors])
    squares = torch.stack([tensor.to(torch.float64).square().sum() for tensor in tensors])
    positions = torch.arange(1, len(tensors) + 1, dtype=torch.float64, device=sums.device)
    return torch.nan_to_num(torch.stack([(sums * positions).sum(), squares.sum()]), nan=0.0).cpu()


_PLANS: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = weakref.WeakKeyDictionary()
"""Per model: the calls of earlier plan passes, by everything their shapes depend on (`_plan_key`)."""


def _plan_key(model, path: str, x: torch.Tensor, args, kwargs) -> tuple:
    """The input's shape, dtype and device, the other arguments' signature, the model's dtypes and its plain
    attributes (tile sizes, strides, `use_framewise_*`, ...): a plan made with the same key has the same calls."""
    attributes = tuple(
        sorted((name, value) for name, value in vars(model).items() if isinstance(value, (bool, int, float, str)))
    )
    dtypes = tuple(sorted({str(parameter.dtype) for parameter in model.parameters()}))
    return (path, tuple(x.shape), x.dtype, str(x.device), signature(args, kwargs), dtypes, attributes)


def _shared_plan(model, split, path: str, x: torch.Tensor, args, kwargs, group, device, deadline) -> list:
    """The calls of `model`'s pass, planned on the group's first rank (or taken from its cache) and sent to all.

    An error on the first rank is sent instead, and raised on every rank; the others wait until `deadline` for it.
    """
    message = None
    if dist.get_rank(group) == 0:
        key = _plan_key(model, path, x, args, kwargs)
        cache = _PLANS.setdefault(model, {})
        try:
            if key not in cache:
                # The other tensor arguments (LTX's `temb`) go to the meta device with the input and the weights.
                meta_args, meta_kwargs = tree_map(lambda v: v.to("meta") if torch.is_tensor(v) else v, (args, kwargs))
                cache[key] = plan_pass(model, split, lambda z: _run(model, path, z, meta_args, meta_kwargs), x)
            message = cache[key]
        except Exception as error:
            message = exchange.ParallelTilingError(f"planning the tiles on rank 0 failed: {error!r}")
    exchange.wait_for_all(group, device, deadline, "get to the plan", "rank 0 plans the tiles; it died or hangs")
    calls = exchange.broadcast_object(message, 0, group, device, deadline, "the plan")
    if isinstance(calls, Exception):
        raise calls
    return calls


def _checked(plan: Plan, counter: list[int], path: str) -> int:
    index = counter[0]
    if index >= len(plan.calls) or plan.calls[index].path != path:
        raise RuntimeError(
            f"the model's calls changed between passes (call {index} is {path}): its tiled pass depends on values, "
            "so it cannot be split over ranks"
        )
    counter[0] += 1
    return index


def _compute_pass(model, split, plan: Plan, rank: int, device, run) -> dict[int, torch.Tensor]:
    outputs, counter = {}, [0]

    def compute(path, original, args, kwargs):
        index = _checked(plan, counter, path)
        call = plan.calls[index]
        if plan.owners[call.tile] != rank:
            return call.structure(call.placeholder(device))
        output = original(*args, **kwargs)
        if tuple(payload(output).shape) != call.shape or payload(output).dtype != call.dtype:
            raise RuntimeError(
                f"call {index} ({path}) returned {tuple(payload(output).shape)} {payload(output).dtype}, the plan "
                f"expected {call.shape} {call.dtype}"
            )
        if call.travels:
            outputs[index] = payload(output)
        return output

    with intercept(model, split, compute), silent_blends(model):
        run()
    if counter[0] != len(plan.calls):
        raise RuntimeError(f"the model made {counter[0]} per-tile calls, the plan {len(plan.calls)}")
    return outputs


def _replay_pass(model, split, plan: Plan, received: dict[int, torch.Tensor], device, run):
    counter = [0]

    def replay(path, original, args, kwargs):
        index = _checked(plan, counter, path)
        call = plan.calls[index]
        if call.travels:
            return call.structure(received[index])
        return call.structure(call.placeholder(device))

    with intercept(model, split, replay), enabled():
        return run()
