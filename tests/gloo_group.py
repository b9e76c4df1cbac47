"""Start a gloo process group of test workers without torchrun, so that one rank dying does not end the others.

`run_group(script, world_size, out, *args)` runs `script` once per rank as `python script RANK WORLD_SIZE PORT OUT
*ARGS`, one torch thread each, and kills every worker still running after `timeout` seconds. A worker calls
`join_group(rank, world_size, port)`, writes its results as `OUT/rank{RANK}.json`, and ends with `os._exit` (a group
that lost a rank cannot be destroyed without waiting for it).
"""

import datetime
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def join_group(rank: int, world_size: int, port: int, timeout: datetime.timedelta) -> None:
    """The worker's side: one torch thread, then join the gloo group whose own timeout is `timeout`."""
    torch.set_num_threads(1)
    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timeout)


def run_group(script: str, world_size: int, out: Path, *args: str, timeout: float) -> list[dict | None]:
    """Run the group, wait at most `timeout` seconds (then kill it), and return each rank's results (None for a rank
    that wrote none); the workers' output is printed, so pytest shows it for a failing test."""
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    workers = [
        subprocess.Popen(
            [sys.executable, script, str(rank), str(world_size), str(port), str(out), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world_size)
    ]
    try:
        for rank, worker in enumerate(workers):
            print(f"rank {rank}:\n" + worker.communicate(timeout=timeout)[0][-3000:])
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    paths = [out / f"rank{rank}.json" for rank in range(world_size)]
    return [json.loads(path.read_text()) if path.exists() else None for path in paths]
