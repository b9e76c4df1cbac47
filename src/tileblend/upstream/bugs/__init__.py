"""Bug reports for diffusers' tiled paths that are broken upstream (`make upstream-bugs`).

- `scripts`: the standalone repro script of each bug (torch and diffusers only, tiny random weights).
- `catalog`: the bugs: what a user sees, the one-line cause, the fix in words, the script and its failure.
- `runner`: runs scripts in a fresh process against the diffusers its `PYTHONPATH` chooses (standard library only).
- `run`: runs the catalogue against the installed diffusers or a checkout and judges each script.
- `drafts`: one bug's issue draft in the fields of diffusers' bug report form.
- `cli`: the command, its report and the drafts' folder.
"""
