"""Tasks of a real model, a short tuning run on them, and compile(tuning_db=...) applying the
best record of each task (and only records of this target)."""

import time

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ember  # noqa: E402
from ember.autotune import (  # noqa: E402
    LocalRunner,
    MeasureSettings,
    Record,
    TuningDatabase,
    extract_tasks,
    tune,
)
from ember.autotune.apply import database_knobs  # noqa: E402
from ember.autotune.features import FEATURE_NAMES  # noqa: E402
from ember.errors import TuningError  # noqa: E402
from ember.target import Target  # noqa: E402

TARGET = "llvm -num-cores=1"


def _two_conv_model():
    """x -> conv 8->16 3x3 -> relu -> conv 16->16 3x3 -> relu -> conv 16->16 3x3 -> relu."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    shapes = [(16, 8, 3, 3), (16, 16, 3, 3), (16, 16, 3, 3)]
    x = "x"
    for i, shape in enumerate(shapes):
        w = numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32),
                                    f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1],
                                      name=f"conv{i}"))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        x = f"r{i}"
    graph = helper.make_graph(nodes, "convs",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [1, 8, 8, 8])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT,
                                                             [1, 16, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reference(model, x):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.fixture(scope="module")
def model():
    return _two_conv_model()


@pytest.fixture(scope="module")
def tasks(model):
    return extract_tasks(model, TARGET)


def test_extract_tasks_weights(tasks):
    convs = [t for t in tasks if t.family == "ConvKnobs"]
    assert sorted(t.weight for t in convs) == [1, 2]  # the two 16->16 convs share a task
    heavy = next(t for t in convs if t.weight == 2)
    assert len(heavy.groups) == 2 and heavy.description.startswith("ConvNCHWc")
    assert heavy.space().size > 1
    assert heavy.space().contains(heavy.default_point())
    assert tasks == sorted(tasks, key=lambda t: (-t.weight, t.description))


def test_tune_then_compile_uses_best_record(model, tasks, tmp_path):
    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    path = tmp_path / "tune.sqlite"
    with TuningDatabase(path) as db, LocalRunner(MeasureSettings(repeat=2)) as runner:
        states = tune([heavy], db, runner, trials=3, batch=3, search="random",
                      confirm=0)
        assert states[0].trials == 3 and len(db.records(task_key=heavy.key)) == 3
        assert all(r.features is not None for r in db.records())
        # a record that beats everything, at a point that is not the default
        point = next(p for p in heavy.space().points() if p != heavy.default_point())
        fingerprint = Target(TARGET).fingerprint
        assert {r.timing for r in db.records()} == {"cold"}   # as the runner times
        db.add([Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                       point, (1e-9,), None, None, "test", time.time(), "cold"),
                # faster still, but measured on another machine: never applied
                Record(heavy.key, heavy.family, heavy.description, TARGET, "other cpu",
                       heavy.default_point() | {"ow_tile": 1}, (1e-12,), None, None,
                       "test", time.time())])
    compiled = ember.compile(model, target=TARGET, tuning_db=path, cache=False)
    knobs = compiled.stats["knobs"]
    tuned = [name for name in heavy.groups]
    for name in tuned:
        assert {k: knobs[name][k] for k in point} == point
    x = np.random.default_rng(1).standard_normal((1, 8, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(compiled.run({"x": x})[0], _reference(model, x),
                               rtol=1e-4, atol=1e-4)


def test_record_that_does_not_fit_the_family(model, tasks, tmp_path):
    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    with TuningDatabase(tmp_path / "db.sqlite") as db:
        db.add(Record(heavy.key, heavy.family, heavy.description, TARGET,
                      Target(TARGET).fingerprint, {"tile_size": 3}, (1e-9,), None, None,
                      "test", time.time()))
    with pytest.raises(TuningError, match=r"knobs \{'tile_size': 3\} do not fit ConvKnobs"):
        ember.compile(model, target=TARGET, tuning_db=tmp_path / "db.sqlite", cache=False)


def test_record_without_a_measured_default_is_not_applied(model, tasks, tmp_path):
    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    point = next(p for p in heavy.space().points() if p != heavy.default_point())
    fingerprint = Target(TARGET).fingerprint
    with TuningDatabase(tmp_path / "db.sqlite") as db:
        db.add(Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                      point, (1e-9,), None, None, "test", time.time()))
        from ember.autotune.lowering import knob_task

        task = knob_task(heavy.group, Target(TARGET))
        assert database_knobs(db, TARGET)(heavy.group, task) is None
        db.add(Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                      heavy.default_point(), (1e-8,), None, None, "test", time.time()))
        assert database_knobs(db, TARGET)(heavy.group, task) == heavy.knobs_at(point)


def test_record_missing_a_knob_of_the_space_is_not_applied(model, tasks, tmp_path):
    """Records made before a knob joined the space (here: without k_chunk) were measured on
    other kernels than their knobs build now: they do not apply."""
    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    assert "k_chunk" in heavy.space().choices
    point = next(p for p in heavy.space().points() if p != heavy.default_point())
    fingerprint = Target(TARGET).fingerprint
    from ember.autotune.lowering import knob_task

    task = knob_task(heavy.group, Target(TARGET))
    with TuningDatabase(tmp_path / "db.sqlite") as db:
        for knobs, cost in ((point, 1e-9), (heavy.default_point(), 1e-8)):
            old = {k: v for k, v in knobs.items() if k != "k_chunk"}
            db.add(Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                          old, (cost,), None, None, "test", time.time()))
        assert database_knobs(db, TARGET)(heavy.group, task) is None
        for knobs, cost in ((point, 1e-9), (heavy.default_point(), 1e-8)):
            db.add(Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                          knobs, (cost,), None, None, "test", time.time()))
        assert database_knobs(db, TARGET)(heavy.group, task) == heavy.knobs_at(point)


def test_records_apply_only_against_a_default_timed_the_same_way(model, tasks, tmp_path):
    """A candidate timed warm (weights in cache) never replaces a default timed cold: a
    task's records count only if timed like its newest one."""
    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    point = next(p for p in heavy.space().points() if p != heavy.default_point())
    fingerprint = Target(TARGET).fingerprint
    from ember.autotune.lowering import knob_task

    task = knob_task(heavy.group, Target(TARGET))

    def record(knobs, cost, stamp, timing):
        return Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                      knobs, (cost,), None, None, "test", stamp, timing)

    with TuningDatabase(tmp_path / "db.sqlite") as db:
        db.add([record(heavy.default_point(), 2e-3, 1.0, "cold"),
                record(point, 1e-3, 2.0, "warm")])
        assert database_knobs(db, TARGET)(heavy.group, task) is None
        db.add(record(heavy.default_point(), 3e-3, 3.0, "warm"))
        assert database_knobs(db, TARGET)(heavy.group, task) == heavy.knobs_at(point)
        db.add(record(point, 4e-3, 4.0, "cold"))   # newest cold: slower than the default
        assert database_knobs(db, TARGET)(heavy.group, task) is None


