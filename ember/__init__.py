"""ember: an end-to-end deep learning compiler."""

__version__ = "0.1.0"
