"""Entry point of `tileblend.upstream.bugs.cli` (`make upstream-bugs`): reproduce the upstream bugs in diffusers'
tiled paths and write their issue drafts. The module says how to use it."""

import sys

from tileblend.upstream.bugs.cli import main


if __name__ == "__main__":
    sys.exit(main())
