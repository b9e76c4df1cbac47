"""`tileblend bench pipeline --model`: a saved pipeline loaded with `from_pretrained`, at tiny sizes."""

import json

import pytest
import torch

from tileblend.cli import main as tileblend


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


@pytest.fixture(scope="module")
def saved_pipeline(tmp_path_factory):
    """A tiny StableDiffusionPipeline saved with `save_pretrained`, without text encoder, tokenizer or safety checker."""
    from diffusers import DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    from tileblend.bench.decode import build_vae
    from tileblend.bench.pipeline import SD_SCHEDULER_CONFIG, SMALL_UNET_CONFIG

    torch.manual_seed(0)
    pipe = StableDiffusionPipeline(
        vae=build_vae("small", 64, torch.device("cpu"), torch.float32, seed=0),
        text_encoder=None,
        tokenizer=None,
        unet=UNet2DConditionModel(**SMALL_UNET_CONFIG),
        scheduler=DDIMScheduler(**SD_SCHEDULER_CONFIG),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    path = tmp_path_factory.mktemp("pipeline") / "tiny-sd"
    pipe.save_pretrained(path)
    return path


def test_pipeline_benchmark_loads_a_saved_pipeline(saved_pipeline, tmp_path):
    record_path = tmp_path / "pipeline.json"
    tiny = ["--size", "128", "--tile", "64", "--pairs", "1", "--reps", "1", "--warmup", "0", "--threads", "1"]
    code = tileblend(
        ["bench", "pipeline", "--model", str(saved_pipeline), "--device", "cpu", *tiny, "--json", str(record_path)]
    )
    record = json.loads(record_path.read_text())

    assert code == 0 and record["outputs_equal"] is True
    assert record["config"]["model"] == str(saved_pipeline) and record["config"]["vae"] == "AutoencoderKL"
    assert record["arms"]["A"]["blend_calls"] > 0 and record["arms"]["B"]["blend_calls"] > 0  # 128 px in 64-px tiles
    assert record["output_shape"] == [1, 3, 128, 128]
    assert f"checkpoint {saved_pipeline}, 2 steps, 128x128, 64-px VAE tiles" in record["title"]


def test_pipeline_without_a_tiled_vae_is_one_line_and_exit_2(tmp_path, capsys):
    assert tileblend(["bench", "pipeline", "--model", str(tmp_path / "missing"), "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    # A missing local path is said as such, without asking the Hub.
    assert f"no such path: {tmp_path / 'missing'}" in error and len(error.strip().splitlines()) == 1
