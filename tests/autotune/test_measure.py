"""Measuring candidates in worker processes: a candidate that crashes, hangs, raises or gives
a wrong answer becomes an error (naming the task) and measuring goes on."""

import os
import signal
import time

import numpy as np
import pytest

import ember
from ember import te
from ember.autotune.database import TuningDatabase
from ember.autotune.measure import LocalRunner, MeasureSettings, compare_outputs
from ember.autotune.tuner import tune
from ember.errors import TuningError
from ember.ops.knobs import Space

_MODULE = None


def _add_one():
    global _MODULE
    if _MODULE is None:
        a = te.placeholder((256,), "float32", name="a")
        b = te.compute((256,), lambda i: a[i] + te.const(1.0, "float32"), name="b")
        _MODULE = ember.build(te.create_schedule(b.op), [a, b], name="add_one")
    return _MODULE


class ToyKernel:
    def __init__(self, mode):
        self.mode = mode
        self.a = np.arange(256, dtype=np.float32)
        self.outputs = [np.zeros(256, np.float32)]

    def run(self):
        if self.mode == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.mode == "hang":
            time.sleep(3600)
        if self.mode == "slow":
            time.sleep(0.002)
        _add_one()(self.a, self.outputs[0])
        if self.mode == "wrong":
            self.outputs[0][7] += 0.5


class ToyTask:
    """A task whose candidates misbehave on purpose (mode = what the kernel does)."""

    key = "toy-task"
    op = "Toy"
    family = "ToyKnobs"
    description = "Toy add-one 256"
    target = "llvm"
    weight = 1

    def space(self):
        return Space({"mode": ("ok", "crash", "hang", "wrong", "raise", "fine")})

    def default_point(self):
        return {"mode": "ok"}

    def features(self, point):
        return (float(len(point["mode"])),) * 28

    def build(self, point, seed=0):
        mode = "ok" if point is None else point["mode"]
        if mode == "raise":
            raise ValueError("this candidate cannot be built")
        return ToyKernel(mode)


SETTINGS = MeasureSettings(repeat=3, min_run_seconds=0.001, timeout=3.0)


def test_crash_hang_wrong_and_raise_are_errors_and_measuring_goes_on():
    modes = ["ok", "crash", "hang", "wrong", "raise", "fine"]
    with LocalRunner(SETTINGS) as runner:
        results = runner.measure(ToyTask(), [{"mode": m} for m in modes])
    ok, crash, hang, wrong, raised, fine = results
    assert ok.ok and len(ok.costs) == 3 and all(c > 0 for c in ok.costs)
    assert crash.error is not None and not crash.ok
    assert "worker process died (signal SIGSEGV" in crash.error
    assert "Toy add-one 256" in crash.error and "'crash'" in crash.error
    assert hang.error.startswith("timed out after 3 s") and "Toy add-one 256" in hang.error
    assert wrong.error.startswith("wrong answer: output 0 differs") and "1 of 256" in wrong.error
    assert raised.error.startswith("ValueError: this candidate cannot be built")
    assert fine.ok  # a fresh worker took over after the crash and the hang


def test_tune_records_errors_and_continues(tmp_path):
    with TuningDatabase(tmp_path / "db.sqlite") as db, LocalRunner(SETTINGS) as runner:
        states = tune([ToyTask()], db, runner, trials=6, batch=6, search="grid",
                      confirm=0)
        records = db.records(task_key="toy-task")
    assert len(records) == 6
    by_mode = {r.knobs["mode"]: r for r in records}
    assert {m for m, r in by_mode.items() if r.ok} == {"ok", "fine"}
    assert by_mode["crash"].error.startswith("worker process died")
    assert states[0].errors == 4 and states[0].trials == 6
    assert states[0].best_knobs["mode"] in ("ok", "fine")


def test_resume_skips_what_was_measured(tmp_path):
    with TuningDatabase(tmp_path / "db.sqlite") as db, LocalRunner(SETTINGS) as runner:
        tune([ToyTask()], db, runner, trials=2, batch=2, search="grid", confirm=0)
        first = {r.knobs["mode"] for r in db.records()}
        states = tune([ToyTask()], db, runner, trials=2, batch=2, search="grid", confirm=0)
        second = [r.knobs["mode"] for r in db.records()][2:]
    assert first == {"ok", "crash"} and second == ["hang", "wrong"]
    assert states[0].trials == 2 and states[0].errors == 3


class SlowDefaultTask(ToyTask):
    key = "toy-slow-default"

    def space(self):
        return Space({"mode": ("slow", "fine")})

    def default_point(self):
        return {"mode": "slow"}


