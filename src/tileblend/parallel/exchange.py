"""What the ranks send each other: the facts of the call they agree on, a status after the tiles, and the tiles'
outputs.

Each rank packs the outputs of the calls it computed into one flat byte buffer, in call order; every rank knows every
buffer's layout from the plan. With a destination rank, each other rank sends its buffer to it (point to point);
without one, each buffer is broadcast from its rank to all. Bytes are sent as `uint8`, so every dtype travels as is
on gloo and NCCL.
"""

import datetime

import torch
import torch.distributed as dist

from .tiles import Plan


ALIGNMENT = 16
"""Each output starts at a multiple of this many bytes in a buffer, so its dtype view is aligned."""


class ParallelDecodeError(RuntimeError):
    """A rank failed, timed out, or was given an input that differs from the other ranks'."""


def comm_device(group, device: torch.device) -> torch.device:
    """The device the group's backend sends from: the CPU for gloo, the tensors' own device otherwise (NCCL)."""
    return torch.device("cpu") if dist.get_backend(group) == "gloo" else device


def _same_on_all_ranks(values: torch.Tensor, group) -> bool:
    both = torch.cat([values, -values])
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group)
    return torch.equal(both[: len(values)], -both[len(values) :])


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


def wait_for_all(group, timeout: datetime.timedelta, step: str, why: str, cause: BaseException | None = None) -> None:
    """On gloo, wait at most `timeout` for every rank (a `monitored_barrier`); raise `ParallelDecodeError` saying which
    `step` a rank did not reach and `why` that may be. Other backends rely on the process group's own timeout."""
    if dist.get_backend(group) != "gloo":
        return
    try:
        dist.monitored_barrier(group=group, timeout=timeout, wait_all_ranks=True)
    except RuntimeError as error:
        raise ParallelDecodeError(
            f"a rank did not {step} within {timeout.total_seconds():g} s ({why}): {error}"
        ) from (cause or error)


def agree(facts: dict[str, torch.Tensor], group, device: torch.device, timeout: datetime.timedelta) -> None:
    """Raise `ParallelDecodeError` on every rank unless every rank holds the same `facts` (name -> float64 values).

    On gloo a `monitored_barrier` first waits at most `timeout` for every rank (a rank that never comes is named);
    then one all_reduce compares the facts, and the error names those that differ.
    """
    wait_for_all(group, timeout, "reach the call", "it died, hangs, or called with other arguments")
    values = torch.cat([fact.to(torch.float64).flatten().cpu() for fact in facts.values()]).to(device)
    both = torch.cat([values, -values])
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=group)
    differs = (both[: len(values)] != -both[len(values) :]).cpu()
    names, start = [], 0
    for name, fact in facts.items():
        if differs[start : start + fact.numel()].any():
            names.append(name)
        start += fact.numel()
    if names:
        raise ParallelDecodeError(
            f"the ranks were given different {', '.join(names)}: every rank must make the same call to "
            "tileblend.parallel"
        )


def check_status(error: BaseException | None, group, device: torch.device, timeout: datetime.timedelta) -> None:
    """Tell every rank whether each rank computed its tiles; raise on all of them if one did not.

    On gloo a `monitored_barrier` first waits at most `timeout` for every rank and names the ones that never come (a
    rank that died or hangs). Then one all_reduce gathers who failed.
    """
    wait_for_all(group, timeout, "finish its tiles", "it died or hangs", cause=error)
    world_size = dist.get_world_size(group)
    failed = torch.zeros(world_size, dtype=torch.float64, device=device)
    failed[dist.get_rank(group)] = 1.0 if error is not None else 0.0
    dist.all_reduce(failed, op=dist.ReduceOp.MAX, group=group)
    ranks = [rank for rank in range(world_size) if failed[rank] > 0]
    if ranks:
        reason = f": {type(error).__name__}: {error}" if error is not None else ""
        raise ParallelDecodeError(f"rank(s) {ranks} failed while computing their tiles{reason}") from error


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


def send_outputs(plan, outputs, group, device, dst: int | None, report: dict | None) -> dict[int, torch.Tensor]:
    """Move the computed outputs to the blending rank(s); returns every output on those ranks, none elsewhere.

    `report`, if given, gets the bytes this rank sent and received added to its "sent" and "received".
    """
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    send_device = comm_device(group, device)
    receivers = list(range(world_size)) if dst is None else [dst]
    received = dict(outputs) if rank in receivers else {}
    own = pack(plan, rank, outputs, send_device)
    traffic = {"sent": own.numel() * len([receiver for receiver in receivers if receiver != rank]), "received": 0}
    if dst is None:
        for source in range(world_size):
            buffer = (
                own if source == rank else torch.empty(layout(plan, source)[2], dtype=torch.uint8, device=send_device)
            )
            if buffer.numel() == 0:
                continue
            dist.broadcast(buffer, src=dist.get_global_rank(group, source), group=group)
            if source != rank:
                traffic["received"] += buffer.numel()
                received |= unpack(plan, source, buffer, device)
        _add(report, traffic)
        return received
    if rank != dst:
        if own.numel():
            dist.send(own, dst=dist.get_global_rank(group, dst), group=group)
        _add(report, traffic)
        return {}
    for source in range(world_size):
        size = layout(plan, source)[2]
        if source == rank or size == 0:
            continue
        buffer = torch.empty(size, dtype=torch.uint8, device=send_device)
        dist.recv(buffer, src=dist.get_global_rank(group, source), group=group)
        traffic["received"] += size
        received |= unpack(plan, source, buffer, device)
    _add(report, traffic)
    return received


def _add(report: dict | None, traffic: dict) -> None:
    if report is not None:
        for key, count in traffic.items():
            report[key] = report.get(key, 0) + count
