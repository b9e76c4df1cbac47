"""`tileblend bench blend`: loop vs vectorized seam blend, per method, dtype and extent (to be written)."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("blend", help="time the seam blend alone")
    parser.set_defaults(handler=main)


def main(args) -> int:
    raise NotImplementedError