def test_confirmation_measures_default_and_best_again_without_building(tmp_path):
    with TuningDatabase(tmp_path / "db.sqlite") as db, LocalRunner(SETTINGS) as runner:
        states = tune([SlowDefaultTask()], db, runner, trials=2, batch=2, search="grid")
        modes = [(r.knobs["mode"], r.role) for r in db.records()]
        again = runner.measure(SlowDefaultTask(), [{"mode": "slow"}, {"mode": "fine"}])
    # the search, then the confirmation: default and candidate in turns, 2 rounds
    assert modes == [("slow", ""), ("fine", "")] + [("slow", "confirm"), ("fine", "confirm")] * 2
    assert states[0].best_knobs == {"mode": "fine"} and states[0].speedup > 2
    assert states[0].confirmed_speedup > 2
    assert all(r.ok and r.build_seconds == 0.0 for r in again)  # kept built in the worker


def test_compare_outputs():
    want = [np.ones((4, 4), np.float32) * 100]
    assert compare_outputs([want[0] + 1e-3], want, MeasureSettings()) is None
    assert "shape (16,)" in compare_outputs([want[0].reshape(16)], want, MeasureSettings())
    ints = [np.arange(5)]
    assert compare_outputs([np.arange(5) + (np.arange(5) == 2)], ints,
                           MeasureSettings()).startswith("wrong answer: output 0")


def test_bad_settings():
    with pytest.raises(TuningError, match="repeat and max_number must be >= 1"):
        MeasureSettings(repeat=0)
    with pytest.raises(TuningError, match="cold_weight_bytes must be >= 0"):
        MeasureSettings(cold_weight_bytes=-1)
    with pytest.raises(TuningError, match="workers must be >= 1"):
        LocalRunner(workers=0)
    with pytest.raises(TuningError, match="unknown search 'annealing'"):
        tune([ToyTask()], None, None, search="annealing")
    with pytest.raises(TuningError, match="trials and batch must be >= 1"):
        tune([ToyTask()], None, None, trials=0)


class LoggingKernel(ToyKernel):
    """Appends (pid, start, end) of every run to a file: what the runs of two workers did."""

    pause = 0.001

    def __init__(self, mode, log):
        super().__init__(mode)
        self.log = log

    def run(self):
        start = time.monotonic()
        super().run()
        time.sleep(self.pause)
        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {start!r} {time.monotonic()!r}\n")


class SlowBuildTask(ToyTask):
    """Candidates that take 0.3 s to build and log their runs."""

    key = "slow-build-task"

    def __init__(self, log):
        self.log = log

    def build(self, point, seed=0):
        time.sleep(0.3)
        mode = "ok" if point is None else point["mode"]
        return LoggingKernel("ok" if mode == "fine" else mode, self.log)


def _runs(log):
    return sorted((float(a), float(b), pid) for pid, a, b in
                  (line.split() for line in log.read_text().splitlines()))


def test_two_workers_build_in_parallel_but_never_time_at_once(tmp_path):
    _add_one()  # built before the workers fork: their first run does not build it
    log = tmp_path / "runs.txt"
    points = [{"mode": "ok"}] + [{"mode": "fine"}] * 7
    settings = MeasureSettings(repeat=3, min_run_seconds=0.003, timeout=10.0)
    with LocalRunner(settings, workers=2) as runner:
        start = time.monotonic()
        results = runner.measure(SlowBuildTask(str(log)), points)
        elapsed = time.monotonic() - start
    assert all(r.ok for r in results)
    runs = _runs(log)
    assert len({pid for _, _, pid in runs}) == 2  # both workers ran kernels
    for (_, end, pid), (start_next, _, pid_next) in zip(runs, runs[1:]):
        if pid != pid_next:  # a run of another worker starts only after this one ended
            assert start_next >= end
    # 8 candidates + a reference in the second worker, 0.3 s each to build: one worker
    # alone needs 2.7 s
    assert elapsed < 2.5


class LongKernel(LoggingKernel):
    pause = 0.011  # a call long beside the stop signal's way to the other CPU


class BusyBuildTask(SlowBuildTask):
    """Candidates whose 0.3 s build keeps the CPU busy and logs a time every 0.5 ms; their
    kernels' calls last 11 ms."""

    key = "busy-build-task"

    def build(self, point, seed=0):
        end = time.monotonic() + 0.3
        with open(self.log + ".builds", "a") as f:
            while (now := time.monotonic()) < end:
                f.write(f"{os.getpid()} {now!r}\n")
                f.flush()
                while time.monotonic() < now + 0.0005:
                    pass
        mode = "ok" if point is None else point["mode"]
        return LongKernel("ok" if mode == "fine" else mode, self.log)


