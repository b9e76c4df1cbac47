"""Entry point of `tileblend.upstream.simple_blend` (`make exact-vs-simple`): the exact blend against the simple one on
real-size tiled decodes, for the coordination issue. The module says how it measures."""

import sys

from tileblend.upstream.simple_blend import main


if __name__ == "__main__":
    sys.exit(main())
