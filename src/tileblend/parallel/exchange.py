"""What the ranks send each other: the facts of the call they agree on, a status after the tiles, and the tiles'
outputs.

Each rank packs the outputs of the calls it computed into one flat byte buffer, in call order; every rank knows every
buffer's layout from the plan. With a destination rank, each other rank sends its buffer to it (point to point);
without one, each buffer is broadcast from its rank to all. Bytes are sent as `uint8`, so every dtype travels as is
on gloo and NCCL.

No rank ever waits longer than the call's `timeout` for the others, in all: the call's `Deadline` is set once, each
step starts with `wait_for_all`, which names the ranks that did not come, and every operation (the plan's broadcast
included) is started asynchronously and waited on inside `bounded`, each wait taking what is left of the deadline.
"""

import contextlib
import datetime
import pickle
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .tiles import Plan


ALIGNMENT = 16
"""Each output starts at a multiple of this many bytes in a buffer, so its dtype view is aligned."""


class ParallelTilingError(RuntimeError):
    """A rank failed, timed out, or was given an input that differs from the other ranks'."""


@dataclass(frozen=True)
class ParallelTraffic:
    """What one rank did in one split pass: the pass's `tiles` (all ranks together), the `own_tiles` this rank
    computed, the bytes it `sent` (its buffer of computed tile outputs, once per other rank that gets it) and the bytes
    it `received` (the other ranks' buffers). Buffers are the outputs in call order, each padded to `ALIGNMENT`."""

    tiles: int
    own_tiles: int
    sent: int
    received: int


def comm_device(group, device: torch.device) -> torch.device:
    """The device the group's backend sends from: the CPU for gloo, the tensors' own device otherwise (NCCL)."""
    return torch.device("cpu") if dist.get_backend(group) == "gloo" else device


def fingerprint(x: torch.Tensor) -> torch.Tensor:
    """A few float64 numbers that differ, with high probability, between different inputs.

    The shape and dtype, three sums over the finite values (plain, squared, position-weighted) and the
    position-weighted counts of NaN, +inf and -inf. It is a cheap check, not a hash: it reads the input once. Sums
    that overflow are the same on every rank given the same input; their NaN (+inf plus -inf) is written as 0 so that
    equal inputs give equal fingerprints.
    """
    flat = x.detach().flatten()
    values = torch.nan_to_num(flat.to(torch.float64), nan=0.0, posinf=0.0, neginf=0.0)
    positions = torch.arange(1, values.numel() + 1, dtype=torch.float64, device=values.device)
    specials = (torch.isnan(flat), torch.isposinf(flat), torch.isneginf(flat))
    sums = [values.sum(), values.square().sum(), (values * positions).sum()]
    sums += [(mask * positions).sum() for mask in specials]
    sums = torch.nan_to_num(torch.stack(sums), nan=0.0).cpu()
    header = torch.tensor([x.dim(), x.dtype.itemsize, x.dtype.is_floating_point, *x.shape][:16], dtype=torch.float64)
    return torch.cat([header, torch.zeros(16 - len(header), dtype=torch.float64), sums])


@dataclass(frozen=True)
class Deadline:
    """The end of one call's `timeout` (on `time.monotonic()`'s clock): every wait of the call takes what is left."""

    timeout: datetime.timedelta
    end: float

    @classmethod
    def after(cls, timeout: datetime.timedelta) -> "Deadline":
        return cls(timeout, time.monotonic() + timeout.total_seconds())

    def remaining(self) -> datetime.timedelta:
        # At least a millisecond: a zero timeout means "wait forever" to `Work.wait`.
        return datetime.timedelta(seconds=max(self.end - time.monotonic(), 1e-3))

    @property
    def seconds(self) -> float:
        return self.timeout.total_seconds()


@contextlib.contextmanager
def bounded(deadline: Deadline, what: str):
    """A block that starts asynchronous operations and waits for each with the function it yields (`wait(work)`),
    until `deadline` at most; an operation that fails or times out raises `ParallelTilingError` saying that `what`
    failed (a rank that is late or hangs, or that died: gloo reports a closed connection at once)."""
    try:
        yield lambda work: work.wait(deadline.remaining())
    except RuntimeError as error:
        raise ParallelTilingError(f"{what} failed (waited at most {deadline.seconds:g} s in all): {error}") from error


