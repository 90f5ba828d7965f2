"""Auto-tuning: extract a model's tasks, search each schedule's knob space with a learned cost
model, measure candidates safely in worker processes, keep every measurement in a tuning
database, and let `ember.compile(..., tuning_db=...)` apply the best::

    tasks = ember.autotune.extract_tasks("resnet18.onnx", "llvm")
    with ember.autotune.TuningDatabase("tune.sqlite") as db:
        ember.autotune.tune(tasks, db, trials=200)
    model = ember.compile("resnet18.onnx", tuning_db="tune.sqlite")
"""

from ember.autotune.apply import DatabaseKnobs, database_knobs
from ember.autotune.database import Record, TuningDatabase, default_path
from ember.autotune.measure import LocalRunner, MeasureResult, MeasureSettings
from ember.autotune.task import TuneTask, extract_tasks, task_key
from ember.autotune.tuner import TaskProgress, summary, tune

__all__ = ["DatabaseKnobs", "LocalRunner", "MeasureResult", "MeasureSettings", "Record",
           "TaskProgress", "TuneTask", "TuningDatabase", "database_knobs", "default_path",
           "extract_tasks", "summary", "task_key", "tune"]
