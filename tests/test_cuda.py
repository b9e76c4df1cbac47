"""CUDA: the vectorized blend equals the loop on the device and stays exact under CUDA-graph capture and replay.

Skipped without a CUDA device. The weights are built on the device in the opmath type (float64 only for float64
tiles), so a captured blend reads no host memory and each replay blends whatever the static inputs hold. `method`, `dtype` and `random_tiles` are fixtures
of tests/conftest.py.
"""

import pytest
import torch

import tileblend
from tileblend import blend, reference
from tileblend.compare import bitwise_equal
from tileblend.cuda_graph import capture


pytestmark = pytest.mark.cuda

DEVICE = "cuda"


# Random tiles of (2, 3, 6, 20, 24) with 40 rows along the blended axis, on the device.
DEVICE_TILES = {"length": 40, "shape": (2, 3, 6, 20, 24), "device": DEVICE}


def test_device_blend_equals_loop_on_device_and_on_cpu(method, dtype, random_tiles):
    for extent in (-1, 0, 1, 2, 3, 17, 40, 64):
        a, b = random_tiles(method, dtype, seed=extent + 10, **DEVICE_TILES)
        expected_cpu = reference.REFERENCE_FUNCTIONS[method](a.cpu(), b.cpu(), extent)
        expected_device = reference.REFERENCE_FUNCTIONS[method](a, b.clone(), extent)
        result = getattr(blend, method)(a, b, extent)
        assert result is b
        assert bitwise_equal(expected_device, b)
        assert bitwise_equal(expected_cpu, b.cpu())


def test_device_weights_are_python_doubles(dtype):
    """Both weights, as `tests/test_blend_properties.py` checks them on the CPU: on CUDA a division by a Python number
    goes through its reciprocal, so this fails if the blend divides by `blend_extent` instead of a tensor."""
    opmath = torch.float64 if dtype == torch.float64 else torch.float32
    for n in [*range(1, 601), 1000, 1023, 1024, 2047, 4095, 4096]:
        weight_a = torch.tensor([[1 - y / n] for y in range(n)], dtype=torch.float64).to(opmath).to(dtype)
        weight_b = torch.tensor([[y / n] for y in range(n)], dtype=torch.float64).to(opmath).to(dtype)
        ones = torch.ones(n, 3, dtype=dtype, device=DEVICE)
        zeros = torch.zeros(n, 3, dtype=dtype, device=DEVICE)
        assert bitwise_equal(weight_a.expand(n, 3), blend.blend_v(ones, zeros.clone(), n).cpu()), n
        assert bitwise_equal(weight_b.expand(n, 3), blend.blend_v(zeros, ones.clone(), n).cpu()), n


def test_device_blend_never_synchronizes(method, dtype, random_tiles):
    """No host-to-device copy or other synchronising call: CUDA raises in "error" sync-debug mode if there is one."""
    a, b = random_tiles(method, dtype, seed=5, **DEVICE_TILES)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        getattr(blend, method)(a, b, 17)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("extent", [2, 3, 32])
@pytest.mark.parametrize("b_is_view", [False, True])
def test_cuda_graph_replays_equal_eager(method, dtype, extent, b_is_view, random_tiles):
    static_a, static_b = random_tiles(method, dtype, seed=0, **DEVICE_TILES)
    if b_is_view:  # b as a strided window into a wider tensor, as diffusers' temporal slices are
        wide = torch.zeros(*static_b.shape[:-1], 2 * static_b.shape[-1], dtype=dtype, device=DEVICE)
        static_b = wide[..., ::2]
    function = getattr(blend, method)
    graph, output = capture(lambda tiles: function(*tiles, extent), (static_a, static_b))
    assert output is static_b

    for replay in range(3):
        a, b = random_tiles(method, dtype, seed=replay + 1, **DEVICE_TILES)
        static_a.copy_(a)
        static_b.copy_(b)
        graph.replay()
        eager = function(a.clone(), b.clone(), extent)
        loop = reference.REFERENCE_FUNCTIONS[method](a.clone(), b.clone(), extent)
        torch.cuda.synchronize()
        assert bitwise_equal(eager, static_b), replay
        assert bitwise_equal(loop, static_b), replay
        assert bitwise_equal(a, static_a), replay


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_autoencoder_kl_tiled_decode_in_cuda_graph(dtype, monkeypatch):
    """The registry's tiny AutoencoderKL: enabled tiled decode captured, replayed 3 times with new latents."""
    from diffusers import AutoencoderKL

    from tileblend.calls import record_blends
    from tileblend.tiny_models import MODELS, build_model, make_input, run_path

    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    entry = MODELS["kl"]
    vae = build_model(entry, dtype, DEVICE)
    stock = [make_input(entry, "decode", dtype, DEVICE, seed=seed) for seed in range(3)]
    expected = [run_path(vae, entry, "decode", z) for z in stock]  # stock diffusers, eager
    with tileblend.enabled(), record_blends(AutoencoderKL) as calls:
        static_latents = make_input(entry, "decode", dtype, DEVICE, seed=3)
        graph, static_output = capture(lambda z: run_path(vae, entry, "decode", z), static_latents)
        assert {"blend_v", "blend_h"} <= calls.methods(), calls.counts()
        for z, stock_output in zip(stock, expected):
            static_latents.copy_(z)
            graph.replay()
            eager = run_path(vae, entry, "decode", z.clone())
            torch.cuda.synchronize()
            assert bitwise_equal(eager, static_output)
            assert bitwise_equal(stock_output, static_output)
