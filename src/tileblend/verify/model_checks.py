"""The whole-model checks of `tileblend verify`: tiled encode and decode of each tiny model of `tileblend.tiny_models` with
the loops and with tileblend enabled, compared bit for bit, with their blend calls and, on CUDA, CUDA-graph replays.
"""

import fnmatch
import sys
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from .. import cuda_graph
from .. import tiny_models as registry
from ..blend import DTYPE_NAMES
from ..calls import record_blends
from ..compare import bitwise_equal
from ..patch import enabled


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
    """Capture `path` of `model` on a copy of `x` in a CUDA graph (`tileblend.cuda_graph.capture`), replay it on
    `replays` new random inputs, and return whether every replay equals eager execution bit for bit."""

    def run(inputs):
        return registry.run_path(model, entry, path, inputs)

    static_input = x.clone()
    graph, static_output = cuda_graph.capture(run, static_input)
    new_inputs = [registry.make_input(entry, path, x.dtype, x.device, seed=seed) for seed in range(1, replays + 1)]
    return all(cuda_graph.replays_equal_eager(graph, run, static_input, static_output, new_inputs))


def verify_model_path(model, entry, path: str, dtype: torch.dtype, device) -> ModelResult:
    """Run tiled `path` of `model` once with the loops and once with tileblend enabled; compare bits and blend calls.

    Both runs record their blend calls (`tileblend.calls.record_blends`). Nothing is timed.
    """
    spec = entry.paths()[path]
    result = ModelResult(model=entry.name, cls=entry.class_name, path=path, dtype=DTYPE_NAMES[dtype], exact=None)
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
            bar.set_postfix_str(f"{entry.name} {DTYPE_NAMES[dtype]}")
            model, reason = None, registry.missing_class(entry)
            if reason is None:
                try:
                    model = registry.build_model(entry, dtype, device)
                except (RuntimeError, NotImplementedError) as error:
                    reason = str(error).splitlines()[0]
            for path in entry.paths():
                if model is None:
                    results.append(_skipped(entry, path, dtype, f"skipped: {reason}"))
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
        model=entry.name, cls=entry.class_name, path=path, dtype=DTYPE_NAMES[dtype], exact=None, note=note
    )


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
