"""The on-disk kernel cache: compiled objects keyed by (kernel key, target, compiler version).

    cache = KernelCache()                 # EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember
    blob = cache.get(key)                 # None when absent or corrupted
    cache.put(key, blob)                  # atomic: temp file + os.replace

Entries carry a magic header and a SHA-256 of their payload, so a truncated or damaged file
is detected and ignored (and rebuilt by the caller) instead of being handed to the loader.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ember.errors import CorruptFileError

MAGIC = b"EMBERKO2"
# every source file of the installed package counts: a hand-kept list of "the files that
# decide kernel code" goes stale the day someone adds a module
_SOURCE_SUFFIXES = (".py", ".ll", ".c", ".h")
_DIGEST_BYTES = 32


def default_cache_dir() -> Path:
    """EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else ~/.cache/ember."""
    explicit = os.environ.get("EMBER_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ember"


@functools.cache
def compiler_version() -> str:
    """ember's version plus a digest of every source file of the installed package: a
    changed compiler never reuses stale objects."""
    from ember.version import __version__

    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.suffix in _SOURCE_SUFFIXES and p.is_file()
                   and "__pycache__" not in p.parts)
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:16]}"


def cache_key(kernel_key: str, target: str, knobs: str = "") -> str:
    """The file name stem of one kernel's entry: its structure, the target (with its thread
    count), the schedule's knobs and the compiler version."""
    text = f"{kernel_key}\0{target}\0{knobs}\0{compiler_version()}"
    return hashlib.sha256(text.encode()).hexdigest()[:40]


class KernelCache:
    """Object files on disk; reads never raise for a bad entry, writes never leave half files."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.hits = 0
        self.misses = 0
        self.corrupted = 0

    def path(self, key: str) -> Path:
        return self.directory / "kernels" / key[:2] / f"{key}.obj"

    def get(self, key: str, symbols: Sequence[str] = ()) -> bytes | None:
        """The entry's object code, or None when absent, damaged, stored under another key,
        or (when `symbols` are given) not a well-formed object defining all of them."""
        try:
            raw = self.path(key).read_bytes()
        except OSError:
            self.misses += 1
            return None
        header = len(MAGIC) + _DIGEST_BYTES
        payload = raw[header:]
        if (len(raw) <= header or raw[:len(MAGIC)] != MAGIC
                or _digest(key, payload) != raw[len(MAGIC):header]
                or not _defines(payload, symbols, key)):
            self.corrupted += 1
            self.misses += 1
            return None
        self.hits += 1
        try:  # the entry was used: the size cap evicts the least recently used first
            os.utime(self.path(key))
        except OSError:
            pass
        return payload

    def entries(self) -> list[Path]:
        return sorted((self.directory / "kernels").glob("*/*.obj"))

    def info(self) -> tuple[int, int]:
        """(number of entries, their total bytes)."""
        sizes = [_size(p) for p in self.entries()]
        return len(sizes), sum(sizes)

    def clear(self) -> int:
        """Remove every entry (and stray temp files); returns how many entries went."""
        removed = 0
        for path in (self.directory / "kernels").glob("*/*"):
            try:
                path.unlink()
                removed += path.suffix == ".obj"
            except OSError:
                pass
        return removed

    def prune(self, max_bytes: int | None = None) -> int:
        """Evict least recently used entries until the cache holds at most `max_bytes`
        (default EMBER_CACHE_MAX_MB, 2048 MB); returns how many were removed."""
        limit = max_cache_bytes() if max_bytes is None else max_bytes
        entries = []
        for path in self.entries():
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in sorted(entries, key=lambda e: (e[0], str(e[2]))):
            if total <= limit:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
        return removed

    def put(self, key: str, payload: bytes) -> None:
        """Store `payload` atomically; a cache that cannot be written is silently skipped."""
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, MAGIC + _digest(key, payload) + payload)
        except OSError:
            pass


def max_cache_bytes() -> int:
    """EMBER_CACHE_MAX_MB (default 2048) in bytes."""
    from ember.errors import ArgumentError

    text = os.environ.get("EMBER_CACHE_MAX_MB", "").strip() or "2048"
    try:
        megabytes = float(text)
    except ValueError:
        raise ArgumentError(f"EMBER_CACHE_MAX_MB must be a number of megabytes, got "
                            f"{text!r}") from None
    if megabytes < 0:
        raise ArgumentError(f"EMBER_CACHE_MAX_MB must be >= 0, got {text!r}")
    return int(megabytes * 1024 * 1024)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _digest(key: str, payload: bytes) -> bytes:
    """SHA-256 over the key and the payload: an entry copied under another kernel's key (same
    bytes, valid digest of its own) does not match."""
    return hashlib.sha256(key.encode() + b"\0" + payload).digest()


def _defines(payload: bytes, symbols: Sequence[str], key: str) -> bool:
    if not symbols:
        return True
    from ember.lowering.link import check_kernel_object

    try:
        check_kernel_object(payload, symbols, f"kernel cache entry {key}")
    except CorruptFileError:
        return False
    return True


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to a temp file next to `path`, then rename it over `path`."""
    path = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
