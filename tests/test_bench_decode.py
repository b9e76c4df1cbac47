"""`tileblend bench decode` and the A/B process protocol, at tiny sizes (a few worker processes)."""

import contextlib
import json
import statistics
import tempfile
import textwrap

import huggingface_hub.constants
import pytest
import torch

from tileblend.bench import pairs
from tileblend.bench.records import WorkerConfig
from tileblend.bench.worker import timed_blends
from tileblend.cli import main as tileblend
from tileblend.patch import find_loop_blends


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


TINY = ["--size", "128", "--pairs", "1", "--reps", "1", "--warmup", "0", "--threads", "1"]


def test_arm_order_alternates_a_b_b_a():
    assert pairs.arm_order(3) == [(0, "A"), (0, "B"), (1, "B"), (1, "A"), (2, "A"), (2, "B")]


def test_timed_blends_times_each_call_and_restores_the_methods():
    from diffusers import AutoencoderKL

    found, _ = find_loop_blends([AutoencoderKL])
    loop = vars(AutoencoderKL)["blend_v"]
    a, b = torch.ones(1, 1, 8, 8), torch.zeros(1, 1, 8, 8)
    with timed_blends(found, torch.device("cpu")) as blends:
        assert AutoencoderKL.blend_v(None, a, b, 4) is b  # the timed method returns the loop's result
        AutoencoderKL.blend_h(None, a, b, 4)
    assert blends["calls"] == 2 and blends["seconds"] > 0
    assert vars(AutoencoderKL)["blend_v"] is loop


def test_the_worker_drops_only_the_third_party_lines_each_worker_would_repeat():
    import logging

    from tileblend.bench.worker import quiet_third_party_logs

    messages = {
        "diffusers.models.modeling_utils": [
            "There are modules in AutoencoderKL that should be kept in float32: []. Casting directly with `to()` can "
            "lead to inconsistent results; set `torch_dtype` in `from_pretrained()` instead to keep these modules in "
            "float32.",
            "There are modules in AutoencoderKL that should be kept in float32: ['norm']. Casting directly with `to()`",
        ],
        "transformers.utils.import_utils": [
            "`CLIPImageProcessor` requires torchvision (not installed); falling back to `CLIPImageProcessorPil` for "
            "backward compatibility.",
            "another line",
        ],
    }
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    quiet_third_party_logs()
    for name, lines in messages.items():
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        try:
            for line in lines:
                logger.warning(line)
        finally:
            logger.removeHandler(handler)
    assert [record.getMessage() for record in records] == [
        messages["diffusers.models.modeling_utils"][1],
        "another line",
    ]


def test_decode_benchmark_records_both_arms(tmp_path, capfd, monkeypatch):
    record_path, plot_path = tmp_path / "decode.json", tmp_path / "decode.png"
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))  # where the arms' outputs are kept meanwhile
    code = tileblend(
        ["bench", "decode", "--preset", "small", "--device", "cpu", *TINY, "--json", str(record_path)]
        + ["--plot", str(plot_path)]
    )
    record = json.loads(record_path.read_text())

    assert code == 0
    assert list(temporary.iterdir()) == []  # no folder left behind
    assert record["outputs_equal"] is True
    assert record["order"] == ["A", "B"]
    assert record["arms"]["A"]["tileblend_enabled"] == [False]
    assert record["arms"]["B"]["tileblend_enabled"] == [True]
    for arm in ("A", "B"):
        stats = record["arms"][arm]
        assert stats["blend_calls"] > 0  # the tiled path ran: 128 px in 64-px tiles
        assert len(stats["samples_ms"]) == 1 and len(stats["samples_ms"][0]) == 1
        assert stats["median_ms"] > 0 and stats["peak_memory_bytes"] > 0
        assert stats["peak_memory_kind"] == "process peak RSS"
    assert len(record["speedups"]) == 1 and record["speedups"][0] > 0
    assert record["config"] | {"size": [128, 128], "tile": 64, "preset": "small", "model": None} == record["config"]
    assert record["output_shape"] == [1, 3, 128, 128]
    assert record["versions"]["diffusers"] and record["versions"]["torch"] == torch.__version__
    assert record["command"].startswith("tileblend bench decode --preset small")
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary, err = capfd.readouterr()
    assert "over each arm's 1 timed calls, from 1 process;" in summary
    assert "kept in float32" not in err  # diffusers' advice, repeated by each worker, is dropped
    assert "one instrumented call per process (synchronised timers), a single sample per arm" in summary


