"""Run the end-to-end benchmarks and regenerate the measured tables of docs/results.md (`make results`).

    python utils/make_results.py --device cpu      # run the CPU set, then rewrite the tables
    python utils/make_results.py --device cuda     # run the GPU set, then rewrite the tables
    python utils/make_results.py --render-only     # only rewrite the tables from the JSON files already there

Each run writes `docs/results/<device>-<name>.json` (the `--json` record of `tileblend bench`) and a `.png` plot. The
tables are rendered from every JSON file in that folder, so CPU and GPU results can come from different machines. Only
the text between the `results:begin` and `results:end` markers of docs/results.md is replaced.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "docs" / "results"
RESULTS_DOC = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"

RUNS = {
    "cpu": {
        "decode-small": ["decode", "--preset", "small", "--threads", "1"],
        "pipeline-small": ["pipeline", "--preset", "small", "--threads", "1"],
    },
    "cuda": {
        "decode-sd-float16": ["decode", "--preset", "sd", "--dtype", "float16"],
        "decode-sd-bfloat16": ["decode", "--preset", "sd", "--dtype", "bfloat16"],
        "decode-wan-bfloat16": ["decode", "--preset", "wan", "--dtype", "bfloat16"],
        "pipeline-sd-float16": ["pipeline", "--preset", "sd", "--dtype", "float16"],
        "pipeline-sd-bfloat16": ["pipeline", "--preset", "sd", "--dtype", "bfloat16"],
    },
}
"""Per device: result name -> `tileblend bench` arguments (the device, JSON and plot paths are added)."""


def run_benchmarks(device: str) -> None:
    """Run every benchmark of `device`'s set, writing its JSON and PNG into RESULTS_DIR; stops at the first failure."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    for name, arguments in RUNS[device].items():
        stem = RESULTS_DIR / f"{device}-{name}"
        command = [sys.executable, "-m", "tileblend", "bench", *arguments, "--device", device]
        command += ["--json", str(stem.with_suffix(".json")), "--plot", str(stem.with_suffix(".png"))]
        print("$ " + " ".join(command[1:]), flush=True)
        subprocess.run(command, check=True)


def render_record(record: dict, plot: Path | None) -> str:
    """The markdown section of one benchmark record."""
    versions, machine = record["versions"], record["machine"]
    version_text = ", ".join(f"{name} {version}" for name, version in versions.items() if version)
    lines = [
        f"### {record['title'].removeprefix('tileblend bench ')}",
        "",
        f"Machine: {machine['device_name']}; {machine['processor']}, {machine['cpu_count']} CPUs, {machine['platform']}.",
        f"Versions: {version_text}.",
        "",
        f"    {record['command'].replace(str(ROOT) + '/', '')}",
        "",
        "| arm | median ms | min ms | max ms | peak memory | blend calls | blend ms | blend share |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for arm, label in (("A", "A: diffusers loops"), ("B", "B: tileblend")):
        stats = record["arms"][arm]
        lines.append(
            f"| {label} | {stats['median_ms']:.1f} | {stats['min_ms']:.1f} | {stats['max_ms']:.1f} "
            f"| {stats['peak_memory_bytes'] / 2**20:.0f} MiB | {stats['blend_calls']} | {stats['blend_ms']:.2f} "
            f"| {stats['blend_share']:.1%} |"
        )
    speedups = ", ".join(f"{speedup:.3f}x" for speedup in record["speedups"])
    lines += [
        "",
        f"Paired speedup A/B: median {record['speedup_median']:.3f}x, range {record['speedup_min']:.3f}x to "
        f"{record['speedup_max']:.3f}x ({speedups}; {record['pairs']} pairs, order {' '.join(record['order'])}). "
        f"Peak memory is the {record['arms']['A']['peak_memory_kind']}. Outputs bitwise equal: "
        f"**{'yes' if record['outputs_equal'] else 'NO'}**.",
    ]
    if plot is not None:
        lines += ["", f"![{plot.stem}](results/{plot.name})"]
    return "\n".join(lines)


def render(results_dir: Path = RESULTS_DIR, doc: Path = RESULTS_DOC) -> None:
    """Replace the generated part of `doc` with one section per JSON record in `results_dir`."""
    sections = []
    for path in sorted(results_dir.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        plot = path.with_suffix(".png")
        sections.append(render_record(record, plot if plot.exists() else None))
    text = doc.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    if not rest:
        raise SystemExit(f"{doc} has no {BEGIN} marker")
    body = "\n\n".join(sections) if sections else "No results yet: run `make results`."
    doc.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}", encoding="utf-8")
    print(f"wrote {len(sections)} result sections into {doc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=list(RUNS), default="cpu", help="which benchmark set to run")
    parser.add_argument("--render-only", action="store_true", help="do not run benchmarks, only rewrite the tables")
    args = parser.parse_args()
    if not args.render_only:
        run_benchmarks(args.device)
    render()
    return 0


if __name__ == "__main__":
    sys.exit(main())
