"""MXNet's NDArray list file (`.params`, `mx.nd.save`) read with the standard library and numpy.

The layout (all little-endian), as MXNet's NDArray::Save / NDArray::Load write and read it:

    uint64 0x112 (list magic), uint64 0 (reserved)
    uint64 count, then `count` arrays:
        uint32 magic: 0xF993FAC9 (V2) or 0xF993FACA (V3, numpy shapes): int32 storage type
                      (0 = dense), then the shape; 0xF993FAC8 (V1): the shape at once;
                      anything else (legacy): that word is ndim and the dims are uint32
        shape: uint32 ndim, int64 dims[ndim]; an empty array (ndim 0 before V3) ends here
        int32 device type, int32 device id
        int32 type flag (mshadow: 0 float32, 1 float64, 2 float16, 3 uint8, 4 int32, ...)
        the elements, C order
    uint64 count, then `count` names: uint64 length, bytes (UTF-8)

Names from `HybridBlock.export` carry "arg:" (parameters) or "aux:" (BatchNorm statistics).
"""

from __future__ import annotations

import os
import struct

import numpy as np

from ember.errors import ModelError, UnsupportedOpError

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA

# mshadow type flags
TYPE_FLAGS: dict[int, np.dtype] = {
    0: np.dtype("float32"), 1: np.dtype("float64"), 2: np.dtype("float16"),
    3: np.dtype("uint8"), 4: np.dtype("int32"), 5: np.dtype("int8"), 6: np.dtype("int64"),
    7: np.dtype("bool"), 8: np.dtype("int16"), 9: np.dtype("uint16"),
    10: np.dtype("uint32"), 11: np.dtype("uint64"),
}

__all__ = ["load_params", "save_params", "TYPE_FLAGS"]


class _Reader:
    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.offset, self.where = data, 0, where

    def take(self, size: int, what: str) -> bytes:
        end = self.offset + size
        if size < 0 or end > len(self.data):
            raise ModelError(f"{self.where}: the file ends inside {what} (at byte "
                             f"{self.offset}, {len(self.data)} bytes in all): truncated?")
        chunk = self.data[self.offset:end]
        self.offset = end
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def load_params(source: str | os.PathLike[str] | bytes) -> dict[str, np.ndarray]:
    """The named arrays of an MXNet .params file (path or bytes), names as stored."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, where = bytes(source), "MXNet params"
    else:
        where = os.fspath(source)
        if not os.path.isfile(where):
            raise ModelError(f"MXNet params file '{where}' does not exist")
        with open(where, "rb") as f:
            data = f.read()
    reader = _Reader(data, where)
    magic, _reserved = reader.unpack("QQ", "the header")
    if magic != LIST_MAGIC:
        raise ModelError(f"{where}: not an MXNet NDArray list (magic {magic:#x}, expected "
                         f"{LIST_MAGIC:#x})")
    (count,) = reader.unpack("Q", "the array count")
    arrays = [_array(reader, index) for index in range(count)]
    (names,) = reader.unpack("Q", "the name count")
    if names not in (0, count):
        raise ModelError(f"{where}: {count} arrays but {names} names")
    keys = []
    for index in range(names):
        (length,) = reader.unpack("Q", f"name {index}")
        keys.append(reader.take(length, f"name {index}").decode("utf-8"))
    if not keys:
        keys = [str(i) for i in range(count)]
    return dict(zip(keys, arrays))


def _array(reader: _Reader, index: int) -> np.ndarray:
    what = f"array {index}"
    (magic,) = reader.unpack("I", what)
    legacy = magic not in (V1_MAGIC, V2_MAGIC, V3_MAGIC)
    if magic in (V2_MAGIC, V3_MAGIC):
        (storage,) = reader.unpack("i", what)
        if storage != 0:
            raise UnsupportedOpError(f"{reader.where}: {what} is a sparse array (storage "
                                     f"type {storage}); only dense arrays are supported")
    if legacy:                                       # the word read was ndim; uint32 dims
        ndim = magic
        shape = reader.unpack(f"{ndim}I", what) if ndim else ()
    else:
        (ndim,) = reader.unpack("i" if magic == V3_MAGIC else "I", what)
        shape = reader.unpack(f"{max(ndim, 0)}q", what) if ndim > 0 else ()
    if ndim < 0 or (ndim == 0 and magic != V3_MAGIC):   # (V3: ndim 0 is a scalar)
        return np.zeros((0,), np.float32)            # an empty NDArray
    reader.unpack("ii", what)                        # device: arrays load on the CPU
    (flag,) = reader.unpack("i", what)
    if flag not in TYPE_FLAGS:
        raise UnsupportedOpError(f"{reader.where}: {what} has type flag {flag}, which is not "
                                 f"supported (supported: {sorted(TYPE_FLAGS)})")
    dtype = TYPE_FLAGS[flag]
    size = int(np.prod(shape, dtype=np.int64))
    raw = reader.take(size * dtype.itemsize, what)
    return np.frombuffer(raw, dtype).reshape(shape).copy()


def save_params(arrays: dict[str, np.ndarray]) -> bytes:
    """The V2 .params bytes of `arrays` (dense, CPU), as MXNet writes them (for tests)."""
    flags = {dtype: flag for flag, dtype in TYPE_FLAGS.items()}
    out = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    for array in arrays.values():
        array = np.ascontiguousarray(array)
        out.append(struct.pack("<Iii", V2_MAGIC, 0, array.ndim))
        out.append(struct.pack(f"<{array.ndim}q", *array.shape))
        out.append(struct.pack("<iii", 1, 0, flags[array.dtype]))
        out.append(array.tobytes())
    out.append(struct.pack("<Q", len(arrays)))
    for name in arrays:
        encoded = name.encode("utf-8")
        out.append(struct.pack("<Q", len(encoded)) + encoded)
    return b"".join(out)
