"""An ELF file cut inside its 64-bit header is a CorruptFileError, not struct.error (a cut
kernel-cache entry raised it: fuzz seed 505010134)."""

import pytest

from ember.errors import CorruptFileError
from ember.runtime.elf import read_elf


@pytest.mark.parametrize("size", [52, 58, 60, 63])
def test_elf64_header_cut_short(size: int) -> None:
    data = (b"\x7fELF\x02\x01\x01" + bytes(57))[:size]
    with pytest.raises(CorruptFileError, match="entry: its ELF header is cut short"):
        read_elf(data, "entry")
