"""The issue draft of one bug, in the fields of diffusers' bug report form, as GitHub renders a filled form.

The form (`.github/ISSUE_TEMPLATE/bug-report.yml` upstream) asks for "Describe the bug", "Reproduction", "Logs" and
"System Info" (what `diffusers-cli env` prints, which the runner records). The draft is a Markdown file: the title as
its first heading, then one `###` section per field. The reproduction is the script `make upstream-bugs` ran, the
logs are what it printed there, and the system info names every diffusers version it reproduced with.
"""

from .run import Outcome, Run


# The answers `diffusers-cli env` leaves to the reporter: every script runs on the CPU, in one process.
ANSWERS = {"Using GPU in script?": "No", "Using distributed or parallel set-up in script?": "No"}


def system_info(runs: list[Run]) -> str:
    """What `diffusers-cli env` prints for the first of `runs`, its questions answered, with the diffusers versions
    of all `runs` (every run uses the same interpreter: the rest is theirs too)."""
    info = runs[0].system["env"] | ANSWERS
    info["🤗 Diffusers version"] = ", ".join(dict.fromkeys(run.system["diffusers"] for run in runs))
    return "\n".join(f"- {key}: {value}" for key, value in info.items())


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
