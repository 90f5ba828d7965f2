"""PARALLEL loops: outline the body into a function and run it on the runtime's threads.

    for (i = begin; i < end; ++i) body(i)
becomes
    closure = {captured values..., begin, end, next = begin}
    ember_parallel_launch(worker, &closure, min(ember_num_threads, end - begin))
where `worker(closure, tid, team)` takes chunks (a CHUNKS_PER_THREAD-th of a thread's share)
from `next` (an atomic fetch-add) until none are left, and runs each through `body_fn`, a
function whose buffer parameters are `noalias`, so the body optimizes like the original.
Whichever threads are running share the work: a thread the OS runs late takes fewer
chunks instead of delaying the loop. Parallel loops nested inside run serially.
ember.runtime.threadpool provides ember_parallel_launch (its own pool, or libgomp's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ember import dtype as dt
from ember.codegen.llvm_expr import I32, PTR
from ember.errors import CodegenError
from ember.runtime.threadpool import LAUNCH_SYMBOL, NUM_THREADS_SYMBOL
from ember.tir.expr import IntImm, Load, Var
from ember.tir.functor import post_order_visit
from ember.tir.stmt import PARALLEL_CHUNKS, Allocate, For, Store

if TYPE_CHECKING:
    from ember.codegen.llvm import FunctionEmitter

# chunks per thread a parallel loop is cut into (one chunk when it runs on one thread);
# a schedule overrides it per loop with the pragma PARALLEL_CHUNKS (1: each thread takes
# one contiguous share, usually the same one on every launch, which keeps its data in the
# thread's own cache; a late thread's share is still taken by whoever is free)
CHUNKS_PER_THREAD = 4


def _captures(em: FunctionEmitter, loop: For) -> tuple[list[Var], list[Var]]:
    """(buffer data vars, scalar vars) bound outside `loop` that its body uses."""
    used: dict[Var, None] = {}

    def note(node: object) -> None:
        if isinstance(node, Var):
            used[node] = None
        elif isinstance(node, (Load, Store)):
            used[node.buffer.data] = None
        elif isinstance(node, Allocate):
            for extent in node.buffer.shape:
                post_order_visit(extent, note)

    post_order_visit(loop.body, note)
    buffers = [v for v in used if v in em.buffers]
    scalars = [v for v in used if v in em.vars and v is not loop.var]
    return buffers, scalars


def emit_parallel_for(em: FunctionEmitter, loop: For) -> None:
    """Emit `loop` (kind PARALLEL) as a libgomp parallel region."""
    from ember.codegen.llvm import FunctionEmitter

    b_ = em.builder
    ctx = em.ctx
    begin = em.expr(loop.begin)
    extent = em.expr(loop.extent)
    end = b_.add(begin, extent)
    buffers, scalars = _captures(em, loop)
    values = [em.buffers[v] for v in buffers] + [em.vars[v] for v in scalars] + [begin, end]
    # the closure: captured values, begin, end, and `next`, the first iteration not yet taken
    closure_type = ir.LiteralStructType([v.type for v in values] + [begin.type])
    closure = em.entry_builder.alloca(closure_type, name=f"{loop.var.name}.closure")
    for position, value in enumerate(values + [begin]):
        b_.store(value, _field(b_, closure, closure_type, position))

    base_name = ctx.fresh_name(f"{em.function.name}_{loop.var.name}_par")
    index_type = begin.type

    # body_fn(buffers..., scalars..., lo, hi): the serial loop over one chunk
    body_type = ir.FunctionType(ir.VoidType(), [v.type for v in values])
    body_fn = ir.Function(ctx.module, body_type, name=f"{base_name}_body")
    body_fn.linkage = "internal"
    body_fn.attributes.add("nounwind")
    inner = FunctionEmitter(ctx, body_fn, in_parallel=True)
    for arg, var in zip(body_fn.args, buffers + scalars):
        arg.name = var.name
        if var in em.buffers:
            arg.add_attribute("noalias")
            inner.buffers[var] = arg
        else:
            inner.vars[var] = arg
    lo, hi = body_fn.args[-2], body_fn.args[-1]
    inner.serial_loop(loop.var, lo, hi, lambda: inner.stmt(loop.body))
    inner.builder.ret_void()

    chunks = dict(loop.annotations).get(PARALLEL_CHUNKS, IntImm(CHUNKS_PER_THREAD, dt.int32))
    if not isinstance(chunks, IntImm) or chunks.value < 1:
        raise CodegenError(f"parallel loop '{loop.var.name}': pragma {PARALLEL_CHUNKS} must be "
                           f"a positive integer constant, got {chunks}")
    worker = _emit_worker(em, base_name, closure_type, body_fn, index_type, chunks.value)

    # threads = max(min(ember_num_threads, extent), 1)
    count = em.module.globals.get(NUM_THREADS_SYMBOL)
    if count is None:
        count = ir.GlobalVariable(em.module, I32, NUM_THREADS_SYMBOL)
    threads: ir.Value = b_.load(count, typ=I32)
    threads = em.call_intrinsic("llvm.smin", I32, [threads, _clamp_i32(em, extent)])
    threads = em.call_intrinsic("llvm.smax", I32, [threads, ir.Constant(I32, 1)])
    launch = em.declare(LAUNCH_SYMBOL, ir.VoidType(), [PTR, PTR, I32])
    b_.call(launch, [worker, closure, threads])


def _clamp_i32(em: FunctionEmitter, extent: ir.Value) -> ir.Value:
    """The extent as an i32, saturated at 2^31 - 1 for 64-bit loops."""
    b_ = em.builder
    width = extent.type.width
    if width == 32:
        return extent
    if width < 32:
        return b_.sext(extent, I32)
    limited = em.call_intrinsic("llvm.smin", extent.type,
                                [extent, ir.Constant(extent.type, 2**31 - 1)])
    return b_.trunc(limited, I32)


def _field(b_: ir.IRBuilder, closure: ir.Value, closure_type: ir.Type, position: int) -> ir.Value:
    ptr = b_.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, position)], inbounds=True,
                 source_etype=closure_type)
    ptr.type = PTR  # llvmlite infers a typed pointer here; the module uses opaque ones
    return ptr


def _emit_worker(em: FunctionEmitter, base_name: str, closure_type: ir.LiteralStructType,
                 body_fn: ir.Function, index_type: ir.IntType, chunks: int) -> ir.Function:
    """void worker(ptr closure, i32 tid, i32 team): run chunks of [begin, end), taken from
    the closure's `next` counter, until none are left."""
    worker = ir.Function(em.module, ir.FunctionType(ir.VoidType(), [PTR, I32, I32]),
                         name=base_name)
    worker.linkage = "internal"
    worker.attributes.add("nounwind")
    entry = worker.append_basic_block("entry")
    grab = worker.append_basic_block("grab")
    run = worker.append_basic_block("run")
    done = worker.append_basic_block("done")
    b_ = ir.IRBuilder(entry)
    closure = worker.args[0]
    fields = [b_.load(_field(b_, closure, closure_type, i), typ=t)
              for i, t in enumerate(closure_type.elements[:-1])]
    values, begin, end = fields[:-2], fields[-2], fields[-1]
    counter = _field(b_, closure, closure_type, len(closure_type.elements) - 1)
    team = _widen(b_, worker.args[2], index_type)
    one = ir.Constant(index_type, 1)
    # grain = ceil(span / pieces), pieces = team * chunks (1 when team is 1)
    span = b_.sub(end, begin)
    several = b_.icmp_signed(">", team, one)
    pieces = b_.select(several, b_.mul(team, ir.Constant(index_type, chunks)), one)
    grain = b_.sdiv(b_.add(span, b_.sub(pieces, one)), pieces)
    grain = b_.select(b_.icmp_signed("<", grain, one), one, grain)
    b_.branch(grab)
    b_.position_at_end(grab)
    lo = b_.atomic_rmw("add", counter, grain, "monotonic")
    b_.cbranch(b_.icmp_signed("<", lo, end), run, done)
    b_.position_at_end(run)
    hi_unclamped = b_.add(lo, grain)
    hi = b_.select(b_.icmp_signed("<", hi_unclamped, end), hi_unclamped, end)
    b_.call(body_fn, values + [lo, hi])
    b_.branch(grab)
    b_.position_at_end(done)
    b_.ret_void()
    return worker


def _widen(b_: ir.IRBuilder, value: ir.Value, index_type: ir.IntType) -> ir.Value:
    if index_type.width > 32:
        return b_.sext(value, index_type)
    if index_type.width < 32:
        return b_.trunc(value, index_type)
    return value