@pytest.mark.parametrize("exclusive", [True, False])
def test_other_workers_stop_building_while_a_kernel_is_timed(tmp_path, exclusive):
    _add_one()
    log = tmp_path / "runs.txt"
    points = [{"mode": "ok"}] + [{"mode": "fine", "n": n} for n in range(5)]  # 5 builds
    settings = MeasureSettings(repeat=3, min_run_seconds=0.01, timeout=10.0)
    with LocalRunner(settings, workers=2, exclusive=exclusive) as runner:
        results = runner.measure(BusyBuildTask(str(log)), points)
    assert all(r.ok for r in results)
    builds = [(int(pid), float(t)) for pid, t in
              (line.split() for line in (tmp_path / "runs.txt.builds").read_text().splitlines())]
    # a build step of another worker inside a run (past the first 2 ms: the stop signal's
    # way to the other CPU)
    overlaps = sum(1 for start, end, pid in _runs(log) for bpid, t in builds
                   if bpid != int(pid) and start + 0.002 < t < end)
    if exclusive:
        assert overlaps == 0
    else:  # the same work without stopping: builds do run beside timed kernels
        assert overlaps > 0


def test_a_worker_crashing_or_hanging_in_its_turn_does_not_stop_the_other(tmp_path):
    _add_one()
    log = tmp_path / "runs.txt"
    points = [{"mode": "ok"}, {"mode": "crash"}, {"mode": "hang"}] + [{"mode": "fine"}] * 4
    settings = MeasureSettings(repeat=2, min_run_seconds=0.002, timeout=2.0)
    with LocalRunner(settings, workers=2) as runner:
        results = runner.measure(SlowBuildTask(str(log)), points)
    assert [r.ok for r in results] == [True, False, False, True, True, True, True]
    assert "signal SIGSEGV" in results[1].error
    assert results[2].error.startswith("timed out after 2 s")


class _WeightedKernel:
    """y = x + w (a kernel naming its weight argument); records which w each call read."""

    def __init__(self, n=1024):
        self.args = [np.ones(n, np.float32), np.full(n, 2.0, np.float32),
                     np.zeros(n, np.float32)]
        self.weights = [1]
        self.outputs = self.args[2:]
        self.seen = []

    def main(self, x, w, y):
        self.seen.append(id(w))
        np.add(x, w, out=y)

    def run(self):
        self.main(*self.args)


def test_cold_weights_rotate_through_copies_and_leave_activations_alone():
    from ember.autotune.measure import MAX_WEIGHT_COPIES, _argument_sets, _time

    k = _WeightedKernel()
    sets = _argument_sets(k, 16 * k.args[1].nbytes)
    assert len(sets) == 16
    assert len({id(s[1]) for s in sets}) == 16          # the weight: 16 distinct copies
    assert all(s[0] is k.args[0] and s[2] is k.args[2] for s in sets)  # x and y shared
    assert all(np.array_equal(s[1], k.args[1]) for s in sets)
    assert all(s[1].ctypes.data % 64 == 0 for s in sets[1:])  # copies aligned as the model's
    assert len(_argument_sets(k, 1 << 40)) == MAX_WEIGHT_COPIES
    assert _argument_sets(k, 0) is None
    costs = _time(k, MeasureSettings(repeat=3, cold_weight_bytes=8 * k.args[1].nbytes,
                                     min_run_seconds=1e-4))
    assert len(costs) == 3 and min(costs) > 0
    # the turn goes on across runs: every copy is read, each about as often
    counts = np.unique(k.seen, return_counts=True)[1]
    assert len(counts) == 8 and counts.max() - counts.min() <= 1 + len(costs)
    np.testing.assert_array_equal(k.outputs[0], 3.0)
    k.seen.clear()
    _time(k, MeasureSettings(repeat=2, cold_weight_bytes=0, min_run_seconds=1e-4))
    assert set(k.seen) == {id(k.args[1])}  # warm: always the one weight buffer


class _ThreadsKernel:
    """Writes how many threads parallel loops may use while it runs."""

    def __init__(self):
        self.outputs = [np.zeros(1, np.float32)]
        self.seen = set()

    def run(self):
        from ember.runtime import threadpool

        self.seen.add(threadpool.num_threads())


class _ThreadsTask(ToyTask):
    key = "threads-task"
    kernels = []

    def build(self, point, seed=0):
        kernel = _ThreadsKernel()
        self.kernels.append(kernel)
        return kernel


