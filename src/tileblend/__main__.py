"""`python -m tileblend ...` is the `tileblend` command."""

import sys

from .cli import main


sys.exit(main())
