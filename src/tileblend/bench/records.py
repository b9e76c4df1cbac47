"""What `tileblend bench` passes between processes and leaves on disk, each with one writer and one reader here.

- `WorkerConfig`: what a parent gives a worker process, as JSON on its command line (`to_json`, `from_json`).
- A worker result: `ArmResult` (`tileblend bench decode`, `pipeline`), `CompileResult` (`tileblend bench compile`) or
  `ParallelArmResult` (`tileblend bench parallel`, one per process), as a JSON file (`write_result`, `read_result`).
- The record of a run: the JSON file `--json PATH` asks for (`write_record`).
"""

import dataclasses
import json
from pathlib import Path
from typing import TypeVar

from ..output import writing


Result = TypeVar("Result")


@dataclasses.dataclass(frozen=True)
class WorkerConfig:
    """A worker's config: the run options every worker reads, and `workload`, what the benchmark's worker builds
    (for example preset, size and tile; a dict whose keys each benchmark chooses).

    Its JSON form, and the `config` of a record, is one flat object: the workload's keys, then the run options'.
    """

    device: str
    dtype: str
    seed: int
    threads: int | None
    warmup: int
    reps: int
    workload: dict = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        """The flat form: `workload`, then the run options."""
        fields = dataclasses.asdict(self)
        return fields.pop("workload") | fields

    @classmethod
    def from_dict(cls, flat: dict) -> "WorkerConfig":
        """The config of a flat dict (`as_dict`): the run options' keys, and every other key as the workload."""
        workload = {key: value for key, value in flat.items() if key not in RUN_KEYS}
        return cls(**{key: flat[key] for key in RUN_KEYS}, workload=workload)

    def to_json(self) -> str:
        """The JSON text of `as_dict`, as a worker's `--config` takes it."""
        return json.dumps(self.as_dict())

    @classmethod
    def from_json(cls, text: str) -> "WorkerConfig":
        """The config `to_json` wrote."""
        return cls.from_dict(json.loads(text))


RUN_KEYS = tuple(field.name for field in dataclasses.fields(WorkerConfig) if field.name != "workload")
"""The run options of a worker config: its fields but `workload`."""


@dataclasses.dataclass(frozen=True)
class ArmResult:
    """What one worker process of the A/B protocol measured (`tileblend.bench.worker.worker_main`): its timed calls
    (ms) and their median, its peak memory and what that measures, and the blend calls of one instrumented call, their
    time and their share of that call."""

    arm: str
    tileblend_enabled: bool
    samples_ms: list[float]
    median_ms: float
    peak_memory_bytes: int
    peak_memory_kind: str
    blend_calls: int
    blend_ms: float
    blend_share: float
    output_shape: list[int]


@dataclasses.dataclass(frozen=True)
class CompileResult:
    """What one worker process of `tileblend bench compile` measured: the blend calls of the eager decode, the graphs
    and FX nodes Dynamo made, the first compiled call (s), the steady compiled calls (ms) and their median, and whether
    the compiled output equals the eager one bit for bit."""

    arm: str
    blend_calls: int
    graphs: int
    fx_nodes: int
    compile_s: float
    samples_ms: list[float]
    steady_ms: float
    equal_to_eager: bool


@dataclasses.dataclass(frozen=True)
class ParallelArmResult:
    """What one process of an arm of `tileblend bench parallel` measured: its timed decodes (ms) and their median, its
    peak memory and what that measures, and the fields of its last call's `tileblend.parallel.ParallelTraffic`
    (`report`) with the pass's tile count (`tiles`); in the single-process arm `report` is empty and `tiles` is "-"."""

    samples_ms: list[float]
    median_ms: float
    peak_memory_bytes: int
    peak_memory_kind: str
    report: dict
    tiles: int | str


def write_result(path: Path | str, result) -> None:
    """Write the worker result `result` (a dataclass instance) to `path` as JSON."""
    Path(path).write_text(json.dumps(dataclasses.asdict(result)), encoding="utf-8")


def read_result(path: Path | str, result_type: type[Result]) -> Result:
    """The `result_type` that `write_result` wrote to `path`."""
    return result_type(**json.loads(Path(path).read_text(encoding="utf-8")))


def write_record(path: Path | str, record: dict) -> None:
    """Write the record of a run, indented JSON ending in a newline, to `path` (creating its folder); a failure raises
    `tileblend.output.OutputError`."""
    with writing(path) as target:
        target.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
