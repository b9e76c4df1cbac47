"""`tileblend bench launches`: the host time the blend loops add to a real-size tiled decode, estimated without a GPU.

On a GPU a loop blend costs about its kernel launches and the host's work to issue them. For each workload (SD's VAE at
1024x1024 and 2048x2048, Wan 2.1's VAE at 720p with 81 frames, each with its own default tiling):

1. The geometry: the VAE is built with the real architecture on the meta device (no weights, no compute) and its tiled
   decode runs once with every blend call recorded (`tileblend.calls.record_blends`): method and effective extent.
2. Per distinct call: the aten ops diffusers' loop and tileblend dispatch (counted, exact), and their host time,
   measured on this CPU on tiles one element wide except along the blended axis, so that compute is negligible and
   what is timed is dispatch (medians, one thread, float16).
3. Multiplied out per decode: blend calls, ops, host milliseconds, loop vs tileblend.

What the result is: a lower bound of the host-side time the loops add to a launch-bound GPU decode (a CUDA launch costs
more per op than a CPU dispatch), not a GPU timing. The meta device is used for the geometry only: its kernels are
Python shape functions, far slower than real dispatch. The summary also states what cost per op would explain the one
published figure, proposal huggingface/diffusers#14722: a 1024x1024 SD pipeline with tiled VAE on an RTX 3070 Ti went
from 1128 to 1009 ms in float16.
"""

import argparse
import statistics
import sys
from collections import Counter
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from .. import arguments
from ..blend import BLEND_AXES, BLEND_FUNCTIONS, DTYPES
from ..calls import record_blends
from ..opcount import count_aten_ops
from ..timing import time_calls
from .decode import SD_VAE_CONFIG, enable_tiling, latent_shape
from .machine import environment
from .options import add_benchmark_parser
from .records import write_record


@dataclass(frozen=True)
class Workload:
    """A real-size decode: the VAE architecture ("sd": SD v1's `AutoencoderKL`, "wan": Wan 2.1's `AutoencoderKLWan`),
    the output (height, width) and the frames of a video."""

    vae: str
    size: tuple[int, int]
    frames: int | None = None


WORKLOADS = {
    "sd-1024": Workload("sd", (1024, 1024)),
    "sd-2048": Workload("sd", (2048, 2048)),
    "wan-720p": Workload("wan", (720, 1280), frames=81),
}
PUBLISHED = {
    "workload": "sd-1024",
    "what": "a 1024x1024 SD pipeline with tiled VAE on an RTX 3070 Ti in float16",
    "loop_ms": 1128.0,
    "vectorized_ms": 1009.0,
    "source": "diffusers#14722",
}
"""The published saving: an SD 1024x1024 pipeline with tiled VAE, RTX 3070 Ti, float16, before and after."""


def meta_vae(name: str):
    """The workload's VAE class and an instance with the real architecture on the meta device, tiling on with the
    model's own defaults."""
    from diffusers import AutoencoderKL, AutoencoderKLWan

    with torch.device("meta"):
        vae = AutoencoderKL(**SD_VAE_CONFIG) if name == "sd" else AutoencoderKLWan()
    enable_tiling(vae, None)
    return vae


def blend_geometry(workload: Workload) -> Counter:
    """The blend calls of one tiled decode of `workload`, counted by (method, effective extent), zero extents left out
    (both implementations return at once)."""
    vae = meta_vae(workload.vae)
    latents = torch.empty(latent_shape(vae, workload.size, workload.frames), device="meta")
    with torch.inference_mode(), record_blends(type(vae)) as calls:
        vae.decode(latents)
    return Counter((call.method, call.effective) for call in calls if call.effective > 0)


def dispatch_cost(loop, method: str, extent: int, rank: int, dtype: torch.dtype, repeats: int) -> dict:
    """Aten ops and host milliseconds (median, min and max of `repeats` calls) of one call of diffusers' `loop` and of
    tileblend's `method`, on CPU tiles
    of `rank` dimensions that are `extent` long along the blended axis and one element wide elsewhere (blended into
    again and again: the values do not change the dispatch)."""
    shape = [1] * rank
    shape[BLEND_AXES[method]] = extent
    a, b = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    functions = {"loop": lambda: loop(None, a, b, extent), "tileblend": lambda: BLEND_FUNCTIONS[method](a, b, extent)}
    cost = {}
    for arm, function in functions.items():
        cost[f"{arm}_ops"] = sum(count_aten_ops(function).values())
        samples = time_calls(function, "cpu", repeats=repeats, warmup=3)
        cost[f"{arm}_ms"] = statistics.median(samples) * 1e3
        cost[f"{arm}_min_ms"], cost[f"{arm}_max_ms"] = min(samples) * 1e3, max(samples) * 1e3
    return cost


