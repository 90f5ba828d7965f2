"""Load a script of benchmarks/ as a module (the folder is not a package)."""

import importlib.util
import os
import sys
from types import ModuleType

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "benchmarks")


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py as the module `bench_<name>` (registered in sys.modules, where
    dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                  os.path.join(BENCHMARKS, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
