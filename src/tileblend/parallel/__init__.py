"""Tiled VAE decode and encode split over the ranks of a `torch.distributed` process group, bit for bit.

    import torch.distributed as dist
    import tileblend.parallel

    dist.init_process_group("nccl")              # or "gloo" on CPUs; launch with torchrun --nproc-per-node N
    vae.enable_tiling()
    frames = tileblend.parallel.decode(vae, latents).sample        # every rank gets the result
    with tileblend.parallel.tiled(vae):                            # or: a pipeline's own vae.decode calls
        video = pipe(prompt, output_type="pt").frames

Each rank computes the tiles assigned to it (balanced by their output size), the decoded tiles travel to the
blending rank(s), and there the model's own tiled decode blends them (with `tileblend.blend`), crops and concatenates.
The result equals the same model's single-device tiled decode bit for bit. The classes and how each splits are in
docs/parallel.md; `SPLITS` holds them, `UNSUPPORTED` the reasons for the paths that cannot be split.
"""

import datetime

import torch.distributed as dist

from .exchange import ParallelTilingError, ParallelTraffic
from .passes import DEFAULT_TIMEOUT, run_parallel
from .scoped import split_calls
from .splits import SPLITS, UNSUPPORTED, Split, split_of


__all__ = [
    "ParallelTilingError",
    "ParallelTraffic",
    "SPLITS",
    "UNSUPPORTED",
    "Split",
    "decode",
    "encode",
    "split_of",
    "tiled",
]


MAX_TIMEOUT = datetime.timedelta(seconds=1e9)
"""The longest `timeout`, about 31 years: past about 9e9 s, gloo's end of a wait overflows and the wait never ends."""


def _timeout(timeout) -> datetime.timedelta:
    """`timeout` as a `datetime.timedelta`: a timedelta, or seconds as a number; positive, at most `MAX_TIMEOUT`
    (`ValueError` otherwise, also for infinity and NaN)."""
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
    number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
    if not number or not 0 < seconds <= MAX_TIMEOUT.total_seconds():
        raise ValueError(
            "timeout must be a positive number of seconds or a datetime.timedelta, at most "
            f"{MAX_TIMEOUT.total_seconds():g} s (about 31 years), not {timeout!r}"
        )
    return datetime.timedelta(seconds=seconds)


def _group(group):
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "tileblend.parallel needs an initialized process group: call torch.distributed.init_process_group() "
            "(launch with torchrun --nproc-per-node N)"
        )
    return dist.group.WORLD if group is None else group


def decode(
    vae,
    latents,
    *args,
    group=None,
    dst: int | None = None,
    timeout: datetime.timedelta | float = DEFAULT_TIMEOUT,
    return_traffic: bool = False,
    **kwargs,
):
    """`vae.decode(latents, *args, **kwargs)` with its tiles split over the ranks of `group`.

    Every rank must call it with the same latents and other arguments (checked: different ones, such as LTX's `temb`,
    raise `ParallelTilingError` on all).
    It runs under `torch.no_grad()`: inference only, the output does not track gradients.

    Args:
        group: the process group (default: the default group). A group of one runs the plain `vae.decode`.
        dst: the rank (in `group`) that gets the result; the others return None and never hold the whole output.
            None (the default): every rank gets it.
        timeout: one deadline for the whole call, its own work included (every wait, the plan's too, takes what
            is left of it), in seconds or as a `datetime.timedelta`, at most `MAX_TIMEOUT` (about 31 years): give a
            decode that computes for long a larger one. Past it, or when a rank fails or dies, every rank raises `ParallelTilingError` naming the rank(s)
            and what happened (on gloo; other backends name no rank). The ranks agree on success before returning,
            so every rank returns or every rank raises, short of the deadline passing during that last exchange.
            The group is unusable after an error.
        return_traffic: also return what this rank did, as a `ParallelTraffic`.

    Returns:
        What `vae.decode` returns, on the receiving rank(s); None on the others. With `return_traffic`, the pair
        (that, this rank's `ParallelTraffic`: the pass's tiles, those computed here, bytes of decoded tiles sent and
        received); the traffic is None in a group of one, which runs the plain `vae.decode`.
    """
    timeout, group = _timeout(timeout), _group(group)
    output, traffic = run_parallel(vae, "decode", latents, args, kwargs, group=group, dst=dst, timeout=timeout)
    return (output, traffic) if return_traffic else output


def encode(
    vae,
    sample,
    *args,
    group=None,
    dst: int | None = None,
    timeout: datetime.timedelta | float = DEFAULT_TIMEOUT,
    return_traffic: bool = False,
    **kwargs,
):
    """`vae.encode(sample, *args, **kwargs)` with its tiles split over the ranks of `group`; arguments and returns as
    `decode` (the traffic counts bytes of encoded tiles)."""
    timeout, group = _timeout(timeout), _group(group)
    output, traffic = run_parallel(vae, "encode", sample, args, kwargs, group=group, dst=dst, timeout=timeout)
    return (output, traffic) if return_traffic else output


def tiled(vae, group=None, dst: int | None = None, timeout: datetime.timedelta | float = DEFAULT_TIMEOUT):
    """A block inside which `vae.decode` and `vae.encode` (where the class splits) run split over `group`'s ranks,
    whoever calls them: `with tileblend.parallel.tiled(pipe.vae): pipe(...)`. Only `vae` is affected (a copy of it,
    other instances of its class and other threads' models are not), and it pickles and deep-copies as outside.
    Like `decode`, the split calls run without gradient tracking. `decode`/`encode` called on `vae` inside the block
    split once, with their own `group`, `dst` and `timeout`.
    """
    timeout, group = _timeout(timeout), _group(group)
    paths = []
    for path in ("decode", "encode"):
        try:
            split_of(vae, path)
        except NotImplementedError:
            continue
        paths.append(path)
    if not paths:
        split_of(vae, "decode")  # raises, naming the class and why
    return split_calls(vae, paths, group, dst, timeout)
