"""ember: an end-to-end deep learning compiler.

    import ember
    from ember import te
    s = te.create_schedule(C.op)
    print(ember.lower(s, [A, B, C]))
    f = ember.build(s, [A, B, C], target="llvm")
    model = ember.compile("model.onnx")        # a whole model
"""

from ember.build import build
from ember.driver import compile
from ember.errors import EmberError
from ember.te.lower import lower

__version__ = "0.1.0"

__all__ = ["build", "compile", "lower", "EmberError", "__version__"]
