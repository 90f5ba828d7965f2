"""A structural check of Metal Shading Language text (no Metal compiler runs on Linux): the
problems it finds are the ones a Metal compiler would reject the file for."""

from __future__ import annotations

import re

# functions of metal_stdlib the printer may call, and C/MSL words followed by "("
METAL_FUNCTIONS = {
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "pow", "floor", "ceil", "rint",
    "trunc", "fabs", "sin", "cos", "fma", "fmin", "fmax", "min", "max", "abs", "copysign",
    "threadgroup_barrier", "as_type", "asin", "acos", "atan", "asinh", "acosh", "atanh",
    "isnan", "isinf", "select", "clamp", "half", "float",
    "int", "uint", "ushort", "short", "char", "uchar", "long", "ulong", "bool",
}
KEYWORDS = {"if", "for", "while", "return", "sizeof", "switch"}
FOREIGN = ["__global", "__local", "__kernel", "__syncthreads", "get_local_id", "get_group_id",
           "threadIdx", "blockIdx", "__shared__", "double", "vload", "vstore", "__device__",
           "_unavailable", "#pragma OPENCL"]
_PARAM = re.compile(r"^(device [\w ]+\*|constant [\w ]+&) (\w+) \[\[buffer\((\d+)\)\]\]$")
_BUILTIN_PARAMS = ("uint3 ember_block [[threadgroup_position_in_grid]]",
                   "uint3 ember_thread [[thread_position_in_threadgroup]]")


def _strip(source: str) -> str:
    """The source without comments and preprocessor lines."""
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    source = re.sub(r"//[^\n]*", "", source)
    return "\n".join(line for line in source.splitlines() if not line.startswith("#"))


def metal_problems(source: str) -> list[str]:
    """What makes `source` invalid MSL, as far as a structural reading can tell ([] if none)."""
    problems = []
    if "#include <metal_stdlib>" not in source or "using namespace metal;" not in source:
        problems.append("no metal_stdlib prelude")
    code = _strip(source)
    for open_, close in ("{}", "()", "[]"):
        depth = 0
        for ch in code:
            depth += (ch == open_) - (ch == close)
            if depth < 0:
                break
        if depth != 0:
            problems.append(f"unbalanced {open_}{close}")
    for word in FOREIGN:
        if word in code:
            problems.append(f"foreign token {word!r}")
    defined = set(re.findall(r"static inline \w+ (\w+)\(", code))
    kernels = re.findall(r"kernel void (\w+)\((.*?)\) \{", code, flags=re.S)
    if not kernels:
        problems.append("no kernel")
    for name, params in kernels:
        parts = [p.strip() for p in params.split(",")]
        if tuple(parts[-2:]) != _BUILTIN_PARAMS:
            problems.append(f"kernel {name}: no threadgroup / thread position arguments")
        indices = []
        for p in parts[:-2]:
            m = _PARAM.match(p)
            if m is None:
                problems.append(f"kernel {name}: bad parameter {p!r}")
            else:
                indices.append(int(m.group(3)))
        if indices != list(range(len(indices))):
            problems.append(f"kernel {name}: buffer indices {indices} are not 0, 1, ...")
    declared_types = set(re.findall(r"typedef \w+ (\w+);", code))
    declared_types |= set(re.findall(r"#define (\w+)\(", source))
    for called in set(re.findall(r"(?<![\w.\[])([A-Za-z_]\w*)\s*\(", code)):
        if called in METAL_FUNCTIONS | KEYWORDS | defined | declared_types:
            continue
        if called in {n for n, _ in kernels}:
            continue
        problems.append(f"call of undefined function {called!r}")
    return problems
