"""The benchmark script the PR asks maintainers to rerun (`tileblend/upstream/tiled_vae_benchmark.py`): it runs with
stock diffusers on a saved checkpoint, and its `--compare` tells identical outputs from different ones. The second run
uses `python -m tileblend run`, standing in for the PR branch: the blends vectorized, the outputs the same bits."""

import subprocess
import sys

import pytest
import torch

from tileblend.upstream import tiled_vae_benchmark


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)

SCRIPT = tiled_vae_benchmark.__file__
ARGUMENTS = ["--dtype", "float32", "--device", "cpu", "--height", "64", "--width", "64", "--repeats", "2"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny AutoencoderKL saved with `save_pretrained`: 64x64 inputs span three of its 32-pixel tiles per axis."""
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(
        block_out_channels=[8, 16],
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
        norm_num_groups=4,
        latent_channels=4,
        sample_size=32,
    )
    path = tmp_path_factory.mktemp("checkpoint") / "vae"
    vae.save_pretrained(path)
    return path


def run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, check=False)


def test_main_and_the_vectorized_blend_give_identical_outputs(checkpoint, tmp_path):
    main, branch = tmp_path / "main.pt", tmp_path / "pr.pt"
    stock = run(SCRIPT, "--model", str(checkpoint), *ARGUMENTS, "--output", str(main))
    assert stock.returncode == 0, stock.stderr
    assert "tiled encode: median" in stock.stdout and "tiled decode: median" in stock.stdout
    vectorized = run("-m", "tileblend", "run", SCRIPT, "--model", str(checkpoint), *ARGUMENTS, "--output", str(branch))
    assert vectorized.returncode == 0, vectorized.stderr
    compared = run(SCRIPT, "--compare", str(main), str(branch))
    assert compared.returncode == 0 and compared.stdout.split() == ["latents:", "identical", "sample:", "identical"]


def test_compare_exits_1_on_different_outputs(checkpoint, tmp_path):
    main, other = tmp_path / "main.pt", tmp_path / "other.pt"
    assert run(SCRIPT, "--model", str(checkpoint), *ARGUMENTS, "--output", str(main)).returncode == 0
    outputs = torch.load(main)
    outputs["sample"][0, 0, 0, 0] += 1
    torch.save(outputs, other)
    compared = run(SCRIPT, "--compare", str(main), str(other))
    assert compared.returncode == 1 and "sample: DIFFERENT" in compared.stdout


def test_the_script_imports_only_torch_and_diffusers():
    source = open(SCRIPT).read()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports == {"argparse", "statistics", "sys", "time", "torch", "diffusers"}


def test_each_run_says_which_diffusers_it_imported(checkpoint, tmp_path):
    import diffusers

    completed = run(SCRIPT, "--model", str(checkpoint), *ARGUMENTS)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith(f"diffusers {diffusers.__version__} from {diffusers.__path__[0]}, torch ")
