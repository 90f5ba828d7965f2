"""The tuning database: every measurement as a record in one SQLite file (WAL, one transaction
per batch), the best record per task and target, and JSON lines export / import.

    with TuningDatabase("tune.sqlite") as db:
        db.add([record, ...])                    # committed at once, or not at all
        best = db.best(task_key, target.fingerprint)

Records are keyed by the task and the target's fingerprint (CPU, features, threads), so a
record measured on another machine is never applied silently; it may still serve as
training data for the cost model (`records(fingerprint=None)`). Each record says how it was
timed (`timing`: 'cold' weights or 'warm', '' for records of schema 1, which did not say):
a task's best record is taken among the records timed like its newest one, never by
comparing a cold time with a warm one. Records of the tuner's confirmation (`role`
'confirm': after the search, the default and the fastest candidates timed again in turns,
several rounds) decide between them where a task has them (`confirmed_costs`): the fastest
of hundreds of single measurements is partly the luckiest.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.errors import TuningError

SCHEMA_VERSION = 3
_COLUMNS = ("task_key", "family", "task", "target", "fingerprint", "knobs", "costs", "median",
            "best", "error", "features", "version", "timestamp", "timing", "role")
CONFIRM = "confirm"  # the role of a confirmation's records
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    task_key TEXT NOT NULL,       -- the task (anchor op, attributes, types), see task.py
    family TEXT NOT NULL,         -- the knob family, e.g. ConvKnobs
    task TEXT NOT NULL,           -- the task in words
    target TEXT NOT NULL,         -- the target string measured on
    fingerprint TEXT NOT NULL,    -- Target.fingerprint: CPU, features, threads
    knobs TEXT NOT NULL,          -- JSON object, sorted keys
    costs TEXT NOT NULL,          -- JSON list of seconds per run ([] on error)
    median REAL,                  -- NULL on error
    best REAL,
    error TEXT,                   -- NULL when the candidate ran and was right
    features TEXT,                -- JSON list (the cost model's loop features) or NULL
    version TEXT NOT NULL,        -- ember version that measured it
    timestamp REAL NOT NULL,
    timing TEXT NOT NULL DEFAULT '',  -- 'cold' or 'warm' weights, '' unknown (schema 1)
    role TEXT NOT NULL DEFAULT '',    -- 'confirm': timed again after the search ('' search)
    UNIQUE (task_key, fingerprint, knobs, timestamp)
);
CREATE INDEX IF NOT EXISTS records_task ON records (task_key, fingerprint);
CREATE INDEX IF NOT EXISTS records_family ON records (family);
CREATE TABLE IF NOT EXISTS model_checks (  -- a task's groups timed in model order
    task_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    knobs TEXT NOT NULL,          -- the default's or the applied record's, JSON
    seconds REAL NOT NULL,        -- its groups' time in the model (fastest round)
    timestamp REAL NOT NULL
);
INSERT OR IGNORE INTO meta VALUES ('schema', '{SCHEMA_VERSION}');
"""


def knobs_json(knobs: Mapping[str, Any]) -> str:
    """The canonical text of a knob point (sorted keys): what identifies a candidate."""
    return json.dumps(dict(knobs), sort_keys=True)


