"""A bounds-checked reader of ELF files (objects and shared libraries): sections, symbols,
relocations. Standard library only: the library loader uses it without the compiler.

    elf = read_elf(data, "kernel cache entry 3b1c...")      # CorruptFileError if malformed
    elf.defines("fused_relu_0")                             # a function defined here?

Every offset and size is checked against the file before anything is read through it, so a
damaged file is refused here instead of crashing the loader that would trust it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ember.errors import CorruptFileError

ET_REL, ET_DYN = 1, 3
SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_REL, SHT_DYNSYM = 2, 4, 8, 9, 11
STT_OBJECT, STT_FUNC = 1, 2
SHN_UNDEF, SHN_LORESERVE = 0, 0xFF00
STB_WEAK = 2
_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183, "riscv64": 243,
             "ppc64le": 21, "s390x": 22, "i686": 3, "i386": 3, "armv7l": 40}


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: int       # STT_*
    binding: int    # STB_*
    section: int    # index of the defining section, SHN_UNDEF when undefined
    value: int
    size: int


@dataclass(frozen=True)
class Elf:
    """The parts of an ELF file ember checks; `data` is the whole file."""

    data: bytes
    type: int
    machine: int
    sections: tuple[Section, ...]
    symbols: dict[str, Symbol]

    def defines(self, name: str, kind: int = STT_FUNC) -> bool:
        symbol = self.symbols.get(name)
        return (symbol is not None and symbol.kind == kind
                and SHN_UNDEF < symbol.section < len(self.sections))

    def file_range(self, name: str) -> tuple[int, int]:
        """(file offset, size) of the bytes of a defined data symbol (shared library)."""
        symbol = self.symbols[name]
        for s in self.sections:
            if s.type != SHT_NOBITS and s.addr <= symbol.value < s.addr + s.size:
                start = s.offset + symbol.value - s.addr
                if symbol.value + symbol.size <= s.addr + s.size:
                    return start, symbol.size
        raise CorruptFileError(f"symbol '{name}' lies outside every section of the file")


def host_machine() -> int | None:
    """The e_machine of this process's architecture (None if not known here)."""
    import platform

    return _MACHINES.get(platform.machine().lower())


@dataclass(frozen=True)
class _Layout:
    """Field layouts of one ELF class (32- or 64-bit, little-endian)."""

    shoff_at: int
    shoff: str
    counts_at: int
    section: str      # sh_name type flags addr offset size link info addralign entsize
    symbol: str
    symbol_fields: tuple[int, int, int, int, int]   # name info shndx value size positions
    rela: int
    rel: int
    sym_shift: int


_LAYOUTS = {
    2: _Layout(40, "<Q", 58, "<IIQQQQIIQQ", "<IBBHQQ", (0, 1, 3, 4, 5), 24, 16, 32),
    1: _Layout(32, "<I", 46, "<IIIIIIIIII", "<IIIBBH", (0, 3, 5, 1, 2), 12, 8, 8),
}


def read_elf(data: bytes, what: str) -> Elf:
    """Parse and bounds-check a little-endian ELF file (32- or 64-bit); CorruptFileError
    names `what`."""
    def fail(reason: str) -> CorruptFileError:
        return CorruptFileError(f"{what}: {reason}")

    if len(data) < 52 or data[:4] != b"\x7fELF":
        raise fail("not an ELF file")
    if data[4] not in _LAYOUTS or data[5] != 1:
        raise fail("not a little-endian 32- or 64-bit ELF file")
    lay = _LAYOUTS[data[4]]
    if len(data) < lay.counts_at + 6:  # a 64-bit header is 64 bytes, more than the 52 above
        raise fail("its ELF header is cut short")
    etype, machine = struct.unpack_from("<HH", data, 16)
    shoff, = struct.unpack_from(lay.shoff, data, lay.shoff_at)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, lay.counts_at)
    size = struct.calcsize(lay.section)
    if (shentsize != size or shnum == 0 or shoff + size * shnum > len(data)
            or shstrndx >= shnum):
        raise fail("its section header table is damaged or cut short")
    raw = [struct.unpack_from(lay.section, data, shoff + size * k) for k in range(shnum)]
    for k, (_, stype, _, _, offset, size, link, _, _, _) in enumerate(raw):
        if stype != SHT_NOBITS and offset + size > len(data):
            raise fail(f"section {k} ends at byte {offset + size}, past the end of the file "
                       f"({len(data)} bytes)")
        if link >= shnum:
            raise fail(f"section {k} links to section {link} of {shnum}")
    names = raw[shstrndx]
    sections = tuple(
        Section(_string(data, names[4], names[5], r[0], fail), r[1], r[3], r[4], r[5], r[6],
                r[7], r[9]) for r in raw)
    symbols: dict[str, Symbol] = {}
    entry = struct.calcsize(lay.symbol)
    at_name, at_info, at_shndx, at_value, at_size = lay.symbol_fields
    for s in sections:
        if s.type in (SHT_SYMTAB, SHT_DYNSYM):
            if s.entsize != entry or s.size % entry:
                raise fail(f"symbol table '{s.name}' has entries of {s.entsize} bytes")
            strings = sections[s.link]
            for k in range(1, s.size // entry):
                fields = struct.unpack_from(lay.symbol, data, s.offset + entry * k)
                name_at, info, shndx = fields[at_name], fields[at_info], fields[at_shndx]
                value, size = fields[at_value], fields[at_size]
                if shndx >= shnum and shndx < SHN_LORESERVE:
                    raise fail(f"symbol {k} of '{s.name}' names section {shndx} of {shnum}")
                name = _string(data, strings.offset, strings.size, name_at, fail)
                if name and (name not in symbols or symbols[name].section == SHN_UNDEF):
                    symbols[name] = Symbol(name, info & 0xF, info >> 4, shndx, value, size)
    elf = Elf(data, etype, machine, sections, symbols)
    if etype == ET_REL:
        _check_relocations(elf, lay, fail)
    return elf


def _string(data: bytes, table_offset: int, table_size: int, at: int, fail) -> str:  # type: ignore[no-untyped-def]
    if at >= table_size:
        raise fail(f"a name points to byte {at} of a {table_size}-byte string table")
    end = data.find(b"\0", table_offset + at, table_offset + table_size)
    if end < 0:
        raise fail("a name in a string table is not terminated")
    try:
        return data[table_offset + at:end].decode()
    except UnicodeDecodeError:
        raise fail("a name in a string table is not text") from None


def _check_relocations(elf: Elf, lay: _Layout, fail) -> None:  # type: ignore[no-untyped-def]
    """Every relocation of an object names a symbol of its table and patches bytes inside
    the section it applies to (a damaged one would make the JIT linker write anywhere)."""
    for s in elf.sections:
        if s.type not in (SHT_RELA, SHT_REL):
            continue
        entry = lay.rela if s.type == SHT_RELA else lay.rel
        word = "<QQ" if lay.rela == 24 else "<II"
        target = elf.sections[s.info] if s.info < len(elf.sections) else None
        table = elf.sections[s.link]
        if target is None or table.type not in (SHT_SYMTAB, SHT_DYNSYM) or s.size % entry:
            raise fail(f"relocation section '{s.name}' is damaged")
        count = table.size // struct.calcsize(lay.symbol)
        for k in range(s.size // entry):
            offset, info = struct.unpack_from(word, elf.data, s.offset + entry * k)
            if offset + 4 > target.size or (info >> lay.sym_shift) >= count:
                raise fail(f"relocation {k} of '{s.name}' points outside '{target.name}' or "
                           "its symbol table")
