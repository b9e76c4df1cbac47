"""Run repro scripts in this interpreter, each as `python -` would run it, and write what they did as JSON.

    python runner.py SCRIPTS RESULTS

SCRIPTS is a JSON file `{"slug": "script text", ...}`; the results are written to the JSON file RESULTS.

Run as a file in a fresh process whose `PYTHONPATH` chooses the diffusers under test, in a working folder of its
own: it imports nothing but the standard library before the scripts. Each script runs as `__main__` in a namespace
of its own, compiled as `<stdin>`, with its stdout and stderr captured together. The JSON holds, per slug, `output`
(what it printed, then its traceback as `python -` prints it, library paths made relative to their `site-packages` or
`src` folder) and `failed` (it raised); and under `system`, the diffusers version, where diffusers was imported from,
and what `diffusers-cli env` reports (`env`).
"""

import contextlib
import io
import json
import sys
import traceback
from pathlib import Path


def run(script: str) -> tuple[str, bool]:
    """What `script` printed, its traceback included, and whether it raised."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            exec(compile(script, "<stdin>", "exec"), {"__name__": "__main__"})
        except BaseException as error:  # noqa: BLE001 - a script's failure, whatever it is, is its result
            # The first frame is this function's: `python -` shows the script's frames only.
            output.write("".join(traceback.format_exception(type(error), error, error.__traceback__.tb_next)))
            return output.getvalue(), True
    return output.getvalue(), False


def main() -> None:
    sys.path[0] = ""  # as `python -` has it, in place of this file's folder, whose module names are common words
    scripts = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    results = {slug: dict(zip(("output", "failed"), run(script))) for slug, script in scripts.items()}
    import diffusers
    import torch
    from diffusers.commands.env import EnvironmentCommand

    folders = {str(Path(module.__file__).parents[1]) + "/" for module in (diffusers, torch)}
    for result in results.values():
        for folder in folders:
            result["output"] = result["output"].replace(folder, "")
    with contextlib.redirect_stdout(io.StringIO()):
        environment = EnvironmentCommand().run()
    results["system"] = {"diffusers": diffusers.__version__, "diffusers_file": diffusers.__file__, "env": environment}
    Path(sys.argv[2]).write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main()
