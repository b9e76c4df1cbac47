"""Entry point of `tileblend.upstream.check` (`make upstream-check`): judge `tileblend rewrite` on a diffusers
checkout. The module says how to use it."""

import sys

from tileblend.upstream.check import main


if __name__ == "__main__":
    sys.exit(main())
