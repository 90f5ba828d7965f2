"""The tuning database: round trip, best record, atomic batches under a kill, concurrent
writers, JSON lines exchange, and clear errors for corrupt or missing files."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ember.autotune.database import Record, TuningDatabase, knobs_json
from ember.errors import TuningError


def _record(key="t1", knobs=None, costs=(1e-3, 2e-3, 1.5e-3), error=None, fp="fp-a",
            stamp=None, timing="cold", role=""):
    return Record(key, "ConvKnobs", f"task {key}", "llvm", fp, knobs or {"ow_tile": 4},
                  tuple(costs) if error is None else (), error, (1.0, 2.0), "0.1.0",
                  time.time() if stamp is None else stamp, timing, role)


def test_round_trip_and_best(tmp_path):
    path = tmp_path / "db.sqlite"
    with TuningDatabase(path) as db:
        assert db.add([_record(knobs={"ow_tile": 4}, costs=(3e-3, 3e-3)),
                       _record(knobs={"ow_tile": 8}, costs=(1e-3, 5e-3, 2e-3)),
                       _record(knobs={"ow_tile": 2}, error="wrong answer: ..."),
                       _record(key="t2", knobs={"ow_tile": 1}, costs=(1e-6,)),
                       _record(knobs={"ow_tile": 7}, costs=(1e-7,), fp="fp-b")]) == 5
    with TuningDatabase(path) as db:
        assert len(db) == 5
        best = db.best("t1", "fp-a")
        assert best is not None and best.knobs == {"ow_tile": 8}
        assert best.median == pytest.approx(2e-3) and best.best == pytest.approx(1e-3)
        assert db.best("t1", "fp-c") is None
        errors = [r for r in db.records(task_key="t1") if not r.ok]
        assert len(errors) == 1 and errors[0].error.startswith("wrong answer")
        assert db.measured("t1", "fp-a") == {knobs_json({"ow_tile": k}) for k in (2, 4, 8)}
        assert db.records(family="ConvKnobs", ok_only=True)[0].features == (1.0, 2.0)


def test_best_is_taken_among_records_timed_like_the_newest(tmp_path):
    """A warm time (weights in cache) is never ranked against a cold one: the best of a task
    comes from the records timed like its newest correct record."""
    with TuningDatabase(tmp_path / "db.sqlite") as db:
        db.add([_record(knobs={"ow_tile": 1}, costs=(1e-4,), stamp=1.0, timing="warm"),
                _record(knobs={"ow_tile": 2}, costs=(3e-4,), stamp=2.0, timing="cold"),
                _record(knobs={"ow_tile": 4}, costs=(2e-4,), stamp=3.0, timing="cold")])
        assert db.latest_timing("t1", "fp-a") == "cold"
        assert db.best("t1", "fp-a").knobs == {"ow_tile": 4}   # not the warm 1e-4
        db.add(_record(knobs={"ow_tile": 8}, costs=(5e-4,), stamp=4.0, timing="warm"))
        assert db.best("t1", "fp-a").knobs == {"ow_tile": 1}   # now warm records rank
        db.add(_record(knobs={"ow_tile": 3}, stamp=5.0, timing="cold", error="crashed"))
        assert db.latest_timing("t1", "fp-a") == "warm"        # errors do not count
        assert db.measured("t1", "fp-a", "cold") == {knobs_json({"ow_tile": k})
                                                     for k in (2, 3, 4)}
        assert [r.timing for r in db.records(timing="warm")] == ["warm", "warm"]


@pytest.mark.parametrize("schema", [1, 2])
def test_old_schema_database_is_upgraded_in_place(tmp_path, schema):
    """A database written before records said how they were timed (schema 1) or whether
    they were a confirmation (schema 2) opens (for reading or writing) with its records
    kept, timing and role ''."""
    import sqlite3

    path = tmp_path / "old.sqlite"
    with TuningDatabase(path) as db:
        db.add([_record(knobs={"ow_tile": k}, costs=(k * 1e-4,)) for k in (1, 2)])
    con = sqlite3.connect(path)   # back to the old schema: without its later columns
    for column in ("timing", "role")[schema - 1:]:
        con.execute(f"ALTER TABLE records DROP COLUMN {column}")
    con.execute(f"UPDATE meta SET value = '{schema}' WHERE key = 'schema'")
    con.commit()
    con.close()
    with TuningDatabase(path, readonly=True) as db:
        timing = "" if schema == 1 else "cold"
        assert [(r.timing, r.role) for r in db.records()] == [(timing, "")] * 2
        assert db.best("t1", "fp-a").knobs == {"ow_tile": 1}
    with TuningDatabase(path) as db:
        db.add(_record(knobs={"ow_tile": 3}, costs=(9e-4,), timing="warm"))
        assert db.best("t1", "fp-a").knobs == {"ow_tile": 3}
        assert len(db) == 3


def test_jsonl_export_import(tmp_path):
    records = [_record(knobs={"ow_tile": k}, costs=(k * 1e-4,)) for k in (1, 2, 3)]
    records.append(_record(knobs={"ow_tile": 9}, error="timed out after 1 s"))
    with TuningDatabase(tmp_path / "a.sqlite") as db:
        db.add(records)
        assert db.export_jsonl(tmp_path / "out.jsonl") == 4
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["knobs"] == {"ow_tile": 1}
    with TuningDatabase(tmp_path / "b.sqlite") as other:
        assert other.import_jsonl(tmp_path / "out.jsonl") == 4
        assert other.import_jsonl(tmp_path / "out.jsonl") == 0   # the same records again
        assert [r.to_json() for r in other.records()] == [r.to_json() for r in records]


def test_jsonl_carries_model_checks(tmp_path):
    """The model-order checks travel with the records, and decide the same way after."""
    with TuningDatabase(tmp_path / "a.sqlite") as db:
        db.add(_record(knobs={"ow_tile": 2}, costs=(1e-4,)))
        db.add_model_checks([("t1", "fp-a", {"ow_tile": 2}, 3e-4),
                             ("t1", "fp-a", {"ow_tile": 1}, 2e-4)])
        db.export_jsonl(tmp_path / "out.jsonl")
        expected = db.model_checks("fp-a")
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sum("model_check" in x for x in lines) == 2
    with TuningDatabase(tmp_path / "b.sqlite") as other:
        assert other.import_jsonl(tmp_path / "out.jsonl") == 1
        other.import_jsonl(tmp_path / "out.jsonl")  # again: nothing doubled
        assert other.model_checks("fp-a") == expected == {
            "t1": {'{"ow_tile": 2}': 3e-4, '{"ow_tile": 1}': 2e-4}}
        assert len(other._all_model_checks()) == 2
        (tmp_path / "bad.jsonl").write_text(json.dumps(
            {"model_check": {"task_key": "t1", "fingerprint": "fp-a", "knobs": {},
                             "seconds": "soon", "timestamp": 1.0}}) + "\n")
        with pytest.raises(TuningError, match=r"bad.jsonl:1: not a model-order check"):
            other.import_jsonl(tmp_path / "bad.jsonl")


def test_bad_jsonl_and_record(tmp_path):
    good = json.dumps(_record().to_json())
    (tmp_path / "bad.jsonl").write_text(good + "\n{not json\n")
    with TuningDatabase(tmp_path / "db.sqlite") as db:
        with pytest.raises(TuningError, match=r"bad.jsonl:2: not JSON"):
            db.import_jsonl(tmp_path / "bad.jsonl")
        assert len(db) == 0  # all or nothing
        (tmp_path / "short.jsonl").write_text(json.dumps({"task_key": "x"}) + "\n")
        with pytest.raises(TuningError, match=r"short.jsonl:1: not a tuning record"):
            db.import_jsonl(tmp_path / "short.jsonl")
        with pytest.raises(TuningError, match="cannot read records from"):
            db.import_jsonl(tmp_path / "missing.jsonl")


def test_corrupt_and_missing_files(tmp_path):
    bad = tmp_path / "corrupt.sqlite"
    bad.write_bytes(b"this is not an sqlite file" * 100)
    with pytest.raises(TuningError, match="corrupt.sqlite' is unreadable or not a tuning"):
        TuningDatabase(bad)
    with pytest.raises(TuningError, match="missing.sqlite' does not exist"):
        TuningDatabase(tmp_path / "missing.sqlite", readonly=True)


def test_schema_version_and_readonly_writes(tmp_path):
    import sqlite3

    path = tmp_path / "db.sqlite"
    TuningDatabase(path).close()
    with TuningDatabase(path, readonly=True) as db:
        with pytest.raises(TuningError, match="db.sqlite': cannot write"):
            db.add(_record())
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    con.commit()
    con.close()
    with pytest.raises(TuningError, match="schema version 99, expected 3"):
        TuningDatabase(path)


_WRITER = textwrap.dedent("""
    import sys, time
    from ember.autotune.database import Record, TuningDatabase
    path, tag, batches, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with TuningDatabase(path) as db:
        print("ready", flush=True)
        for b in range(batches):
            db.add([Record("t", "ConvKnobs", "t", "llvm", "fp", {"tag": tag, "b": b, "i": i},
                           (1e-3,), None, None, "0", time.time()) for i in range(size)])
""")


def _writer(path, tag, batches, size):
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(path), tag, str(batches),
                             str(size)], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def test_writer_killed_mid_write_leaves_whole_batches(tmp_path):
    path = tmp_path / "db.sqlite"
    TuningDatabase(path).close()
    writer = _writer(path, "k", 100000, 500)
    assert writer.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    with TuningDatabase(path) as db:
        count = len(db)
    assert count > 0 and count % 500 == 0  # every batch is there whole or not at all


def test_concurrent_writers(tmp_path):
    path = tmp_path / "db.sqlite"
    TuningDatabase(path).close()
    writers = [_writer(path, tag, 40, 3) for tag in ("a", "b")]
    for w in writers:
        assert w.wait(120) == 0
    with TuningDatabase(path) as db:
        records = db.records()
    assert len(records) == 240
    assert {r.knobs["tag"] for r in records} == {"a", "b"}
