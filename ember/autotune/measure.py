"""Measuring candidates safely: build and time each in a separate worker process, check its
output against the default schedule's, and turn a crash, a hang or a wrong answer into an
error record instead of the end of the run.

    runner = LocalRunner(MeasureSettings(repeat=5, timeout=20))
    results = runner.measure(task, [point, ...])     # one MeasureResult per point
    runner.close()

What is measured: after one warm-up call (which is also the checked one), `repeat` timed
runs of `number` calls of the kernel on the same buffers; `number` grows until a run lasts
`min_run_seconds`. Costs are seconds per call: host time for CPU kernels, device time (its
events) for a kernel with `timed(number)`, as GPU kernels are (ember.autotune.gpu_measure).

The candidates a worker gets together (a batch, or its share of one) are built and checked
first, then timed in turns: round r runs each candidate once, so a machine whose speed
drifts over seconds (a shared or cloud host, frequency changes) slows every candidate of a
round alike instead of whichever was timed during the slow spell. ResNet-50's 3x3 stride-2
conv on a 2-vCPU Zen 3 VM, its default and 9 neighbours measured twice: back to back, the
two measurements differ by up to 28-51% for a candidate (rank correlation 0.70-0.83); in
turns by 2-7% (0.90-0.98).

Caches (`MeasureSettings.cold_weight_bytes`, 128 MiB by default, for kernels that name
their weights): each timed call reads its weights from one of several copies spanning that
many bytes, taken in turn, so they come from memory as inside a network whose other layers
evicted them since the last inference; activations and outputs stay the same buffers, as
warm as the layer before leaves them. Timed back to back with one copy (0), a layer's
weights stay in L2 or L3 and candidates are ranked by a state the model never sees
(ResNet-50's 256@14 Winograd conv on a 2 MB-L2 Xeon: 1.05 ms warm, 1.30-1.40 ms with its
4 MB of weights rotated through 64-256 MB, 1.29 ms inside the model).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ember.errors import TuningError

if TYPE_CHECKING:
    from ember.target import Target

GPU_KINDS = ("cuda", "rocm", "opencl", "metal")  # target kinds measured on a device
COLD_WEIGHT_BYTES = 128 << 20  # what a kernel's weight copies span when timed cold


@dataclass(frozen=True)
class MeasureSettings:
    """How candidates are timed and checked."""

    repeat: int = 5               # timed runs per candidate (median and min over them)
    min_run_seconds: float = 0.01  # calls per run grow until a run lasts this long
    max_number: int = 1000
    timeout: float = 30.0         # seconds for one candidate: build, check and runs
    rtol: float = 1e-3            # output check against the default schedule's
    atol: float = 1e-4            # ... relative to the largest reference magnitude
    check: bool = True
    seed: int = 0
    cold_weight_bytes: int = COLD_WEIGHT_BYTES  # weights rotated through copies (0: warm)

    @property
    def timing(self) -> str:
        """'cold' (weights rotated through copies) or 'warm' (one copy, back to back): how
        the records of a run were timed, so that records timed one way are only ranked
        against each other (for a kernel without weights, or a device kernel, the two are
        the same)."""
        return "cold" if self.cold_weight_bytes else "warm"

    def __post_init__(self) -> None:
        if self.repeat < 1 or self.timeout <= 0 or self.max_number < 1:
            raise TuningError(f"MeasureSettings: repeat and max_number must be >= 1 and "
                              f"timeout > 0, got {self.repeat}, {self.max_number}, "
                              f"{self.timeout}")
        if self.cold_weight_bytes < 0:
            raise TuningError(f"MeasureSettings: cold_weight_bytes must be >= 0 (0: warm), "
                              f"got {self.cold_weight_bytes}")


@dataclass(frozen=True)
class MeasureResult:
    """Seconds per call of each timed run, or the error that stopped the candidate."""

    costs: tuple[float, ...] = ()
    error: str | None = None
    build_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.costs)

    @property
    def median(self) -> float:
        return float(np.median(self.costs)) if self.ok else math.inf

    @property
    def best(self) -> float:
        """The fastest run: what candidates are ranked by (interference from other work on
        the machine only ever adds time)."""
        return min(self.costs) if self.ok else math.inf


class Kernel(Protocol):
    outputs: list[np.ndarray]

    def run(self) -> None: ...


class Measurable(Protocol):
    """What a runner measures: a task with a key, a description, and a way to build any
    candidate (None: the default schedule, the reference for the output check)."""

    key: str
    description: str

    def build(self, point: Mapping[str, Any] | None, seed: int = 0) -> Kernel: ...

    def default_point(self) -> dict[str, Any]: ...


class Runner(Protocol):
    def measure(self, task: Measurable, points: Sequence[Mapping[str, Any]]
                ) -> list[MeasureResult]: ...

    def close(self) -> None: ...


# -- in the worker ----------------------------------------------------------------------------
MAX_WEIGHT_COPIES = 64


def _argument_sets(kernel: Kernel, cold_bytes: int,
                   like: list[list[np.ndarray]] | None = None) -> list[list[np.ndarray]] | None:
    """The kernel's arguments with its weights (`kernel.weights`: argument indexes) copied
    until the copies span `cold_bytes` (at most MAX_WEIGHT_COPIES sets); None: no rotation
    (warm, a device kernel, or a kernel that names no weights). With `like` (another
    candidate's sets, same task: the same weights), its weight copies are shared, so the
    candidates timed in turns need the copies' memory once."""
    args, weights = getattr(kernel, "args", None), getattr(kernel, "weights", ())
    size = sum(args[i].nbytes for i in weights) if args is not None else 0
    if not cold_bytes or not size or getattr(kernel, "timed", None) is not None:
        return None
    if like is not None and _same_weights(args, weights, like[0]):
        return [[other[i] if i in weights else a for i, a in enumerate(args)]
                for other in like]
    from ember.runtime.library import aligned_array

    copies = int(min(MAX_WEIGHT_COPIES, max(2, cold_bytes // size)))
    sets = [list(args)]
    for _ in range(copies - 1):
        other = list(args)
        for i in weights:
            other[i] = aligned_array(args[i].shape, args[i].dtype, like=args[i])
        sets.append(other)
    return sets


def _same_weights(args: Sequence[np.ndarray], weights: Sequence[int],
                  other: Sequence[np.ndarray]) -> bool:
    return len(args) == len(other) and all(
        args[i].shape == other[i].shape and args[i].dtype == other[i].dtype and
        np.array_equal(args[i], other[i]) for i in weights)


def _run_seconds(kernel: Kernel, number: int,
                 sets: list[list[np.ndarray]] | None = None) -> float:
    """Seconds of `number` calls: the kernel's own clock when it has one (a device's
    events), else the host's; with `sets`, call i takes argument set i mod len(sets)."""
    timed = getattr(kernel, "timed", None)
    if timed is not None:
        return float(timed(number))
    if sets is not None:  # the turn goes on from run to run: sets[0] is the next one
        main = kernel.main  # type: ignore[attr-defined]
        start = time.perf_counter()
        for i in range(number):
            main(*sets[i % len(sets)])
        elapsed = time.perf_counter() - start
        shift = number % len(sets)
        sets[:] = sets[shift:] + sets[:shift]
        return elapsed
    start = time.perf_counter()
    for _ in range(number):
        kernel.run()
    return time.perf_counter() - start


class _Timed:
    """A kernel being timed: its argument sets (cold weights), calls per run, costs."""

    def __init__(self, kernel: Kernel, sets: list[list[np.ndarray]] | None) -> None:
        self.kernel, self.sets = kernel, sets
        self.number = 1
        self.costs: list[float] = []
        self.error: str | None = None

    def run(self, number: int, timing: Any) -> float:
        with timing:
            return _run_seconds(self.kernel, number, self.sets)

    def calibrate(self, settings: MeasureSettings, timing: Any) -> None:
        """Grow the calls per run until one run is long enough to time well."""
        if self.sets is not None:  # one untimed turn: no copy is timed fresh from being written
            self.run(len(self.sets), timing)
        number = 1
        while True:
            elapsed = self.run(number, timing)
            if elapsed >= settings.min_run_seconds or number >= settings.max_number:
                break
            number = min(settings.max_number,
                         max(number * 2, int(number * settings.min_run_seconds /
                                             max(elapsed, 1e-9))))
        self.number = number


def _time_in_turns(kernels: Sequence[Kernel], settings: MeasureSettings,
                   timing: Any = None) -> list[_Timed]:
    """Time `kernels` in `settings.repeat` rounds, each round one run of each (every run
    holding `timing`); a kernel that raises gets its error and leaves the rounds."""
    timing = timing if timing is not None else contextlib.nullcontext()
    timed: list[_Timed] = []
    shared = None
    for kernel in kernels:
        sets = _argument_sets(kernel, settings.cold_weight_bytes, shared)
        shared = shared or sets
        timed.append(_Timed(kernel, sets))
    for rounds in range(settings.repeat + 1):  # round 0: calls per run
        for t in timed:
            if t.error is not None:
                continue
            try:
                if rounds == 0:
                    t.calibrate(settings, timing)
                else:
                    t.costs.append(t.run(t.number, timing) / t.number)
            except Exception as error:  # noqa: BLE001 - the candidate's error
                t.error = _error_text(error)
    return timed


def _time(kernel: Kernel, settings: MeasureSettings) -> tuple[float, ...]:
    """Seconds per call of `settings.repeat` runs of one kernel."""
    (t,) = _time_in_turns([kernel], settings)
    if t.error is not None:
        raise TuningError(t.error)
    return tuple(t.costs)


def _error_text(error: Exception) -> str:
    where = traceback.extract_tb(error.__traceback__)[-1]
    at = f"{os.path.basename(where.filename)}:{where.lineno}"
    return f"{type(error).__name__}: {error} (at {at})"


def compare_outputs(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                    settings: MeasureSettings) -> str | None:
    """None when `got` matches the reference, else what differs."""
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"wrong answer: output {i} has shape {g.shape}, expected {w.shape}"
        if w.dtype.kind in "fc":
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            bad = ~np.isclose(g, w, rtol=settings.rtol, atol=settings.atol * (scale + 1.0))
        else:
            bad = g != w
        if np.any(bad):
            diff = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
            return (f"wrong answer: output {i} differs from the default schedule's in "
                    f"{int(np.sum(bad))} of {w.size} elements (max |diff| {diff:.3g})")
    return None


@dataclass
class WorkerState:
    """What a measuring process keeps between candidates: each task's reference outputs and
    a few built kernels (the first candidate measured, normally the default, and the
    fastest two), so measuring them again to confirm a result costs no build."""

    references: dict[str, list[np.ndarray]] = field(default_factory=dict)
    first: dict[str, tuple[str, Kernel]] = field(default_factory=dict)
    fastest: dict[str, list[tuple[float, str, Kernel]]] = field(default_factory=dict)

    def kept(self, key: str, point: str) -> Kernel | None:
        if key in self.first and self.first[key][0] == point:
            return self.first[key][1]
        return next((k for _, p, k in self.fastest.get(key, []) if p == point), None)

    def keep(self, key: str, point: str, kernel: Kernel, cost: float) -> None:
        if key not in self.first:
            self.first[key] = (point, kernel)
            return
        ranked = [e for e in self.fastest.get(key, []) if e[1] != point]
        ranked.append((cost, point, kernel))
        ranked.sort(key=lambda e: e[0])
        self.fastest[key] = ranked[:2]


def task_target(task: Measurable) -> Target | None:
    """The task's ember Target, None for a measurable that names none."""
    from ember.target import Target

    target = getattr(task, "target", None)
    return Target(target) if isinstance(target, str) else None


@contextlib.contextmanager
def target_threads(task: Measurable):  # type: ignore[no-untyped-def]
    """Parallel loops use the task's target's thread count (`-num-cores`, else the cores
    this process may run on) while its candidates run, whatever the process was set to:
    records keyed to a 1-core fingerprint are timed on 1 thread."""
    from ember.runtime import threadpool

    target = task_target(task)
    if target is None or target.kind not in ("llvm", "c"):
        yield
        return
    before = threadpool.num_threads()
    threadpool.set_num_threads(min(target.num_cores, threadpool.MAX_THREADS))
    try:
        yield
    finally:
        threadpool.set_num_threads(before)


def measure_one(task: Measurable, point: Mapping[str, Any], settings: MeasureSettings,
                state: WorkerState | None = None, timing: Any = None) -> MeasureResult:
    """Build, check and time one candidate in this process (see `measure_batch`)."""
    return measure_batch(task, [point], settings, state, timing)[0]


def measure_batch(task: Measurable, points: Sequence[Mapping[str, Any]],
                  settings: MeasureSettings, state: WorkerState | None = None,
                  timing: Any = None) -> list[MeasureResult]:
    """Build and check each candidate in this process (exceptions become its error), then
    time those that passed in turns, on the task's target's thread count. `timing` (a
    context: the runner's turn) is held while a kernel runs: builds of several workers run
    in parallel, but no two candidates are timed at once."""
    try:
        with target_threads(task):
            return _measure_batch(task, points, settings, state, timing)
    except Exception as error:  # noqa: BLE001 - a bad target string is the candidates' error
        return [MeasureResult((), f"{type(error).__name__}: {error}", 0.0) for _ in points]


def _measure_batch(task: Measurable, points: Sequence[Mapping[str, Any]],
                   settings: MeasureSettings, state: WorkerState | None,
                   timing: Any) -> list[MeasureResult]:
    from ember.autotune.database import knobs_json

    state = state if state is not None else WorkerState()
    timing = timing if timing is not None else contextlib.nullcontext()
    names = [knobs_json(p) for p in points]
    default = knobs_json(task.default_point())
    results: list[MeasureResult | None] = [None] * len(points)
    ready: dict[str, tuple[Kernel, float]] = {}  # name -> (kernel, build seconds)
    for index, (point, name) in enumerate(zip(points, names)):
        if name in ready:
            continue
        start = time.perf_counter()
        try:
            kernel = state.kept(task.key, name)
            if kernel is not None:  # measured before, built and checked already
                ready[name] = (kernel, 0.0)
                continue
            built = _build_and_check(task, point, name == default, settings, state, timing)
            if isinstance(built, str):
                results[index] = MeasureResult((), built, time.perf_counter() - start)
            else:
                ready[name] = (built, time.perf_counter() - start)
        except Exception as error:  # noqa: BLE001 - any failure of a candidate is its error
            results[index] = MeasureResult((), _error_text(error), time.perf_counter() - start)
    todo = [i for i, r in enumerate(results) if r is None and names[i] in ready]
    timed = _time_in_turns([ready[names[i]][0] for i in todo], settings, timing)
    charged: set[str] = set()  # a candidate listed twice: its build counted once
    for i, t in zip(todo, timed):
        seconds = 0.0 if names[i] in charged else ready[names[i]][1]
        charged.add(names[i])
        if t.error is not None:
            results[i] = MeasureResult((), t.error, seconds)
            continue
        results[i] = MeasureResult(tuple(t.costs), None, seconds)
        state.keep(task.key, names[i], t.kernel, min(t.costs))
    return [r if r is not None else MeasureResult((), "not measured", 0.0) for r in results]


def _build_and_check(task: Measurable, point: Mapping[str, Any], is_default: bool,
                     settings: MeasureSettings, state: WorkerState,
                     timing: Any) -> Kernel | str:
    """The candidate built, run once and checked against the default schedule's output (the
    reference, built first unless this is the default); its error text if it is wrong."""
    if settings.check and task.key not in state.references and not is_default:
        reference = task.build(None, settings.seed)
        with timing:
            reference.run()
        state.references[task.key] = [o.copy() for o in reference.outputs]
    kernel = task.build(point, settings.seed)
    with timing:  # every run of a kernel holds the turn, the checked one too
        kernel.run()
    if settings.check and task.key not in state.references:  # the default itself
        state.references[task.key] = [o.copy() for o in kernel.outputs]
    elif settings.check:
        wrong = compare_outputs(kernel.outputs, state.references[task.key], settings)
        if wrong is not None:
            return wrong
    return kernel


class _Turn:
    """A worker's side of the runner's timing turns: ask for the turn, wait for the go, say
    when done. The runner grants one turn at a time and takes it back from a worker that
    dies or hangs holding it (a lock shared by the workers would stay held)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.send(("turn",))
        self.conn.recv()

    def __exit__(self, *exc: object) -> None:
        self.conn.send(("done",))


def _worker_main(conn: Connection, turns: bool = False) -> None:
    """Serve ("task", task) and ("measure", key, points, settings) (a list of results back)
    until the pipe closes; with `turns`, every run of a kernel waits for the runner's go."""
    import faulthandler

    faulthandler.disable()  # a crashing candidate is expected here: no stack dump
    tasks: dict[str, Measurable] = {}
    state = WorkerState()
    timing = _Turn(conn) if turns else None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "task":
            tasks[message[1].key] = message[1]
            continue
        _, key, points, settings = message
        conn.send(measure_batch(tasks[key], points, settings, state, timing))


# -- in the tuner ----------------------------------------------------------------------------
class _Worker:
    def __init__(self, context: Any, method: str, turns: bool = False) -> None:
        self.method = method
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, turns), daemon=True)
        self.process.start()
        child.close()
        self.tasks: set[str] = set()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()

    def death(self) -> str:
        self.process.join(5)
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"


class LocalRunner:
    """Measures candidates in `workers` worker processes on this machine; a worker that dies
    or hangs is replaced. With several workers, candidates build in parallel while kernel
    runs take turns the runner grants one worker at a time, and while a kernel runs the
    other workers are stopped (SIGSTOP, then SIGCONT when its run ends: `exclusive`), so a
    timed kernel shares the machine with nothing of the tuner's. Why: on a 2-vCPU host whose
    vCPUs share one core, a 1-thread conv kernel ran 1.6-1.8x slower beside a build on the
    other vCPU, and unevenly (candidates' ratios moved by up to 15%). Within a batch the
    workers mostly build first and time after, so the overlap is at the edges: 24 candidates
    of two ResNet-18 conv tasks ranked with Spearman 0.985 / 0.991 against one worker's
    ranking without stopping, 0.993 / 0.990 with it. Workers are forked (they start
    with ember loaded), except for tasks on GPU targets, whose workers are spawned (fresh
    interpreters: a device runtime's threads and handles do not survive a fork); `start`
    forces one method for all."""

    def __init__(self, settings: MeasureSettings | None = None, workers: int = 1,
                 start: str | None = None, exclusive: bool = True) -> None:
        if workers < 1:
            raise TuningError(f"LocalRunner: workers must be >= 1, got {workers}")
        self.settings = settings or MeasureSettings()
        methods = multiprocessing.get_all_start_methods()
        if start is not None and start not in methods:
            raise TuningError(f"LocalRunner: start {start!r} is not a start method here; "
                              f"expected one of {methods}")
        self._start = start
        self._fork = "fork" if "fork" in methods else "spawn"
        self._workers: list[_Worker | None] = [None] * workers
        # with several workers, builds overlap but kernel runs take turns
        self._holder: int | None = None       # the slot whose kernel runs now
        self._waiting: list[int] = []         # slots asking for a turn, in order
        self._exclusive = exclusive and hasattr(signal, "SIGSTOP")
        self._stopped: dict[int, float] = {}  # slot -> when it was stopped for a turn
        self._stopped_seconds: dict[int, float] = {}  # slot -> off the clock, this job

    def _method(self, task: Measurable) -> str:
        if self._start is not None:
            return self._start
        target = task_target(task)
        return "spawn" if target is not None and target.kind in GPU_KINDS else self._fork

    def _worker(self, slot: int, method: str) -> _Worker:
        worker = self._workers[slot]
        if worker is not None and worker.method != method:
            self._kill(slot)
            worker = None
        if worker is None or not worker.process.is_alive():
            worker = self._workers[slot] = _Worker(multiprocessing.get_context(method), method,
                                                   turns=len(self._workers) > 1)
        return worker

    def measure(self, task: Measurable, points: Sequence[Mapping[str, Any]]
                ) -> list[MeasureResult]:
        """One result per point. Each worker gets a share of the points to build, check and
        time in turns; a share whose worker dies or runs past its time-out (the settings'
        time-out per candidate) is measured again one candidate at a time, so the one that
        crashed or hung gets the error and the others their times."""
        results: list[MeasureResult | None] = [None] * len(points)
        shares = min(len(self._workers), len(points))
        jobs = [list(range(k, len(points), shares)) for k in range(shares)]
        busy: dict[int, tuple[list[int], float]] = {}  # worker slot -> (job, deadline)
        asked: dict[int, float] = {}              # worker slot -> when it asked for a turn
        while jobs or busy:
            for slot in range(len(self._workers)):
                if slot in busy or not jobs:
                    continue
                job = jobs.pop(0)
                worker = self._worker(slot, self._method(task))
                try:
                    if task.key not in worker.tasks:
                        worker.conn.send(("task", task))
                        worker.tasks.add(task.key)
                    worker.conn.send(("measure", task.key, [dict(points[i]) for i in job],
                                      self.settings))
                except (BrokenPipeError, OSError) as error:
                    jobs[:0] = self._failed(job, slot, task, points, results, str(error))
                    continue
                busy[slot] = (job, time.monotonic() + self.settings.timeout * len(job))
                self._stopped_seconds[slot] = 0.0
            if not busy:
                continue
            now = time.monotonic()
            # a worker waiting for its turn, or stopped for another's, is not on the clock
            clocks = [self._deadline(slot, d) for slot, (_, d) in busy.items()
                      if self._on_clock(slot)]
            timeout = max(0.0, min(clocks) - now) if clocks else None
            conns = {self._workers[s].conn: s for s in busy}  # type: ignore[union-attr]
            ready = wait(list(conns), timeout)
            for conn in ready:
                slot = conns[conn]  # type: ignore[index]
                job, _ = busy[slot]
                # stopped mid-message (a partial one would block the read): let it finish;
                # a worker that sends is done building until it hears back
                self._resume(slot)
                try:
                    message = conn.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    busy.pop(slot)
                    jobs[:0] = self._failed(job, slot, task, points, results)
                    continue
                if message == ("turn",):
                    self._waiting.append(slot)
                    asked[slot] = time.monotonic()
                elif message == ("done",):
                    self._release(slot)
                else:
                    busy.pop(slot)
                    self._release(slot)
                    for i, result in zip(job, message):
                        results[i] = result
            granted = self._grant()
            if granted is not None and granted in busy and granted in asked:
                # waiting for the turn is not the candidate's time
                job, deadline = busy[granted]
                busy[granted] = (job, deadline + time.monotonic() - asked.pop(granted))
            now = time.monotonic()
            for slot, (job, deadline) in list(busy.items()):
                if now >= self._deadline(slot, deadline) and self._on_clock(slot):
                    busy.pop(slot)
                    self._kill(slot)
                    if len(job) > 1:
                        jobs[:0] = [[i] for i in job]
                        continue
                    results[job[0]] = MeasureResult(
                        (), f"timed out after {self.settings.timeout:g} s (build, check and "
                            f"runs) on task {task.description} with knobs "
                            f"{dict(points[job[0]])}")
        return [r if r is not None else MeasureResult((), "not measured") for r in results]

    def _failed(self, job: list[int], slot: int, task: Measurable,
                points: Sequence[Mapping[str, Any]], results: list[MeasureResult | None],
                detail: str = "") -> list[list[int]]:
        """After the worker of `job` died: the jobs to run again (each candidate alone), or,
        for a job of one, its error in `results`."""
        if len(job) > 1:
            self._kill(slot)
            return [[i] for i in job]
        results[job[0]] = MeasureResult((), self._died(slot, task, points[job[0]], detail))
        return []

    def _died(self, slot: int, task: Measurable, point: Mapping[str, Any],
              detail: str = "") -> str:
        worker = self._workers[slot]
        how = worker.death() if worker is not None else "unknown"
        self._kill(slot)
        return (f"worker process died ({how}{'; ' + detail if detail else ''}) measuring "
                f"task {task.description} with knobs {dict(point)}")

    def _on_clock(self, slot: int) -> bool:
        return slot not in self._waiting and slot not in self._stopped

    def _deadline(self, slot: int, deadline: float) -> float:
        return deadline + self._stopped_seconds.get(slot, 0.0)

    def _stop_others(self, holder: int) -> None:
        """Stop every other live worker while `holder`'s kernel runs."""
        if not self._exclusive:
            return
        for slot, worker in enumerate(self._workers):
            if slot == holder or worker is None or slot in self._stopped:
                continue
            try:
                os.kill(worker.process.pid, signal.SIGSTOP)  # type: ignore[arg-type]
            except (ProcessLookupError, TypeError):
                continue  # gone already: its pipe tells
            self._stopped[slot] = time.monotonic()

    def _resume(self, slot: int) -> None:
        since = self._stopped.pop(slot, None)
        if since is None:
            return
        self._stopped_seconds[slot] = (self._stopped_seconds.get(slot, 0.0)
                                       + time.monotonic() - since)
        worker = self._workers[slot]
        if worker is not None:
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(worker.process.pid, signal.SIGCONT)  # type: ignore[arg-type]

    def _resume_all(self) -> None:
        for slot in list(self._stopped):
            self._resume(slot)

    def _release(self, slot: int) -> None:
        if self._holder == slot:
            self._holder = None
            self._resume_all()
        if slot in self._waiting:
            self._waiting.remove(slot)

    def _grant(self) -> int | None:
        """Give the turn to the next waiting worker when nobody holds it (the others stopped
        while it runs); that worker's slot."""
        while self._holder is None and self._waiting:
            slot = self._waiting.pop(0)
            worker = self._workers[slot]
            try:
                if worker is not None:
                    self._stop_others(slot)
                    worker.conn.send(("go",))
                    self._holder = slot
                    return slot
            except (BrokenPipeError, OSError):  # it died: its error is read from its pipe
                self._resume_all()
        return None

    def _kill(self, slot: int) -> None:
        self._release(slot)
        self._stopped.pop(slot, None)
        worker = self._workers[slot]
        if worker is not None:
            worker.kill()
        self._workers[slot] = None

    def close(self) -> None:
        for slot in range(len(self._workers)):
            self._kill(slot)

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Kernel", "LocalRunner", "Measurable", "MeasureResult", "MeasureSettings",
           "Runner", "WorkerState", "compare_outputs", "measure_batch", "measure_one"]
