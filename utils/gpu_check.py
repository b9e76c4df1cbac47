"""Validate tileblend on a GPU in one command (`make gpu-check`); every output lands in one folder.

    python utils/gpu_check.py [--device cuda] [--out out/gpu-check] [--wheels DIR] [--models KIND=ID[:SUBFOLDER] ...]
                              [--upstream DIFFUSERS]
    make gpu-check [WHEELS=DIR] [DEVICE=cpu] [MODELS="image=stabilityai/sdxl-vae video=Wan-AI/Wan2.1-T2V-1.3B-Diffusers:vae"]

Runs as it is on a machine with torch (with CUDA) and nothing of this repository installed: the steps import
tileblend from `src/`. Steps, in order, each with a timeout (each writes `<step>.log`, and JSON/PNG files where the
command has them):

1. `deps`: installs missing Python packages (diffusers, transformers, matplotlib, hypothesis) from the wheel
   folder `--wheels` (`pip install --no-index --find-links DIR`); nothing is downloaded.
2. `cuda-tests`: `pytest -m cuda tests` (CUDA graph replay of the blends and of every registry model, blend parity
   on the device). On CUDA a test skipped for want of CUDA is a failure (skips by design, such as upstream bugs, are
   not); with `--device cpu` they cannot run, and the summary says SKIPPED with their count.
3. `verify`: `tileblend verify --device DEVICE --dtype float32 float16 bfloat16` (methods, whole models, CUDA graph
   replay; on a CPU only the `kl` and `hunyuan-video` models).
4. `bench-blend`: `tileblend bench blend --device DEVICE` (on a CPU: float32 and bfloat16 at extents 1, 8, 128).
5. `decode-image-<dtype>`, `decode-video-<dtype>`: `tileblend bench decode`, loops vs tileblend, in float16 and
   bfloat16 on CUDA: with `--models` the real checkpoints given (an image VAE at 2048x2048, a video VAE at 480p with 81
   frames), otherwise the random-weight presets of the same architectures (`sd`: SD's VAE at 1024x1024, `wan`: Wan
   2.1's). On a CPU: float32 at tiny sizes.
6. `bench-pipeline`: `tileblend bench pipeline --preset sd`, 1 pair in float16 on CUDA (the small preset on a CPU).
7. `upstream-tests`: the tests the pull request adds, on the device: a copy of `--upstream` (the pristine diffusers
   checkout, or a .tar.gz of one, the pull request is made from; needed on CUDA) rewritten by `tileblend rewrite`
   (`--inherit`: in that layout), then the `TilingBlend` tests of the test files the rewrite edits, with
   `DIFFUSERS_TEST_DEVICE` set to the device. On CUDA every one must run (a skip fails the step); on a CPU the
   CUDA-graph ones skip and the summary says how many.
8. `pr-benchmark`: the pull request's benchmark script (`tileblend/upstream/tiled_vae_benchmark.py`, stock diffusers
   only) on a saved random-weight SD VAE (a small one on a CPU), run with the pristine copy's diffusers (main) and with
   the rewritten one's (the branch), then `--compare`: the times of both and whether their outputs are identical.

`summary.md` and `summary.json` list each step's status, time, command and log, then one table of the decode
benchmarks (weights, dtype, medians, speedup, peak memory, bitwise equality) in the form the PR draft pastes
(`make upstream-pr` reads summary.json). The exit code is 1 if any step failed. Designed to finish its default set in
under 10 minutes on one H200; `--device cpu` runs every step at tiny sizes.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
REQUIRED = {"diffusers": "diffusers", "transformers": "transformers", "matplotlib": "matplotlib"}
REQUIRED |= {"hypothesis": "hypothesis", "pytest": "pytest", "parameterized": "parameterized"}
"""Import name -> distribution name of every package the steps need besides torch."""
BUDGET_S = 10 * 60
TINY_CPU = ["--size", "128", "--pairs", "1", "--reps", "1", "--threads", "1"]
DTYPES = ["--dtype", "float32", "float16", "bfloat16"]
STEPS = {
    "cuda": {
        "verify": ["verify", *DTYPES],
        "bench-blend": ["bench", "blend"],
        "bench-pipeline": ["bench", "pipeline", "--preset", "sd", "--pairs", "1", "--reps", "3", "--dtype", "float16"],
    },
    "cpu": {
        "verify": ["verify", *DTYPES, "--models", "kl", "hunyuan-video"],
        "bench-blend": ["bench", "blend", "--dtype", "float32", "bfloat16", "--extents", "1", "8", "128"]
        + ["--threads", "1"],
        "bench-pipeline": ["bench", "pipeline", "--preset", "small", "--dtype", "float32", *TINY_CPU],
    },
}
"""Per device: step name -> its `tileblend` arguments (--device, --json and, for the A/B benchmarks, --plot are added).
The decode steps (`decode_steps`) run between bench-blend and bench-pipeline."""
PRESETS = {"image": "sd", "video": "wan"}
"""The random-weight presets of `tileblend bench decode` with the architectures of the checkpoints below."""
CHECKPOINTS = {"image": "stabilityai/sdxl-vae", "video": "Wan-AI/Wan2.1-T2V-1.3B-Diffusers:vae"}
"""Real checkpoints a tester would use (`--models` with these, or others of the same kinds)."""
DECODE_RUNS = {"preset": ["--pairs", "2", "--reps", "3"], "checkpoint": ["--pairs", "1", "--reps", "2"]}
"""A/B processes and timed calls of a decode step on CUDA: fewer for real-size checkpoints (81-frame clips)."""
TIMEOUTS_S = {"verify": 240, "bench-blend": 180, "decode": 150, "bench-pipeline": 150, "upstream-tests": 180}
"""Per step, the most seconds it may run on the GPU machine (its device time is rationed)."""
CPU_TIMEOUT_FACTOR = 6
"""On a CPU the steps are this script's own test, at tiny sizes, often on a busy 2-core machine: their limits are
wider by this factor, there only to stop a hang."""


def step_timeout(name: str, device: str) -> float:
    return TIMEOUTS_S[name] * (CPU_TIMEOUT_FACTOR if device == "cpu" else 1)


PR_BENCHMARK = {"cuda": (1024, "float16"), "cpu": (128, "float32")}
"""Output size and dtype of the pull request's benchmark script per device."""


