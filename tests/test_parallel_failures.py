"""Every way a rank can fail in `tileblend.parallel`, on a gloo group of 2 processes: each rank gets
`ParallelTilingError` naming what happened, and a waiting rank raises within `timeout`, not after the process
group's timeout (here 60 s) or the failing rank's hang.

One group per case (a failed call leaves the group unusable). A rank "hangs" for HANG_S seconds and then goes on;
a rank "dies" with `os._exit`. The waiting rank must raise before the hang ends (plus start-up slack).
"""

import datetime
import json
import os
import sys
import time
from pathlib import Path

import gloo_group
import pytest

import tileblend.parallel
from tileblend.parallel import exchange, passes
from tileblend.tiny_models import MODELS, build_model, make_input


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


TIMEOUT = datetime.timedelta(seconds=1)
HANG_S = 6.0
GROUP_TIMEOUT_S = 120


def _hang_then(function):
    """`function`, hanging for HANG_S seconds at its first call that is not on the meta device (the plan pass)."""
    hung = []

    def hanging(*args, **kwargs):
        if not hung and not any(getattr(arg, "is_meta", False) for arg in args):
            hung.append(True)
            time.sleep(HANG_S)
        return function(*args, **kwargs)

    return hanging


def _die(*args, **kwargs):
    os._exit(3)


def _break(case: str, model) -> None:
    """Make this rank fail as `case` says: (where, how), where is the step, how "hang" or "die"."""
    where, how = case.split(":")
    if where == "tile":
        model.decoder.forward = _hang_then(model.decoder.forward) if how == "hang" else _die
    elif where == "plan":
        passes.plan_pass = _hang_then(passes.plan_pass) if how == "hang" else _die
    elif where == "exchange":
        exchange.pack = _hang_then(exchange.pack) if how == "hang" else _die
    elif where == "send":
        exchange._move = _die


CASES = {
    # case id: (failing rank, what it does, dst, the waiting rank's error)
    "hangs before the call": (1, "call:hang", None, "rank(s) [1] did not reach the call within 1 s"),
    "hangs in its tile": (0, "tile:hang", None, "rank(s) [0] did not finish its tiles within 1 s"),
    "dies in its tile": (1, "tile:die", None, "rank(s) [1] did not finish its tiles within 1 s"),
    "hangs while planning": (0, "plan:hang", None, "rank(s) [0] did not get to the plan within 1 s"),
    "dies while planning": (0, "plan:die", None, "rank(s) [0] did not get to the plan within 1 s"),
    "hangs packing its tiles": (1, "exchange:hang", None, "rank(s) [1] did not get to the exchange of the tiles"),
    "dies packing its tiles for dst": (1, "exchange:die", 0, "rank(s) [1] did not get to the exchange of the tiles"),
    "dies sending its tiles": (1, "send:die", None, "moving rank 0's tiles to the other ranks failed (waited at most"),
}


def worker_main(rank: int, world_size: int, port: int, out: str, case_id: str) -> None:
    gloo_group.join_group(rank, world_size, port, datetime.timedelta(seconds=60))
    failing, case, dst, _ = CASES[case_id]
    entry = MODELS["kl"]
    model = build_model(entry)
    x = make_input(entry, "decode")
    if rank == failing:
        _break(case, model)
    start = time.monotonic()
    try:
        if case == "call:hang" and rank == failing:
            time.sleep(HANG_S)
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
    results = gloo_group.run_group(__file__, 2, tmp_path, case_id, timeout=GROUP_TIMEOUT_S)
    waiting = results[1 - failing]
    assert waiting is not None, "the waiting rank wrote no result"
    assert waiting["error"].startswith(f"ParallelTilingError: {expected}"), waiting["error"]
    assert waiting["seconds"] < HANG_S - 2, "the waiting rank waited for the hang, not for `timeout`"
    if case.endswith("hang"):  # the hanging rank goes on afterwards, and finds the others gone
        assert results[failing]["error"].startswith("ParallelTilingError: "), results[failing]["error"]
    else:
        assert results[failing] is None  # it died


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
