"""Wall-clock timing with device synchronisation: the one way `tileblend verify` and `tileblend bench` time a call."""

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


def timed(function, device) -> tuple[object, float]:
    """Call `function()` once between two synchronisations of `device`.

    Returns:
        Its result and the seconds from the end of the work queued before the call to the end of the call's work.
    """
    synchronize(device)
    begin = time.perf_counter()
    result = function()
    synchronize(device)
    return result, time.perf_counter() - begin


def time_calls(function, device, repeats: int = 20, warmup: int = 3, budget_s: float | None = None) -> list[float]:
    """Call `function()` `warmup` times, then time it `repeats` times (stopping early once `budget_s` is spent).

    Returns:
        The seconds of each timed call (`timed`).
    """
    for _ in range(warmup):
        function()
    synchronize(device)  # the warm-up's work does not count against the budget
    samples = []
    started = time.perf_counter()
    for _ in range(repeats):
        samples.append(timed(function, device)[1])
        if budget_s is not None and time.perf_counter() - started > budget_s and len(samples) >= 3:
            break
    return samples


def median_ms(samples: list[float]) -> float:
    """The median of `samples` (seconds), in milliseconds."""
    return statistics.median(samples) * 1e3
