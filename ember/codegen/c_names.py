"""C types of ember dtypes and scoped, collision-free C identifiers for the C back end."""

from __future__ import annotations

import re

from ember.dtype import DType
from ember.errors import CodegenError
from ember.tir.expr import Var

_C_KEYWORDS = """auto break case char const continue default do double else enum extern float for
goto if inline int long register restrict return short signed sizeof static struct switch
typedef union unsigned void volatile while _Bool _Complex _Imaginary bool true false NULL""".split()
# names the generated code calls or includes; a local with such a name would shadow them
_LIBC_NAMES = """malloc free memcpy memset abs labs div exit main size_t uintptr_t errno
exp expf exp2 exp2f log logf log2 log2f sqrt sqrtf tanh tanhf erf erff pow powf floor floorf
ceil ceilf nearbyint nearbyintf trunc truncf fabs fabsf sin sinf cos cosf fma fmaf
INFINITY NAN""".split()
RESERVED = frozenset(_C_KEYWORDS + _LIBC_NAMES)

_COMPUTE_TYPES = {
    "float16": "float", "float32": "float", "float64": "double",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "bool": "bool",
}
_STORAGE_TYPES = {**_COMPUTE_TYPES, "float16": "uint16_t", "bool": "uint8_t"}


def compute_ctype(dtype: DType) -> str:
    """The C type holding one lane of `dtype` in a register (float16 is computed as float)."""
    try:
        return _COMPUTE_TYPES[str(dtype.element.storage)]
    except KeyError:
        raise CodegenError(f"the C back end has no type for {dtype}") from None


def storage_ctype(dtype: DType) -> str:
    """The C type of one element of `dtype` in memory (bool is a byte, float16 its bits)."""
    try:
        return _STORAGE_TYPES[str(dtype.element.storage)]
    except KeyError:
        raise CodegenError(f"the C back end cannot store elements of type {dtype}") from None


def type_suffix(dtype: DType) -> str:
    """Suffix of per-type helpers: f32 (also for float16), f64, i8 ... u64, b."""
    element = dtype.element.storage
    if element.is_bool:
        return "b"
    if element.is_float:
        return "f64" if element.bits == 64 else "f32"
    if element.is_int:
        return f"{element.kind[0]}{element.bits}"
    raise CodegenError(f"the C back end has no helpers for type {dtype}")


def c_identifier(name: str) -> str:
    """`name` made a valid C identifier outside the reserved `ember_` namespace."""
    text = re.sub(r"[^0-9A-Za-z_]", "_", name) or "v"
    if text[0].isdigit():
        text = "v" + text
    if text.startswith("ember_"):
        text = "v_" + text
    return text


class Scopes:
    """Identifiers live in nested C blocks; a binding hides the previous one until its block ends.

    Every binding gets a name unused in any enclosing block, so C never sees shadowing or a
    redefinition, and sibling blocks reuse the same readable names.
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._vars: dict[Var, tuple[str, str]] = {}
        self._frames: list[tuple[list[str], list[tuple[Var, tuple[str, str] | None]]]] = []
        self.push()

    def push(self) -> None:
        self._frames.append(([], []))

    def pop(self) -> None:
        names, bindings = self._frames.pop()
        self._taken.difference_update(names)
        for var, previous in reversed(bindings):
            if previous is None:
                del self._vars[var]
            else:
                self._vars[var] = previous

    def fresh(self, hint: str) -> str:
        """A new identifier like `hint` (then hint_1, hint_2, ...) declared in this block."""
        base = c_identifier(hint)
        name, counter = base, 0
        while name in self._taken or name in RESERVED:
            counter += 1
            name = f"{base}_{counter}"
        self._taken.add(name)
        self._frames[-1][0].append(name)
        return name

    def bind(self, var: Var, name: str, kind: str = "scalar") -> None:
        """Make uses of `var` print as `name`; kind "array" means a vector held per lane."""
        self._frames[-1][1].append((var, self._vars.get(var)))
        self._vars[var] = (name, kind)

    def lookup(self, var: Var) -> tuple[str, str]:
        try:
            return self._vars[var]
        except KeyError:
            raise CodegenError(f"variable '{var.name}' ({var.dtype}) is used but not defined "
                               "(not a parameter, loop variable or let binding)") from None
