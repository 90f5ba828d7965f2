"""The loop IR: expressions, statements, buffers and functions, plus traversal helpers."""

from ember.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, Call, Cast, CommReducer, Div, Expr, FloatImm,
    FloorDiv, FloorMod, IntImm, IterKind, IterVar, Let, Load, Max, Min, Mul, Not, Or, Ramp,
    Range, Reduce, Select, StringImm, Sub, Var, const, convert,
)
from ember.tir.function import Buffer, PrimFunc, buffer
from ember.tir.functor import Mutator, Visitor, post_order_visit, substitute, used_vars
from ember.tir.stmt import (
    Allocate, AttrStmt, Barrier, Evaluate, For, ForKind, IfThenElse, LetStmt, Seq, Stmt, Store,
    seq,
)
from ember.tir.structural import structural_equal, structural_hash

__all__ = [
    "EQ", "GE", "GT", "LE", "LT", "NE", "Add", "And", "Broadcast", "Call", "Cast",
    "CommReducer", "Div", "Expr", "FloatImm", "FloorDiv", "FloorMod", "IntImm", "IterKind",
    "IterVar", "Let", "Load", "Max", "Min", "Mul", "Not", "Or", "Ramp", "Range", "Reduce",
    "Select", "StringImm", "Sub", "Var", "const", "convert", "Buffer", "PrimFunc", "buffer",
    "Mutator", "Visitor", "post_order_visit", "substitute", "used_vars", "Allocate",
    "AttrStmt", "Barrier", "Evaluate", "For", "ForKind", "IfThenElse", "LetStmt", "Seq",
    "Stmt", "Store", "seq", "structural_equal", "structural_hash",
]
