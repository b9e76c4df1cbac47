"""Run the end-to-end pipeline benchmark from Python and read its JSON record.

    python examples/pipeline_benchmark.py                          # GPU: SD-v1-size pipeline, 1024x1024, float16
    python examples/pipeline_benchmark.py --small --size 128       # CPU: small preset

A StableDiffusionPipeline with seeded random SD-v1-size weights runs DDIM for 2 steps and decodes with VAE tiling,
once per process, alternating diffusers' loops (arm A) and tileblend (arm B). Same as `tileblend bench pipeline`.
"""

import argparse
import json
import tempfile
from pathlib import Path

import torch

from tileblend.cli import main as tileblend


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="small UNet and VAE, for a CPU")
    parser.add_argument("--size", type=int, help="image size in pixels (default: the preset's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float16" if torch.cuda.is_available() else "float32")
    parser.add_argument("--pairs", type=int, default=3, help="A/B process pairs")
    parser.add_argument("--reps", type=int, default=5, help="timed pipeline calls per process")
    parser.add_argument("--threads", type=int, help="torch CPU threads per process")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        record_path = Path(tmp, "pipeline.json")
        command = ["bench", "pipeline", "--preset", "small" if args.small else "sd", "--device", args.device]
        command += ["--dtype", args.dtype, "--pairs", str(args.pairs), "--reps", str(args.reps)]
        command += ["--json", str(record_path)]
        command += ["--size", str(args.size)] if args.size else []
        command += ["--threads", str(args.threads)] if args.threads else []
        code = tileblend(command)
        record = json.loads(record_path.read_text(encoding="utf-8"))

    loops, vectorized = record["arms"]["A"], record["arms"]["B"]
    print(
        f"\npipeline call: {loops['median_ms']:.0f} ms with diffusers' loops, {vectorized['median_ms']:.0f} ms with "
        f"tileblend (paired speedup {record['speedup_median']:.2f}x, {vectorized['blend_calls']} blend calls per call); "
        f"images bitwise equal: {'yes' if record['outputs_equal'] else 'NO'}"
    )
    return code


if __name__ == "__main__":
    raise SystemExit(main())
