"""The streamed-decode checks of `tileblend verify`: for each tiny model whose class `tileblend.streamed` covers, the
tiled decode as the installed diffusers runs it and the row-streamed one (`tileblend.streamed_decode`), bit for bit,
with the same blend calls (more than zero)."""

import inspect
import sys
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from .. import tiny_models as registry
from ..blend import DTYPE_NAMES
from ..calls import record_blends
from ..compare import bitwise_equal
from ..streamed import COVERED, streamed_decode
from ..streamed.source import streamed_version


@dataclass
class StreamedResult:
    """The verdict for one tiny model and dtype: `exact` (None: not run, `note` says why), the blend calls of the stock
    decode by method, and whether the streamed decode made the same calls in the same order."""

    model: str
    cls: str
    dtype: str
    exact: bool | None
    blend_calls: dict[str, int] = field(default_factory=dict)
    same_calls: bool | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        """False when the decodes ran and differed, blended nothing, or blended differently."""
        return self.exact is None or bool(self.exact and self.blend_calls and self.same_calls)


def covered_entries(entries) -> list:
    """The entries among `entries` whose class the streamed decode covers and that have a tiled decode."""
    return [entry for entry in entries if entry.class_name in COVERED and entry.decode is not None]


def verify_streamed(entry, dtype: torch.dtype, device) -> StreamedResult:
    """Decode `entry`'s latent with its tiny model's own tiled decode and with the streamed one; compare."""
    result = StreamedResult(model=entry.name, cls=entry.class_name, dtype=DTYPE_NAMES[dtype], exact=None)
    reason = registry.missing_class(entry)
    if reason is not None:
        result.note = f"skipped: {reason}"
        return result
    model = registry.build_model(entry, dtype, device)
    if streamed_version(inspect.getattr_static(type(model), "tiled_decode")) is None:
        result.note = "skipped: this diffusers' tiled_decode is not one tileblend streams (it decodes as written)"
        return result
    latent = registry.make_input(entry, "decode", dtype, device)
    with record_blends(type(model)) as calls:
        expected = registry.run_path(model, entry, "decode", latent)
    with streamed_decode(model), record_blends(type(model)) as streamed_calls:
        actual = registry.run_path(model, entry, "decode", latent)
    result.exact = bitwise_equal(expected, actual)
    result.blend_calls = calls.counts()
    result.same_calls = streamed_calls == calls
    return result


def verify_all(entries, device, dtypes, progress: bool = True) -> list[StreamedResult]:
    """`verify_streamed` for every covered entry among `entries` and every dtype; a dtype without kernels is skipped."""
    cases = [(entry, dtype) for entry in covered_entries(entries) for dtype in dtypes]
    results = []
    for entry, dtype in tqdm(cases, desc="streamed decode", unit="model", file=sys.stderr, disable=not progress):
        try:
            results.append(verify_streamed(entry, dtype, device))
        except (RuntimeError, NotImplementedError) as error:
            if "not implemented for" not in str(error):
                raise
            note = f"skipped, no kernel: {error}".splitlines()[0]
            results.append(StreamedResult(entry.name, entry.class_name, DTYPE_NAMES[dtype], None, note=note))
    return results


def format_streamed_table(results: list[StreamedResult]) -> str:
    """One line per model and dtype: streamed equals stock (yes / NO / skip), the blend calls, notes."""
    header = f"{'model':<24} {'dtype':<9} {'exact':<5} {'blend calls (v/h/t)':<20} notes"
    lines = [header, "-" * len(header)]
    for r in results:
        exact = "skip" if r.exact is None else "yes" if r.exact else "NO"
        counts = "/".join(str(r.blend_calls.get(name, 0)) for name in ("blend_v", "blend_h", "blend_t"))
        notes = [r.note] if r.note else []
        if r.exact is not None and not r.same_calls:
            notes.insert(0, "BLEND CALLS DIFFER")
        if r.exact is not None and not r.blend_calls:
            notes.insert(0, "NOTHING BLENDED")
        lines.append(f"{r.model:<24} {r.dtype:<9} {exact:<5} {counts:<20} {'; '.join(notes)}")
    return "\n".join(lines)
