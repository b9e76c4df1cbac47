"""`tileblend verify`: check on this machine that tileblend's blends equal diffusers' loops bit for bit.

Two levels of checks, both comparing bits (`tileblend.compare.bitwise_equal`: infinities, signed zeros and subnormals
included):

- methods (`--quick` runs only these): for each loop blend that `tileblend.enable()` would patch, and each dtype, the
  original method and its vectorized replacement run on the same random tiles of that model's rank, over extents that
  are clamped, clipped by a shorter tile, zero and negative, with special values and a non-contiguous tile; the table
  also gives the speed of both at one larger seam (the median of several synchronised calls each).
- whole models: for each tiny model of `tileblend.models` (one per diffusers class with loop blends), tiled encode and
  tiled decode run once with the loops and once with tileblend enabled on the same input; the outputs must be
  identical, the blend methods the registry declares for that path must have been called, and the tileblend run must
  make the same blend calls as the loop run. On CUDA, the vectorized path is also captured in a CUDA graph and
  replayed on new inputs, each replay equal to eager execution. Whole models are not timed: a single run of a tiny,
  convolution-bound model says nothing about the blend (`tileblend bench` measures speed).
"""

import argparse
import fnmatch
import json
import sys
import warnings
from dataclasses import asdict, dataclass, field

import torch
from tqdm.auto import tqdm

from . import models as registry
from .blend import DTYPES
from .calls import record_blends
from .compare import bitwise_equal
from .patch import PatchedMethod, autoencoder_classes, enabled, find_loop_blends, original_method, vectorized_method
from .timing import median_ms, time_calls


@dataclass
class MethodResult:
    """The verdict for one method and dtype."""

    cls: str
    method: str
    dtype: str
    exact: bool
    cases: int
    loop_ms: float
    vectorized_ms: float
    timed_calls: int

    @property
    def speedup(self) -> float:
        return self.loop_ms / self.vectorized_ms


def tile_pairs(rank: int, axis: int, dtype: torch.dtype, device, generator: torch.Generator):
    """Yield (a, b, blend_extent) cases for a blend along `axis` of `rank`-dimensional tiles.

    Covers tiles of equal and unequal lengths along the axis, extents inside the tile, clamped by the shorter tile,
    one, zero and negative, a non-contiguous `b`, and special values (inf, NaN, signed zero, subnormals).
    """
    shape = [2, 3, 7, 12, 10][-rank:] if rank <= 5 else [2] * (rank - 3) + [7, 12, 10]
    for a_length, b_length in ((12, 12), (12, 5), (4, 12)):
        a_shape, b_shape = list(shape), list(shape)
        a_shape[axis], b_shape[axis] = a_length, b_length
        for extent in (-2, 0, 1, 2, 3, 6, 12, 40):
            a = (torch.randn(a_shape, generator=generator, dtype=torch.float64) * 8).to(device, dtype)
            b = (torch.randn(b_shape, generator=generator, dtype=torch.float64) * 8).to(device, dtype)
            yield a, b, extent
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0, 1e-40, 3e38, 1.0], dtype=torch.float64)
    a = special[torch.randint(len(special), shape, generator=generator)].to(device, dtype)
    b = special[torch.randint(len(special), shape, generator=generator)].to(device, dtype)
    yield a, b, 5
    wide = list(shape)
    wide[-1] *= 2
    b_view = torch.randn(wide, generator=generator, dtype=torch.float64).to(device, dtype)[..., ::2]
    yield torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype), b_view, 6


def timing_tiles(rank: int, dtype: torch.dtype, device, generator: torch.Generator):
    """Tiles of a typical decode size for the speed column: 256x256 images, or 8 frames of 128x128 video."""
    shape = (1, 3, 256, 256) if rank == 4 else (1, 3, 8, 128, 128)
    return [torch.randn(shape, generator=generator).to(device, dtype) for _ in range(2)]


TIMED_CALLS = 7
"""Timed calls per arm of the method table's speed columns (fewer, but at least 3, when half a second is spent)."""