def decode_steps(device: str, models: dict[str, str]) -> dict[str, list[str]]:
    """The decode steps: image and video VAE, float16 and bfloat16 on CUDA (float32 at tiny sizes on a CPU), with the
    checkpoint `models[kind]` ("ID" or "ID:SUBFOLDER") where given, else the kind's random-weight preset."""
    steps = {}
    for kind in ("image", "video"):
        if kind in models:
            model, _, subfolder = models[kind].partition(":")
            source = ["--model", model] + (["--subfolder", subfolder] if subfolder else [])
            runs = DECODE_RUNS["checkpoint"]
        else:
            source, runs = ["--preset", PRESETS[kind]], DECODE_RUNS["preset"]
        if device == "cpu":
            tiny = ["--tile", "64"] + (["--frames", "5"] if kind == "video" else [])
            source = ["--preset", "small" if kind == "image" else "wan-small"] if kind not in models else source
            steps[f"decode-{kind}-float32"] = ["bench", "decode", *source, "--dtype", "float32", *tiny, *TINY_CPU]
            continue
        for dtype in ("float16", "bfloat16"):
            steps[f"decode-{kind}-{dtype}"] = ["bench", "decode", *source, "--dtype", dtype, *runs]
    return steps


def parse_models(words: list[str]) -> dict[str, str]:
    """`--models image=ID[:SUBFOLDER] video=ID[:SUBFOLDER]` (either or both) as {kind: "ID[:SUBFOLDER]"}."""
    models = {}
    for word in words:
        kind, _, model = word.partition("=")
        if kind not in PRESETS or not model:
            raise SystemExit(f"gpu_check: --models takes image=ID[:SUBFOLDER] and video=ID[:SUBFOLDER], not {word!r}")
        models[kind] = model
    return models


@dataclass
class Step:
    """The outcome of one step."""

    name: str
    status: str  # "ok", "FAIL" or "SKIPPED: why"
    seconds: float
    command: str
    log: str


def missing_packages() -> list[str]:
    return [dist for module, dist in REQUIRED.items() if importlib.util.find_spec(module) is None]