def test_missing_database(model):
    with pytest.raises(TuningError, match="tuning database '.*nothing.sqlite' does not exist"):
        ember.compile(model, target=TARGET, tuning_db="/nonexistent/nothing.sqlite")


def test_given_knobs_win_over_records(model, tasks, tmp_path):
    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    with TuningDatabase(tmp_path / "db.sqlite") as db:
        from ember.autotune.lowering import knob_task

        task = knob_task(heavy.group, Target(TARGET))
        given = heavy.knobs_at(heavy.default_point() | {"ow_tile": 1})
        lookup = database_knobs(db, TARGET, {heavy.group.name: given})
        assert lookup(heavy.group, task) == given
        assert database_knobs(db, TARGET)(heavy.group, task) is None  # no record yet


@pytest.mark.parametrize("other", ["llvm -num-cores=2", "llvm -mcpu=skylake-avx512 -num-cores=1"])
def test_records_of_another_target_fingerprint_are_ignored(model, tasks, tmp_path, other):
    """Records measured with another thread count or on another CPU (default and a faster
    candidate both) never apply to this target; on their own target they do."""
    from ember.autotune.lowering import knob_task

    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    there = knob_task(heavy.group, Target(other))
    # the other target's own default (its facts may choose another tile than the host's)
    theirs = type(heavy.default()).default(there).to_dict()
    default_there = {k: theirs[k] for k in heavy.default_point()}
    point = next(p for p in heavy.space().points()
                 if p not in (heavy.default_point(), default_there))
    assert Target(other).fingerprint != Target(TARGET).fingerprint
    with TuningDatabase(tmp_path / "db.sqlite") as db:
        for knobs, cost in ((default_there, 1e-3), (point, 1e-6)):
            db.add(Record(heavy.key, heavy.family, heavy.description, other,
                          Target(other).fingerprint, knobs, (cost,), None, None, "test",
                          time.time()))
        assert database_knobs(db, TARGET)(heavy.group, knob_task(heavy.group,
                                                                 Target(TARGET))) is None
        chosen = database_knobs(db, other)(heavy.group, there)
        assert chosen is not None and {k: chosen.to_dict()[k] for k in point} == point
    compiled = ember.compile(model, target=TARGET, tuning_db=tmp_path / "db.sqlite",
                             cache=False)
    default = heavy.default().to_dict()
    for name in heavy.groups:
        assert {k: compiled.stats["knobs"][name][k] for k in point} == \
            {k: default[k] for k in point}


