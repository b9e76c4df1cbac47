"""Where a benchmark ran: the machine and the package versions, collected in one place for every benchmark record."""

import contextlib
import importlib.metadata
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import __version__


VERSIONED_PACKAGES = ("diffusers", "transformers", "accelerate")
"""Installed packages whose versions a record gives besides Python, torch and tileblend (None when not installed)."""


@dataclass(frozen=True)
class Machine:
    """The facts a benchmark record states about its run.

    `gpu` is the CUDA device's name (None off CUDA); `torch_threads` is torch's intra-op thread count in this process;
    `versions` holds python, torch, tileblend, then `VERSIONED_PACKAGES`, then cuda on a CUDA device.
    """

    platform: str
    processor: str
    cpu_count: int | None
    torch_threads: int
    gpu: str | None
    load_average: tuple[float, float, float] | None
    versions: dict[str, str | None]


def cpu_name() -> str:
    """The CPU model (from /proc/cpuinfo on Linux), or what `platform` knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine(device: torch.device | str) -> Machine:
    """Collect the platform, CPU, GPU (on CUDA), load and versions of this process for a run on `device`."""
    device = torch.device(device)
    versions = {"python": platform.python_version(), "torch": torch.__version__, "tileblend": __version__}
    for package in VERSIONED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    if device.type == "cuda":
        versions["cuda"] = torch.version.cuda
    return Machine(
        platform=platform.platform(),
        processor=cpu_name(),
        cpu_count=os.cpu_count(),
        torch_threads=torch.get_num_threads(),
        gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        load_average=os.getloadavg() if hasattr(os, "getloadavg") else None,
        versions=versions,
    )


def environment(device: torch.device | str, threads: int | None) -> dict:
    """The `versions` and `machine` entries of an end-to-end benchmark record (`tileblend bench decode`, `pipeline`,
    `compile`, `parallel`) whose workers ran on `device` with `threads` torch threads (None: torch's default)."""
    facts = machine(device)
    cpu_threads = f"CPU, torch threads per process: {threads or facts.torch_threads}"
    return {
        "versions": facts.versions,
        "machine": {
            "platform": facts.platform,
            "processor": facts.processor,
            "cpu_count": facts.cpu_count,
            "device_name": facts.gpu or cpu_threads,
            "load_average": facts.load_average,
        },
    }
