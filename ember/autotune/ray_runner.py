"""Measuring on a Ray cluster: each candidate is one Ray task (its own worker process, no
retries), so many machines tune at once; a candidate that crashes its worker or runs past
the time-out is an error like with the local runner.

    runner = RayRunner(address="auto")            # or None: start a local Ray instance
    tune(tasks, db, runner, trials=2000)

Needs `pip install 'ember[ray]'`; the local runner needs nothing beyond ember.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ember.autotune.measure import Measurable, MeasureResult, MeasureSettings, measure_one
from ember.errors import TuningError


# seconds the first result of a runner may take beyond the time-out: Ray starts its worker
# processes on demand, and each imports ember (seconds; on a loaded machine, above 20)
WORKER_START_SECONDS = 60.0


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise TuningError("the Ray runner needs ray: pip install 'ember[ray]'") from None
    return ray


def _measure_remote(task: Measurable, point: Mapping[str, Any],
                    settings: MeasureSettings) -> MeasureResult:
    return measure_one(task, point, settings)


class RayRunner:
    """Measures candidates as Ray tasks on the cluster at `address` (None: a local
    instance, started here without the dashboard)."""

    def __init__(self, settings: MeasureSettings | None = None, address: str | None = None,
                 num_cpus: int | None = None) -> None:
        self.ray = _ray()
        self.settings = settings or MeasureSettings()
        self._started = False
        if not self.ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address is not None:
                kwargs["address"] = address
            elif num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            self.ray.init(**kwargs)
            self._started = True
        # one CPU per candidate: timings are not shared with another candidate's
        self._remote = self.ray.remote(num_cpus=1, max_retries=0)(_measure_remote)
        self._tasks: dict[str, Any] = {}
        self._started_workers = False  # a result came back: the workers are up

    def measure(self, task: Measurable, points: Sequence[Mapping[str, Any]]
                ) -> list[MeasureResult]:
        ray = self.ray
        if task.key not in self._tasks:
            self._tasks[task.key] = ray.put(task)
        refs = [self._remote.remote(self._tasks[task.key], dict(p), self.settings)
                for p in points]
        results = []
        for point, ref in zip(points, refs):
            start = 0.0 if self._started_workers else WORKER_START_SECONDS
            try:
                results.append(ray.get(ref, timeout=self.settings.timeout + start))
                self._started_workers = True
            except ray.exceptions.GetTimeoutError:
                ray.cancel(ref, force=True)
                results.append(MeasureResult((), f"timed out after {self.settings.timeout:g} s "
                                                 f"on task {task.description} with knobs "
                                                 f"{dict(point)}"))
            except ray.exceptions.RayError as error:
                results.append(MeasureResult((), f"Ray worker failed ({type(error).__name__}) "
                                                 f"measuring task {task.description} with "
                                                 f"knobs {dict(point)}"))
        return results

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["RayRunner"]
