"""How long the documented commands take on this machine (`make durations`): one run each, timed as a user would.

    python utils/durations.py                          # run every command, print the table
    python utils/durations.py --write docs/results.md  # ... and put it between the durations markers there
    python utils/durations.py --commands verify-quick demo

Each command runs once, from the repository root, with `.venv/bin` first on PATH. The table gives its wall time, the
CPU seconds it and its children used (user + system: what scales to another machine with the same work), the
1-minute load average before and after it, and the work it did (model runs, counted from its output), with the
machine, the versions and the date. Wall time under load is not what an idle machine gives: read the load columns.
"""

import argparse
import datetime
import os
import platform
import re
import resource
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- durations:begin -->", "<!-- durations:end -->"


@dataclass(frozen=True)
class Command:
    """A documented command: what the table shows, what runs, and how to count its work from its output."""

    shown: str
    argv: list[str]
    work: str  # "verify", "bench" (an A/B benchmark) or "" (nothing counted): which counter reads the output


VERIFY = ["tileblend", "verify", "--device", "cpu", "--no-progress"]
COMMANDS = {
    "verify-quick": Command("tileblend verify --quick --device cpu", [*VERIFY, "--quick"], "verify"),
    "verify": Command("tileblend verify --device cpu", VERIFY, "verify"),
    "demo": Command("make demo", ["make", "--no-print-directory", "demo"], "verify"),
    "bench-decode": Command(
        "tileblend bench decode --preset small --device cpu --threads 1",
        ["tileblend", "bench", "decode", "--preset", "small", "--device", "cpu", "--threads", "1"],
        "bench",
    ),
    "bench-pipeline": Command(
        "tileblend bench pipeline --preset small --device cpu --threads 1",
        ["tileblend", "bench", "pipeline", "--preset", "small", "--device", "cpu", "--threads", "1"],
        "bench",
    ),
    "bench-blend": Command("tileblend bench blend --threads 1", ["tileblend", "bench", "blend", "--threads", "1"], ""),
    "bench-launches": Command("tileblend bench launches", ["tileblend", "bench", "launches"], ""),
}
"""The commands `make durations` times, by name (`--commands`), all on the CPU (`make demo` included). verify runs
without its progress bar, which is the only difference from the command shown."""


def count_work(kind: str, output: str) -> str:
    """The work a command did, read from its output: verify's method/dtype pairs and tiny-model runs, or a benchmark's
    worker processes and model calls (each worker makes its warmup, timed and one instrumented call)."""
    if not kind:
        return ""
    if kind == "verify":
        methods = re.search(r"of (\d+) method/dtype pairs", output)
        models = re.search(r"of (\d+) model/path/dtype runs", output)
        words = [f"{methods[1]} method/dtype pairs" if methods else "no method table"]
        return ", ".join(words + ([f"{models[1]} model runs"] if models else []))
    run = re.search(r"(\d+) pairs of processes .*?, (\d+) warmup \+ (\d+) timed calls each", output)
    if not run:
        return "?"
    pairs, warmup, reps = (int(group) for group in run.groups())
    return f"{2 * pairs} processes, {2 * pairs * (warmup + reps + 1)} model calls"


def children_cpu_seconds() -> float:
    """User + system seconds of every finished child (and their waited-for children) of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: Command) -> dict:
    """Run `command` once and return its row: wall and CPU seconds, load before and after, work, exit code."""
    environment = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    print(f"$ {command.shown}", file=sys.stderr, flush=True)
    load_before, cpu_before, start = os.getloadavg()[0], children_cpu_seconds(), time.monotonic()
    completed = subprocess.run(
        command.argv, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    wall, cpu = time.monotonic() - start, children_cpu_seconds() - cpu_before
    output = completed.stdout.decode(errors="replace")
    return {
        "command": command.shown,
        "wall": wall,
        "cpu": cpu,
        "load": (load_before, os.getloadavg()[0]),
        "work": count_work(command.work, output),
        "exit": completed.returncode,
    }


def machine() -> str:
    """The CPU, its core count and the versions the timings depend on."""
    from tileblend.bench.machine import cpu_name

    versions = ", ".join(f"{name} {version(name)}" for name in ("torch", "diffusers"))
    return f"{cpu_name()}, {os.cpu_count()} cores, {platform.system()}; Python {platform.python_version()}, {versions}"


def table(rows: list[dict], when: datetime.datetime) -> str:
    """The markdown of `rows`, headed by the machine and the date."""
    heading = (
        f"Measured by `make durations` on {when:%Y-%m-%d %H:%M} UTC: {machine()}. One run each; CPU s is user + "
        "system time of the command and its children (on 2 cores, up to twice the wall time). Load: the 1-minute "
        "load average before and after; with load above the core count, other jobs shared the machine: the wall time "
        "is longer than on an idle one, and the CPU time can be longer too."
    )
    lines = [
        textwrap.fill(heading, 119, break_long_words=False, break_on_hyphens=False),
        "",
        "| command | wall s | CPU s | load before, after | work | exit |",
        "| --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| `{row['command']}` | {row['wall']:.0f} | {row['cpu']:.0f} | {row['load'][0]:.1f}, {row['load'][1]:.1f} "
            f"| {row['work']} | {row['exit']} |"
        )
    return "\n".join(lines)


def write_between_markers(doc: Path, text: str) -> None:
    """Replace what lies between the durations markers of `doc` with `text`."""
    content = doc.read_text(encoding="utf-8")
    head, begin, rest = content.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"durations: {doc} has no {BEGIN} ... {END} markers")
    doc.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=list(COMMANDS), help="default: all")
    parser.add_argument("--write", metavar="DOC", type=Path, help="put the table between the durations markers of DOC")
    args = parser.parse_args(argv)
    if args.write and BEGIN not in args.write.read_text(encoding="utf-8"):
        parser.error(f"{args.write} has no {BEGIN} marker")
    when = datetime.datetime.now(datetime.timezone.utc)
    rows = [run(COMMANDS[name]) for name in args.commands]
    text = table(rows, when)
    print(text)
    if args.write:
        write_between_markers(args.write, text)
        print(f"durations: wrote the table into {args.write}", file=sys.stderr)
    return 1 if any(row["exit"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
