"""The `ember` command line: a thin layer over the library."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ember.errors import EmberError


def _cmd_demo(args: argparse.Namespace) -> int:
    from ember.demo import run_gemm_demo

    return run_gemm_demo(size=args.size, threads=args.threads, target=args.target)


def _cmd_target(args: argparse.Namespace) -> int:
    from ember.target import Target

    t = Target(args.spec) if args.spec else Target.host()
    print(f"target:       {t}")
    print(f"triple:       {t.triple}")
    print(f"cpu:          {t.cpu}")
    print(f"vector bits:  {t.vector_bits}")
    print(f"cores:        {t.num_cores}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember", description="ember: an end-to-end deep learning compiler")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="compile a GEMM with a tuned schedule, check it "
                                       "against numpy and compare speed",
                          description="Build an fp32 matrix multiply with ember's x86 "
                                      "schedule, check it against numpy and print GFLOP/s of "
                                      "both.")
    demo.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    demo.add_argument("--threads", type=int, default=None,
                      help="thread count (default: all cores)")
    demo.add_argument("--target", default="llvm", help="target string (default: llvm, the "
                                                       "host CPU)")
    demo.set_defaults(func=_cmd_demo)

    target = sub.add_parser("target", help="show what a target string means on this machine",
                            description="Parse a target string (default: the host) and print "
                                        "its triple, CPU and vector width.")
    target.add_argument("spec", nargs="?", default="", help='e.g. "llvm -mcpu=znver4"')
    target.set_defaults(func=_cmd_target)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from ember import __version__

        print(__version__)
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args))
    except EmberError as err:
        print(f"ember: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
