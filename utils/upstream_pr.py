"""Entry point of `tileblend.upstream.pr` (`make upstream-pr`): write the upstream pull request and its drafts. The
module says how to use it."""

import sys

from tileblend.upstream.pr import main


if __name__ == "__main__":
    sys.exit(main())
