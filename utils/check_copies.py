"""Entry point of `tileblend.upstream.copies` (`make fix-copies` outside a checkout): the "Copied from" checker for
trees without upstream's own. The module says how to use it."""

import sys

from tileblend.upstream.copies import main


if __name__ == "__main__":
    sys.exit(main())