def verify_method(patched: PatchedMethod, dtype: torch.dtype, device, seed: int = 0) -> MethodResult:
    """Compare one patched method with its original loop on `device` in `dtype`."""
    loop = original_method(patched.cls, patched.method)
    vectorized = vectorized_method(loop, patched.rank)
    generator = torch.Generator().manual_seed(seed)
    exact, cases = True, 0
    for a, b, extent in tile_pairs(patched.rank, patched.axis, dtype, device, generator):
        expected = loop(None, a, b.clone(), extent)
        actual_b = b.clone()
        actual = vectorized(None, a, actual_b, extent)
        exact &= actual is actual_b and bitwise_equal(expected, actual)
        cases += 1
    a, b = timing_tiles(patched.rank, dtype, device, generator)
    extent = 8 if patched.axis == -3 else 64
    loop_samples = time_calls(lambda: loop(None, a, b, extent), device, repeats=TIMED_CALLS, budget_s=0.5)
    vectorized_samples = time_calls(lambda: vectorized(None, a, b, extent), device, repeats=TIMED_CALLS, budget_s=0.5)
    return MethodResult(
        cls=patched.cls.__name__,
        method=patched.method,
        dtype=str(dtype).removeprefix("torch."),
        exact=exact,
        cases=cases,
        loop_ms=median_ms(loop_samples),
        vectorized_ms=median_ms(vectorized_samples),
        timed_calls=min(len(loop_samples), len(vectorized_samples)),
    )


def verify_methods(device, dtypes, progress: bool = True) -> list[MethodResult]:
    """Run `verify_method` for every loop blend in the installed diffusers and every dtype."""
    found, _ = find_loop_blends(autoencoder_classes())
    cases = [(patched, dtype) for patched in found for dtype in dtypes]
    bar = tqdm(cases, desc="blend methods", unit="check", file=sys.stderr, disable=not progress)
    return [verify_method(patched, dtype, device) for patched, dtype in bar]


def format_table(results: list[MethodResult]) -> str:
    """One line per method and dtype: exact, then the median times of the loop and of tileblend on one seam."""
    header = f"{'class':<34} {'method':<8} {'dtype':<9} {'exact':<6} {'loop ms':>8} {'vec ms':>8} {'speedup':>8}"
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.cls:<34} {r.method:<8} {r.dtype:<9} {'yes' if r.exact else 'NO':<6} "
            f"{r.loop_ms:>8.3f} {r.vectorized_ms:>8.3f} {r.speedup:>7.1f}x"
        )
    if results:
        fewest, most = min(r.timed_calls for r in results), max(r.timed_calls for r in results)
        calls = f"{fewest}" if fewest == most else f"{fewest} to {most}"
        lines.append(
            f"loop ms, vec ms: median of {calls} synchronised calls each (after 3 untimed) on one seam, 256x256 "
            "images or 8 frames of 128x128 video, extent 64 rows (8 frames for blend_t); speedup: their ratio"
        )
    return "\n".join(lines)


@dataclass
class ModelResult:
    """The verdict for one tiny model, tiled path and dtype.

    `exact` is None when the path did not run (`note` says why: an upstream bug, or no kernel for the dtype).
    `blend_calls` counts the calls of the loop run by method. `blends_seen` is whether every blend method the registry
    declares for the path was called; `same_calls` whether the tileblend run made the same blend calls (methods and
    extents, in order) as the loop run. `cuda_graph` is None off CUDA, else whether every replay of the captured
    vectorized path equalled eager execution.
    """

    model: str
    cls: str
    path: str
    dtype: str
    exact: bool | None
    blend_calls: dict[str, int] = field(default_factory=dict)
    blends_seen: bool | None = None
    same_calls: bool | None = None
    clipped: bool = False
    zero: bool = False
    cuda_graph: bool | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        """False when the path ran and differed, missed a declared blend, changed its blend calls under tileblend, or
        failed its CUDA graph check."""
        return self.exact is None or (
            self.exact and self.blends_seen and self.same_calls and self.cuda_graph is not False
        )