def run_command(
    name: str, command: list[str], out: Path, timeout_s: int, cwd: Path = ROOT, env: dict | None = None
) -> tuple[int, float]:
    """Run `command` from `cwd` (the repository root) with `out/<name>.log` as stdout and stderr and this repository's
    `src/` (or `env`'s PYTHONPATH) importable; returns (exit code, seconds)."""
    env = dict(os.environ) | (env or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT / "src")]))
    log = out / f"{name}.log"
    begin = time.perf_counter()
    print(f"[{name}] $ {' '.join(command)}", flush=True)
    with log.open("w", encoding="utf-8") as file:
        file.write("$ " + " ".join(command) + "\n")
        file.flush()
        try:
            code = subprocess.run(command, cwd=cwd, env=env, stdout=file, stderr=subprocess.STDOUT, timeout=timeout_s)
            returncode = code.returncode
        except subprocess.TimeoutExpired:
            file.write(f"\nTIMEOUT after {timeout_s} s\n")
            returncode = 124
    return returncode, time.perf_counter() - begin


def step_deps(out: Path, wheels: str | None) -> Step:
    missing = missing_packages()
    log = out / "deps.log"
    if not missing:
        log.write_text("all required packages importable\n", encoding="utf-8")
        return Step("deps", "ok", 0.0, "", log.name)
    if not wheels:
        log.write_text(f"missing: {' '.join(missing)}; no wheel folder given\n", encoding="utf-8")
        return Step("deps", f"FAIL: missing {' '.join(missing)}; pass WHEELS=DIR", 0.0, "", log.name)
    command = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", wheels, *missing]
    code, seconds = run_command("deps", command, out, timeout_s=300)
    importlib.invalidate_caches()
    still_missing = missing_packages()
    status = "ok" if code == 0 and not still_missing else f"FAIL: missing {' '.join(still_missing or missing)}"
    return Step("deps", status, seconds, " ".join(command), log.name)


def junit_counts(report: Path) -> tuple[dict[str, int], list[str]]:
    """The test, skip, failure and error counts of a pytest JUnit report, and its skip reasons."""
    counts = {"tests": 0, "skipped": 0, "failures": 0, "errors": 0}
    if not report.exists():
        return counts, []
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {key: int(suite.get(key, 0)) for key in counts}
    return counts, [skipped.get("message", "") for skipped in suite.iter("skipped")]


def without_upstream(device: str) -> list[Step]:
    """The pull request's steps without --upstream: failed on CUDA (they are what a GPU run is for), skipped on a CPU."""
    status = "FAIL: no --upstream (UPSTREAM=) given" if device == "cuda" else "SKIPPED: no --upstream given"
    return [Step(name, status, 0.0, "", "") for name in ("upstream-tests", "pr-benchmark")]