def wait_for_all(
    group, device: torch.device, deadline: Deadline, step: str, why: str, cause: BaseException | None = None
) -> None:
    """Wait until every rank has reached `step`, `deadline` at most; raise `ParallelTilingError` on every rank that
    waited in vain, naming the ranks that did not come and `why` that may be.

    On gloo every rank sends each other rank a token and waits for theirs, so the missing ranks are named; on other
    backends one all_reduce is waited on.
    """
    if dist.get_backend(group) != "gloo":
        with bounded(deadline, f"waiting for every rank to {step} ({why})") as wait:
            wait(dist.all_reduce(torch.zeros(1, device=device), group=group, async_op=True))
        return
    rank = dist.get_rank(group)
    token, sends, receives, missing = torch.zeros(1, dtype=torch.uint8), [], {}, []
    for peer in range(dist.get_world_size(group)):
        if peer == rank:
            continue
        try:
            sends.append(dist.isend(token, dist.get_global_rank(group, peer), group=group))
            received = torch.zeros(1, dtype=torch.uint8)
            receives[peer] = (received, dist.irecv(received, dist.get_global_rank(group, peer), group=group))
        except RuntimeError:  # its connection is closed: it died
            missing.append(peer)
    for peer, (_, work) in receives.items():
        try:
            work.wait(deadline.remaining())
        except RuntimeError:
            missing.append(peer)
    if missing:
        raise ParallelTilingError(
            f"rank(s) {sorted(missing)} did not {step} within {deadline.seconds:g} s ({why})"
        ) from cause
    with bounded(deadline, f"telling the other ranks that this one reached '{step}'") as wait:
        for work in sends:
            wait(work)


def agree(facts: dict[str, torch.Tensor], group, device: torch.device, deadline: Deadline) -> None:
    """Raise `ParallelTilingError` on every rank unless every rank holds the same `facts` (name -> float64 values).

    Every rank first waits for the others (`wait_for_all`), then one all_reduce compares the facts, and the error
    names those that differ.
    """
    wait_for_all(group, device, deadline, "reach the call", "it died, hangs, or called with other arguments")
    values = torch.cat([fact.to(torch.float64).flatten().cpu() for fact in facts.values()]).to(device)
    both = torch.cat([values, -values])
    with bounded(deadline, "comparing the calls") as wait:
        wait(dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group, async_op=True))
    differs = (both[: len(values)] != -both[len(values) :]).cpu()
    names, start = [], 0
    for name, fact in facts.items():
        if differs[start : start + fact.numel()].any():
            names.append(name)
        start += fact.numel()
    if names:
        raise ParallelTilingError(
            f"the ranks were given different {', '.join(names)}: every rank must make the same call to "
            "tileblend.parallel"
        )


MESSAGE_BYTES = 512
"""How much of a failed rank's error message (UTF-8) the other ranks get."""


def check_status(
    error: BaseException | None, group, device: torch.device, deadline: Deadline, step: str, doing: str
) -> None:
    """Tell every rank whether each rank got through `step` ("finish its tiles"); raise on all of them if one did not,
    naming each failed rank, what it was `doing` ("computing their tiles") and its error.

    Every rank first waits for the others (`wait_for_all`: a rank that died or hangs is named), then one all_gather
    shares each rank's error message (empty when it succeeded).
    """
    wait_for_all(group, device, deadline, step, "it died or hangs", cause=error)
    message = torch.zeros(MESSAGE_BYTES, dtype=torch.uint8)
    if error is not None:
        text = f"{type(error).__name__}: {error}".encode()[:MESSAGE_BYTES]
        message[: len(text)] = torch.frombuffer(bytearray(text), dtype=torch.uint8)
    messages = [torch.zeros_like(message, device=device) for _ in range(dist.get_world_size(group))]
    with bounded(deadline, f"sharing whether each rank got to {step}") as wait:
        wait(dist.all_gather(messages, message.to(device), group=group, async_op=True))
    texts = [bytes(message.cpu().tolist()).rstrip(b"\0").decode(errors="replace") for message in messages]
    failed = {rank: text for rank, text in enumerate(texts) if text}
    if failed:
        reasons = "; ".join(f"rank {rank}: {text}" for rank, text in failed.items())
        raise ParallelTilingError(f"rank(s) {list(failed)} failed while {doing}: {reasons}") from error