def _gemm_model(m=32, k=256, n=256):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32) * 0.1, "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="gemm")], "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_tuning_a_small_gemm_finds_a_faster_config_than_the_worst(tmp_path):
    """The model-guided tuner on a GEMM: every candidate computes the right numbers, the best
    found is faster than the slowest tried by a clear margin, and compiling with the
    database gives the right answer with the best record's knobs where they beat the
    default."""
    gemm = _gemm_model()
    [task] = [t for t in extract_tasks(gemm, TARGET) if t.family == "DenseKnobs"]
    path = tmp_path / "gemm.sqlite"
    settings = MeasureSettings(repeat=3, min_run_seconds=0.002)
    with TuningDatabase(path) as db, LocalRunner(settings) as runner:
        [state] = tune([task], db, runner, trials=20, batch=5, seed=0, confirm=2)
        records = db.records(task_key=task.key)
    ok = [r for r in records if r.ok]
    # the confirmation: the default and the 3 fastest others, 2 rounds, after the search
    confirmed = [r for r in records if r.role == "confirm"]
    default = json_key(task.default_point())
    search = [r for r in records if r.role == ""]
    fastest = sorted({json_key(r.knobs): r.best for r in sorted(
        search, key=lambda r: -r.best)}.items(), key=lambda kv: kv[1])
    if fastest[0][0] != default:   # something beat the default
        others = [k for k, _ in fastest if k != default][:3]
        assert sorted(json_key(r.knobs) for r in confirmed) == sorted([default, *others] * 2)
        assert records[-len(confirmed):] == confirmed
        assert set(state.confirmed) == {default, *others}
        assert state.confirmed_speedup == state.confirmed[default] / min(
            state.confirmed.values())
    else:
        assert not confirmed and state.confirmed_speedup is None
    assert not [r.error for r in records if not r.ok]  # the check passed for every candidate
    assert len({json_key(r.knobs) for r in records}) >= 10
    worst = max(r.best for r in ok)
    assert state.best_cost == min(r.best for r in ok)
    assert state.best_cost < 0.8 * worst
    compiled = ember.compile(gemm, target=TARGET, tuning_db=path, cache=False)
    x = np.random.default_rng(2).standard_normal((32, 256)).astype(np.float32)
    w = numpy_helper.to_array(gemm.graph.initializer[0])
    np.testing.assert_allclose(compiled.run({"x": x})[0], x @ w, rtol=1e-4, atol=1e-4)


def json_key(knobs):
    from ember.autotune.database import knobs_json

    return knobs_json(knobs)


def _stalled(weight, latency, rounds, improving=0.0):
    """A TaskProgress-like record: `rounds` search rounds after the default, each improving
    the best by `improving` (relative)."""
    from types import SimpleNamespace

    from ember.autotune.tuner import TaskProgress

    p = TaskProgress(SimpleNamespace(weight=weight), "fp", None, set())
    cost = latency
    p.history = [cost]
    for _ in range(rounds):
        cost *= 1.0 - improving
        p.history.append(cost)
    p.best_cost = cost
    return p


