"""C99 text of the small static inline helpers the C back end emits on demand.

Each helper is keyed by its C name; `helper_source` prints the requested ones in a fixed order
so that generated files are deterministic. Everything here needs only libc.
"""

from __future__ import annotations

# C compute type and name suffix of every integer type a helper can be stamped out for
INT_TYPES = {
    "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
}
MINMAX_TYPES = {**INT_TYPES, "f32": "float", "f64": "double", "b": "bool"}

_F16_TO_F32 = """\
/* IEEE half (stored as uint16_t) to float; exact. */
static inline float ember_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t mantissa = (uint32_t)h & 0x3ffu;
    uint32_t bits;
    float result;
    if (exponent == 0x1fu) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0u) {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else {
        /* zero or subnormal: mantissa * 2^-24 is exact in float */
        result = (float)mantissa * 5.9604644775390625e-8f;
        return sign ? -result : result;
    }
    memcpy(&result, &bits, sizeof(result));
    return result;
}"""

_F32_TO_F16 = """\
/* float to IEEE half, rounding to nearest even; overflow gives infinity. */
static inline uint16_t ember_f32_to_f16(float value) {
    uint32_t bits;
    uint32_t sign;
    uint32_t magnitude;
    memcpy(&bits, &value, sizeof(bits));
    sign = (bits >> 16) & 0x8000u;
    magnitude = bits & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) {
        return (uint16_t)(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
    }
    if (magnitude >= 0x477ff000u) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (magnitude < 0x38800000u) {
        /* result is subnormal: round |value| * 2^24 to an integer, ties to even */
        float scaled = (value < 0.0f ? -value : value) * 16777216.0f;
        uint32_t whole = (uint32_t)scaled;
        float fraction = scaled - (float)whole;
        if (fraction > 0.5f || (fraction == 0.5f && (whole & 1u))) {
            whole += 1u;
        }
        return (uint16_t)(sign | whole);
    } else {
        uint32_t half = (((magnitude >> 23) - 112u) << 10) | ((magnitude >> 13) & 0x3ffu);
        uint32_t rest = magnitude & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) {
            half += 1u; /* a carry into the exponent is still correct */
        }
        return (uint16_t)(sign | half);
    }
}"""

_F16_ROUND = """\
/* Round a float to the nearest half value (float16 arithmetic is done in float). */
static inline float ember_f16_round(float value) {
    return ember_f16_to_f32(ember_f32_to_f16(value));
}"""

_ALLOC = """\
/* 64-byte aligned heap memory from plain malloc; the raw pointer sits just before it. */
static inline void* ember_alloc(size_t nbytes) {
    unsigned char* raw = (unsigned char*)malloc(nbytes + 64u + sizeof(void*));
    uintptr_t aligned;
    if (raw == NULL) {
        return NULL;
    }
    aligned = ((uintptr_t)(raw + sizeof(void*)) + 63u) & ~(uintptr_t)63u;
    memcpy((unsigned char*)aligned - sizeof(void*), &raw, sizeof(void*));
    return (void*)aligned;
}

static inline void ember_free(void* pointer) {
    void* raw;
    if (pointer == NULL) {
        return;
    }
    memcpy(&raw, (unsigned char*)pointer - sizeof(void*), sizeof(void*));
    free(raw);
}"""


# Integer division by zero and INT_MIN / -1 trap (SIGFPE) on common machines; like numpy,
# ember gives 0 for x / 0 and x % 0, and lets INT_MIN / -1 wrap.
def _divide(kind: str, suffix: str, ctype: str) -> str:
    head = f"static inline {ctype} ember_{kind}_{suffix}({ctype} a, {ctype} b) {{\n"
    if suffix.startswith("u"):
        op = "%" if kind == "floormod" else "/"
        return head + f"    return b == 0 ? 0 : ({ctype})(a {op} b);\n}}"
    unsigned = "u" + ctype
    if kind == "floormod":
        return (head + "    if (b == 0 || b == -1) return 0;\n"
                f"    {ctype} r = ({ctype})(a % b);\n"
                f"    return (r != 0 && ((r < 0) != (b < 0))) ? ({ctype})(r + b) : r;\n}}")
    body = (head + "    if (b == 0) return 0;\n"
            f"    if (b == -1) return ({ctype})(0 - ({unsigned})a);\n"
            f"    {ctype} q = ({ctype})(a / b);\n")
    if kind == "div":
        return body + "    return q;\n}"
    return body + f"    return (q * b != a && ((a < 0) != (b < 0))) ? ({ctype})(q - 1) : q;\n}}"


def _minmax(kind: str, suffix: str, ctype: str) -> str:
    op = "<" if kind == "min" else ">"
    return (f"static inline {ctype} ember_{kind}_{suffix}({ctype} a, {ctype} b) {{\n"
            f"    return a {op} b ? a : b;\n"
            "}")


def _bits(source: str, source_type: str, target: str, target_type: str) -> str:
    """The bits of a `source_type` as a `target_type` of one width (memcpy is the defined
    way in C; compilers make it a register move)."""
    return (f"static inline {target_type} ember_bits_{source}_{target}({source_type} x) {{\n"
            f"    {target_type} r;\n"
            "    memcpy(&r, &x, sizeof(r));\n"
            "    return r;\n"
            "}")


def _all_helpers() -> dict[str, str]:
    table = {
        "ember_f16_to_f32": _F16_TO_F32,
        "ember_f32_to_f16": _F32_TO_F16,
        "ember_f16_round": _F16_ROUND,
        "ember_alloc": _ALLOC,
    }
    for float_suffix, float_type, ints in (("f32", "float", ("u32", "i32")),
                                           ("f64", "double", ("u64", "i64"))):
        for int_suffix in ints:
            table[f"ember_bits_{float_suffix}_{int_suffix}"] = _bits(
                float_suffix, float_type, int_suffix, INT_TYPES[int_suffix])
            table[f"ember_bits_{int_suffix}_{float_suffix}"] = _bits(
                int_suffix, INT_TYPES[int_suffix], float_suffix, float_type)
    for suffix, ctype in INT_TYPES.items():
        for kind in ("div", "floordiv", "floormod"):
            table[f"ember_{kind}_{suffix}"] = _divide(kind, suffix, ctype)
    for suffix, ctype in MINMAX_TYPES.items():
        table[f"ember_min_{suffix}"] = _minmax("min", suffix, ctype)
        table[f"ember_max_{suffix}"] = _minmax("max", suffix, ctype)
    return table


HELPERS: dict[str, str] = _all_helpers()
# helpers that call other helpers
_NEEDS = {"ember_f16_round": ("ember_f16_to_f32", "ember_f32_to_f16")}


def helper_source(names: set[str]) -> str:
    """The C text of the helpers named in `names` (plus what they need), in a fixed order."""
    wanted = set(names)
    for name in names:
        wanted.update(_NEEDS.get(name, ()))
    unknown = wanted - HELPERS.keys()
    assert not unknown, unknown
    return "\n\n".join(text for name, text in HELPERS.items() if name in wanted)