def broadcast_object(message, src: int, group, device: torch.device, deadline: Deadline, what: str):
    """`message` (a picklable object, significant on rank `src` of `group` only) on every rank: its pickled length,
    then its bytes, each broadcast and waited on until `deadline` at most; `what` names it in the error."""
    rank = dist.get_rank(group)
    data = pickle.dumps(message) if rank == src else b""
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    with bounded(deadline, f"sending {what} from rank {src}") as wait:
        wait(dist.broadcast(size, src=dist.get_global_rank(group, src), group=group, async_op=True))
        buffer = torch.empty(int(size.item()), dtype=torch.uint8, device=device)
        if rank == src:
            buffer.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        wait(dist.broadcast(buffer, src=dist.get_global_rank(group, src), group=group, async_op=True))
    return message if rank == src else pickle.loads(buffer.cpu().numpy().tobytes())


def layout(plan: Plan, rank: int) -> tuple[list[int], list[int], int]:
    """`rank`'s buffer: the indices of the calls it holds, their byte offsets, and its total size."""
    indices = plan.owned(rank)
    offsets, size = [], 0
    for index in indices:
        offsets.append(size)
        size += -(-plan.calls[index].nbytes // ALIGNMENT) * ALIGNMENT
    return indices, offsets, size


def pack(plan: Plan, rank: int, outputs: dict[int, torch.Tensor], device: torch.device) -> torch.Tensor:
    """`rank`'s computed outputs, copied into its flat byte buffer on `device`."""
    indices, offsets, size = layout(plan, rank)
    buffer = torch.empty(size, dtype=torch.uint8, device=device)
    for index, offset in zip(indices, offsets):
        data = outputs[index].contiguous().view(-1).view(torch.uint8)
        buffer[offset : offset + data.numel()].copy_(data)
    return buffer


def unpack(plan: Plan, rank: int, buffer: torch.Tensor, device: torch.device) -> dict[int, torch.Tensor]:
    """The outputs held in `rank`'s buffer, by call index, as tensors of their shape and dtype on `device`."""
    indices, offsets, _ = layout(plan, rank)
    buffer = buffer.to(device)
    outputs = {}
    for index, offset in zip(indices, offsets):
        call = plan.calls[index]
        data = buffer[offset : offset + call.nbytes]
        outputs[index] = data.view(call.dtype).view(call.shape)
    return outputs


def send_outputs(
    plan, outputs, group, device, dst: int | None, deadline: Deadline
) -> tuple[dict[int, torch.Tensor], ParallelTraffic]:
    """Move the computed outputs to the blending rank(s).

    Each rank's buffer moves in one operation (a broadcast from it, or a send to `dst`), waited on until `deadline`.

    Returns:
        Every output by call index on the blending rank(s) (none elsewhere), and what this rank did in the pass.
    """
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    send_device = comm_device(group, device)
    receivers = list(range(world_size)) if dst is None else [dst]
    received = dict(outputs) if rank in receivers else {}
    own = pack(plan, rank, outputs, send_device)
    wait_for_all(group, send_device, deadline, "get to the exchange of the tiles", "it died or hangs")
    sent, received_bytes = own.numel() * len([receiver for receiver in receivers if receiver != rank]), 0
    for source in range(world_size):
        size = layout(plan, source)[2]
        if size == 0 or (dst is not None and rank not in (source, dst)) or source == dst:
            continue
        buffer = own if source == rank else torch.empty(size, dtype=torch.uint8, device=send_device)
        destination = "the other ranks" if dst is None else f"rank {dst}"
        with bounded(deadline, f"moving rank {source}'s tiles to {destination}") as wait:
            wait(_move(buffer, source, rank, dst, group))
        if source != rank:
            received_bytes += size
            received |= unpack(plan, source, buffer, device)
    traffic = ParallelTraffic(
        tiles=plan.num_tiles, own_tiles=plan.owners.count(rank), sent=sent, received=received_bytes
    )
    return received, traffic


def _move(buffer: torch.Tensor, source: int, rank: int, dst: int | None, group):
    """Start moving `source`'s buffer: a broadcast from it (no `dst`), or its send to `dst` (and `dst`'s receive)."""
    if dst is None:
        return dist.broadcast(buffer, src=dist.get_global_rank(group, source), group=group, async_op=True)
    if source == rank:
        return dist.isend(buffer, dist.get_global_rank(group, dst), group=group)
    return dist.irecv(buffer, dist.get_global_rank(group, source), group=group)