@dataclass(frozen=True)
class Record:
    """One measurement of one candidate (knob values) of one task on one target."""

    task_key: str
    family: str
    task: str
    target: str
    fingerprint: str
    knobs: Mapping[str, Any]
    costs: tuple[float, ...] = ()
    error: str | None = None
    features: tuple[float, ...] | None = None
    version: str = ""
    timestamp: float = field(default_factory=time.time)
    timing: str = ""        # 'cold' or 'warm' (MeasureSettings.timing); '' unknown
    role: str = ""          # CONFIRM: timed in the confirmation after the search

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.costs)

    @property
    def median(self) -> float:
        """Median seconds per run (infinite for a failed candidate)."""
        return _median(self.costs) if self.ok else math.inf

    @property
    def best(self) -> float:
        """The fastest run (what candidates are ranked by); infinite for a failure."""
        return min(self.costs) if self.ok else math.inf

    def to_json(self) -> dict[str, Any]:
        return {"task_key": self.task_key, "family": self.family, "task": self.task,
                "target": self.target, "fingerprint": self.fingerprint,
                "knobs": dict(self.knobs), "costs": list(self.costs), "error": self.error,
                "features": None if self.features is None else list(self.features),
                "version": self.version, "timestamp": self.timestamp, "timing": self.timing,
                "role": self.role}

    @staticmethod
    def from_json(data: Mapping[str, Any], where: str = "record") -> Record:
        try:
            features = data.get("features")
            return Record(str(data["task_key"]), str(data["family"]), str(data.get("task", "")),
                          str(data["target"]), str(data["fingerprint"]), dict(data["knobs"]),
                          tuple(float(c) for c in data.get("costs", ())),
                          None if data.get("error") is None else str(data["error"]),
                          None if features is None else tuple(float(f) for f in features),
                          str(data.get("version", "")), float(data["timestamp"]),
                          str(data.get("timing") or ""), str(data.get("role") or ""))
        except (KeyError, TypeError, ValueError) as error:
            raise TuningError(f"{where}: not a tuning record ({type(error).__name__}: "
                              f"{error})") from None


