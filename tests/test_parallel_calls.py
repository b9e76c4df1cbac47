"""`tileblend.parallel` refuses a call the ranks do not all make alike, on a gloo group of 2 processes, and takes
`decode` inside a `tiled()` block of the same model.

One group runs the cases in sequence (an agreement error leaves the group usable) and writes each rank's results as
JSON; each test checks one part of them. The `timeout` checks need no group: it is read before the group is.
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

import tileblend.parallel
from tileblend.calls import record_blends
from tileblend.tiny_models import MODELS, build_model, make_input, run_path


GROUP_TIMEOUT_S = 300


def _digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def _attempt(function) -> str:
    try:
        function()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "no error"


def _ltx_cases(rank: int) -> dict:
    """An LTX VAE with `timestep_conditioning`, decoded as LTXPipeline calls it (`decode(latents, temb)`), with the
    ranks passing different `temb`, then a different `return_dict`."""
    entry = MODELS["ltx-video"]
    entry = dataclasses.replace(entry, init_kwargs={**entry.init_kwargs, "timestep_conditioning": True})
    model = build_model(entry)
    x = make_input(entry, "decode")
    return {
        "different temb": _attempt(lambda: tileblend.parallel.decode(model, x, torch.tensor([0.05 * (1 + rank)]))),
        "different temb by keyword": _attempt(
            lambda: tileblend.parallel.decode(model, x, temb=torch.tensor([0.05 + rank * 1e-6]))
        ),
        "different values": _attempt(
            lambda: tileblend.parallel.decode(model, x, torch.tensor([0.05]), return_dict=rank == 0)
        ),
    }


def _decode_inside_tiled(rank: int) -> dict:
    """`tileblend.parallel.decode(vae, z)` inside `with tileblend.parallel.tiled(vae)`: split once, equal to one
    device's tiled decode, with the blends run."""
    entry = MODELS["kl"]
    model = build_model(entry)
    x = make_input(entry, "decode")
    expected = _digest(run_path(model, entry, "decode", x))
    with tileblend.parallel.tiled(model), record_blends(type(model)) as calls:
        output, traffic = tileblend.parallel.decode(model, x, return_traffic=True)
    return {"equal": _digest(output.sample) == expected, "blends": len(calls), "own_tiles": traffic.own_tiles}


def worker_main(rank: int, world_size: int, port: int, out: str) -> None:
    gloo_group.join_group(rank, world_size, port, datetime.timedelta(seconds=60))
    tileblend.enable()
    results = _ltx_cases(rank)
    try:
        results["decode inside tiled"] = _decode_inside_tiled(rank)
    except Exception as error:
        results["decode inside tiled"] = f"{type(error).__name__}: {error}"
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    os._exit(0)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict]:
    ranks = gloo_group.run_group(__file__, 2, tmp_path_factory.mktemp("gloo"), timeout=GROUP_TIMEOUT_S)
    assert None not in ranks, f"rank(s) {[rank for rank, r in enumerate(ranks) if r is None]} wrote no results"
    return ranks


IN_THE_GROUP = pytest.mark.xdist_group("gloo-calls")
"""The tests that read the group's results: one xdist worker runs them all (`--dist loadgroup`), so it starts once."""


@pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)
@IN_THE_GROUP
@pytest.mark.parametrize("case", ["different temb", "different temb by keyword", "different values"])
def test_ranks_passing_different_arguments_besides_the_input_raise_on_every_rank(results, case):
    for rank_results in results:
        assert rank_results[case].startswith(
            "ParallelTilingError: the ranks were given different arguments besides the input"
        ), rank_results[case]


@pytest.mark.slow
@IN_THE_GROUP
def test_decode_inside_a_tiled_block_of_the_same_model_splits_once(results):
    for rank_results in results:
        inside = rank_results["decode inside tiled"]
        assert isinstance(inside, dict), inside
        assert inside["equal"] is True and inside["blends"] > 0
    assert sum(rank_results["decode inside tiled"]["own_tiles"] for rank_results in results) > 1


@pytest.mark.parametrize("timeout", [float("inf"), 1e300, float("nan"), 1e10, datetime.timedelta.max])
def test_a_timeout_too_large_or_not_a_number_is_a_value_error(timeout):
    model = build_model(MODELS["kl"])
    for call in (tileblend.parallel.decode, tileblend.parallel.encode):
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds .* at most 1e\\+09"):
            call(model, torch.zeros(1, 4, 8, 8), timeout=timeout)
    with pytest.raises(ValueError, match="timeout must be"):
        tileblend.parallel.tiled(model, timeout=timeout)


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
