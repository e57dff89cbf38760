"""Batched, retried, spooled delivery of line protocol to one sink: nothing is lost.

``write(lines)`` only appends to an in-memory buffer; a sender thread seals the
buffer into a batch every ``flush_interval_s`` or ``batch_lines`` lines and
delivers batches strictly in order:

* the on-disk spool always holds the OLDEST undelivered batches, the in-memory
  queue only newer ones, and the sender always sends the spool first;
* a failed send (``TransientSinkError``) moves the batch and everything queued
  behind it to the spool, then retries with exponential backoff
  (``backoff_s`` doubling up to ``max_backoff_s``) until the server is back;
* a batch the server refuses as data (``PermanentSinkError``) is kept in
  ``<spool>/rejected/`` with the error and counted, never retried;
* ``close()`` persists whatever is still undelivered to the spool; the next
  exporter on the same spool directory replays it first.
"""
from __future__ import annotations

import collections
import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from controller.export.errors import ConfigError, PermanentSinkError, TransientSinkError
from controller.export.sinks import Sink
from controller.export.spool import Spool

log = logging.getLogger("controller.export")

# the measurement of every line of a batch: up to the first unescaped comma or space
_MEASUREMENT = re.compile(rb"^((?:[^,\\ \n]|\\.)+)", re.MULTILINE)
_UNESCAPE = re.compile(rb"\\(.)")


def count_measurements(body: bytes) -> collections.Counter[str]:
    """Lines per measurement in a line-protocol batch (one regex pass, no per-line parse),
    so delivered telemetry can be compared with what the server holds."""
    names = collections.Counter(_MEASUREMENT.findall(body))
    return collections.Counter({_UNESCAPE.sub(rb"\1", m).decode(errors="replace"): n
                                for m, n in names.items()})


@dataclass(slots=True, kw_only=True)
class ExporterStats:
    lines_written: int = 0
    lines_delivered: int = 0
    batches_delivered: int = 0
    batches_spooled: int = 0
    send_failures: int = 0
    lines_rejected: int = 0
    last_error: str = ""
    # measurement -> lines delivered (what a server should hold, per measurement)
    delivered_by_measurement: dict[str, int] = field(default_factory=dict)