def cuda_graph_replays_equal(model, entry, path: str, x: torch.Tensor, replays: int = 3) -> bool:
    """Capture `path` of `model` (tileblend enabled) in a CUDA graph, replay it on new inputs, compare with eager.

    Warms up on a side stream, captures once, then for each replay copies a new random input into the static input.
    """
    side_stream = torch.cuda.Stream()
    side_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side_stream):
        for _ in range(2):
            registry.run_path(model, entry, path, x)
    torch.cuda.current_stream().wait_stream(side_stream)
    static_input = x.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = registry.run_path(model, entry, path, static_input)
    for seed in range(1, replays + 1):
        static_input.copy_(registry.make_input(entry, path, x.dtype, x.device, seed=seed))
        graph.replay()
        torch.cuda.synchronize()
        replayed = static_output.clone()
        if not bitwise_equal(registry.run_path(model, entry, path, static_input.clone()), replayed):
            return False
    return True


def verify_model_path(model, entry, path: str, dtype: torch.dtype, device) -> ModelResult:
    """Run tiled `path` of `model` once with the loops and once with tileblend enabled; compare bits and blend calls.

    Both runs record their blend calls (`tileblend.calls.record_blends`). Nothing is timed.
    """
    spec = entry.paths()[path]
    result = ModelResult(model=entry.name, cls=entry.class_name, path=path, dtype=_dtype_name(dtype), exact=None)
    if not spec.runs:
        result.note = f"skipped, upstream bug: {spec.upstream_bug}"
        return result
    x = registry.make_input(entry, path, dtype, device)
    cls = type(model)
    with record_blends(cls) as calls:
        expected = registry.run_path(model, entry, path, x)
    with enabled():
        with record_blends(cls) as vectorized_calls:
            actual = registry.run_path(model, entry, path, x)
        if torch.device(device).type == "cuda" and not entry.decode_uses_generator:
            result.cuda_graph = cuda_graph_replays_equal(model, entry, path, x)
    result.exact = bitwise_equal(expected, actual)
    result.blend_calls = calls.counts()
    result.blends_seen = set(spec.blends) <= calls.methods()
    result.same_calls = vectorized_calls == calls
    result.clipped, result.zero = calls.clipped, calls.zero
    result.note = f"upstream bug: {spec.upstream_bug}" if spec.upstream_bug else ""
    return result


def verify_models(entries, device, dtypes, progress: bool = True) -> list[ModelResult]:
    """Run `verify_model_path` for every entry, tiled path and dtype; one model is built per entry and dtype."""
    cases = [(entry, dtype) for entry in entries for dtype in dtypes]
    total = sum(len(entry.paths()) for entry in entries) * len(dtypes)
    results = []
    with tqdm(total=total, desc="tiny models", unit="path", file=sys.stderr, disable=not progress) as bar:
        for entry, dtype in cases:
            bar.set_postfix_str(f"{entry.name} {_dtype_name(dtype)}")
            try:
                model = registry.build_model(entry, dtype, device)
            except (RuntimeError, NotImplementedError) as error:
                model, reason = None, f"skipped: {error}".splitlines()[0]
            for path in entry.paths():
                if model is None:
                    results.append(_skipped(entry, path, dtype, reason))
                else:
                    try:
                        results.append(verify_model_path(model, entry, path, dtype, device))
                    except (RuntimeError, NotImplementedError) as error:
                        if "not implemented for" not in str(error):
                            raise
                        results.append(_skipped(entry, path, dtype, f"skipped, no kernel: {error}".splitlines()[0]))
                bar.update()
    return results


def _skipped(entry, path, dtype, note) -> ModelResult:
    return ModelResult(
        model=entry.name, cls=entry.class_name, path=path, dtype=_dtype_name(dtype), exact=None, note=note
    )


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def format_model_table(results: list[ModelResult]) -> str:
    """One line per model, path and dtype: exact (yes / NO / skip), blend calls by method, notes."""
    header = f"{'model':<24} {'path':<6} {'dtype':<9} {'exact':<5} {'blend calls (v/h/t)':<20} notes"
    lines = [header, "-" * len(header)]
    for r in results:
        exact = "skip" if r.exact is None else "yes" if r.exact else "NO"
        counts = "/".join(str(r.blend_calls.get(name, 0)) for name in ("blend_v", "blend_h", "blend_t"))
        notes = [r.note] if r.note else []
        if r.exact is not None and not r.blends_seen:
            notes.insert(0, "DECLARED BLEND NOT CALLED")
        if r.exact is not None and not r.same_calls:
            notes.insert(0, "BLEND CALLS DIFFER UNDER TILEBLEND")
        if r.cuda_graph is not None:
            notes.insert(0, "cuda graph ok" if r.cuda_graph else "CUDA GRAPH MISMATCH")
        notes[:0] = [label for label, seen in (("clipped", r.clipped), ("zero extent", r.zero)) if seen]
        lines.append(f"{r.model:<24} {r.path:<6} {r.dtype:<9} {exact:<5} {counts:<20} {'; '.join(notes)}")
    return "\n".join(lines)


