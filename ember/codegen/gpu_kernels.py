"""Split a GPU PrimFunc into kernels: one per statement at root, with its launch shape.

After lowering, a GPU function is a sequence of root stages (each a loop nest whose outer
loops are bound to blockIdx / threadIdx) inside allocations of the global intermediates
between them. Each root statement becomes a kernel launched over the largest extent bound
to each thread axis; the intermediates become device buffers the host allocates.

A serial root loop whose body holds thread-bound loops (a scan's time loop: each step needs
every thread's results of the step before) stays on the host: each statement of its body
becomes a kernel taking the loop variable as its last scalar, launched once per iteration
in body order (`DeviceProgram.order`), so a launch boundary is the grid-wide barrier
between steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.errors import CodegenError
from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import Buffer, PrimFunc
from ember.tir.functor import Visitor

AXES = "xyz"


@dataclass(frozen=True)
class Kernel:
    """One device kernel: its body, the global buffers and scalars it takes (in order) and
    its launch shape: `grid` blocks of `block` threads (x, y, z)."""

    name: str
    body: S.Stmt
    buffers: tuple[Buffer, ...]
    scalars: tuple[E.Var, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    thread_extents: tuple[tuple[str, int], ...]  # tag -> launched extent
    step: E.Var | None = None  # a host loop's variable, passed as the last scalar

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class DeviceProgram:
    """A PrimFunc as a host sequence of kernel launches over its parameters and temporaries."""

    name: str
    params: tuple[Buffer | E.Var, ...]
    temporaries: tuple[Buffer, ...]   # global intermediates, allocated by the host
    kernels: tuple[Kernel, ...]
    # launch order: (kernel index, value of its step variable or None); empty: each once
    order: tuple[tuple[int, int | None], ...] = ()

    def launch_order(self) -> tuple[tuple[Kernel, int | None], ...]:
        """Every launch in order: a kernel and its step value (None outside a host loop)."""
        if not self.order:
            return tuple((k, None) for k in self.kernels)
        return tuple((self.kernels[i], step) for i, step in self.order)


class _Scan(Visitor):
    """Thread extents, global buffers accessed and scalar variables used by one kernel."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.extents: dict[str, int] = {}
        self.buffers: dict[E.Var, Buffer] = {}
        self.vars: set[E.Var] = set()

    def visit_For(self, loop: S.For) -> None:
        if loop.kind == S.ForKind.THREAD_BINDING:
            extent = E.as_const_int(loop.extent)
            if extent is None:
                raise CodegenError(f"{self.where}: loop '{loop.var.name}' bound to "
                                   f"{loop.thread_tag} has a non-constant extent {loop.extent}")
            self.extents[loop.thread_tag] = max(self.extents.get(loop.thread_tag, 1), extent)
        self.generic_visit(loop)

    def visit_Load(self, node: E.Load) -> None:
        if node.buffer.scope == "global":
            self.buffers.setdefault(node.buffer.data, node.buffer)
        self.generic_visit(node)

    def visit_Store(self, node: S.Store) -> None:
        if node.buffer.scope == "global":
            self.buffers.setdefault(node.buffer.data, node.buffer)
        self.generic_visit(node)

    def visit_Allocate(self, node: S.Allocate) -> None:
        self.generic_visit(node)

    def visit_Var(self, var: E.Var) -> None:
        self.vars.add(var)


class _HasThreads(Visitor):
    def __init__(self) -> None:
        self.found = False

    def visit_For(self, loop: S.For) -> None:
        self.found = self.found or loop.kind == S.ForKind.THREAD_BINDING
        self.generic_visit(loop)


def _has_threads(stmt: S.Stmt) -> bool:
    finder = _HasThreads()
    finder.visit(stmt)
    return finder.found


# a root: its body, and the serial host loop around it (or None)
Root = tuple[S.Stmt, S.For | None]


def _roots(stmt: S.Stmt, temporaries: list[Buffer], out: list[Root],
           loop: S.For | None = None) -> None:
    match stmt:
        case S.Allocate(buffer, body) if buffer.scope == "global":
            # a loop peeled by the pipeline repeats its body's allocations: one device buffer
            if all(t.data is not buffer.data for t in temporaries):
                temporaries.append(buffer)
            _roots(body, temporaries, out, loop)
        case S.Seq(items):
            for item in items:
                _roots(item, temporaries, out, loop)
        case S.Evaluate(E.IntImm()):
            pass
        case S.For() if (stmt.kind == S.ForKind.SERIAL and loop is None
                         and _has_threads(stmt.body)):
            for v in (stmt.begin, stmt.extent):
                if E.as_const_int(v) is None:
                    raise CodegenError(f"host loop '{stmt.var.name}' around GPU kernels has a "
                                       f"non-constant bound {v}")
            _roots(stmt.body, temporaries, out, stmt)
        case _:
            out.append((stmt, loop))


def split_kernels(func: PrimFunc, max_threads: int = 1024) -> DeviceProgram:
    """The kernels of `func` (after the TIR pipeline), in launch order.

        program = split_kernels(func)   # program.kernels[0].grid == (64, 1, 1), ...
    """
    temporaries: list[Buffer] = []
    roots: list[Root] = []
    _roots(func.body, temporaries, roots)
    params = [p for p in func.params if isinstance(p, Buffer)] + temporaries
    scalars = [p for p in func.params if isinstance(p, E.Var)]
    kernels = []
    for number, (body, loop) in enumerate(roots):
        name = f"{func.name}_kernel{number}"
        scan = _Scan(f"kernel '{name}'")
        scan.visit(body)
        for tag in scan.extents:
            if tag.startswith("vthread"):
                raise CodegenError(f"kernel '{name}': virtual threads ({tag}) are not "
                                   "supported; bind to blockIdx or threadIdx")
        grid = tuple(scan.extents.get(f"blockIdx.{a}", 1) for a in AXES)
        block = tuple(scan.extents.get(f"threadIdx.{a}", 1) for a in AXES)
        threads = block[0] * block[1] * block[2]
        if threads > max_threads:
            raise CodegenError(f"kernel '{name}': {threads} threads per block "
                               f"({' x '.join(map(str, block))}) exceed the target's "
                               f"{max_threads}; split the threadIdx axes smaller")
        used = [b for b in params if b.data in scan.buffers]
        step = loop.var if loop is not None and loop.var in scan.vars else None
        kernel_scalars = tuple(v for v in scalars if v in scan.vars)
        kernels.append(Kernel(name, body, tuple(used),
                              kernel_scalars + ((step,) if step is not None else ()),
                              grid, block, tuple(sorted(scan.extents.items())),  # type: ignore
                              step))
    order = _order(roots, kernels)
    return DeviceProgram(func.name, func.params, tuple(temporaries), tuple(kernels), order)


def _order(roots: list[Root], kernels: list[Kernel]) -> tuple[tuple[int, int | None], ...]:
    """Launch order: kernels outside host loops once; a host loop's kernels per iteration."""
    if all(loop is None for _, loop in roots):
        return ()
    order: list[tuple[int, int | None]] = []
    i = 0
    while i < len(roots):
        loop = roots[i][1]
        if loop is None:
            order.append((i, None))
            i += 1
            continue
        j = i
        while j < len(roots) and roots[j][1] is loop:
            j += 1
        begin, count = E.as_const_int(loop.begin), E.as_const_int(loop.extent)
        assert begin is not None and count is not None
        for value in range(begin, begin + count):
            order += [(n, value if kernels[n].step is not None else None)
                      for n in range(i, j)]
        i = j
    return tuple(order)
