"""The TIR pass pipeline: the ordered pass list per optimization level and its one runner.

Order and why:
- simplify, partition_loops, remove_no_ops: split off the tails of non-divisible tiles while
  the guards are still readable multi-dimensional conditions, and drop dead tails.
- flatten_buffers before vectorize_loops: the vectorizer then sees one flat index per access
  and turns `i * 8 + j` (j vectorized) into `ramp(i * 8, 1, 8)` directly.
- unroll_loops before vectorize_loops: an unrolled loop around a vectorized one becomes
  copies of it, each vectorized on its own (and a vectorized loop around an unrolled one
  keeps the unrolled straight-line code as its body).
- lower_intrinsics after vectorization: the expansions (erf, rsqrt) inherit the vector
  width; exp, tanh and sigmoid are left to the back ends, which expand them faster.
- simplify, remove_no_ops last: fold the arithmetic the passes left behind.
flatten_buffers and vectorize_loops run at every level: code generators require flat
indices and no VECTORIZED loops.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Sequence

from ember.errors import EmberError, VerifyError
from ember.tir.function import PrimFunc
from ember.tir.transform.flatten import flatten_buffers
from ember.tir.transform.insert_barriers import insert_barriers
from ember.tir.transform.lower_intrinsics import lower_intrinsics
from ember.tir.transform.partition import partition_loops
from ember.tir.transform.remove_no_ops import remove_no_ops
from ember.tir.transform.unroll import unroll_loops
from ember.tir.transform.vectorize import vectorize_loops
from ember.tir.verify import verify

Pass = Callable[[PrimFunc], PrimFunc]


def simplify(func: PrimFunc) -> PrimFunc:
    """Simplify every expression and statement (ember.tir.transform.simplify)."""
    try:
        from ember.tir.transform.simplify import simplify as simplify_pass
    except ImportError:  # the simplifier pass is optional for correctness
        return func
    return simplify_pass(func)


PASSES: dict[int, list[Pass]] = {
    0: [flatten_buffers, vectorize_loops, lower_intrinsics],
    1: [simplify, flatten_buffers, simplify, unroll_loops, vectorize_loops, lower_intrinsics,
        simplify, remove_no_ops],
    2: [simplify, partition_loops, remove_no_ops, flatten_buffers, simplify, unroll_loops,
        vectorize_loops, lower_intrinsics, simplify, remove_no_ops],
}
PASSES[3] = PASSES[2]


def gpu_passes(opt_level: int = 3) -> list[Pass]:
    """The pipeline of a GPU kernel: barriers around shared buffers first (while every
    stage's statements are still apart), then the common passes."""
    if opt_level not in PASSES:
        raise EmberError(f"opt_level must be one of {sorted(PASSES)}, got {opt_level}")
    return [insert_barriers, *PASSES[opt_level]]


class PassError(EmberError):
    """A pass failed; the message names the pass."""


def run_passes(func: PrimFunc, passes: Sequence[Pass] | None = None, opt_level: int = 3,
               verify_each: bool = False) -> PrimFunc:
    """Apply `passes` (default: PASSES[opt_level]) in order.

    With `verify_each` (or EMBER_VERIFY=1) the IR is verified before the first and after
    every pass. EMBER_PRINT_AFTER=vectorize_loops,simplify (or "all") prints the IR after
    the named passes to stderr. A failure is re-raised prefixed with "in pass <name>:".

        func = run_passes(func, opt_level=3, verify_each=True)
    """
    if passes is None:
        if opt_level not in PASSES:
            raise EmberError(f"opt_level must be one of {sorted(PASSES)}, got {opt_level}")
        passes = PASSES[opt_level]
    verify_each = verify_each or os.environ.get("EMBER_VERIFY", "") not in ("", "0")
    print_after = {name.strip() for name in os.environ.get("EMBER_PRINT_AFTER", "").split(",")
                   if name.strip()}
    if verify_each:
        _run_verify(func, "input")
    for p in passes:
        name = getattr(p, "__name__", repr(p))
        try:
            func = p(func)
        except EmberError as err:
            try:
                renamed = type(err)(f"in pass {name}: {err}")
            except Exception:
                renamed = PassError(f"in pass {name}: {err}")
            raise renamed from err
        except Exception as err:
            raise PassError(f"in pass {name}: {type(err).__name__}: {err}") from err
        if name in print_after or "all" in print_after:
            print(f"# IR after {name}\n{func}", file=sys.stderr)
        if verify_each:
            _run_verify(func, name)
    return func


def _run_verify(func: PrimFunc, name: str) -> None:
    try:
        verify(func)
    except VerifyError as err:
        where = "the input" if name == "input" else f"pass {name}"
        raise VerifyError(f"in {where}: {err}") from err
