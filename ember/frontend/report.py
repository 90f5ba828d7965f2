"""The one error every importer raises for a model's unsupported operators, all listed at once."""

from __future__ import annotations

from typing import Sequence

from ember.errors import UnsupportedOpError


class UnsupportedOperatorsError(UnsupportedOpError):
    """Every unsupported operator or attribute of a model, with where each one is.

    `problems` holds one line per fault: the operator, the node and, when the framework
    recorded it, the source location that created the node."""

    def __init__(self, framework: str, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        head = (f"the {framework} model uses {count} unsupported operators or attributes:"
                if count > 1 else f"the {framework} model uses an unsupported operator or "
                                  "attribute:")
        super().__init__("\n  ".join([head, *self.problems]))