def test_scheduler_spreads_rounds_by_share_once_searches_stall():
    """Stalled tasks share the rounds in proportion to weight x latency (the heavy one does
    not take them all); a task still improving gets the next round over a stalled one."""
    from ember.autotune.tuner import _priority

    heavy, light = _stalled(4, 1e-3, 0), _stalled(1, 1e-3, 0)
    picks = {"heavy": 0, "light": 0}
    for _ in range(50):
        name, p = max((("heavy", heavy), ("light", light)), key=lambda kv: _priority(kv[1]))
        picks[name] += 1
        p.history.append(p.history[-1])  # no gain
    assert 3 <= picks["heavy"] / picks["light"] <= 5, picks
    improving = _stalled(1, 1e-3, 10, improving=0.05)
    stalled = _stalled(1, 1e-3, 10)
    assert _priority(improving) > _priority(stalled)
    fresh = _stalled(1, 1e-3, 0)
    assert _priority(fresh) > _priority(stalled)


def test_task_kernels_name_their_weights_for_cold_timing():
    """A conv task's kernel names the model's weight (and bias) arguments, not its input or
    output: those are what cold timing rotates."""
    task = next(t for t in extract_tasks(_two_conv_model(), TARGET) if t.op == "ConvNCHWc")
    kernel = task.build(None)
    assert kernel.weights
    shapes = [kernel.args[i].shape for i in kernel.weights]
    assert any(len(s) >= 4 for s in shapes), shapes       # the packed conv weight
    data = kernel.args[0]
    assert 0 not in kernel.weights and data.shape[0] == 1  # the activation is not rotated
    assert all(kernel.args[i] is not o for i in kernel.weights for o in kernel.outputs)


def test_task_kernels_are_timed_on_64_byte_aligned_arguments():
    """As in the model's workspace: numpy's own arrays (16-byte aligned) would split a cache
    line on every vector load and store of a candidate and rank tiles by it."""
    for task in extract_tasks(_two_conv_model(), TARGET):
        kernel = task.build(None)
        assert all(a.ctypes.data % 64 == 0 for a in kernel.args), task.description


def test_tuned_groups_are_reported(model, tasks, tmp_path, capsys):
    """The groups whose knobs came from records: in compile stats, in an exported library's
    metadata and in `ember inspect --db` (for the .onnx and the .so); for another target,
    inspect names the targets the records were made for."""
    from ember.cli import main
    from ember.driver import export_library
    from ember.runtime.library import load_library

    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    point = next(p for p in heavy.space().points() if p != heavy.default_point())
    fingerprint = Target(TARGET).fingerprint
    db_path, onnx_path = tmp_path / "db.sqlite", tmp_path / "convs.onnx"
    onnx.save(model, onnx_path)
    with TuningDatabase(db_path) as db:
        for knobs, cost in ((point, 1e-9), (heavy.default_point(), 1e-8)):
            db.add(Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                          knobs, (cost,), None, None, "test", time.time()))
    compiled = ember.compile(model, target=TARGET, tuning_db=db_path, cache=False)
    assert compiled.stats["tuned"] == sorted(heavy.groups)
    assert ember.compile(model, target=TARGET, cache=False).stats["tuned"] == []
    library = export_library(model, tmp_path / "convs.so", target=TARGET, tuning_db=db_path,
                             cache=False)
    meta = load_library(library).metadata
    assert meta["tuned"] == sorted(heavy.groups)
    for name in heavy.groups:
        assert {k: meta["knobs"][name][k] for k in point} == point
    capsys.readouterr()
    for args in ([str(onnx_path), "--db", str(db_path), "--target", TARGET], [str(library)]):
        assert main(["inspect", *args]) == 0
        out = capsys.readouterr().out
        assert f"tuned knobs: {len(heavy.groups)} of " in out
        assert all(f"  {name} (ConvKnobs): " in out for name in heavy.groups)
    assert main(["inspect", str(onnx_path), "--db", str(db_path),
                 "--target", "llvm -num-cores=2"]) == 0
    out = capsys.readouterr().out
    assert "tuned knobs: 0 of " in out and f"made for other targets: {TARGET};" in out