class Exporter:
    """Owns a sink and a spool directory; thread-safe ``write``."""

    def __init__(self, sink: Sink, *, spool_dir: str | Path, batch_lines: int = 5000,
                 flush_interval_s: float = 1.0, backoff_s: float = 0.1,
                 max_backoff_s: float = 5.0, max_queued_batches: int = 64) -> None:
        if batch_lines < 1:
            raise ConfigError(f"Exporter.batch_lines={batch_lines} must be >= 1")
        if not flush_interval_s > 0:
            raise ConfigError(f"Exporter.flush_interval_s={flush_interval_s} must be > 0")
        if not 0 < backoff_s <= max_backoff_s:
            raise ConfigError(
                f"Exporter.backoff_s={backoff_s} must be > 0 and <= max_backoff_s={max_backoff_s}")
        self.sink = sink
        self.spool = Spool(spool_dir)
        self.rejected_dir = Path(spool_dir) / "rejected"
        self.batch_lines = batch_lines
        self.flush_interval_s = flush_interval_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_queued_batches = max_queued_batches
        self.stats = ExporterStats()
        self._buf: list[str] = []
        self._queue: collections.deque[tuple[bytes, int]] = collections.deque()
        self._spool_lines: dict[Path, int] = {}
        self._inflight: bytes | None = None  # queue head being sent, if any
        self._inflight_path: Path | None = None  # where it went if spilled meanwhile
        self._cv = threading.Condition()
        self._closing = False
        self._idle = True
        self._thread = threading.Thread(target=self._run, name="int-exporter", daemon=True)
        self._thread.start()

    # -- producer side ------------------------------------------------------------------

    def write(self, lines: Iterable[str]) -> None:
        """Queue lines (no trailing newlines) for delivery."""
        with self._cv:
            if self._closing:
                raise ConfigError("Exporter.write after close()")
            before = len(self._buf)
            self._buf.extend(lines)
            self.stats.lines_written += len(self._buf) - before
            if len(self._buf) >= self.batch_lines:
                self._seal()
                self._cv.notify_all()

    def _seal(self) -> None:
        """Move the buffer into batches (lock held)."""
        while self._buf:
            chunk = self._buf[: self.batch_lines]
            del self._buf[: self.batch_lines]
            body = ("\n".join(chunk) + "\n").encode()
            if len(self._queue) >= self.max_queued_batches:
                self._spill()
            if len(self.spool) and not self._queue:
                # nothing in memory: the batch goes behind the spool, on disk
                self._to_spool(body, len(chunk))
            else:
                self._queue.append((body, len(chunk)))

    def _to_spool(self, body: bytes, n: int) -> Path:
        p = self.spool.append(body)
        self._spool_lines[p] = n
        self.stats.batches_spooled += 1
        return p

    def _spill(self) -> None:
        """Move every queued batch to the spool, keeping order (lock held)."""
        while self._queue:
            body, n = self._queue.popleft()
            p = self._to_spool(body, n)
            if body is self._inflight:
                self._inflight_path = p

    def pending_batches(self) -> int:
        with self._cv:
            return len(self._queue) + len(self.spool) + (1 if self._buf else 0)

    def queue_stats(self) -> dict[str, int]:
        """What waits for delivery right now: lines not yet sealed, batches (and their
        lines) queued in memory, batches and bytes in the on-disk spool.  A soak watches
        these stay bounded; a growing spool means the server is not keeping up."""
        with self._cv:
            return {"buffered_lines": len(self._buf),
                    "queued_batches": len(self._queue),
                    "queued_lines": sum(n for _, n in self._queue),
                    "spool_batches": len(self.spool),
                    "spool_lines": sum(self._spool_lines.values()),
                    "spool_bytes": self.spool.bytes_queued()}

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Seal and wait until everything written so far is delivered; False on timeout."""
        end = time.monotonic() + timeout_s
        with self._cv:
            self._seal()
            self._cv.notify_all()
            while self._queue or len(self.spool) or not self._idle:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.1))
            return True

    def close(self, timeout_s: float = 10.0) -> bool:
        """Deliver what is possible within ``timeout_s``, spool the rest, stop. True if
        everything was delivered."""
        done = self.flush(timeout_s)
        with self._cv:
            self._closing = True
            self._seal()
            self._spill()
            self._cv.notify_all()
        self._thread.join(timeout=self.max_backoff_s + 10)
        self.sink.close()
        return done

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sender thread ------------------------------------------------------------------

    def _next(self) -> tuple[bytes, int, Path | None] | None:
        got = self.spool.oldest()
        if got is not None:
            path, body = got
            n = self._spool_lines.get(path, body.count(b"\n"))
            return body, n, path
        if self._queue:
            body, n = self._queue[0]
            return body, n, None
        return None

    def _run(self) -> None:
        backoff = self.backoff_s
        last_seal = time.monotonic()
        warn = _FailureLog(self.sink.kind)
        while True:
            with self._cv:
                if self._closing:  # close() already flushed; what is left stays spooled
                    self._idle = True
                    self._cv.notify_all()
                    return
                if time.monotonic() - last_seal >= self.flush_interval_s:
                    self._seal()
                    last_seal = time.monotonic()
                item = self._next()
                if item is None:
                    self._idle = True
                    self._cv.notify_all()
                    self._cv.wait(self.flush_interval_s)
                    continue
                self._idle = False
                body, n, path = item
                if path is None:
                    self._inflight, self._inflight_path = body, None
            try:
                self.sink.write(body)
            except TransientSinkError as exc:
                with self._cv:
                    self.stats.send_failures += 1
                    self.stats.last_error = str(exc)
                    if path is None:
                        self._spill()  # the failed batch is the oldest queued one
                    self._inflight, self._inflight_path = None, None
                    closing = self._closing
                    self._idle = True
                    self._cv.notify_all()
                if closing:
                    return
                warn.failed(exc, backoff)
                with self._cv:
                    self._cv.wait_for(lambda: self._closing, timeout=backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
                continue
            except PermanentSinkError as exc:
                self._reject(body, n, str(exc))
            except Exception as exc:  # a sink bug must not kill delivery: retry later
                with self._cv:
                    self.stats.send_failures += 1
                    self.stats.last_error = f"{type(exc).__name__}: {exc}"
                    if path is None:
                        self._spill()
                    self._inflight, self._inflight_path = None, None
                log.exception("export: sink %s raised", self.sink.kind)
                time.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
                continue
            else:
                backoff = self.backoff_s
                warn.recovered()
                counts = count_measurements(body)
                with self._cv:
                    self.stats.lines_delivered += n
                    self.stats.batches_delivered += 1
                    by = self.stats.delivered_by_measurement
                    for name, k in counts.items():
                        by[name] = by.get(name, 0) + k
            with self._cv:
                if path is not None:
                    self.spool.remove(path)
                    self._spool_lines.pop(path, None)
                elif self._queue and self._queue[0][0] is body:
                    self._queue.popleft()
                elif self._inflight_path is not None:  # spilled while being sent
                    self.spool.remove(self._inflight_path)
                    self._spool_lines.pop(self._inflight_path, None)
                self._inflight, self._inflight_path = None, None
                self._cv.notify_all()

    def _reject(self, body: bytes, n: int, error: str) -> None:
        self.rejected_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.time_ns()
        (self.rejected_dir / f"{stamp}.lp").write_bytes(body)
        (self.rejected_dir / f"{stamp}.err").write_text(error + "\n")
        with self._cv:
            self.stats.lines_rejected += n
            self.stats.last_error = error
        log.error("export: %d lines refused by %s, kept in %s: %s", n, self.sink.kind,
                  self.rejected_dir, error)


class _FailureLog:
    """Failed deliveries, logged without flooding: the first failure at once, then one
    line per ``interval_s`` with the number of failed attempts since the last line, and
    one line when delivery resumes (a controller without its InfluxDB warned every 5 s)."""

    def __init__(self, kind: str, interval_s: float = 60.0) -> None:
        self.kind, self.interval_s = kind, interval_s
        self.quiet = 0            # failures not logged yet
        self.total = 0            # failures since the last success
        self.last_s: float | None = None

    def failed(self, exc: Exception, backoff_s: float) -> None:
        self.total += 1
        now = time.monotonic()
        if self.last_s is not None and now - self.last_s < self.interval_s:
            self.quiet += 1
            return
        more = f" ({self.quiet} more failed attempts since the last message)" if self.quiet else ""
        log.warning("export to %s failed (%s); points are spooled to disk and retried (next "
                    "in %.1f s)%s; no further message for %.0f s unless it recovers",
                    self.kind, exc, backoff_s, more, self.interval_s)
        self.quiet, self.last_s = 0, now

    def recovered(self) -> None:
        if self.total:
            log.warning("export to %s works again after %d failed attempts", self.kind,
                        self.total)
        self.quiet = self.total = 0
        self.last_s = None
