"""Using tuning records at compile time: the best record of each group's task on the target
becomes that group's knobs (through `ember.compile(..., knobs=...)`).

    model = ember.compile("resnet18.onnx", tuning_db="tune.sqlite")
    model.stats["tuned"]        # the groups whose knobs came from a record
    model.stats["knobs"]        # every group's knobs (family and values)

Only records measured on the same target fingerprint apply: a record from another CPU or
thread count never applies silently. A task's best record applies only where the task's
default was measured too (successfully) and was slower, timed the same way (cold or warm
weights) as the task's newest record, and only a record that names every knob of the task's
space (records made before a knob joined it were measured on other kernels). Where the
tuner confirmed a task (its default and fastest candidates timed again in turns, records of
role 'confirm'), those records decide: the candidate with the lowest median there applies
if it beats the default's median there; else the fastest record against the default's.
Where the model was timed with and without that record (`ember.tune_check`) and its groups
ran no faster with it, the default stays.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping

from ember.autotune.database import Record, TuningDatabase, confirmed_costs, knobs_json
from ember.autotune.task import task_key
from ember.errors import TuningError
from ember.autotune.lowering import knob_family
from ember.lowering.compile import KnobsArg
from ember.lowering.groups import FusedGroup
from ember.ops.knobs import Knobs, Task
from ember.target import Target


class DatabaseKnobs:
    """The `knobs=` callable of a tuning database: `(group, task) -> Knobs | None`; groups
    named in `given` (a mapping) or answered by `given` (a callable) keep that answer."""

    def __init__(self, db: TuningDatabase, target: Target, given: KnobsArg = None) -> None:
        self.path, self.fingerprint, self.given = db.path, Target(target).fingerprint, given
        self.target = Target(target)
        # the best record per task and the fastest run of every candidate, read once (the
        # file is not held open while compiling)
        self.ranked: dict[str, list[Record]] = {}   # per task, fastest first
        self.costs: dict[str, dict[str, float]] = {}
        self.confirmed: dict[str, dict[str, float]] = {}   # per task, confirmation medians
        records = db.records(fingerprint=self.fingerprint, ok_only=True)
        # a task's records timed like its newest one (cold and warm times never compared)
        timing = {r.task_key: r.timing for r in sorted(records, key=lambda r: r.timestamp)}
        for r in sorted(records, key=lambda r: r.best):
            if r.timing != timing[r.task_key]:
                continue
            self.ranked.setdefault(r.task_key, []).append(r)
            seen = self.costs.setdefault(r.task_key, {})
            name = knobs_json(r.knobs)
            seen[name] = min(seen.get(name, math.inf), r.best)
        for key, ranked in self.ranked.items():
            self.confirmed[key] = confirmed_costs(ranked)
        # per task, its groups' seconds in model order with the default and with a record
        self.in_model = db.model_checks(self.fingerprint)
        self.applied: dict[str, str] = {}   # group name -> task key of the record applied

    def __call__(self, group: FusedGroup, task: Task) -> Knobs | None:
        if isinstance(self.given, Mapping) and group.name in self.given:
            return self.given[group.name]
        if callable(self.given):
            answer: Knobs | None = self.given(group, task)
            if answer is not None:
                return answer
        family = knob_family(group, self.target)
        if family is None:
            return None
        key = task_key(group)
        # the fastest record but those from before a knob joined the task's space (their
        # knobs name fewer of the family's knobs: measured on another kernel than they
        # build now); knobs the family does not have are an error below
        names = set(family.space(task).choices)
        fields = {f.name for f in dataclasses.fields(family)}
        usable = [r for r in self.ranked.get(key, ()) if names <= set(r.knobs)
                  or not set(r.knobs) <= fields]
        default = family.default(task)
        values = default.to_dict()
        confirmed = self.confirmed.get(key, {})
        default_name = knobs_json({n: values[n] for n in names})
        if default_name in confirmed:  # the confirmation decides
            usable = sorted((r for r in usable if knobs_json(r.knobs) in confirmed
                             and knobs_json(r.knobs) != default_name),
                            key=lambda r: confirmed[knobs_json(r.knobs)])
            costs = confirmed
        else:
            costs = self.costs.get(key, {})
        record = usable[0] if usable else None
        if record is None or record.family != family.family():
            return None
        where = f"tuning record of task {record.task} in '{self.path}': "
        try:
            knobs = default.replace(**dict(record.knobs))
        except TypeError as error:
            raise TuningError(f"{where}knobs {dict(record.knobs)} do not fit "
                              f"{family.family()} ({error})") from None
        # only a record measured against the default, and faster, replaces it
        default_cost = costs.get(knobs_json({n: values[n] for n in record.knobs}))
        cost = costs.get(knobs_json(record.knobs), record.best)
        if default_cost is None or cost >= default_cost:
            return None
        # timed in model order (ember.tune_check) and no faster there: the default stays
        in_model = self.in_model.get(key, {})
        here, there = in_model.get(knobs_json(record.knobs)), in_model.get(default_name)
        if here is not None and there is not None and here >= there:
            return None
        self.applied[group.name] = key
        return knobs


def database_knobs(path: str | os.PathLike[str] | TuningDatabase, target: Target | str,
                   given: KnobsArg = None) -> DatabaseKnobs:
    """The `knobs=` callable applying the best records of the database at `path`."""
    if isinstance(path, TuningDatabase):
        return DatabaseKnobs(path, Target(target), given)
    if not os.path.isfile(path):
        raise TuningError(f"tuning database '{path}' does not exist")
    with TuningDatabase(path, readonly=True) as db:
        return DatabaseKnobs(db, Target(target), given)


__all__ = ["DatabaseKnobs", "database_knobs"]
