"""Readable text for the loop IR: `str(func)` prints a Python-like loop nest."""

from __future__ import annotations

from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import Buffer, PrimFunc

_BINARY = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.FloorDiv: "//", E.FloorMod: "%",
           E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=",
           E.And: "&&", E.Or: "||", E.BitwiseAnd: "&", E.BitwiseOr: "|", E.BitwiseXor: "^"}
_PRECEDENCE = {E.Or: 1, E.And: 2, E.BitwiseOr: 3, E.BitwiseXor: 3, E.BitwiseAnd: 3,
               E.EQ: 3, E.NE: 3, E.LT: 3, E.LE: 3, E.GT: 3, E.GE: 3,
               E.Add: 4, E.Sub: 4, E.Mul: 5, E.Div: 5, E.FloorDiv: 5, E.FloorMod: 5}


def expr_to_str(e: E.Expr, parent_precedence: int = 0) -> str:
    match e:
        case E.Var(name):
            return name
        case E.IntImm(value, dtype):
            if dtype.is_bool:
                return "True" if value else "False"
            return str(value) if dtype == E.dt.int32 else f"{dtype}({value})"
        case E.FloatImm(value, dtype):
            return repr(value) if dtype == E.dt.float32 else f"{dtype}({value!r})"
        case E.StringImm(value):
            return repr(value)
        case E.Min(a, b):
            return f"min({expr_to_str(a)}, {expr_to_str(b)})"
        case E.Max(a, b):
            return f"max({expr_to_str(a)}, {expr_to_str(b)})"
        case E.BinaryOp(a, b):
            prec = _PRECEDENCE[type(e)]  # type: ignore[index]
            text = f"{expr_to_str(a, prec)} {_BINARY[type(e)]} {expr_to_str(b, prec + 1)}"  # type: ignore[index]
            return f"({text})" if prec < parent_precedence else text
        case E.Not(a):
            return f"!{expr_to_str(a, 9)}"
        case E.Cast(dtype, value):
            return f"{dtype}({expr_to_str(value)})"
        case E.Select(c, t, f):
            return f"select({expr_to_str(c)}, {expr_to_str(t)}, {expr_to_str(f)})"
        case E.Ramp(base, stride, lanes):
            return f"ramp({expr_to_str(base)}, {expr_to_str(stride)}, {lanes})"
        case E.Broadcast(value, lanes):
            return f"x{lanes}({expr_to_str(value)})"
        case E.Let(var, value, body):
            return f"(let {var.name} = {expr_to_str(value)} in {expr_to_str(body)})"
        case E.Load(buffer, indices, predicate):
            idx = ", ".join(expr_to_str(i) for i in indices)
            always = predicate is None or E.is_const_int(predicate, 1)
            pred = "" if always else f" if {expr_to_str(predicate)}"
            return f"{buffer.name}[{idx}{pred}]"
        case E.Call(_, name, args):
            return f"{name}({', '.join(expr_to_str(a) for a in args)})"
        case E.Reduce(_, source, axis, condition, value_index):
            axes = ", ".join(iv.var.name for iv in axis)
            src = ", ".join(expr_to_str(s) for s in source)
            cond = "" if E.is_const_int(condition, 1) else f", where={expr_to_str(condition)}"
            return f"reduce[{value_index}]({src}, axis=[{axes}]{cond})"
    return f"<{type(e).__name__}>"


class _StmtPrinter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def print(self, s: S.Stmt, depth: int) -> None:
        match s:
            case S.For(var, begin, extent, kind, body, thread_tag, annotations):
                if E.is_const_int(begin, 0):
                    rng = f"range({expr_to_str(extent)})"
                else:
                    rng = f"range({expr_to_str(begin)}, {expr_to_str(begin + extent)})"
                label = "" if kind == S.ForKind.SERIAL else f"  # {kind.value}"
                if thread_tag:
                    label = f"  # bind {thread_tag}"
                for key, value in annotations:
                    label += f" pragma {key}={expr_to_str(value)}"
                self.emit(depth, f"for {var.name} in {rng}:{label}")
                self.print(body, depth + 1)
            case S.Store(buffer, value, indices, predicate):
                idx = ", ".join(expr_to_str(i) for i in indices)
                pred = "" if predicate is None else f" if {expr_to_str(predicate)}"
                self.emit(depth, f"{buffer.name}[{idx}] = {expr_to_str(value)}{pred}")
            case S.Allocate(buffer, body):
                dims = ", ".join(expr_to_str(d) for d in buffer.shape)
                self.emit(depth, f"{buffer.name} = allocate({buffer.dtype}[{dims}], "
                                 f"{buffer.scope!r})")
                self.print(body, depth)
            case S.IfThenElse(condition, then_case, else_case):
                self.emit(depth, f"if {expr_to_str(condition)}:")
                self.print(then_case, depth + 1)
                if else_case is not None:
                    self.emit(depth, "else:")
                    self.print(else_case, depth + 1)
            case S.Seq(stmts):
                for item in stmts:
                    self.print(item, depth)
            case S.LetStmt(var, value, body):
                self.emit(depth, f"{var.name} = {expr_to_str(value)}")
                self.print(body, depth)
            case S.Evaluate(value):
                self.emit(depth, expr_to_str(value))
            case S.AttrStmt(key, value, body):
                self.emit(depth, f"# attr {key} = {expr_to_str(value)}")
                self.print(body, depth)
            case S.Barrier(scope):
                self.emit(depth, f"barrier({scope!r})")
            case _:
                self.emit(depth, f"<{type(s).__name__}>")


def stmt_to_str(s: S.Stmt, depth: int = 0) -> str:
    printer = _StmtPrinter()
    printer.print(s, depth)
    return "\n".join(printer.lines)


def _param_to_str(p: Buffer | E.Var) -> str:
    if isinstance(p, Buffer):
        dims = ", ".join(expr_to_str(d) for d in p.shape)
        return f"{p.name}: {p.dtype}[{dims}]"
    return f"{p.name}: {p.dtype}"


def func_to_str(f: PrimFunc) -> str:
    params = ", ".join(_param_to_str(p) for p in f.params)
    return f"def {f.name}({params}):\n{stmt_to_str(f.body, 1)}"