@pytest.mark.parametrize("cores", [1, 3])
def test_candidates_run_on_the_targets_thread_count(cores):
    from ember.autotune.measure import measure_one
    from ember.runtime import threadpool

    task = _ThreadsTask()
    task.target = f"llvm -num-cores={cores}"
    task.kernels = []
    before = threadpool.num_threads()
    threadpool.set_num_threads(2)
    try:
        result = measure_one(task, task.default_point(), SETTINGS)
        assert result.ok, result.error
        assert {n for k in task.kernels for n in k.seen} == {cores}
        assert threadpool.num_threads() == 2  # the process's own count is given back
    finally:
        threadpool.set_num_threads(before)


def test_a_bad_target_string_is_the_candidates_error():
    from ember.autotune.measure import measure_one

    task = _ThreadsTask()
    task.target = "llvm -num-cores=many"
    result = measure_one(task, task.default_point(), SETTINGS)
    assert not result.ok and "num-cores" in result.error


class _DriftingKernel:
    """A kernel whose every call is slower than the one before (a machine slowing down):
    `calls` is shared by the kernels of one test."""

    def __init__(self, name, calls, log):
        self.name, self.calls, self.log = name, calls, log
        self.outputs = [np.zeros(1, np.float32)]

    def run(self):
        self.calls[0] += 1
        self.log.append(self.name)

    def timed(self, number):
        """Its own clock (as a device kernel has): 1 ms a call, 5% more with every call
        made so far, so the test does not hang on the host's sleep and timer precision."""
        seconds = 0.0
        for _ in range(number):
            self.run()
            seconds += 0.001 * (1.0 + 0.05 * self.calls[0])
        return seconds


class _DriftingTask(ToyTask):
    key = "drifting-task"

    def __init__(self):
        self.calls, self.log = [0], []

    def space(self):
        return Space({"mode": ("ok", "a", "b", "c")})

    def build(self, point, seed=0):
        return _DriftingKernel("ok" if point is None else point["mode"], self.calls, self.log)


def test_the_candidates_of_a_batch_are_timed_in_turns():
    from ember.autotune.measure import measure_batch

    task = _DriftingTask()
    settings = MeasureSettings(repeat=6, min_run_seconds=1e-4, timeout=10.0)
    points = [{"mode": m} for m in ("ok", "a", "b", "c")]
    results = measure_batch(task, points, settings)
    assert all(r.ok and len(r.costs) == 6 for r in results)
    # after each is built, checked and its calls per run found: rounds of one run each
    assert task.log[-24:] == ["ok", "a", "b", "c"] * 6
    # the same kernel timed in turns: the drift slows all four alike (one after the other,
    # the last would come out (1 + 0.05 * 24) / (1 + 0.05 * 6) = 1.7x the first)
    best = [r.best for r in results]
    assert max(best) / min(best) < 1.15


def test_a_candidate_raising_while_timed_leaves_the_others_their_times():
    from ember.autotune.measure import measure_batch

    class Flaky(_DriftingKernel):
        def run(self):
            super().run()
            if self.name == "a" and self.calls[0] > 6:
                raise RuntimeError("lost the device")

    class FlakyTask(_DriftingTask):
        def build(self, point, seed=0):
            return Flaky("ok" if point is None else point["mode"], self.calls, self.log)

    results = measure_batch(FlakyTask(), [{"mode": m} for m in ("ok", "a", "b")],
                            MeasureSettings(repeat=3, min_run_seconds=1e-4))
    assert results[0].ok and results[2].ok
    assert results[1].error.startswith("RuntimeError: lost the device")


def test_candidates_timed_in_turns_share_their_cold_weight_copies():
    from ember.autotune.measure import _argument_sets

    a, b = _WeightedKernel(), _WeightedKernel()
    first = _argument_sets(a, 8 * a.args[1].nbytes)
    second = _argument_sets(b, 8 * b.args[1].nbytes, like=first)
    assert [s[1] for s in second] == [s[1] for s in first]  # the same 8 weight copies
    assert all(s[0] is b.args[0] and s[2] is b.args[2] for s in second)  # its own x, y
    b.args[1][:] = 5.0  # other weights: copies of its own
    third = _argument_sets(b, 8 * b.args[1].nbytes, like=first)
    assert all(s[1] is not f[1] and s[1][0] == 5.0 for s, f in zip(third, first))


def test_a_crash_in_a_shared_batch_is_found_candidate_by_candidate():
    points = [{"mode": m} for m in ("ok", "fine", "crash", "fine", "wrong")]
    with LocalRunner(SETTINGS) as runner:
        results = runner.measure(ToyTask(), points)
    assert [r.ok for r in results] == [True, True, False, True, False]
    assert "signal SIGSEGV" in results[2].error and "'crash'" in results[2].error
    assert results[4].error.startswith("wrong answer")
