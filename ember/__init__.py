"""ember: an end-to-end deep learning compiler.

    import ember
    from ember import te
    s = te.create_schedule(C.op)
    print(ember.lower(s, [A, B, C]))
    f = ember.build(s, [A, B, C], target="llvm")
    model = ember.compile("model.onnx")        # a whole model
"""

from ember.build import build
from ember.errors import EmberError
from ember.te.lower import lower

__version__ = "0.1.0"

__all__ = ["build", "compile", "lower", "EmberError", "__version__"]


def __getattr__(name: str) -> object:
    # the model compiler (graph, ops, runtime) loads on first use of ember.compile
    if name == "compile":
        from ember.driver import compile

        return compile
    raise AttributeError(f"module 'ember' has no attribute '{name}'")
