"""Write docs/operators.md, the table of supported operators, from ember's op registry and
the ONNX importer's converters (run after adding an op; a test checks it is current).

    python docs/operators.py            # rewrites docs/operators.md
"""

from __future__ import annotations

import sys
from pathlib import Path

HEADER = """# Supported operators

Generated from the op registry (`ember/ops/registry.py`) and the ONNX importer's converters
by `python docs/operators.py`; do not edit by hand. Graph ops follow ONNX: same names,
inputs and attribute defaults. Inputs in *italics* must be constants (they decide shapes)
and become attributes. An ONNX op missing here is still imported when ONNX defines it as a
function of supported ops.

| op | fusion pattern | inputs | attributes (defaults) |
|---|---|---|---|
"""


def _attr_text(value: object) -> str:
    from ember.ops.registry import REQUIRED

    return "required" if value is REQUIRED else repr(value)


def table() -> str:
    """The whole page as text."""
    from ember.frontend.onnx import CONVERTERS
    from ember.ops.registry import all_ops

    rows = []
    for name, op in sorted(all_ops().items()):
        inputs = ", ".join(f"*{i}*" if i in op.attr_inputs else i for i in op.inputs)
        attrs = ", ".join(f"{k}={_attr_text(v)}" for k, v in sorted(op.attrs.items())
                          if k not in op.attr_inputs)
        pattern = getattr(op.pattern, "name", str(op.pattern)).lower()
        rows.append(f"| {name} | {pattern} | {inputs} | {attrs.replace('|', '/')} |")
    converted = sorted(set(CONVERTERS) - set(all_ops()))
    tail = ("\n## Converted by the ONNX importer\n\nThese ONNX ops are rewritten into the ops "
            "above (or folded) while importing:\n\n" + ", ".join(converted) + "\n")
    return HEADER + "\n".join(rows) + "\n" + tail


def main() -> int:
    path = Path(__file__).with_name("operators.md")
    path.write_text(table())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