def default_path() -> Path:
    """EMBER_TUNING_DB, else tuning.sqlite in the user's cache directory."""
    if os.environ.get("EMBER_TUNING_DB"):
        return Path(os.environ["EMBER_TUNING_DB"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ember" / "tuning.sqlite"


class TuningDatabase:
    """The records of one SQLite file; safe for several processes writing at once."""

    def __init__(self, path: str | os.PathLike[str] | None = None, readonly: bool = False
                 ) -> None:
        self.path = Path(path) if path is not None else default_path()
        if readonly and not self.path.is_file():
            raise TuningError(f"tuning database '{self.path}' does not exist")
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            uri = f"file:{self.path}?mode=ro" if readonly else str(self.path)
            self._db = sqlite3.connect(uri, uri=readonly, timeout=60.0,
                                       isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 60000")
            if not readonly:
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.executescript(_SCHEMA)
            version = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if version is not None and version[0] in ("1", "2"):
                _upgrade(self.path)
                version = self._db.execute("SELECT value FROM meta WHERE key = 'schema'"
                                           ).fetchone()
        except sqlite3.DatabaseError as error:
            raise TuningError(f"tuning database '{self.path}' is unreadable or not a tuning "
                              f"database ({error}); move it away to start a new one") from None
        if version is None or int(version[0]) != SCHEMA_VERSION:
            raise TuningError(f"tuning database '{self.path}': schema version "
                              f"{None if version is None else version[0]}, expected "
                              f"{SCHEMA_VERSION}")

    # -- writing --------------------------------------------------------------------------
    def add(self, records: Record | Iterable[Record]) -> int:
        """Store records in one transaction (all or none); returns how many were new."""
        batch = [records] if isinstance(records, Record) else list(records)
        rows = [_row(r) for r in batch]
        before = self._db.total_changes
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(f"INSERT OR IGNORE INTO records ({', '.join(_COLUMNS)}) "
                                 f"VALUES ({', '.join('?' * len(_COLUMNS))})", rows)
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as error:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise TuningError(f"tuning database '{self.path}': cannot write ({error})") from None
        return self._db.total_changes - before

    # -- reading --------------------------------------------------------------------------
    def records(self, task_key: str | None = None, fingerprint: str | None = None,
                family: str | None = None, ok_only: bool = False, timing: str | None = None
                ) -> list[Record]:
        """The records matching every given field, oldest first."""
        where, args = [], []
        for column, value in (("task_key", task_key), ("fingerprint", fingerprint),
                              ("family", family), ("timing", timing)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if ok_only:
            where.append("error IS NULL AND median IS NOT NULL")
        sql = f"SELECT {', '.join(_COLUMNS)} FROM records"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [_record(row) for row in self._query(sql + " ORDER BY id", args)]

    def best(self, task_key: str, fingerprint: str) -> Record | None:
        """The fastest correct record of a task on a target, or None: the lowest minimum over
        its runs (interference from other work on the machine only ever adds time), among
        the records timed like the task's newest correct record."""
        timing = self.latest_timing(task_key, fingerprint)
        rows = list(self._query(f"SELECT {', '.join(_COLUMNS)} FROM records WHERE task_key = ? "
                                "AND fingerprint = ? AND timing = ? AND error IS NULL AND "
                                "median IS NOT NULL ORDER BY best, median, id LIMIT 1",
                                [task_key, fingerprint, timing]))
        return _record(rows[0]) if rows else None

    def latest_timing(self, task_key: str, fingerprint: str) -> str | None:
        """How the newest correct record of a task on a target was timed (None: no record)."""
        rows = list(self._query("SELECT timing FROM records WHERE task_key = ? AND "
                                "fingerprint = ? AND error IS NULL AND median IS NOT NULL "
                                "ORDER BY timestamp DESC, id DESC LIMIT 1",
                                [task_key, fingerprint]))
        return str(rows[0][0]) if rows else None

    def measured(self, task_key: str, fingerprint: str, timing: str | None = None
                 ) -> set[str]:
        """The candidates (knobs_json) already measured for a task on a target (timed as
        `timing`, if given)."""
        return {knobs_json(r.knobs) for r in self.records(task_key, fingerprint,
                                                          timing=timing)}

    def add_model_checks(self, checks: Iterable[tuple[str, str, Mapping[str, Any], float]]
                         ) -> None:
        """Store (task key, fingerprint, knobs, seconds) of groups timed in model order
        (ember.tune_check), in one transaction."""
        now = time.time()
        self._insert_model_checks([{"task_key": k, "fingerprint": f, "knobs": p,
                                    "seconds": s, "timestamp": now} for k, f, p, s in checks])

    def _insert_model_checks(self, checks: Sequence[Mapping[str, Any]]) -> None:
        rows = [(c["task_key"], c["fingerprint"], knobs_json(c["knobs"]), float(c["seconds"]),
                 float(c["timestamp"])) for c in checks]
        if not rows:
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT INTO model_checks VALUES (?, ?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as error:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise TuningError(f"tuning database '{self.path}': cannot write ({error})") from None

    def model_checks(self, fingerprint: str) -> dict[str, dict[str, float]]:
        """Per task, per knobs (knobs_json), its groups' seconds in model order from the
        newest check on `fingerprint`; empty for a file that has none."""
        out: dict[str, dict[str, float]] = {}
        for check in self._all_model_checks():
            if check["fingerprint"] == fingerprint:
                out.setdefault(check["task_key"], {})[knobs_json(check["knobs"])] = \
                    float(check["seconds"])
        return out

    def __len__(self) -> int:
        return int(next(iter(self._query("SELECT COUNT(*) FROM records", [])))[0])

    def _query(self, sql: str, args: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
        try:
            return iter(self._db.execute(sql, args).fetchall())
        except sqlite3.DatabaseError as error:
            raise TuningError(f"tuning database '{self.path}': cannot read ({error})") from None

    # -- exchange -------------------------------------------------------------------------
    def export_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write every record as one JSON object per line, then every model-order check as
        a line `{"model_check": {...}}` (to a temp file, then renamed); returns how many
        records it wrote."""
        out = Path(path)
        tmp = out.with_name(out.name + ".tmp")
        records = self.records()
        with open(tmp, "w") as f:
            for r in records:
                f.write(json.dumps(r.to_json(), sort_keys=True) + "\n")
            for check in self._all_model_checks():
                f.write(json.dumps({"model_check": check}, sort_keys=True) + "\n")
        os.replace(tmp, out)
        return len(records)

    def import_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Add the records and model-order checks of a JSON lines file (ones already here
        are skipped); returns how many records were new."""
        records, checks = [], []
        try:
            with open(path) as f:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    where = f"{path}:{number}"
                    try:
                        data = json.loads(line)
                    except json.JSONDecodeError as error:
                        raise TuningError(f"{where}: not JSON ({error})") from None
                    if isinstance(data, dict) and "model_check" in data:
                        checks.append(_model_check(data["model_check"], where))
                    else:
                        records.append(Record.from_json(data, where))
        except OSError as error:
            raise TuningError(f"cannot read records from '{path}': {error}") from None
        added = self.add(records)
        have = {_check_key(c) for c in self._all_model_checks()}
        self._insert_model_checks([c for c in checks if _check_key(c) not in have])
        return added

    def _all_model_checks(self) -> list[dict[str, Any]]:
        """Every model-order check, oldest first; none for a file from before the table."""
        try:
            rows = self._db.execute("SELECT task_key, fingerprint, knobs, seconds, timestamp "
                                    "FROM model_checks ORDER BY timestamp").fetchall()
        except sqlite3.OperationalError:  # a read-only file from before the table
            return []
        return [{"task_key": k, "fingerprint": f, "knobs": json.loads(p), "seconds": s,
                 "timestamp": t} for k, f, p, s, t in rows]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> TuningDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _upgrade(path: Path) -> None:
    """An older schema to this one in place, in one transaction (another process may be
    doing the same): 1 -> 2, records say how they were timed (the old ones did not: '');
    2 -> 3, records say whether they were a confirmation (the old ones: '')."""
    db = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        version = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if version == ("1",):
            db.execute("ALTER TABLE records ADD COLUMN timing TEXT NOT NULL DEFAULT ''")
        if version in (("1",), ("2",)):
            db.execute("ALTER TABLE records ADD COLUMN role TEXT NOT NULL DEFAULT ''")
            db.execute(f"UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema'")
        db.execute("COMMIT")
    finally:
        db.close()


def confirmed_costs(records: Iterable[Record]) -> dict[str, float]:
    """Per candidate (knobs_json), the median of its fastest runs over its confirmation
    records among `records` (a task's, timed one way); empty where it has none."""
    runs: dict[str, list[float]] = {}
    for r in records:
        if r.role == CONFIRM and r.ok:
            runs.setdefault(knobs_json(r.knobs), []).append(r.best)
    return {k: _median(v) for k, v in runs.items()}


def _model_check(data: Any, where: str) -> dict[str, Any]:
    """A model-order check read from a JSON lines file, its fields checked."""
    try:
        check = {"task_key": str(data["task_key"]), "fingerprint": str(data["fingerprint"]),
                 "knobs": dict(data["knobs"]), "seconds": float(data["seconds"]),
                 "timestamp": float(data["timestamp"])}
    except (KeyError, TypeError, ValueError) as error:
        raise TuningError(f"{where}: not a model-order check ({type(error).__name__}: "
                          f"{error})") from None
    if not math.isfinite(check["seconds"]) or check["seconds"] < 0:
        raise TuningError(f"{where}: a model-order check's seconds must be a finite "
                          f"non-negative number, got {check['seconds']}")
    return check


def _check_key(check: Mapping[str, Any]) -> tuple[Any, ...]:
    return (check["task_key"], check["fingerprint"], knobs_json(check["knobs"]),
            float(check["timestamp"]))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _row(r: Record) -> tuple[Any, ...]:
    return (r.task_key, r.family, r.task, r.target, r.fingerprint, knobs_json(r.knobs),
            json.dumps(list(r.costs)), _finite(r.median), _finite(r.best), r.error,
            None if r.features is None else json.dumps(list(r.features)), r.version,
            r.timestamp, r.timing, r.role)


def _record(row: tuple[Any, ...]) -> Record:
    (task_key, family, task, target, fingerprint, knobs, costs, _median, _best, error,
     features, version, timestamp, timing, role) = row
    return Record(task_key, family, task, target, fingerprint, json.loads(knobs),
                  tuple(json.loads(costs)), error,
                  None if features is None else tuple(json.loads(features)), version,
                  timestamp, timing, role)


__all__ = ["CONFIRM", "Record", "TuningDatabase", "confirmed_costs", "default_path",
           "knobs_json"]
