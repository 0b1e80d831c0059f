"""Resume journal of a fleet run: which host reached which phase, kept on disk so a re-run resumes.

    j = journal.open("bios-apply profile=hpc-v3 inventory=prod.yaml reboot")    # one file per run key
    if not j.done(host, journal.REBOOT_REQUESTED):
        ... PATCH ...;  j.record(host, journal.PATCHED)
        j.record(host, journal.RESET_SENDING)           # BEFORE the reset request leaves
        ... reset ...                                   # answered 2xx, no redirect:
        j.record(host, journal.REBOOT_REQUESTED)        #   the BMC accepted it
        # (refused -- a redirect, a 4xx: j.retract(host, journal.RESET_SENDING); no answer: left as it is)
        ... wait ...;   j.record(host, journal.REBOOTED)
    ... verify ...;     j.record(host, journal.VERIFIED)
    j.finish()                                          # every host done: nothing to resume, file removed

On a re-run after Ctrl-C or a crash, ``resume_action(j.phases(host))`` says what is left for each host:
``"skip"`` (verified), ``"verify"`` (a reset was accepted, seen, or sent without an answer: wait for power-on
and verify, never reset again), ``"reboot"`` (values written but no reset taken by the BMC yet), ``"run"``
(nothing recorded). "Reset sending" is recorded before the reset is sent, so a crash (or a lost answer) between
the two errs on the side of not rebooting twice: the re-run verifies and reports the values still pending
instead of resetting a host that may already be restarting. "Reboot requested" is recorded only once the BMC
accepted the request (2xx, no redirect); a refusal retracts "reset sending", so the re-run resets instead of
waiting for a reset that never happened (issue 40 item 3).

File format (``numaforge-journal/1``), JSON lines, mode 0600::

    {"format": "numaforge-journal/1", "run_key": "...", "created": 1764680000.0}
    {"host": "gpu-01", "phase": "patched", "time": 1764680001.2, "changed": ["NumaNodesPerSocket"]}
    {"host": "gpu-01", "phase": "reset-sending", "time": 1764680001.9}
    {"host": "gpu-01", "phase": "reboot-requested", "time": 1764680002.0}

A record with ``"retracted": true`` takes its phase back (a reset the BMC refused); compaction drops both.

The header is created atomically (temp file in the same directory, fsync, rename, fsync of the directory); each
record is one appended line (opened with O_NOFOLLOW: a link planted at the journal is refused, never written
through; the rename replaces a link), fsync'd before ``record`` returns (O(1) per record: a few ms, not a rewrite of the
fleet's state). A crash can only tear the last line; it is ignored on load and the file is compacted atomically
before anything is appended after it. A bad line anywhere else is an error naming file:line. Data attached to
a phase goes through numaforge.secrets.redact before it is written. Thread-safe: fleet workers record
concurrently.
Pure state: no peer is contacted here.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import hostlock, safeio
from .errors import NumaforgeError
from .paths import state_dir
from .secrets import redact

MAX_JOURNAL_BYTES = 256 * 1024 * 1024  # a resume journal (safeio.read_input's cap)

FORMAT = "numaforge-journal/1"

PATCHED = "patched"  # the differing values were written (pending a reset)
RESET_SENDING = "reset-sending"  # recorded just before the reset request is sent (retracted if it was refused)
REBOOT_REQUESTED = "reboot-requested"  # the BMC accepted the reset request (2xx, no redirect)
REBOOTED = "rebooted"  # the host came back on
VERIFIED = "verified"  # current values equal the desired ones
PHASES = (PATCHED, RESET_SENDING, REBOOT_REQUESTED, REBOOTED, VERIFIED)


class JournalError(NumaforgeError):
    """The journal file cannot be read/written, is corrupt, or belongs to another run."""

    exit_code = 2


def default_dir() -> Path:
    """Per-user state (numaforge.paths.state_dir()/journal): never inside a shared checkout or install tree."""
    return state_dir() / "journal"


def path_for(run_key: str, directory: str | os.PathLike | None = None) -> Path:
    """The journal file of a run key: <dir>/<sha256(run_key)[:16]>.json (the key itself is inside)."""
    if not isinstance(run_key, str) or not run_key.strip():
        raise JournalError(
            "the run key of a journal must be a non-empty string",
            "numaforge.journal.open",
            "pass what the run does, e.g. 'bios-apply profile=NAME inventory=PATH'",
        )
    digest = hashlib.sha256(run_key.encode()).hexdigest()[:16]
    return Path(directory if directory is not None else default_dir()) / f"{digest}.json"


def open(run_key: str, directory: str | os.PathLike | None = None) -> "Journal":
    """The journal of ``run_key``: resumed if a previous run left one, else a new (not yet written) one."""
    return Journal(path_for(run_key, directory), run_key)


@contextmanager
def open_held(
    run_key: str, directory: str | os.PathLike | None = None, *, task: str, wait: float = 0.0
) -> Iterator["Journal"]:
    """:func:`open`, holding the journal for this run (numaforge.hostlock, across processes): a second live run
    of the same command fails naming the holder (or waits ``wait`` seconds) instead of resuming from a journal
    the first is still writing. The hold ends with the block (or the process)."""
    path = path_for(run_key, directory)
    with hostlock.held(f"resume journal {path.name}", task, wait, doing="running this command"):
        yield Journal(path, run_key)


def resume_action(phases: Iterable[str]) -> str:
    """What a re-run does for a host whose journal holds ``phases``: run / reboot / verify / skip."""
    done = set(phases)
    if VERIFIED in done:
        return "skip"
    if RESET_SENDING in done or REBOOT_REQUESTED in done or REBOOTED in done:
        return "verify"
    if PATCHED in done:
        return "reboot"
    return "run"


def _host_name(host: Any) -> str:
    return host if isinstance(host, str) else str(getattr(host, "name", host))


class Journal:
    """Per-host phases of one run (see the module docstring). Create with :func:`open`."""

    def __init__(self, path: str | os.PathLike, run_key: str):
        self.path = Path(path)
        self.run_key = run_key
        self._lock = threading.Lock()
        self._hosts: dict[str, dict[str, dict]] = {}
        self.created = time.time()
        self.resumed = False
        if self.path.exists():
            self._load()

    # -- reading ---------------------------------------------------------------------------------------
    def _load(self) -> None:
        where = str(self.path)
        lines = safeio.read_input(
            self.path,
            what="resume journal",
            error=JournalError,
            max_bytes=MAX_JOURNAL_BYTES,
            fix_kind="delete it to start the run from scratch",
            fix_size="delete it to start the run from scratch (a journal holds a few KiB per host)",
        ).split(b"\n")
        torn = lines[-1] != b""  # a complete file ends with a newline: anything after it is torn
        lines = lines[:-1]
        if not lines:
            raise JournalError(
                "the resume journal is empty or torn before its header",
                where,
                "delete it to start the run from scratch",
            )
        header = self._parse(lines[0], 1)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            got = header.get("format") if isinstance(header, dict) else None
            raise JournalError(
                f"not a numaforge journal (format {got!r}, expected {FORMAT!r})",
                f"{where}:1",
                "delete it or point the run at another journal dir",
            )
        if header.get("run_key") != self.run_key:
            raise JournalError(
                f"the journal belongs to another run ({header.get('run_key')!r}, this run is {self.run_key!r})",
                where,
                "re-run the original command to finish it, or delete the journal to start over",
            )
        hosts: dict[str, dict[str, dict]] = {}
        for n, line in enumerate(lines[1:], 2):
            rec = self._parse(line, n)
            if not (isinstance(rec, dict) and isinstance(rec.get("host"), str) and rec.get("phase") in PHASES):
                raise JournalError(
                    f"line {n} of the journal is not a host/phase record (phases are {', '.join(PHASES)})",
                    f"{where}:{n}",
                    "delete it to start the run from scratch",
                )
            if rec.get("retracted") is True:
                hosts.get(rec["host"], {}).pop(rec["phase"], None)
                continue
            entry = {k: v for k, v in rec.items() if k not in ("host", "phase")}
            hosts.setdefault(rec["host"], {})[rec["phase"]] = entry
        self._hosts = hosts
        self.created = float(header.get("created") or self.created)
        self.resumed = True
        if torn:  # the last append of a crashed run: drop it so new records do not follow garbage
            self._rewrite()

    def _parse(self, line: bytes, n: int):
        try:
            return json.loads(line)
        except ValueError as exc:
            raise JournalError(
                f"line {n} of the resume journal is not valid JSON ({exc})",
                f"{self.path}:{n}",
                "delete it to start the run from scratch",
            ) from None

    def done(self, host: Any, phase: str) -> bool:
        """True if ``host`` reached ``phase`` in this or a previous (interrupted) run."""
        self._check_phase(phase)
        with self._lock:
            return phase in self._hosts.get(_host_name(host), {})

    def phases(self, host: Any) -> list[str]:
        """Phases ``host`` reached, in pipeline order."""
        with self._lock:
            got = self._hosts.get(_host_name(host), {})
            return [p for p in PHASES if p in got]

    def data(self, host: Any, phase: str) -> dict:
        with self._lock:
            return dict(self._hosts.get(_host_name(host), {}).get(phase, {}))

    def action(self, host: Any) -> str:
        """resume_action() for this host."""
        return resume_action(self.phases(host))

    def hosts(self) -> dict[str, list[str]]:
        with self._lock:
            return {h: [p for p in PHASES if p in got] for h, got in self._hosts.items()}

    # -- writing ---------------------------------------------------------------------------------------
    def record(self, host: Any, phase: str, **data: Any) -> None:
        """Record that ``host`` reached ``phase``; on disk (appended and fsync'd) before this returns."""
        self._check_phase(phase)
        name = _host_name(host)
        entry = {"time": time.time(), **redact(data)}
        line = json.dumps({"host": name, "phase": phase, **entry}, default=str) + "\n"
        with self._lock:
            if not self.path.exists():
                self._rewrite()  # header first, created atomically
            self._append(line.encode())
            self._hosts.setdefault(name, {})[phase] = entry

    def retract(self, host: Any, phase: str) -> None:
        """Take back ``phase`` for ``host`` (a reset request the BMC refused); on disk before this returns."""
        self._check_phase(phase)
        name = _host_name(host)
        line = json.dumps({"host": name, "phase": phase, "time": time.time(), "retracted": True}) + "\n"
        with self._lock:
            if phase not in self._hosts.get(name, {}):
                return
            self._append(line.encode())
            self._hosts[name].pop(phase, None)

    def finish(self) -> None:
        """The run completed: remove the journal (a later run starts fresh)."""
        with self._lock:
            try:
                self.path.unlink(missing_ok=True)
            except OSError as exc:
                raise JournalError(
                    f"cannot remove the finished journal: {exc.strerror}",
                    str(self.path),
                    "delete it by hand; otherwise the next identical run resumes from it",
                ) from None
            self._hosts = {}

    def _check_phase(self, phase: str) -> None:
        if phase not in PHASES:
            raise JournalError(
                f"unknown journal phase {phase!r}", "numaforge.journal", f"use one of: {', '.join(PHASES)}"
            )

    def _append(self, data: bytes) -> None:
        try:
            fd = safeio.open_nofollow(self.path, os.O_WRONLY | os.O_APPEND, what="resume journal", error=JournalError)
            try:
                _write_synced(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise JournalError(
                f"cannot write the resume journal: {exc.strerror}",
                str(self.path),
                "free disk space or fix permissions; the run cannot be resumed without it",
            ) from None

    def _rewrite(self) -> None:
        """Write header + every known record to a temp file, fsync, rename over the journal, fsync the dir."""
        header = {"format": FORMAT, "run_key": self.run_key, "created": self.created}
        lines = [json.dumps(header)] + [
            json.dumps({"host": h, "phase": p, **e}, default=str)
            for h, phases in self._hosts.items()
            for p, e in phases.items()
        ]
        data = ("\n".join(lines) + "\n").encode()
        where = str(self.path)
        tmp = None
        try:
            safeio.ensure_dir(self.path.parent, what="journal directory", error=JournalError)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            try:
                os.fchmod(fd, 0o600)
                _write_synced(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            tmp = None
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as exc:
            raise JournalError(
                f"cannot write the resume journal: {exc.strerror}",
                where,
                "free disk space or fix permissions; the run cannot be resumed without it",
            ) from None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def _write_synced(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (os.write may write less than asked), then fsync."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)
