"""ember's version (one place: the package, the kernel cache and exported libraries read it)."""

__version__ = "0.1.0"