def test_decode_benchmark_refuses_a_single_tile(tmp_path):
    # 128 px fit in one 128-px tile: no blend runs, so there would be nothing to compare.
    with pytest.raises(RuntimeError, match="no blend method ran"):
        tileblend(["bench", "decode", "--preset", "small", "--device", "cpu", *TINY, "--tile", "128"])


FAKE_WORKER = """
import sys

import torch
from diffusers import AutoencoderKL

from tileblend import is_enabled
from tileblend.bench.worker import worker_main


def build_workload(config):
    def run():
        b = AutoencoderKL.blend_v(None, torch.ones(1, 1, 8, 8), torch.zeros(1, 1, 8, 8), 4)
        return b + is_enabled()  # arm B returns other bits

    return run


if __name__ == "__main__":
    sys.exit(worker_main(build_workload))
"""


def test_pairs_report_outputs_that_differ(tmp_path, monkeypatch):
    (tmp_path / "fake_worker.py").write_text(textwrap.dedent(FAKE_WORKER))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    config = WorkerConfig(device="cpu", dtype="float32", seed=0, threads=1, warmup=0, reps=2)

    summary = pairs.run_pairs("fake_worker", config, pairs=1, progress=lambda line: None)

    assert summary["outputs_equal"] is False
    assert summary["arms"]["A"]["blend_calls"] == summary["arms"]["B"]["blend_calls"] == 1
    assert [len(samples) for samples in summary["arms"]["B"]["samples_ms"]] == [2]