def estimate(name: str, dtype: torch.dtype, repeats: int) -> dict:
    """The launch-cost estimate of workload `name`: per (method, extent) row and in total."""
    workload = WORKLOADS[name]
    loops = type(meta_vae(workload.vae))
    rank = 4 if workload.frames is None else 5
    rows = []
    seams = sorted(blend_geometry(workload).items())
    for (method, extent), calls in tqdm(seams, desc=name, unit="seam", file=sys.stderr):
        cost = dispatch_cost(vars(loops)[method], method, extent, rank, dtype, repeats)
        rows.append({"method": method, "extent": extent, "calls": calls} | cost)
    totals = {key: sum(row["calls"] * row[key] for row in rows) for key in rows[0] if key.endswith(("_ops", "_ms"))}
    totals["calls"] = sum(row["calls"] for row in rows)
    totals["saved_ms"] = totals["loop_ms"] - totals["tileblend_ms"]
    totals["loop_us_per_op"] = totals["loop_ms"] * 1e3 / totals["loop_ops"]
    described = {"workload": name, "vae": loops.__name__, "size": list(workload.size), "frames": workload.frames}
    return described | {"rows": rows, "totals": totals}


def published_check(results: list[dict]) -> str | None:
    """What cost per removed op would explain the published saving, against the host cost measured here."""
    result = next((result for result in results if result["workload"] == PUBLISHED["workload"]), None)
    if result is None:
        return None
    totals = result["totals"]
    saved_ms = PUBLISHED["loop_ms"] - PUBLISHED["vectorized_ms"]
    removed_ops = totals["loop_ops"] - totals["tileblend_ops"]
    return (
        f"{PUBLISHED['source']}: {PUBLISHED['loop_ms']:.0f} -> {PUBLISHED['vectorized_ms']:.0f} ms for "
        f"{PUBLISHED['what']} saves {saved_ms:.0f} ms; the {removed_ops} ops the "
        f"vectorized blend removes from that decode would explain it at {saved_ms * 1e3 / removed_ops:.1f} us per op, "
        f"{saved_ms * 1e3 / removed_ops / totals['loop_us_per_op']:.1f}x the {totals['loop_us_per_op']:.2f} us per "
        f"op this CPU's dispatch alone costs (estimate here: {totals['saved_ms']:.1f} ms)."
    )


def format_table(results: list[dict]) -> str:
    """One Markdown row per workload and per (method, extent), loop vs tileblend."""
    lines = [
        "| workload | method | extent | calls | loop ops | tileblend ops | loop host ms | tileblend host ms |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        for row in result["rows"]:
            lines.append(
                f"| {result['workload']} | {row['method']} | {row['extent']} | {row['calls']} | "
                f"{row['calls'] * row['loop_ops']} | {row['calls'] * row['tileblend_ops']} | "
                f"{row['calls'] * row['loop_ms']:.2f} | {row['calls'] * row['tileblend_ms']:.2f} |"
            )
        totals = result["totals"]
        lines.append(
            f"| **{result['workload']}** | all | | {totals['calls']} | {totals['loop_ops']} | "
            f"{totals['tileblend_ops']} | {totals['loop_ms']:.2f} | {totals['tileblend_ms']:.2f} |"
        )
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    parser = add_benchmark_parser(
        subparsers, "launches", "estimate the host time the blend loops add to real-size tiled decodes", __doc__, main
    )
    parser.add_argument(
        "--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS), help="default: all"
    )
    parser.add_argument("--dtype", choices=["float16", "bfloat16", "float32"], default="float16")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls per measurement (default: 50)")
    parser.add_argument("--json", metavar="PATH", type=arguments.output_file, help="write the estimate as JSON")


def main(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        print("tileblend bench launches: --repeats must be at least 1")
        return 2
    torch.set_num_threads(1)
    results = [estimate(name, DTYPES[args.dtype], args.repeats) for name in args.workloads]
    print(f"tileblend bench launches: host dispatch of the blends per tiled decode, {args.dtype}, one CPU thread\n")
    print(format_table(results))
    check = published_check(results)
    for result in results:
        totals = result["totals"]
        print(
            f"\n{result['workload']}: the loops dispatch {totals['loop_ops']} ops in {totals['loop_ms']:.1f} ms of host "
            f"time ({totals['loop_us_per_op']:.2f} us per op), tileblend {totals['tileblend_ops']} in "
            f"{totals['tileblend_ms']:.2f} ms: at least {totals['saved_ms']:.1f} ms of host time saved per decode on "
            "a launch-bound GPU (an estimate, not a GPU timing). Spread, every seam at its fastest and at its slowest "
            f"of {args.repeats} calls: loops {totals['loop_min_ms']:.1f}-{totals['loop_max_ms']:.1f} ms, tileblend "
            f"{totals['tileblend_min_ms']:.2f}-{totals['tileblend_max_ms']:.2f} ms."
        )
    if check:
        print(f"\n{check}")
    conditions = environment("cpu", 1)
    load = conditions["machine"]["load_average"]
    if load is not None:
        print(f"\nmachine load (1, 5, 15-minute averages) when it ended: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    if args.json:
        command = f"tileblend bench launches --workloads {' '.join(args.workloads)} --dtype {args.dtype}"
        record = {"benchmark": "launches", "command": command, "dtype": args.dtype, "repeats": args.repeats}
        record |= {"results": results}
        record |= {"published_check": check} | conditions
        write_record(args.json, record)
    return 0
