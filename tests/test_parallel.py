"""`tileblend.parallel` on gloo: every supported registry model, split over 2 and 3 processes, bit for bit.

One process group per world size (a module fixture; its tests share an xdist group, so that pytest-xdist never
starts a group twice) runs every case in sequence (the parity of each supported model's tiled paths in float32 and
bfloat16, then the error cases) and writes its results as JSON; each test checks one part of them. Each worker is
this file run as a script, with one torch thread; the group has a hard timeout and is killed past it.

Each case's grid has a number of tiles that is not a multiple of the world size (checked from the plan), see
`grid_shape`; between the two world sizes every blend method of every supported path runs.
"""

import dataclasses
import datetime
import hashlib
import json
import os
import sys
from pathlib import Path

import gloo_group
import pytest
import torch
import torch.distributed as dist

import tileblend.parallel
from tileblend.tiny_models import MODELS, REGISTRY, build_model, make_input, run_path


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


GROUP_TIMEOUT_S = 300
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def supported_cases() -> list[tuple[str, str]]:
    """(registry name, path) of every tiled path that runs upstream and that tileblend.parallel splits."""
    return [
        (entry.name, path)
        for entry in REGISTRY
        for path, tiled in entry.paths().items()
        if tiled.runs and (entry.class_name, path) in tileblend.parallel.SPLITS
    ]


def parity_cases() -> list[tuple[str, str, str]]:
    """(registry name, path, dtype name) of every case a group runs: every supported path in float32, then in bfloat16."""
    cases = [(name, path, "float32") for name, path in supported_cases()]
    return cases + [(name, path, "bfloat16") for name, path in supported_cases()]


