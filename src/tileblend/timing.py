"""Wall-clock timing with device synchronisation, shared by `tileblend verify` and `tileblend bench`."""

import statistics
import time

import torch


def synchronize(device: torch.device | str) -> None:
    """Wait for all work queued on `device` (a no-op on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_calls(function, device, repeats: int = 20, warmup: int = 3, budget_s: float | None = None) -> list[float]:
    """Call `function()` `warmup` times, then time it `repeats` times (stopping early once `budget_s` is spent).

    Returns:
        The seconds of each timed call, each measured between device synchronisations.
    """
    for _ in range(warmup):
        function()
    synchronize(device)
    samples = []
    started = time.perf_counter()
    for _ in range(repeats):
        begin = time.perf_counter()
        function()
        synchronize(device)
        samples.append(time.perf_counter() - begin)
        if budget_s is not None and time.perf_counter() - started > budget_s and len(samples) >= 3:
            break
    return samples


def median_ms(samples: list[float]) -> float:
    """The median of `samples` (seconds), in milliseconds."""
    return statistics.median(samples) * 1e3