def select_entries(patterns: list[str] | None) -> list:
    """The registry entries whose name or diffusers class matches any of `patterns` (names or globs); all if None.

    Raises:
        ValueError: a pattern matches no entry.
    """
    if not patterns:
        return list(registry.REGISTRY)
    selected = []
    for pattern in patterns:
        matches = [
            entry
            for entry in registry.REGISTRY
            if fnmatch.fnmatchcase(entry.name, pattern) or fnmatch.fnmatchcase(entry.class_name, pattern)
        ]
        if not matches:
            raise ValueError(f"--models {pattern!r} matches no model; known: {', '.join(registry.MODELS)}")
        selected += [entry for entry in matches if entry not in selected]
    return selected


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="check bitwise parity of every patched blend and every tiled model on this machine",
        description="Compare diffusers' loop blends with tileblend's bit for bit: each method on random tiles, then "
        "tiled encode and decode of a tiny model of every diffusers autoencoder with loop blends.",
    )
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default_device, help=f"torch device (default: {default_device})")
    parser.add_argument(
        "--dtype",
        nargs="+",
        choices=list(DTYPES),
        default=None,
        help="dtypes to check (default: every dtype the device has for the methods; float32, bfloat16 and float16 "
        "for the models)",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="models to check, by registry name or diffusers class, globs allowed (default: all)",
    )
    parser.add_argument("--quick", action="store_true", help="method-level checks only, no whole models")
    parser.add_argument(
        "--json", metavar="PATH", help="also write one JSON record per method and dtype, and per model, path and dtype"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the parity tables; return 1 on any mismatch, 2 on a usage error."""
    try:
        device = torch.device(args.device)
        torch.empty(0, device=device)
        entries = [] if args.quick else select_entries(args.models)
    except (RuntimeError, ValueError) as error:
        print(f"tileblend verify: error: {error}", file=sys.stderr)
        return 2
    if args.quick and args.models:
        print("tileblend verify: error: --models needs the whole-model checks; drop --quick", file=sys.stderr)
        return 2
    method_names = args.dtype or [name for name in DTYPES if not (name == "float64" and device.type == "mps")]
    model_names = args.dtype or ["float32", "bfloat16", "float16"]
    progress = not args.no_progress

    from diffusers.utils import logging as diffusers_logging

    verbosity = diffusers_logging.get_verbosity()
    diffusers_logging.set_verbosity_error()  # diffusers' dtype-cast advice for each tiny model would break the bar
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            methods = verify_methods(device, [DTYPES[name] for name in method_names], progress)
            model_results = verify_models(entries, device, [DTYPES[name] for name in model_names], progress)
    finally:
        diffusers_logging.set_verbosity(verbosity)

    print(format_table(methods))
    method_mismatches = [f"{r.cls}.{r.method} ({r.dtype})" for r in methods if not r.exact]
    print(f"\n{len(methods) - len(method_mismatches)} of {len(methods)} method/dtype pairs exact on {device}.")
    model_mismatches = [f"{r.model} {r.path} ({r.dtype})" for r in model_results if not r.ok]
    if model_results:
        print("\n" + format_model_table(model_results))
        ran = [r for r in model_results if r.exact is not None]
        print(
            f"\n{len(ran) - len(model_mismatches)} of {len(ran)} model/path/dtype runs exact with their blends "
            f"called on {device} ({len(model_results) - len(ran)} skipped)."
        )
    if args.json:
        records = [{"check": "method"} | asdict(r) | {"speedup": r.speedup} for r in methods]
        records += [{"check": "model"} | asdict(r) | {"ok": r.ok} for r in model_results]
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(records, file, indent=2)
    if method_mismatches or model_mismatches:
        print("MISMATCH: " + ", ".join(method_mismatches + model_mismatches), file=sys.stderr)
        return 1
    return 0
