"""Expressions of the loop IR as C99 text, with vector expressions expanded one lane at a time.

A vector expression is printed for one lane at a time: `print(e, lane="lane")` replaces each
Ramp by `base + lane * stride`, each Broadcast by its scalar and each vector variable by its
element, so a vector Store becomes a small scalar loop over lanes. Let expressions become
`const` locals declared before the statement that uses them (`ExprPrinter.prelude`), except
under a guard (a Select branch, the right side of && or ||), where they are substituted
unless every load in the bound value carries its own predicate (then evaluating it where the
guard is false reads nothing it should not).
"""

from __future__ import annotations

import math

import numpy as np

from ember.codegen.c_names import Scopes, compute_ctype, storage_ctype, type_suffix
from ember.codegen.intrinsics import INTRINSICS, c_function, lookup
from ember.dtype import DType
from ember.errors import CodegenError
from ember.tir import expr as E
from ember.tir.expr import Expr
from ember.tir.function import Buffer
from ember.tir.functor import post_order_visit, substitute

# C operator precedence (higher binds tighter)
PRIMARY, UNARY, MUL, ADD, REL, EQUAL, LAND, LOR, COND = 16, 15, 13, 12, 10, 9, 5, 4, 3
BITAND, BITXOR, BITOR = 8, 7, 6

_ARITH = {E.Add: ("+", ADD), E.Sub: ("-", ADD), E.Mul: ("*", MUL), E.Div: ("/", MUL)}
_BITWISE = {E.BitwiseAnd: ("&", BITAND), E.BitwiseXor: ("^", BITXOR),
            E.BitwiseOr: ("|", BITOR)}
_LOGIC = {E.EQ: ("==", EQUAL), E.NE: ("!=", EQUAL), E.LT: ("<", REL), E.LE: ("<=", REL),
          E.GT: (">", REL), E.GE: (">=", REL), E.And: ("&&", LAND), E.Or: ("||", LOR)}



def _paren(text: str, prec: int, need: int) -> str:
    return f"({text})" if prec < need else text


def int_literal(value: int, dtype: DType) -> tuple[str, int]:
    """C text and precedence of an integer or bool constant."""
    element = dtype.element
    if element.is_bool:
        return ("true" if value else "false"), PRIMARY
    if element.bits == 64:
        if element.kind == "uint":
            return f"UINT64_C({value})", PRIMARY
        if value == -(2**63):
            return "(-INT64_C(9223372036854775807) - 1)", PRIMARY
        return f"INT64_C({value})", PRIMARY
    if element.kind == "uint" and element.bits == 32:
        return f"{value}u", PRIMARY
    if value == -(2**31):
        return "(-2147483647 - 1)", PRIMARY
    return str(value), (UNARY if value < 0 else PRIMARY)


def float_literal(value: float, dtype: DType) -> tuple[str, int]:
    """C text and precedence of a float constant (float16 constants are exact floats)."""
    element = dtype.element
    if math.isnan(value):
        return ("NAN" if element.bits != 64 else "(double)NAN"), PRIMARY
    with np.errstate(over="ignore"):
        if element.bits == 16:
            value = float(np.float16(value))
        if element.bits <= 32:
            text = str(np.float32(value))
        else:
            text = repr(float(value))
    if "inf" in text:
        return ("-INFINITY" if text.startswith("-") else "INFINITY"), UNARY
    if not any(c in text for c in ".e"):
        text += ".0"
    if element.bits <= 32:
        text += "f"
    return text, (UNARY if text.startswith("-") else PRIMARY)


def typed(e: Expr) -> bool:
    """Whether `e` prints as C of its full type (so a constant next to it may be bare)."""
    match e:
        case E.IntImm():
            return False
        case E.Select(_, a, b):
            return typed(a) or typed(b)
        case E.BinaryOp(a, b):
            return typed(a) or typed(b)
        case E.Let(_, _, body):
            return typed(body)
        case E.Broadcast(value, _):
            return typed(value)
        case E.Ramp(base, stride, _):
            return typed(base) or typed(stride)
    return True


