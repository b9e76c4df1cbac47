"""The issue draft of one bug, in the fields of diffusers' bug report form, as GitHub renders a filled form.

The form (`.github/ISSUE_TEMPLATE/bug-report.yml` upstream) asks for "Describe the bug", "Reproduction", "Logs" and
"System Info" (what `diffusers-cli env` prints). The draft is a Markdown file: the title as its first heading, then
one `###` section per field. The reproduction is the script `make upstream-bugs` ran, the logs are what it printed
there, and the system info names every diffusers version it reproduced with.
"""

from .run import Outcome, Run


def system_info(runs: list[Run]) -> str:
    """The lines of `diffusers-cli env` that bear on a CPU repro, with the diffusers versions of `runs` (the first
    run's interpreter gives the rest: every run uses the same one)."""
    system = runs[0].system
    versions = ", ".join(dict.fromkeys(run.system["diffusers"] for run in runs))
    return "\n".join(
        [
            f"- 🤗 Diffusers version: {versions}",
            f"- Platform: {system['platform']}",
            f"- Python version: {system['python']}",
            f"- PyTorch version (GPU?): {system['torch']} ({system['cuda']})",
            "- Using GPU in script?: No",
            "- Using distributed or parallel set-up in script?: No",
        ]
    )


def draft(outcome: Outcome, runs: list[Run]) -> str:
    """The draft of `outcome`'s bug, with `outcome`'s output as the logs and `runs` (those that reproduced it, the
    run of `outcome` first) in the system info."""
    bug = outcome.bug
    return f"""# {bug.title}

### Describe the bug

{bug.description}

Cause: {bug.cause}

Fix: {bug.fix}

The script below shows it with a tiny random-weight `{bug.class_name}` on the CPU, in seconds. It prints what it \
expects and what it observes, and fails while the bug is there.

### Reproduction

```python
{bug.script.rstrip()}
```

### Logs

```shell
{outcome.output.rstrip()}
```

### System Info

{system_info(runs)}
"""