def grid_shape(entry, path: str, world_size: int) -> tuple[int, ...]:
    """The input of the case: the registry's, with its tile count moved off a multiple of `world_size`.

    On 2 ranks (an odd count): 3 x 3 tiles where the registry has them, else one row of 3 (half the height, 1.5 times
    the width), after the temporal tiles. On 3 ranks (not a multiple of 3): 2 x 2 spatial tiles and no temporal ones.
    """
    shape = list(entry.sample_shape if path == "encode" else entry.latent_shape)
    temporal = "blend_t" in entry.paths()[path].blends
    if world_size == 2 and entry.name not in NINE_TILES:
        shape[-2:] = [shape[-2] // 2, shape[-1] * 3 // 2]
    elif world_size == 3 and temporal:
        shape[2] = {"encode": 5, "decode": 2}[path]
    elif world_size == 3 and entry.name in NINE_TILES:
        shape[-2:] = [size * 3 // 4 for size in shape[-2:]]
    return tuple(shape)


NINE_TILES = {"dc", "kl", "flux2", "kvae", "consistency-decoder"}
"""Registry models whose registry inputs give 3 x 3 tiles (the others give 2 x 2 spatial tiles)."""


# Worker side.


def _digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def _output(model, entry, path, x, **options):
    from tileblend.tiny_models import _tensor_of

    function = tileblend.parallel.decode if path == "decode" else tileblend.parallel.encode
    kwargs = (
        {"generator": torch.Generator().manual_seed(0)} if path == "decode" and entry.decode_uses_generator else {}
    )
    with torch.no_grad():
        output, traffic = function(model, x, return_traffic=True, **kwargs, **options)
    fields = {"type": type(traffic).__name__} | dataclasses.asdict(traffic)
    return (None if output is None else _tensor_of(output)), fields


def _parity_case(name, path, dtype_name, rank, world_size, reference: bool) -> dict:
    from tileblend.calls import record_blends

    entry, dtype = MODELS[name], DTYPES[dtype_name]
    model = build_model(entry, dtype)
    x = torch.randn(grid_shape(entry, path, world_size), generator=torch.Generator().manual_seed(0)).to(dtype)
    result = {"name": name, "path": path, "dtype": dtype_name}
    if reference:
        with record_blends(type(model)) as calls:
            result["reference"] = _digest(run_path(model, entry, path, x))
        result["reference_blends"] = calls.counts()
    with record_blends(type(model)) as calls:
        output, traffic = _output(model, entry, path, x)
    result |= {"digest": _digest(output), "blends": calls.counts(), "traffic": traffic}
    return result


def _error_cases(rank, world_size) -> dict:
    """Each bad input, by name: the error message this rank got, or "no error"; plus the cases that must work."""
    entry = MODELS["kl"]
    model = build_model(entry)
    x = make_input(entry, "decode")
    results = {}

    def attempt(case, function):
        try:
            function()
            results[case] = "no error"
        except Exception as error:
            results[case] = f"{type(error).__name__}: {error}"

    model.disable_tiling()
    attempt("tiling disabled", lambda: _output(model, entry, "decode", x))
    model.enable_tiling()
    attempt("different inputs", lambda: _output(model, entry, "decode", x + rank))
    attempt("different dst", lambda: _output(model, entry, "decode", x, dst=None if rank == 0 else 0))
    attempt("dst not an int", lambda: _output(model, entry, "decode", x, dst=0.0))
    if rank == 0:
        model.disable_tiling()
    attempt("tiling on some ranks only", lambda: _output(model, entry, "decode", x))
    model.enable_tiling()
    other_weights = build_model(entry)
    if rank == 0:
        with torch.no_grad():
            next(other_weights.parameters()).add_(1.0)
    attempt("different weights", lambda: _output(other_weights, entry, "decode", x))

    def failing_decoder(*args, **kwargs):
        raise RuntimeError("out of memory (injected)")

    model.decoder.forward = failing_decoder if rank == world_size - 1 else model.decoder.forward
    attempt("rank fails", lambda: _output(model, entry, "decode", x))
    del model.decoder.forward

    small = x[..., :8, :8]  # smaller than one 16-latent tile: one tile, fewer tiles than ranks
    output, traffic = _output(model, entry, "decode", small)
    results["one tile"] = {"equal": _digest(output) == _digest(run_path(model, entry, "decode", small))}
    results["one tile"] |= {"tiles": traffic["tiles"], "own_tiles": traffic["own_tiles"]}

    output, traffic = _output(model, entry, "decode", x, dst=1)
    results["dst"] = {"none": output is None, "traffic": traffic}
    if output is not None:
        results["dst"]["equal"] = _digest(output) == _digest(run_path(model, entry, "decode", x))

    with tileblend.parallel.tiled(model):
        results["tiled"] = _digest(model.decode(x).sample) == _digest(run_path(model, entry, "decode", x))
    output, _ = _output(model, entry, "decode", x, timeout=30)  # seconds, as a number
    results["timeout in seconds"] = _digest(output) == _digest(run_path(model, entry, "decode", x))
    attempt("timeout a string", lambda: _output(model, entry, "decode", x, timeout="30"))
    results["timestep-conditioned ltx"] = _timestep_conditioned_ltx(world_size)
    return results


def _timestep_conditioned_ltx(world_size) -> dict:
    """An LTX VAE with `timestep_conditioning`, decoded as LTXPipeline calls it: `decode(latents, temb)`."""
    from tileblend.calls import record_blends

    entry = MODELS["ltx-video"]
    entry = dataclasses.replace(entry, init_kwargs={**entry.init_kwargs, "timestep_conditioning": True})
    model = build_model(entry)
    x = torch.randn(grid_shape(entry, "decode", world_size), generator=torch.Generator().manual_seed(0))
    temb = torch.tensor([0.05])
    with torch.no_grad(), record_blends(type(model)) as calls:
        expected = model.decode(x, temb).sample
    output = tileblend.parallel.decode(model, x, temb).sample
    return {"equal": _digest(output) == _digest(expected), "blends": sum(calls.counts().values())}


def worker_main(rank: int, world_size: int, port: int, out: str) -> None:
    gloo_group.join_group(rank, world_size, port, datetime.timedelta(seconds=60))
    tileblend.enable()
    results = {"parity": [], "errors": None}
    for index, (name, path, dtype_name) in enumerate(parity_cases()):
        results["parity"].append(_parity_case(name, path, dtype_name, rank, world_size, index % world_size == rank))
    results["errors"] = _error_cases(rank, world_size)
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    os._exit(0)


# Test side.


def run_group(world_size: int, out: Path) -> list[dict]:
    results = gloo_group.run_group(__file__, world_size, out, timeout=GROUP_TIMEOUT_S)
    assert None not in results, f"rank(s) {[rank for rank, r in enumerate(results) if r is None]} wrote no results"
    return results


@pytest.fixture(
    scope="module",
    params=[pytest.param(size, marks=pytest.mark.xdist_group(f"gloo-{size}"), id=f"{size}-ranks") for size in (2, 3)],
)
def group(request, tmp_path_factory) -> tuple[int, list[dict]]:
    """(world size, each rank's results) of one group run. Each group runs once: its tests share an xdist group, so
    one worker runs them all (`make test` runs pytest with `--dist loadgroup`)."""
    return request.param, run_group(request.param, tmp_path_factory.mktemp(f"gloo-{request.param}"))


def test_every_rank_equals_the_single_device_tiled_pass(group):
    check_parity(*group)


def test_bytes_sent_equal_bytes_received(group):
    check_traffic(group[1])


def test_bad_inputs_raise_on_every_rank_naming_what_differs(group):
    check_bad_inputs(*group)


def test_one_tile_dst_and_tiled_block(group):
    check_small_input_and_dst(group[1])


def check_parity(world_size, results):
    assert [tuple(case[key] for key in ("name", "path", "dtype")) for case in results[0]["parity"]] == parity_cases()
    for index, case in enumerate(results[0]["parity"]):
        label = f"{case['name']} {case['path']} {case['dtype']}"
        reference = results[index % world_size]["parity"][index]
        assert reference["reference_blends"], label  # the single-device pass blended
        assert case["traffic"]["tiles"] % world_size != 0, label
        for rank_results in results:
            mine = rank_results["parity"][index]
            assert mine["digest"] == reference["reference"], f"{label}: differs from single-device tiled"
            assert mine["blends"] == reference["reference_blends"], label
        traffics = [rank_results["parity"][index]["traffic"] for rank_results in results]
        assert all(traffic["type"] == "ParallelTraffic" for traffic in traffics), label
        assert all(traffic["tiles"] == case["traffic"]["tiles"] for traffic in traffics), label  # the whole pass's
        own = [traffic["own_tiles"] for traffic in traffics]
        assert sum(own) == case["traffic"]["tiles"] and min(own) > 0, label  # every tile once, every rank works


def check_traffic(results):
    for index in range(len(results[0]["parity"])):
        traffics = [rank_results["parity"][index]["traffic"] for rank_results in results]
        assert sum(traffic["sent"] for traffic in traffics) == sum(traffic["received"] for traffic in traffics)
        assert all(traffic["sent"] > 0 and traffic["received"] > 0 for traffic in traffics)


def check_bad_inputs(world_size, results):
    for rank, rank_results in enumerate(results):
        errors = rank_results["errors"]
        assert errors["tiling disabled"].startswith("ValueError: tiling is disabled on this AutoencoderKL")
        assert errors["different inputs"].startswith("ParallelTilingError: the ranks were given different inputs")
        assert errors["different dst"].startswith("ParallelTilingError: the ranks were given different dst")
        assert "different tiling switches" in errors["tiling on some ranks only"]
        assert errors["different weights"].startswith("ParallelTilingError: the ranks were given different weights")
        assert errors["dst not an int"].startswith("ValueError: dst must be a rank of the group")
        assert errors["timeout a string"] == (
            "ValueError: timeout must be a positive number of seconds or a datetime.timedelta, at most 1e+09 s "
            "(about 31 years), not '30'"
        )
        last = world_size - 1
        assert errors["rank fails"] == (
            f"ParallelTilingError: rank(s) [{last}] failed while computing their tiles: "
            f"rank {last}: RuntimeError: out of memory (injected)"
        )


def check_small_input_and_dst(results):
    for rank, rank_results in enumerate(results):
        errors = rank_results["errors"]
        assert errors["one tile"]["equal"] and errors["one tile"]["tiles"] == 1
        assert errors["tiled"] is True and errors["timeout in seconds"] is True
        assert errors["timestep-conditioned ltx"]["equal"] is True and errors["timestep-conditioned ltx"]["blends"] > 0
        dst = errors["dst"]
        assert dst["none"] is (rank != 1)
        if rank == 1:
            assert dst["equal"] is True and dst["traffic"]["sent"] == 0 and dst["traffic"]["received"] > 0
        else:
            assert dst["traffic"]["received"] == 0 and dst["traffic"]["sent"] > 0
    assert sum(rank_results["errors"]["one tile"]["own_tiles"] for rank_results in results) == 1
    dst_traffics = [rank_results["errors"]["dst"]["traffic"] for rank_results in results]
    assert sum(traffic["own_tiles"] for traffic in dst_traffics) == dst_traffics[0]["tiles"]
    assert sum(traffic["sent"] for traffic in dst_traffics) == dst_traffics[1]["received"]  # all of it goes to dst


def test_tiles_go_costliest_first_to_the_least_loaded_rank():
    from tileblend.parallel.tiles import assign

    assert assign([5, 1, 4, 3], 2) == (0, 0, 1, 1)  # 5 -> rank 0, 4 -> rank 1, 3 -> rank 1 (4 < 5), 1 -> rank 0
    assert assign([2, 2, 2], 3) == (0, 1, 2) and assign([7], 3) == (0,)


def test_unsupported_paths_name_the_class_and_the_reason():
    consistency = build_model(MODELS["consistency-decoder"])
    with pytest.raises(NotImplementedError, match="ConsistencyDecoderVAE's tiled decode: its decode samples"):
        tileblend.parallel.split_of(consistency, "decode")
    assert tileblend.parallel.split_of(consistency, "encode").travel == ("encoder",)


def test_world_of_one_runs_the_plain_path_and_unsupported_classes_are_named():
    entry = MODELS["kl"]
    model, x = build_model(entry), make_input(entry, "decode")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        output, traffic = tileblend.parallel.decode(model, x, return_traffic=True)
        assert torch.equal(output.sample, run_path(model, entry, "decode", x)) and traffic is None
        assert torch.equal(tileblend.parallel.decode(model, x).sample, output.sample)  # the output alone
        vidtok = build_model(MODELS["vidtok"])
        with pytest.raises(NotImplementedError, match="cannot split AutoencoderVidTok's tiled decode: its causal"):
            tileblend.parallel.decode(vidtok, make_input(MODELS["vidtok"], "decode"))
    finally:
        dist.destroy_process_group()
    with pytest.raises(RuntimeError, match="needs an initialized process group"):
        tileblend.parallel.decode(model, x)


def test_world_of_one_checks_dst_takes_keyword_inputs_and_splits_subclasses():
    """A group of one refuses a `dst` that is not one of its ranks (as larger groups do); inside `tiled()`,
    `vae.decode(z=...)` works as outside; a user subclass that adds no tiling methods splits like its parent (also in
    `tiled()`, which leaves no method on it afterwards), one that overrides them is refused, naming what it
    overrides."""
    from diffusers import AutoencoderKL

    entry = MODELS["kl"]
    model, x = build_model(entry), make_input(entry, "decode")
    expected = run_path(model, entry, "decode", x)

    class UsersVAE(AutoencoderKL):
        def describe(self):
            return "mine"

    class OverridingVAE(AutoencoderKL):
        def tiled_decode(self, z, return_dict=True):
            return super().tiled_decode(z, return_dict)

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for dst in (7, 0.0, True):
            with pytest.raises(ValueError, match="dst must be a rank of the group"):
                tileblend.parallel.decode(model, x, dst=dst)
        with tileblend.parallel.tiled(model):
            assert torch.equal(model.decode(z=x).sample, expected)
            with pytest.raises(TypeError, match="missing the input argument 'z'"):
                model.decode()
        users = UsersVAE(**model.config)
        users.load_state_dict(model.state_dict())
        users.enable_tiling()
        users.tile_sample_min_size, users.tile_latent_min_size = model.tile_sample_min_size, model.tile_latent_min_size
        assert torch.equal(tileblend.parallel.decode(users, x).sample, expected)
        with tileblend.parallel.tiled(users):  # the subclass inherits decode/encode: they are wrapped on it
            assert torch.equal(users.decode(x).sample, expected) and "decode" in vars(UsersVAE)
        assert "decode" not in vars(UsersVAE) and "encode" not in vars(UsersVAE)  # it inherits them again
        with pytest.raises(NotImplementedError, match="OverridingVAE's tiled decode: it overrides tiled_decode of"):
            tileblend.parallel.split_of(OverridingVAE(**model.config), "decode")
    finally:
        dist.destroy_process_group()


def test_tiled_block_leaves_copies_pickling_and_the_class_alone(tmp_path):
    """Inside `tiled()`: a deep copy decodes on its own with its own weights (zeroing them changes its output), the
    model saves with `torch.save` and loads back, other instances of the class are untouched; after the block the
    class holds its own `decode` again."""
    import copy

    from diffusers import AutoencoderKL

    entry = MODELS["kl"]
    model, x = build_model(entry), make_input(entry, "decode")
    expected = run_path(model, entry, "decode", x)
    own_decode = vars(AutoencoderKL)["decode"]
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with tileblend.parallel.tiled(model):
            clone = copy.deepcopy(model)
            with torch.no_grad():
                for parameter in clone.parameters():
                    parameter.zero_()
            assert not torch.equal(clone.decode(x).sample, expected)
            assert torch.equal(model.decode(x).sample, expected)
            torch.save(model, tmp_path / "model.pt")
            loaded = torch.load(tmp_path / "model.pt", weights_only=False)
            assert torch.equal(run_path(loaded, entry, "decode", x), expected)
        assert vars(AutoencoderKL)["decode"] is own_decode
    finally:
        dist.destroy_process_group()


def test_same_inputs_with_infinities_of_both_signs_are_the_same_input():
    """+inf and -inf in the same latents made the fingerprint's sums NaN, so equal inputs looked different; moving one
    infinity must still change the fingerprint."""
    from tileblend.parallel import exchange

    x = torch.randn(1, 4, 8, 8)
    x[0, 0, 1, 1], x[0, 1, 2, 3], x[0, 2, 4, 4] = float("inf"), float("-inf"), float("nan")  # not at position 1
    moved = x.clone()
    moved[0, 1, 2, 3], moved[0, 1, 2, 4] = moved[0, 1, 2, 4], float("-inf")
    assert torch.equal(exchange.fingerprint(x), exchange.fingerprint(x.clone()))
    assert not torch.equal(exchange.fingerprint(x), exchange.fingerprint(moved))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        facts = {"inputs": exchange.fingerprint(x)}
        exchange.agree(
            facts, dist.group.WORLD, torch.device("cpu"), exchange.Deadline.after(datetime.timedelta(seconds=5))
        )
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