@pytest.mark.cuda
def test_decode_benchmark_on_cuda_half_precision(tmp_path):
    record_path = tmp_path / "decode.json"
    code = tileblend(
        ["bench", "decode", "--preset", "small", "--device", "cuda", "--dtype", "float16", *TINY]
        + ["--json", str(record_path)]
    )
    record = json.loads(record_path.read_text())

    assert code == 0 and record["outputs_equal"] is True
    assert record["arms"]["B"]["blend_calls"] > 0
    assert record["arms"]["B"]["peak_memory_kind"] == "cuda max allocated"
    assert record["machine"]["device_name"] == torch.cuda.get_device_name()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Tiny checkpoints saved with `save_pretrained`: an image VAE at the top level of its folder, a video VAE in the
    `vae` subfolder of another, as a pipeline repository holds it."""
    from diffusers import AutoencoderKL, AutoencoderKLWan

    from tileblend.bench.decode import SMALL_VAE_CONFIG

    root = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    AutoencoderKL(**SMALL_VAE_CONFIG).save_pretrained(root / "image")
    AutoencoderKLWan(base_dim=8, z_dim=4).save_pretrained(root / "video" / "vae")
    return root


@pytest.mark.parametrize(
    "where, size, output_shape",
    [(["image"], "96x128", [1, 3, 96, 128]), (["video", "--subfolder", "vae"], "64", [1, 3, 5, 64, 64])],
    ids=["image", "video"],
)
def test_decode_benchmark_loads_a_saved_checkpoint(checkpoints, tmp_path, where, size, output_shape):
    """`--model PATH` loads the class the config names, in the requested dtype; the arms decode it bit for bit alike."""
    record_path = tmp_path / "decode.json"
    model = ["--model", str(checkpoints / where[0]), *where[1:]]
    tiny = ["--size", size, "--tile", "32", "--pairs", "1", "--reps", "1", "--warmup", "0", "--threads", "1"]
    frames = ["--frames", "5"] if where[0] == "video" else []
    code = tileblend(["bench", "decode", *model, *frames, "--device", "cpu", *tiny, "--json", str(record_path)])
    record = json.loads(record_path.read_text())

    assert code == 0 and record["outputs_equal"] is True
    assert record["config"]["vae"] == ("AutoencoderKLWan" if where[0] == "video" else "AutoencoderKL")
    assert record["config"]["preset"] is None and record["config"]["model"] == str(checkpoints / where[0])
    assert record["output_shape"] == output_shape
    assert record["arms"]["A"]["blend_calls"] > 0 and record["arms"]["B"]["blend_calls"] > 0
    assert f"checkpoint {checkpoints / where[0]}" in record["title"]


def test_checkpoint_defaults_are_real_sizes_and_the_models_own_tiles(checkpoints):
    from tileblend.bench.decode import workload_config
    from tileblend.cli import build_parser

    def config(*argv):
        return workload_config(build_parser().parse_args(["bench", "decode", *argv]))

    image = config("--model", str(checkpoints / "image"))
    assert (image["size"], image["frames"], image["tile"]) == ([2048, 2048], None, None)
    video = config("--model", str(checkpoints / "video"), "--subfolder", "vae")
    assert (video["size"], video["frames"], video["tile"]) == ([480, 832], 81, None)
    assert config("--model", str(checkpoints / "video"), "--subfolder", "vae", "--size", "720x1280")["size"] == [
        720,
        1280,
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "{root}/missing"], "no such path: {root}/missing"),
        (
            ["--model", "{root}/not-tiled"],
            "its config names UNet2DModel, not a diffusers autoencoder with tiled blends",
        ),
        (
            ["--model", "nobody/no-such-vae-xyz"],
            "cannot read the config of nobody/no-such-vae-xyz: offline (HF_HUB_OFFLINE is set)",
        ),
        (["--model", "{root}/image", "--frames", "9"], "--frames applies to video VAEs only, not AutoencoderKL"),
        (["--subfolder", "vae"], "--subfolder applies to --model only"),
    ],
    ids=["missing-path", "no-tiling", "hub-offline", "frames-for-image", "subfolder-without-model"],
)
def test_checkpoint_errors_are_one_line_and_exit_2(checkpoints, monkeypatch, capsys, argv, message):
    (checkpoints / "not-tiled").mkdir(exist_ok=True)
    (checkpoints / "not-tiled" / "config.json").write_text(json.dumps({"_class_name": "UNet2DModel"}))
    # A Hub ID without network, deterministically: huggingface_hub reads HF_HUB_OFFLINE when imported, and asks this
    # constant before each request.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    argv = [word.format(root=checkpoints) for word in argv]
    assert tileblend(["bench", "decode", *argv, "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert message.format(root=checkpoints) in error and len(error.strip().splitlines()) == 1


def test_ctrl_c_stops_the_benchmark_with_one_line_and_no_worker_traceback(tmp_path):
    """Ctrl-C in a terminal (SIGINT to the whole process group) while a worker runs: exit 130 and one line, no
    worker's KeyboardInterrupt traceback, no worker left running."""
    import os
    import signal
    import subprocess
    import sys

    from test_parallel_bench import default_sigint, processes_mentioning, wait_for

    command = [sys.executable, "-m", "tileblend", "bench", "decode", "--preset", "small", "--device", "cpu"]
    command += ["--size", "128", "--pairs", "1", "--warmup", "0", "--reps", "100000", "--threads", "1"]
    environment = dict(os.environ, TMPDIR=str(tmp_path))  # the workers' --result paths name it
    bench = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        wait_for(lambda: len(processes_mentioning(str(tmp_path))) >= 1)
        os.killpg(bench.pid, signal.SIGINT)
        _, err = bench.communicate(timeout=120)
        assert bench.returncode == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err
        assert err.rstrip().endswith("tileblend bench: interrupted")
        assert processes_mentioning(str(tmp_path)) == []
    finally:  # a failure here must not leave a 100000-call worker running
        for pid in processes_mentioning(str(tmp_path)) + [bench.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def unreachable_hub(request, tmp_path, monkeypatch):
    """A Hub endpoint without network, HF_HUB_OFFLINE unset and an empty local Hub cache: a closed local port (refused
    at once) or one that accepts connections and never answers (a network that drops them)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    if request.param == "silent":
        server.listen(8)
    endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
    if request.param == "closed":
        server.close()
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # restored after the test, whatever the benchmark sets
    yield endpoint
    server.close()


@pytest.mark.parametrize("unreachable_hub", ["closed", "silent"], indirect=True)
def test_a_hub_id_without_network_names_the_network_at_once(unreachable_hub, capsys):
    """Without network, a Hub ID is not retried for minutes and then blamed: one line names the network."""
    assert tileblend(["bench", "decode", "--model", "stabilityai/sdxl-vae", "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1
    assert f"no network: the Hub ({unreachable_hub}) does not answer" in error and "HF_HUB_OFFLINE=1" in error


@pytest.mark.parametrize("unreachable_hub", ["closed"], indirect=True)
def test_a_hub_id_without_network_is_read_from_the_local_cache(unreachable_hub, tmp_path):
    """Without network, a checkpoint in the local Hub cache is used, and the workers are told to read only that."""
    import os

    from tileblend.bench.decode import checkpoint_class

    snapshot = tmp_path / "hub" / "models--owner--vae" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"_class_name": "AutoencoderKL"}))
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    assert checkpoint_class("owner/vae", None) == "AutoencoderKL"
    assert os.environ["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize("size", ["0", "-64", "64x", "axb", "1x2x3"])
def test_size_must_be_positive_pixels(size, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tileblend(["bench", "decode", "--size", size])
    assert exit_info.value.code == 2 and "is not a positive SIZE or HEIGHTxWIDTH" in capsys.readouterr().err


@pytest.mark.parametrize("model", ["./no-such-vae", "~/no-such-vae", "/no/such/vae", "a/b/c"])
def test_a_missing_local_path_is_said_without_asking_the_hub(model, monkeypatch, capsys):
    """A path that cannot be a Hub ID (`owner/name`) and does not exist: "no such path" at once, no request."""
    import diffusers

    def no_request(*args, **kwargs):
        raise AssertionError("the Hub was asked")

    monkeypatch.setattr(diffusers.AutoencoderKL, "load_config", no_request)
    assert tileblend(["bench", "decode", "--model", model, "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"no such path: {model}")


def a_summary(pair_count: int, speedups: list[float], a_ms: float, a_blend_ms: float, b_ms: float, b_blend_ms: float):
    def arm(median, blend):
        return {
            "median_ms": median, "min_ms": median, "max_ms": median, "peak_memory_bytes": 1, "blend_calls": 4,
            "blend_ms": blend, "blend_share": blend / median, "samples_ms": [[median]] * pair_count,
            "peak_memory_kind": "process peak RSS",
        }  # fmt: skip

    arms = {"A": arm(a_ms, a_blend_ms), "B": arm(b_ms, b_blend_ms)}
    return {
        "pairs": pair_count, "arms": arms, "speedups": speedups, "speedup_median": statistics.median(speedups),
        "speedup_min": min(speedups), "speedup_max": max(speedups), "outputs_equal": True,
        "speedup_bound": pairs.blend_bound(arms),
    }  # fmt: skip


def test_a_single_pair_is_not_a_result_and_an_unexplained_speedup_is_noise():
    from tileblend.bench.protocol import format_summary

    # Arm A spends 10.6 ms of 100 ms in blends, arm B 1.2 ms: the blend explains 100 / 90.6 = 1.104x at most.
    explained = a_summary(3, [1.08, 1.10, 1.09], 100.0, 10.6, 91.0, 1.2)
    assert "the blend explains up to 1.104x" in format_summary("t", explained, (1.0, 1.0, 1.0))
    assert "machine load (1, 5, 15-minute averages) when it ended: 1.00, 1.00, 1.00" in format_summary(
        "t", explained, (1.0, 1.0, 1.0)
    )
    noise = a_summary(3, [1.4, 1.5, 1.6], 100.0, 10.6, 66.0, 1.2)
    assert "NOISE: the median speedup 1.500x is beyond what the blend's own time explains (1.104x" in format_summary(
        "t", noise
    )
    slower = a_summary(3, [0.7, 0.8, 0.75], 100.0, 10.6, 130.0, 1.2)
    assert "NOISE: the median speedup 0.750x" in format_summary("t", slower)
    single = a_summary(1, [0.58], 100.0, 10.6, 170.0, 1.2)
    assert "NOT A RESULT: one pair gives one ratio and no spread" in format_summary("t", single)