def test_confirmation_decides_what_applies(model, tasks, tmp_path):
    """A candidate whose one search measurement was the fastest of all but which the
    confirmation (default and candidates timed again in turns) finds slower than the default
    does not apply; the candidate the confirmation finds fastest does, though its search
    measurement was slower; without a confirmed default the fastest record decides."""
    from ember.autotune.lowering import knob_task

    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    default = heavy.default_point()
    lucky, steady = [p for p in heavy.space().points() if p != default][:2]
    fingerprint = Target(TARGET).fingerprint
    task = knob_task(heavy.group, Target(TARGET))
    stamp = iter(range(1, 100))

    def record(knobs, cost, role=""):
        return Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                      knobs, (cost,), None, None, "test", float(next(stamp)), "cold", role)

    with TuningDatabase(tmp_path / "db.sqlite") as db:
        db.add([record(default, 2.0e-3), record(lucky, 1.0e-3), record(steady, 1.8e-3)])
        assert database_knobs(db, TARGET)(heavy.group, task) == heavy.knobs_at(lucky)
        db.add([record(p, c, "confirm") for p, c in
                ((default, 1.9e-3), (lucky, 2.1e-3), (steady, 1.7e-3),
                 (default, 1.9e-3), (lucky, 2.0e-3), (steady, 1.75e-3))])
        assert database_knobs(db, TARGET)(heavy.group, task) == heavy.knobs_at(steady)
        db.add([record(steady, 3e-3, "confirm") for _ in range(3)])  # median now 3e-3
        assert database_knobs(db, TARGET)(heavy.group, task) is None


def test_records_checked_in_model_order(model, tasks, tmp_path):
    """check_in_model times the groups whose record applies in model order against the
    default build and keeps both times; a record whose groups ran no faster in the model
    no longer applies, one that ran faster still does."""
    from ember.autotune.lowering import knob_task
    from ember.tune_check import check_in_model

    heavy = next(t for t in tasks if t.family == "ConvKnobs" and t.weight == 2)
    point = next(p for p in heavy.space().points() if p != heavy.default_point())
    fingerprint = Target(TARGET).fingerprint
    task = knob_task(heavy.group, Target(TARGET))
    path = tmp_path / "db.sqlite"
    with TuningDatabase(path) as db:
        db.add([Record(heavy.key, heavy.family, heavy.description, TARGET, fingerprint,
                       knobs, (cost,), None, None, "test", time.time(), "cold", "confirm")
                for knobs, cost in ((heavy.default_point(), 2e-3), (point, 1e-3))])
    verdicts = check_in_model(model, path, TARGET, rounds=2)
    assert list(verdicts) == [heavy.description] and verdicts[heavy.description] > 0
    with TuningDatabase(path) as db:
        checks = db.model_checks(fingerprint)[heavy.key]
        assert set(checks) == {json_key(heavy.default_point()), json_key(point)}
        for default_s, tuned_s, applies in ((1e-3, 2e-3, False), (2e-3, 1e-3, True)):
            db.add_model_checks([(heavy.key, fingerprint, heavy.default_point(), default_s),
                                 (heavy.key, fingerprint, point, tuned_s)])
            got = database_knobs(db, TARGET)(heavy.group, task)
            assert got == (heavy.knobs_at(point) if applies else None)
    with TuningDatabase(tmp_path / "other.sqlite") as db:   # nothing applies: nothing timed
        pass
    assert check_in_model(model, tmp_path / "other.sqlite", TARGET) == {}


def test_transfer_takes_other_tasks_and_this_task_on_other_machines(tasks, tmp_path):
    """What warms up a task's cost model: records of other tasks of its family, and its own
    task measured on another target (an imported database of another machine), but not
    its own records here (the search observes those) nor other families'."""
    from ember.autotune.tuner import _transfer

    convs = [t for t in tasks if t.family == "ConvKnobs"]
    task, other_task = convs[0], convs[1]
    here = Target(TARGET).fingerprint
    features = (1.0,) * len(FEATURE_NAMES)

    def record(t, fingerprint, family=None):
        return Record(t.key, family or t.family, t.description, TARGET, fingerprint,
                      t.default_point(), (1e-3,), None, features, "test", time.time(),
                      timing="cold")

    with TuningDatabase(tmp_path / "db.sqlite") as db:
        db.add([record(task, here), record(task, "another machine"),
                record(other_task, here), record(task, "x", family="DenseKnobs")])
        sources = sorted(g for _, _, g in _transfer(db, task, here, "cold"))
    assert sources == sorted([f"{task.key}/another machine/cold",
                              f"{other_task.key}/{here}/cold"])
