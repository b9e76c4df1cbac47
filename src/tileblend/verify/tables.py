"""The tables `tileblend verify` prints: one for the method checks, one for the model checks."""

from .method_checks import MethodResult
from .model_checks import ModelResult


def format_method_table(results: list[MethodResult]) -> str:
    """One line per method and dtype: exact, and how many tile pairs were compared."""
    header = f"{'class':<34} {'method':<8} {'dtype':<9} {'exact':<6} {'cases':>5}"
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(f"{r.cls:<34} {r.method:<8} {r.dtype:<9} {'yes' if r.exact else 'NO':<6} {r.cases:>5}")
    return "\n".join(lines)


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
