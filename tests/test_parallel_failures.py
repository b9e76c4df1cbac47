"""Every way a rank can fail in `tileblend.parallel`, on a gloo group of 2 processes: each rank gets
`ParallelTilingError` naming what happened, and a waiting rank raises because of `timeout`, not after the process
group's timeout or the failing rank's hang.

One group per case (a failed call leaves the group unusable). A rank "hangs" until the other rank has written its
result (at most HANG_S seconds) and then goes on; a rank "dies" with `os._exit`. So a waiting rank that returns at all
was not released by the hang's end, and with the group's own timeout longer than HANG_S, not by the group either: the
cases assert what happened, not how fast, and hold on a busy machine. Both ranks pass a barrier before the call, so
that a slow start (building the model) does not count against `timeout`.
"""

import datetime
import json
import os
import pickle
import sys
import time
from pathlib import Path

import gloo_group
import pytest
import torch.distributed as dist

import tileblend.parallel
from tileblend.parallel import exchange, passes
from tileblend.tiny_models import MODELS, build_model, make_input


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


TIMEOUT = datetime.timedelta(seconds=5)
HANG_S = 150.0
GROUP_TIMEOUT = datetime.timedelta(seconds=300)
STALL_S = 3.0
"""In "late at every step", rank 0 is this late before each step: each step alone fits in `TIMEOUT`, all do not."""


def _hang(peer_result: Path) -> None:
    """Wait until the other rank has written its result, at most HANG_S seconds."""
    end = time.monotonic() + HANG_S
    while not peer_result.exists() and time.monotonic() < end:
        time.sleep(0.05)


def _hang_then(function, peer_result: Path):
    """`function`, hanging (`_hang`) at its first call that is not on the meta device (the plan pass)."""
    hung = []

    def hanging(*args, **kwargs):
        if not hung and not any(getattr(arg, "is_meta", False) for arg in args):
            hung.append(True)
            _hang(peer_result)
        return function(*args, **kwargs)

    return hanging


def _late_then(function):
    def late(*args, **kwargs):
        time.sleep(STALL_S)
        return function(*args, **kwargs)

    return late


def _die(*args, **kwargs):
    os._exit(3)


def _fail_blending(*args, **kwargs):
    raise RuntimeError("out of memory while blending")


def _break(case: str, model, peer_result: Path) -> None:
    """Make this rank fail as `case` says: (where, how), where is the step, how "hang", "die", "late" or "fail"."""
    where, how = case.split(":")
    if where == "tile":
        model.decoder.forward = _hang_then(model.decoder.forward, peer_result) if how == "hang" else _die
    elif where == "plan":
        passes.plan_pass = _hang_then(passes.plan_pass, peer_result) if how == "hang" else _die
    elif where == "plan-send":
        exchange.pickle.dumps = _hang_then(pickle.dumps, peer_result)
    elif where == "exchange":
        exchange.pack = _hang_then(exchange.pack, peer_result) if how == "hang" else _die
    elif where == "send":
        exchange._move = _die
    elif where == "every-step":
        exchange.wait_for_all = _late_then(exchange.wait_for_all)
    elif where == "blend":
        passes._replay_pass = _fail_blending


within = f"within {TIMEOUT.total_seconds():g} s"
CASES = {
    # case id: (failing rank, what it does, dst, the waiting rank's error)
    "hangs before the call": (1, "call:hang", None, f"rank(s) [1] did not reach the call {within}"),
    "hangs in its tile": (0, "tile:hang", None, f"rank(s) [0] did not finish its tiles {within}"),
    "dies in its tile": (1, "tile:die", None, f"rank(s) [1] did not finish its tiles {within}"),
    "hangs while planning": (0, "plan:hang", None, f"rank(s) [0] did not get to the plan {within}"),
    "dies while planning": (0, "plan:die", None, f"rank(s) [0] did not get to the plan {within}"),
    "hangs sending the plan": (0, "plan-send:hang", None, "sending the plan from rank 0 failed (waited at most 5 s"),
    "hangs packing its tiles": (1, "exchange:hang", None, "rank(s) [1] did not get to the exchange of the tiles"),
    "dies packing its tiles for dst": (1, "exchange:die", 0, "rank(s) [1] did not get to the exchange of the tiles"),
    "dies sending its tiles": (1, "send:die", None, "moving rank 0's tiles to the other ranks failed (waited at most"),
    "late at every step": (0, "every-step:late", None, "rank(s) [0] did not "),
    "fails blending": (
        1,
        "blend:fail",
        None,
        "rank(s) [1] failed while blending the tiles: rank 1: RuntimeError: out",
    ),
}


def worker_main(rank: int, world_size: int, port: int, out: str, case_id: str) -> None:
    gloo_group.join_group(rank, world_size, port, GROUP_TIMEOUT)
    failing, case, dst, _ = CASES[case_id]
    entry = MODELS["kl"]
    model = build_model(entry)
    x = make_input(entry, "decode")
    peer_result = Path(out, f"rank{1 - rank}.json")
    if rank == failing:
        _break(case, model, peer_result)
    dist.barrier()
    start = time.monotonic()
    try:
        if case == "call:hang" and rank == failing:
            _hang(peer_result)
        tileblend.parallel.decode(model, x, dst=dst, timeout=TIMEOUT)
        error = "no error"
    except Exception as caught:
        error = f"{type(caught).__name__}: {caught}"
    result = {"error": error, "seconds": time.monotonic() - start}
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    os._exit(0)


@pytest.mark.parametrize("case_id", list(CASES))
def test_a_failing_rank_makes_every_rank_raise_in_time(case_id, tmp_path):
    failing, case, _, expected = CASES[case_id]
    results = gloo_group.run_group(__file__, 2, tmp_path, case_id, timeout=GROUP_TIMEOUT.total_seconds() + 60)
    waiting = results[1 - failing]
    assert waiting is not None, "the waiting rank wrote no result"
    assert waiting["error"].startswith(f"ParallelTilingError: {expected}"), waiting["error"]
    if case.endswith("die"):
        assert results[failing] is None  # it died
    else:  # the failing rank goes on, or fails itself, and raises too: no rank returns the output alone
        assert results[failing]["error"].startswith("ParallelTilingError: "), results[failing]["error"]
    if case.endswith("hang"):  # it was released by the waiting rank's result: that rank did not wait for the hang
        assert waiting["seconds"] < HANG_S


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
