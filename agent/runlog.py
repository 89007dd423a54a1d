"""The run log: every run kept in a SQLite database (what it was asked, on which model and settings, how it
ended, its answer, tokens, time, and its events as the trace has them), read back by `agent logs`.

A RunLog receives events as the trace does (``emit(event, **data)``): a row when a run starts, its events
and its outcome when it ends. Several processes may write at once: each write is a short transaction that
takes SQLite's write lock first (``BEGIN IMMEDIATE``) and waits for it up to a busy timeout.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from agent.text import scrub
from agent.trace import timestamp

LOG_FILE = "runs.db"
KEEP_RUNS = 1000  # the newest runs kept; older ones (and their events) are removed as new ones start
BUSY_TIMEOUT = 10.0  # seconds a write waits for another process's
FLUSH_EVERY = 50  # events held before they are written; the rest are written when the run ends
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL, finished TEXT, status TEXT NOT NULL,
    task TEXT, model TEXT, base_url TEXT, protocol TEXT, temperature REAL, constrained INTEGER, session TEXT,
    settings TEXT, answer TEXT, error TEXT, steps INTEGER, model_calls INTEGER, reasks INTEGER,
    prompt_tokens INTEGER, completion_tokens INTEGER, usage_missing INTEGER, seconds REAL);
CREATE TABLE IF NOT EXISTS events (
    run_id INTEGER NOT NULL, seq INTEGER NOT NULL, time TEXT NOT NULL, event TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq));
"""
OUTCOME = ("status", "answer", "error", "steps", "model_calls", "reasks", "prompt_tokens", "completion_tokens",
           "usage_missing", "seconds")
RUNNING = "running"  # a run that has not ended yet (or whose process was killed before it could say so)


class LogError(Exception):
    """The run log cannot be read; the message says how to fix it."""


class RunLog:
    """Keeps each run whose events it receives in the database at ``path`` (created when the first run
    starts). A failure to write is said once through ``warn``, and the log stops: the run goes on."""

    def __init__(self, path: Path, warn: Callable[[str], None], *, keep: int = KEEP_RUNS,
                 busy_timeout: float = BUSY_TIMEOUT):
        self.path, self.warn, self.keep, self.busy_timeout = Path(path), warn, keep, busy_timeout
        self.db: sqlite3.Connection | None = None
        self.run_id: int | None = None  # the run being logged
        self.seq = 0  # its next event's number
        self.pending: list[tuple] = []  # its events not written yet
        self.failed = False
        self.lock = threading.Lock()  # tools run at once report from their own threads

    def __call__(self, event: str, **data) -> None:
        if self.failed:
            return
        with self.lock:
            try:
                self._record(event, timestamp(), data)
            except Exception as error:  # whatever it is, the run must not end for it
                self.fail(f"cannot be written ({reason(error)}); the run goes on, unlogged; {fix(error, self.path)}")
            except KeyboardInterrupt:
                if event != "run_end":
                    raise  # the run ends as interrupted, and is logged so
                self.fail("was not written: interrupted while it waited (the run had ended; its answer stands)")

    def fail(self, why: str) -> None:
        self.failed = True
        self.close()
        self.warn(f"the run log {self.path} {why}")

    def close(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except sqlite3.Error:
                pass
            self.db = None

    def _record(self, event: str, time: str, data: dict) -> None:
        if event == "run_start":
            self.run_id, self.seq, self.pending = self._start(time, data), 0, []
        if self.run_id is None:  # an event outside a run: nothing to file it under
            return
        text = json.dumps(scrub(data), ensure_ascii=False, default=str)
        self.pending.append((self.run_id, self.seq, time, event, text))
        self.seq += 1
        if event == "run_end":
            self._end(time, data)
            self.run_id = None
        elif len(self.pending) >= FLUSH_EVERY:
            self._flush()

    def _start(self, time: str, data: dict) -> int:
        with self._writing() as db:
            run_id = db.execute(
                "INSERT INTO runs (started, status, task, model, base_url, protocol, temperature, constrained, "
                "session, settings) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (time, RUNNING, scrub(data.get("task")), data.get("model"), data.get("base_url"),
                 data.get("protocol"), data.get("temperature"), data.get("constrained"), data.get("session"),
                 json.dumps(data.get("settings") or {}))).lastrowid
            if self.keep:
                db.execute("DELETE FROM events WHERE run_id <= ?", (run_id - self.keep,))
                db.execute("DELETE FROM runs WHERE id <= ?", (run_id - self.keep,))
        return run_id

    def _end(self, time: str, data: dict) -> None:
        with self._writing() as db:
            db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", self.pending)
            db.execute(f"UPDATE runs SET finished = ?, {', '.join(f'{k} = ?' for k in OUTCOME)} WHERE id = ?",
                       (time, *(scrub(data.get(k)) for k in OUTCOME), self.run_id))
        self.pending = []

    def _flush(self) -> None:
        with self._writing() as db:
            db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", self.pending)
        self.pending = []

    def _writing(self):
        """A transaction holding the write lock from its start (so two writers never deadlock), committed at
        the end of the block."""
        if self.db is None:
            self.db = connect(self.path, self.busy_timeout, create=True)
        return Transaction(self.db)


class Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind, *exc) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK" if kind else "COMMIT")


def connect(path: Path, busy_timeout: float = BUSY_TIMEOUT, *, create: bool = False) -> sqlite3.Connection:
    """The database at ``path``: created (readable by the user only) with its tables when ``create``,
    else opened read-only."""
    if create:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # an empty file is an empty database
        db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        try:
            found = tables(db)
            if not found:  # a new database
                db.execute("PRAGMA journal_mode = WAL")  # kept by the file: readers never wait for a writer
            if not {"runs", "events"} <= found:
                db.executescript(SCHEMA)
            db.execute("PRAGMA synchronous = NORMAL")  # a commit is not a disk sync: a crash of the machine may
            # lose the latest runs, never the database
        except BaseException:
            db.close()
            raise
        return db
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout,
                           isolation_level=None)


def tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def recent(path: Path, limit: int) -> list[dict]:
    """The newest ``limit`` runs, newest first, without their events; none when there is no log yet."""
    with reading(path) as db:
        if db is None:
            return []
        rows = db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT ?", (limit,))
        return [run_record(rows, row) for row in rows.fetchall()]


def one(path: Path, run_id: int) -> dict | None:
    """The run ``run_id`` with its events (each as the trace writes it: event, time, data); None when the log
    has no such run."""
    with reading(path) as db:
        if db is None:
            return None
        cursor = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,))
        row = cursor.fetchone()
        if row is None:
            return None
        run = run_record(cursor, row)
        events = db.execute("SELECT event, time, data FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        run["events"] = [{"event": event, "time": time, **json.loads(data)} for event, time, data in events]
        return run


def run_record(cursor: sqlite3.Cursor, row: tuple) -> dict:
    run = dict(zip((column[0] for column in cursor.description), row))
    run["settings"] = json.loads(run["settings"] or "{}")
    run["constrained"] = None if run["constrained"] is None else bool(run["constrained"])
    return run


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection | None]:
    """The log opened read-only for a ``with`` block (None when there is no log yet); an unreadable one is a
    LogError that says how to fix it."""
    path, db = Path(path), None
    if not path.exists():
        yield None
        return
    try:
        db = connect(path)
        yield db if {"runs", "events"} <= tables(db) else None
    except (sqlite3.Error, OSError) as error:
        raise LogError(f"cannot read the run log {path} ({reason(error)}); {fix(error, path)}") from error
    finally:
        if db is not None:
            db.close()


def reason(error: Exception) -> str:
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return str(error) if isinstance(error, sqlite3.Error) else f"{type(error).__name__}: {error}"


def fix(error: Exception, path: Path) -> str:
    """What the user can do about ``error``, in a few words."""
    if isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError):
        return f"it is damaged or not a run log: move it away (mv {path} {path}.broken) and a new one is started"
    if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
        return "another agent held it too long; try again"
    return "set AGENT_LOGS_DIR to a folder you can write, or pass --no-log"