def always_true(e: Expr) -> bool:
    """A predicate that holds in every lane: True or a broadcast of True."""
    if isinstance(e, E.Broadcast):
        e = e.value
    return E.is_const_int(e, 1)


def strip_call(text: str, function: str) -> str:
    """`function(x)` -> `x` when the call spans all of `text`; else `text` unchanged."""
    if not (text.startswith(function + "(") and text.endswith(")")):
        return text
    depth = 0
    for position in range(len(function), len(text)):
        depth += {"(": 1, ")": -1}.get(text[position], 0)
        if depth == 0:
            return text[len(function) + 1:-1] if position == len(text) - 1 else text
    return text


def _zero(dtype: DType) -> str:
    if dtype.is_float:
        return "0.0" if dtype.bits == 64 else "0.0f"
    return "false" if dtype.is_bool else "0"


class ExprPrinter:
    """Prints expressions; records helpers it uses and locals that must be declared first."""

    def __init__(self, scopes: Scopes, buffer_types: dict[E.Var, DType]) -> None:
        self.scopes = scopes
        self.buffer_types = buffer_types
        self.helpers: set[str] = set()
        self.prelude: list[str] = []
        self._guarded = 0  # > 0 inside a Select branch, a right operand of && / ||, ...

    def expr(self, e: Expr, lane: str | None = None, bare: bool = False) -> str:
        """C text of `e`; vector expressions need the name of the lane variable.

        `bare`: the context gives an int64 constant its type (`i < 16` with int64 i), so a
        small one may print as a plain literal instead of INT64_C(16).
        """
        return self.sub(e, lane, 0, bare)

    def sub(self, e: Expr, lane: str | None, need: int, bare: bool = False) -> str:
        if bare and isinstance(e, E.IntImm) and e.dtype.bits == 64 and -2**31 < e.value < 2**31:
            return _paren(str(e.value), UNARY if e.value < 0 else PRIMARY, need)
        text, prec = self.print(e, lane)
        return _paren(text, prec, need)

    def print(self, e: Expr, lane: str | None) -> tuple[str, int]:
        if e.dtype.lanes > 1 and lane is None:
            raise CodegenError(f"vector expression {e} of type {e.dtype} used where the C "
                               "back end expects a scalar")
        match e:
            case E.IntImm(value, dtype):
                return int_literal(value, dtype)
            case E.FloatImm(value, dtype):
                return float_literal(value, dtype)
            case E.Var():
                return self._var(e, lane), PRIMARY
            case E.Cast():
                return self._cast(e, lane)
            case E.FloorDiv() | E.FloorMod():
                return self._floor(e, lane)
            case E.Min(a, b) | E.Max(a, b):
                kind = "min" if isinstance(e, E.Min) else "max"
                helper = self.helper(f"ember_{kind}_{type_suffix(e.dtype)}")
                return f"{helper}({self.expr(a, lane, True)}, {self.expr(b, lane, True)})", PRIMARY
            case E.Add() | E.Sub() | E.Mul() | E.Div():
                return self._arith(e, lane)
            case E.CompareOp() | E.And() | E.Or():
                return self._logic(e, lane)
            case E.BitwiseAnd() | E.BitwiseOr() | E.BitwiseXor():
                return self._bitwise(e, lane)
            case E.Not(a):
                if a.dtype.is_bool:
                    return f"!{self.sub(a, lane, UNARY)}", UNARY
                return self._wrap_narrow(e.dtype, f"~{self.sub(a, lane, UNARY)}", UNARY)
            case E.Select(E.IntImm(value), true_value, false_value):
                return self.print(true_value if value else false_value, lane)
            case E.Select(condition, true_value, false_value):
                cond = self.sub(condition, lane, EQUAL)
                self._guarded += 1
                yes = self.sub(true_value, lane, COND + 1)
                no = self.sub(false_value, lane, COND + 1)
                self._guarded -= 1
                return f"{cond} ? {yes} : {no}", COND
            case E.Ramp(base, stride, _):
                return self._ramp(base, stride, lane)
            case E.Broadcast(value, _):
                return self.print(value, None)
            case E.Let(var, value, body):
                if self._guarded and not _speculable(value):
                    # hoisting would evaluate `value` even where the guard is false
                    return self.print(substitute(body, {var: value}), lane)
                self._hoist_let(var, value, lane)
                return self.print(body, lane)
            case E.Load():
                return self._load(e, lane)
            case E.Call():
                return self._call(e, lane)
        raise CodegenError(f"the C back end cannot print {type(e).__name__} expression {e}")

    # ------------------------------------------------------------------------------------
    def helper(self, name: str) -> str:
        self.helpers.add(name)
        return name

    def _var(self, var: E.Var, lane: str | None) -> str:
        name, kind = self.scopes.lookup(var)
        if kind == "buffer":
            raise CodegenError(f"buffer data '{var.name}' used as a value; the C back end "
                               "only supports buffer accesses through Load and Store")
        if var.dtype.lanes > 1 and kind == "array":
            return f"{name}[{lane}]"
        return name

    def _wrap_narrow(self, dtype: DType, text: str, prec: int) -> tuple[str, int]:
        """Round float16 results and wrap 8/16-bit integer results to their type."""
        element = dtype.element
        if element.is_float and element.bits == 16:
            return f"{self.helper('ember_f16_round')}({text})", PRIMARY
        if element.is_int and element.bits < 32:
            return f"({compute_ctype(element)})({text})", UNARY
        return text, prec

    def _arith(self, e: E.BinaryOp, lane: str | None) -> tuple[str, int]:
        op, prec = _ARITH[type(e)]
        a = self.sub(e.a, lane, prec, typed(e.b))
        b = self.sub(e.b, lane, prec + 1, typed(e.a))
        element = e.dtype.element
        if element.is_bool:
            raise CodegenError(f"arithmetic '{op}' on bool values in {e}; cast to an integer "
                               "type first")
        if op == "/" and element.is_int:  # a helper that cannot trap on a zero divisor
            helper = self.helper(f"ember_div_{type_suffix(element)}")
            return f"{helper}({self.expr(e.a, lane, True)}, {self.expr(e.b, lane, True)})", PRIMARY
        if element.kind == "uint" and element.bits < 32 and op == "*":
            # uint16 * uint16 would overflow the promoted (signed) int
            a = f"(uint32_t){self.sub(e.a, lane, UNARY)}"
            b = f"(uint32_t){self.sub(e.b, lane, UNARY)}"
        return self._wrap_narrow(e.dtype, f"{a} {op} {b}", prec)

    def _logic(self, e: E.BinaryOp, lane: str | None) -> tuple[str, int]:
        op, prec = _LOGIC[type(e)]
        texts = []
        for child, need in ((e.a, prec), (e.b, prec + 1)):
            nested = isinstance(child, (E.CompareOp, E.And, E.Or))
            if nested and not (type(child) is type(e) and isinstance(e, (E.And, E.Or))):
                need = PRIMARY  # keep -Wparentheses quiet and the reading obvious
            other = e.b if child is e.a else e.a
            guarded = int(child is e.b and isinstance(e, (E.And, E.Or)))
            self._guarded += guarded
            texts.append(self.sub(child, lane, need, typed(other)))
            self._guarded -= guarded
        return f"{texts[0]} {op} {texts[1]}", prec

    def _bitwise(self, e: E.BinaryOp, lane: str | None) -> tuple[str, int]:
        op, prec = _BITWISE[type(e)]
        if not e.dtype.element.is_int:
            raise CodegenError(f"bitwise '{op}' on {e.dtype} values in {e}; it takes integers")
        # operands in parentheses unless primary: C's bitwise precedences surprise readers
        a = self.sub(e.a, lane, UNARY, typed(e.b))
        b = self.sub(e.b, lane, UNARY, typed(e.a))
        return self._wrap_narrow(e.dtype, f"{a} {op} {b}", prec)

    def _floor(self, e: E.BinaryOp, lane: str | None) -> tuple[str, int]:
        element = e.dtype.element
        kind = "floordiv" if isinstance(e, E.FloorDiv) else "floormod"
        if not element.is_int:
            raise CodegenError(f"{type(e).__name__} on {e.dtype} values in {e}; the C back end "
                               "supports floor division of integers only")
        helper = self.helper(f"ember_{kind}_{type_suffix(element)}")
        return f"{helper}({self.expr(e.a, lane, True)}, {self.expr(e.b, lane, True)})", PRIMARY

    def _cast(self, e: E.Cast, lane: str | None) -> tuple[str, int]:
        source, target = e.value.dtype.element, e.dtype.element
        if source == target:
            return self.print(e.value, lane)
        if target.is_bool:
            return f"{self.sub(e.value, lane, EQUAL + 1)} != {_zero(source)}", EQUAL
        if target.is_float and target.bits == 16:
            inner = self.expr(e.value, lane)
            if not (source.is_float and source.bits <= 32):
                inner = f"(float){self.sub(e.value, lane, UNARY)}"
            return f"{self.helper('ember_f16_round')}({inner})", PRIMARY
        if source.is_float and source.bits == 16 and target.bits == 32:
            return self.print(e.value, lane)  # float16 values already live in floats
        if target.is_handle or source.is_handle:
            raise CodegenError(f"cannot cast between {source} and {target} in {e}")
        return f"({compute_ctype(target)}){self.sub(e.value, lane, UNARY)}", UNARY

    def _ramp(self, base: Expr, stride: Expr, lane: str | None) -> tuple[str, int]:
        assert lane is not None
        # `lane` is an int; a typed base or stride (or INT64_C) makes the sum 64-bit if needed
        offset, offset_prec = lane, PRIMARY
        if not E.is_const_int(stride, 1):
            offset, offset_prec = f"{lane} * {self.sub(stride, None, MUL + 1)}", MUL
        if E.is_const_int(base, 0):
            return offset, offset_prec
        return f"{self.sub(base, None, ADD, typed(stride))} + {offset}", ADD

    def _hoist_let(self, var: E.Var, value: Expr, lane: str | None) -> None:
        if value.dtype.is_handle:
            raise CodegenError(f"let '{var.name}' binds a handle; the C back end binds only "
                               "numbers")
        text = self.expr(value, lane)
        name = self.scopes.fresh(var.name)
        self.prelude.append(f"const {compute_ctype(value.dtype)} {name} = {text};")
        self.scopes.bind(var, name, "scalar")

    def _load(self, e: E.Load, lane: str | None) -> tuple[str, int]:
        self._guarded += int(e.predicate is not None)
        element = f"{self.pointer(e.buffer, 'load')}[{self.index(e.indices, e.buffer, lane)}]"
        self._guarded -= int(e.predicate is not None)
        text, prec = element, PRIMARY
        if e.buffer.dtype.is_bool:
            text, prec = f"{element} != 0", EQUAL
        elif e.buffer.dtype.is_float and e.buffer.dtype.bits == 16:
            text = f"{self.helper('ember_f16_to_f32')}({element})"
        if e.predicate is not None and not always_true(e.predicate):
            cond = self.sub(e.predicate, lane, EQUAL)
            text = f"{cond} ? {_paren(text, prec, COND + 1)} : {_zero(e.buffer.dtype)}"
            prec = COND
        return text, prec

    def function_name(self, intrinsic: str, bits: int) -> str:
        """The math library function computing `intrinsic` on `bits`-bit floats."""
        return c_function(intrinsic, bits)

    def pointer(self, buffer: Buffer, what: str) -> str:
        """C name of the buffer's data, cast when it is accessed as another element type."""
        if buffer.data not in self.buffer_types:
            raise CodegenError(f"{what} of buffer '{buffer.name}', which is neither a parameter "
                               "nor allocated (Allocate) around the access")
        name, kind = self.scopes.lookup(buffer.data)
        if kind != "buffer":
            raise CodegenError(f"{what} of '{buffer.name}': its data variable is not a buffer")
        declared = self.buffer_types[buffer.data]
        if storage_ctype(declared) != storage_ctype(buffer.dtype):
            return f"(({storage_ctype(buffer.dtype)}*){name})"
        return name

    def index(self, indices: tuple[Expr, ...], buffer: Buffer, lane: str | None) -> str:
        if len(indices) != 1:
            name = buffer.name
            raise CodegenError(f"access to '{name}' has {len(indices)} indices; the C back "
                               "end needs flat buffers (run flatten_buffers first)")
        if not indices[0].dtype.is_int:
            raise CodegenError(f"index {indices[0]} of '{buffer.name}' has "
                               f"type {indices[0].dtype}; expected an integer")
        return self.expr(indices[0], lane, bare=True)

    def _reinterpret(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        """The bits of a value as another type of one width: a cast between integers, a
        memcpy helper where a float is involved."""
        (arg,) = e.args
        source, target = arg.dtype.element.storage, e.dtype.element.storage
        if source.bits != target.bits or source.is_bool or target.is_bool:
            raise CodegenError(f"reinterpret from {arg.dtype} to {e.dtype}: the widths differ")
        if source == target:
            return self.print(arg, lane)
        if source.is_float or target.is_float:
            if source.bits == 16:
                raise CodegenError("the C back end holds float16 in floats: reinterpret of "
                                   f"{arg.dtype} as {e.dtype} is not supported")
            name = f"ember_bits_{type_suffix(source)}_{type_suffix(target)}"
            return f"{self.helper(name)}({self.expr(arg, lane)})", PRIMARY
        return f"({compute_ctype(target)}){self.sub(arg, lane, UNARY)}", UNARY

    def _call(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        if e.name == "reinterpret" and len(e.args) == 1:
            return self._reinterpret(e, lane)
        info = lookup(e.name, len(e.args))
        if info is None:
            raise CodegenError(f"call of unknown function '{e.name}' in {e}; the C back end "
                               f"knows the intrinsics {', '.join(sorted(INTRINSICS))}")
        element = e.dtype.element
        if not element.is_float or any(a.dtype.element != element for a in e.args):
            types = ", ".join(str(a.dtype) for a in e.args)
            raise CodegenError(f"intrinsic '{e.name}' needs float arguments of its result type "
                               f"{e.dtype}, got ({types})")
        double = element.bits == 64
        # rsqrt and sigmoid have no libm function: 1 / sqrt(x) and 1 / (1 + exp(-x))
        base = {"rsqrt": "sqrt", "sigmoid": "exp"}.get(e.name, e.name)
        function = self.function_name(base, element.bits)
        one = "1.0" if double else "1.0f"
        if e.name == "rsqrt":
            text, prec = f"{one} / {function}({self.expr(e.args[0], lane)})", MUL
        elif e.name == "sigmoid":
            arg = self.sub(e.args[0], lane, PRIMARY)  # never `--x`
            text, prec = f"{one} / ({one} + {function}(-{arg}))", MUL
        else:
            args = ", ".join(self.expr(a, lane) for a in e.args)
            text, prec = f"{function}({args})", PRIMARY
        if element.bits == 16:
            return f"{self.helper('ember_f16_round')}({text})", PRIMARY
        return text, prec


def _speculable(value: Expr) -> bool:
    """May `value` be evaluated where its guard is false? Yes when every load in it carries
    its own predicate (a te.if_then_else branch's loads do, and the inlined values bound there
    are nested Lets: substituting those would copy each one at every use)."""
    loads: list[E.Load] = []
    post_order_visit(value, lambda n: loads.append(n) if isinstance(n, E.Load) else None)
    return all(ld.predicate is not None for ld in loads)
