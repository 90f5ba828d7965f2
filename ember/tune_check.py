"""Tuning records checked in model order: a kernel confirmed faster alone may still be slower
where the model runs it (its input left in cache by the layer before, its weights evicted by
the others). The model is compiled with and without a tuning database's records, every
fused group is timed in model order (`CompiledModel.profile`), the two builds in turns, and
per task whose record applied, both builds' time of its groups is kept in the database
(`TuningDatabase.add_model_checks`, beside the records); `compile(tuning_db=...)` then takes
the record only where the model ran it faster (ember.autotune.apply).

    verdicts = ember.tune_check.check_in_model("resnet50.onnx", "tune.sqlite",
                                               "llvm -num-cores=1")
    # {task description: tuned seconds / default seconds in the model}

On ResNet-50 (Intel Xeon, 1 thread), a Winograd task confirmed 1.06x faster alone ran 8%
slower in model order while ten others ran 0.2-3.6% faster.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ember.autotune.database import TuningDatabase
from ember.autotune.task import extract_tasks
from ember.driver import compile as compile_model
from ember.driver import resolve_target
from ember.errors import ArgumentError, TuningError
from ember.runtime.executor import CompiledModel
from ember.target import Target


def check_in_model(model: Any, db_path: str | os.PathLike[str], target: str | Target = "llvm",
                   rounds: int = 8, input_shapes: Mapping[str, Sequence[int]] | None = None,
                   seed: int = 0) -> dict[str, float]:
    """Time the groups whose knobs come from `db_path`'s records in model order against the
    default build's, `rounds` rounds of 3 runs each in turns, and add the times to the
    database (`add_model_checks`); returns per task (its description) tuned over
    default seconds of its groups (the fastest round of each); {} where nothing applied, or
    for a target other than this machine's CPU (nothing is timed). Inputs are seeded random
    (floats) and zeros (integers)."""
    if rounds < 1:
        raise ArgumentError(f"check_in_model: rounds must be >= 1, got {rounds}")
    tgt = resolve_target(target)
    if not tgt.is_host:  # timed here, in this process: this machine's CPU only
        return {}
    tuned = compile_model(model, tgt, input_shapes=input_shapes, tuning_db=db_path)
    if not isinstance(tuned, CompiledModel):
        raise TuningError("check_in_model: the model's shapes are decided at run time; give "
                          "input_shapes to time it in model order")
    applied = set(tuned.stats.get("tuned", []))
    if not applied:
        return {}
    default = compile_model(model, tgt, input_shapes=input_shapes)
    rng = np.random.default_rng(seed)
    feeds = {s.name: (rng.standard_normal(s.shape).astype(s.dtype)
                      if np.issubdtype(np.dtype(s.dtype), np.floating)
                      else np.zeros(s.shape, s.dtype)) for s in default.inputs}
    times: dict[str, dict[str, list[float]]] = {"default": {}, "tuned": {}}
    for _ in range(rounds):
        for name, built in (("default", default), ("tuned", tuned)):
            for row in built.profile(feeds, repeat=3):
                times[name].setdefault(row.group, []).append(row.seconds)
    verdicts: dict[str, float] = {}
    checks = []
    knobs = tuned.stats["knobs"]
    with TuningDatabase(db_path) as db:
        for task in extract_tasks(model, tgt, input_shapes=input_shapes):
            groups = [g for g in task.groups if g in applied]
            if not groups:
                continue
            names = set(task.space().choices)
            point = {k: v for k, v in knobs[groups[0]].items() if k in names}
            seconds = {name: float(np.min(np.sum([times[name][g] for g in groups], axis=0)))
                       for name in ("default", "tuned")}
            checks += [(task.key, tgt.fingerprint, task.default_point(), seconds["default"]),
                       (task.key, tgt.fingerprint, point, seconds["tuned"])]
            verdicts[task.description] = seconds["tuned"] / seconds["default"]
        db.add_model_checks(checks)
    return verdicts


def verdict_lines(verdicts: Mapping[str, float]) -> list[str]:
    """`check_in_model`'s answer as lines for a person, the largest gain first."""
    if not verdicts:
        return []
    return (["in model order, tuned / default seconds of each tuned task's groups (above "
             "1.0: the default stays):"]
            + [f"  {ratio:.3f}  {task}"
               for task, ratio in sorted(verdicts.items(), key=lambda kv: kv[1])])


__all__ = ["check_in_model", "verdict_lines"]