def upstream_copies(out: Path, upstream: Path, inherit: bool) -> tuple[Path, Path, Step | None]:
    """A pristine (main) and a rewritten (the pull request) copy of `upstream` under `out/upstream`, and a failed
    `Step` when the rewrite fails."""
    import shutil
    import tarfile

    copies = {}
    for name in ("main", "branch"):
        tree = out / "upstream" / name
        shutil.rmtree(tree, ignore_errors=True)
        if upstream.is_dir():
            shutil.copytree(upstream, tree / upstream.name, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        else:
            with tarfile.open(upstream) as archive:
                archive.extractall(tree, filter="data")
        copies[name] = next(tree.iterdir())
    rewrite = [sys.executable, "-m", "tileblend", "rewrite", str(copies["branch"])] + (
        ["--inherit"] if inherit else []
    )
    code, seconds = run_command("upstream-rewrite", rewrite, out, timeout_s=120)
    failed = (
        None
        if code == 0
        else Step("upstream-tests", f"FAIL: the rewrite (exit {code})", seconds, " ".join(rewrite), "")
    )
    return copies["main"], copies["branch"], failed


def rewrite_identity(main: Path, branch: Path, inherit: bool) -> dict:
    """Which change the PR steps ran on: the checkout's diffusers version, the layout, and the fingerprint of the files
    the rewrite changed (`tileblend.upstream.change_digest`, which `make upstream-pr` compares with its own rewrite)."""
    import re

    sys.path.insert(0, str(ROOT / "src"))
    from tileblend.upstream.change_digest import change_digest

    changed = {}
    for path in sorted(branch.rglob("*")):
        relative = path.relative_to(branch)
        if path.is_file() and not path.is_symlink() and "__pycache__" not in relative.parts:
            data, before = path.read_bytes(), main / relative
            if not before.is_file() or before.read_bytes() != data:
                changed[relative.as_posix()] = data
    init = (branch / "src" / "diffusers" / "__init__.py").read_text(encoding="utf-8")
    version = re.search(r'^__version__ = "([^"]+)"', init, flags=re.MULTILINE).group(1)
    layout = "inherit" if inherit else "copies"
    return {"version": version, "layout": layout, "files": len(changed), "digest": change_digest(changed)}


def pytest_summary(log: Path) -> str:
    """The last line of pytest's output in `log`: its counts and time (e.g. "28 passed in 12.31s")."""
    lines = [line.strip("= ") for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("===")]
    return lines[-1] if lines else ""


def step_upstream_tests(out: Path, device: str, branch: Path) -> Step:
    """The tests the pull request adds (the `TilingBlend` classes of the test files it edits or writes), run on the
    device in the rewritten copy."""
    files = sorted(
        str(path.relative_to(branch))
        for path in (branch / "tests" / "models" / "autoencoders").glob("test_models_*.py")
        if "TilingBlend(" in path.read_text(encoding="utf-8") or "TilingBlend:" in path.read_text(encoding="utf-8")
    )
    report = out / "upstream-tests.xml"
    command = [sys.executable, "-m", "pytest", *files, "-k", "TilingBlend", "-rs", "-p", "no:cacheprovider"]
    command += [f"--junitxml={report}"]
    env = {"PYTHONPATH": str(branch / "src"), "DIFFUSERS_TEST_DEVICE": device}
    timeout_s = step_timeout("upstream-tests", device)
    code, seconds = run_command("upstream-tests", command, out, timeout_s, cwd=branch, env=env)
    counts, skip_reasons = junit_counts(report)
    ran = counts["tests"] - counts["skipped"]
    if code != 0 or counts["failures"] or counts["errors"] or ran == 0:
        status = f"FAIL ({counts['failures']} failed, {counts['errors']} errors, exit {code})"
    elif device == "cuda":
        # A graph replay of a model that draws noise draws other noise: its CUDA-graph test skips by design.
        skipped = sum("draws noise" not in reason for reason in skip_reasons)
        status = f"ok ({ran} passed)" if not skipped else f"FAIL: {skipped} skipped on CUDA"
    else:
        status = f"ok ({ran} passed; {counts['skipped']} skipped on the CPU: half precision and CUDA graphs)"
    return Step("upstream-tests", status, seconds, " ".join(["pytest", *command[3:-1]]), "upstream-tests.log")


def step_pr_benchmark(out: Path, device: str, main: Path, branch: Path) -> tuple[Step, dict]:
    """The pull request's benchmark script (`tileblend/upstream/tiled_vae_benchmark.py`, stock diffusers only) on a
    saved random-weight SD VAE, once with main's diffusers and once with the branch's, then `--compare`; returns the
    step and what the PR's GPU section shows of it (each run's lines, the comparison)."""
    script = ROOT / "src" / "tileblend" / "upstream" / "tiled_vae_benchmark.py"
    checkpoint = out / "pr-benchmark-vae"
    size, dtype = PR_BENCHMARK[device]
    # SD 2's 768-pixel tiles (48 pixels for the small VAE on a CPU): overlaps that are not powers of two, where a blend
    # with weights rounded to the tile's dtype would give other outputs on main and on the branch.
    config = 'SD_VAE_CONFIG | {"sample_size": 768}' if device == "cuda" else 'SMALL_VAE_CONFIG | {"sample_size": 48}'

    save = (
        "import sys, torch; from diffusers import AutoencoderKL; "
        "from tileblend.bench.decode import SD_VAE_CONFIG, SMALL_VAE_CONFIG; "
        f"torch.manual_seed(0); AutoencoderKL(**{config}).save_pretrained(sys.argv[1])"
    )
    code, total = run_command("pr-benchmark-vae", [sys.executable, "-c", save, str(checkpoint)], out, timeout_s=120)
    weights = "random-weight SD v1 VAE with 768-pixel tiles" if device == "cuda" else "small random-weight VAE"
    shown = {"weights": weights, "runs": {}}
    shown |= {"size": f"{size}x{size}", "dtype": dtype}
    commands = []
    for name, tree in (("main", main), ("branch", branch)):
        command = [sys.executable, str(script), "--model", str(checkpoint), "--device", device, "--dtype", dtype]
        command += ["--height", str(size), "--width", str(size), "--output", str(out / f"pr-benchmark-{name}.pt")]
        code, seconds = run_command(f"pr-benchmark-{name}", command, out, 300, env={"PYTHONPATH": str(tree / "src")})
        total += seconds
        commands.append(" ".join(command))
        lines = (out / f"pr-benchmark-{name}.log").read_text(encoding="utf-8").splitlines()
        shown["runs"][name] = [line for line in lines if line.startswith("tiled ")]
        if code != 0:
            return Step("pr-benchmark", f"FAIL: the {name} run (exit {code})", total, " && ".join(commands), ""), shown
    compare = [sys.executable, str(script), "--compare", str(out / "pr-benchmark-main.pt")]
    compare += [str(out / "pr-benchmark-branch.pt")]
    code, seconds = run_command("pr-benchmark-compare", compare, out, timeout_s=120)
    shown["compare"] = (out / "pr-benchmark-compare.log").read_text(encoding="utf-8").splitlines()[1:]
    status = "ok (outputs identical)" if code == 0 else "FAIL: main and the branch give different outputs"
    logs = "pr-benchmark-main.log, pr-benchmark-branch.log, pr-benchmark-compare.log"
    return Step("pr-benchmark", status, total + seconds, " && ".join([*commands, " ".join(compare)]), logs), shown


def step_cuda_tests(out: Path, device: str) -> Step:
    report = out / "cuda-tests.xml"
    command = [sys.executable, "-m", "pytest", "-m", "cuda", "-rs", "-p", "no:cacheprovider", "tests"]
    command += [f"--junitxml={report}"]
    code, seconds = run_command("cuda-tests", command, out, timeout_s=240)
    counts, skip_reasons = junit_counts(report)
    # Skips by design (an upstream bug, a path the class lacks) are fine; a skip for want of CUDA on CUDA is not.
    cuda_skips = sum("CUDA" in reason for reason in skip_reasons)
    if code not in (0, 5) or counts["failures"] or counts["errors"]:
        status = f"FAIL ({counts['failures']} failed, {counts['errors']} errors, exit {code})"
    elif counts["tests"] == 0:
        status = "FAIL: no CUDA tests collected"
    elif device == "cuda":
        ran = counts["tests"] - counts["skipped"]
        by_design = counts["skipped"] - cuda_skips
        status = (
            f"ok ({ran} passed, {by_design} skipped by design)" if not cuda_skips else f"FAIL: {cuda_skips} skipped"
        )
    else:
        status = f"SKIPPED: {cuda_skips} of {counts['tests']} CUDA tests need a CUDA device"
    return Step("cuda-tests", status, seconds, " ".join(command), f"cuda-tests.log, {report.name}")


def step_command(name: str, arguments: list[str], out: Path, timeout_s: int) -> Step:
    command = [sys.executable, "-m", "tileblend", *arguments]
    code, seconds = run_command(name, command, out, timeout_s)
    status = "ok" if code == 0 else ("FAIL: timeout" if code == 124 else f"FAIL (exit {code})")
    return Step(name, status, seconds, " ".join(command), f"{name}.log")


def decode_table(out: Path, names: list[str]) -> str:
    """The Markdown table of the decode steps' JSON records in `out` (steps that wrote none are left out)."""
    lines = [
        "| decode | weights | dtype | loop ms | tileblend ms | speedup (range) | peak memory loop / tileblend | bitwise |",
        "| --- | --- | --- | ---: | ---: | --- | --- | --- |",
    ]
    for name in names:
        path = out / f"{name}.json"
        if not path.is_file():
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        config, arms = record["config"], record["arms"]
        weights = (
            f"checkpoint `{config['model']}`" if config.get("model") else f"random-weight preset `{config['preset']}`"
        )
        clip = f"{config['frames']} frames of " if config["frames"] else ""
        peaks = " / ".join(f"{arms[arm]['peak_memory_bytes'] / 2**30:.2f} GiB" for arm in ("A", "B"))
        lines.append(
            f"| {clip}{config['size'][0]}x{config['size'][1]} | {weights} | {config['dtype']} | "
            f"{arms['A']['median_ms']:.1f} | {arms['B']['median_ms']:.1f} | {record['speedup_median']:.3f}x "
            f"({record['speedup_min']:.3f}-{record['speedup_max']:.3f}) | {peaks} | "
            f"{'yes' if record['outputs_equal'] else 'NO'} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def machine(device: str) -> dict:
    """The device's name and the versions of torch and CUDA that ran."""
    import torch

    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    return {"name": name, "torch": torch.__version__, "cuda": torch.version.cuda}


def write_summary(out: Path, device: str, steps: list[Step], total_s: float, pr: dict | None = None) -> None:
    lines = [
        f"# tileblend gpu-check on {device}",
        "",
        f"Total {total_s:.0f} s (budget {BUDGET_S} s on one H200).",
        "",
        "| step | status | seconds | log |",
        "| --- | --- | ---: | --- |",
    ]
    lines += [f"| {step.name} | {step.status} | {step.seconds:.0f} | {step.log} |" for step in steps]
    lines += ["", "Commands:", ""] + [f"- {step.name}: `{step.command}`" for step in steps if step.command]
    table = decode_table(out, [step.name for step in steps if step.name.startswith("decode-")])
    lines += [
        "",
        "Tiled decode, diffusers' loops vs tileblend (medians; speedup: median of the paired runs):",
        "",
        table,
    ]
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    record = {"device": device, "total_s": total_s, "steps": [asdict(step) for step in steps]}
    record |= {"decode_table": table, "pr": pr or {}, "machine": machine(device)}
    (out / "summary.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    print("\n" + "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: every step at tiny sizes")
    parser.add_argument("--out", default=str(ROOT / "out" / "gpu-check"), help="folder for every output")
    parser.add_argument("--wheels", default=os.environ.get("WHEELS") or None, help="wheel folder for missing packages")
    parser.add_argument(
        "--models",
        nargs="*",
        default=[],
        metavar="KIND=ID[:SUBFOLDER]",
        help=f"real checkpoints for the decode steps, e.g. image={CHECKPOINTS['image']} video={CHECKPOINTS['video']}",
    )
    parser.add_argument(
        "--upstream",
        type=Path,
        help="the pristine diffusers checkout (or .tar.gz of one) the pull request is made from: its rewrite's added "
        "tests and the benchmark script on main and on the branch run on the device (needed on CUDA)",
    )
    parser.add_argument("--inherit", action="store_true", help="rewrite --upstream in the --inherit layout")
    args = parser.parse_args(argv)
    models = parse_models(args.models)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    steps = [step_deps(out, args.wheels)]
    if steps[0].status != "ok":
        write_summary(out, args.device, steps, time.perf_counter() - started)
        return 1
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        steps.append(Step("cuda", f"FAIL: torch {torch.__version__} sees no CUDA device", 0.0, "", ""))
        write_summary(out, args.device, steps, time.perf_counter() - started)
        return 1

    steps.append(step_cuda_tests(out, args.device))
    plan = dict(STEPS[args.device])
    pipeline = plan.pop("bench-pipeline")
    plan |= decode_steps(args.device, models) | {"bench-pipeline": pipeline}
    for name, arguments in plan.items():
        arguments = arguments + ["--device", args.device, "--json", str(out / f"{name}.json")]
        if name.startswith("decode-") or name == "bench-pipeline":
            arguments += ["--plot", str(out / f"{name}.png")]
        timeout_s = step_timeout("decode" if name.startswith("decode-") else name, args.device)
        steps.append(step_command(name, arguments, out, timeout_s=timeout_s))
    pr = {}  # what the PR's GPU section shows: the change that ran, its tests' result, its benchmark
    if args.upstream is None:
        steps += without_upstream(args.device)
    else:
        main_tree, branch, failed = upstream_copies(out, args.upstream.resolve(), args.inherit)
        steps.append(failed or step_upstream_tests(out, args.device, branch))
        if failed is None:
            tests = steps[-1]
            step, benchmark = step_pr_benchmark(out, args.device, main_tree, branch)
            steps.append(step)
            pr = {"change": rewrite_identity(main_tree, branch, args.inherit), "benchmark": benchmark}
            pr["tests"] = {"command": tests.command, "pytest": pytest_summary(out / "upstream-tests.log")}

    total_s = time.perf_counter() - started
    write_summary(out, args.device, steps, total_s, pr)
    return 1 if any(step.status.startswith("FAIL") for step in steps) else 0


if __name__ == "__main__":
    sys.exit(main())
