"""ember: an end-to-end deep learning compiler.

    import ember
    from ember import te
    s = te.create_schedule(C.op)
    print(ember.lower(s, [A, B, C]))
    f = ember.build(s, [A, B, C], target="llvm")
    model = ember.compile("model.onnx")        # a whole model
    ember.export_library("model.onnx", "model.so")   # one file, runs without the compiler
"""

import importlib

from ember.errors import EmberError
from ember.version import __version__

__all__ = ["build", "compile", "export_c", "export_library", "export_objects", "export_wasm",
           "lower",
           "EmberError", "__version__"]

# everything but the errors loads on first use, so that loading an exported library
# (ember.runtime.library) does not import the compiler
_LAZY = {"build": "ember.lowering.build", "lower": "ember.te.lower", "compile": "ember.driver",
         "export_library": "ember.driver", "export_objects": "ember.driver",
         "export_wasm": "ember.driver", "export_c": "ember.driver"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("_"):
        try:  # a subpackage, as `import ember; ember.te` always allowed
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'ember' has no attribute '{name}'")
