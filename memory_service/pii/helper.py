"""A second process that masks part of a large batch, so that one request's masking uses two cores.

A request is served by one process, and masking a bulk write is most of its time: the name tier's
model reads a note in ~2.5 ms of one core (bench/RESULTS.md, "Bulk writes"). For a batch of at least
``MIN_CHARACTERS``, ``Masker.detect_many(..., parallel=True)`` sends the batch's second half (by
characters) to this process's helper, detects the first half itself meanwhile, and joins the two.
The detections are the same as in one process: the helper builds the same masker from the same
installed packages, and is used only when it reports the same ``Masker.version``.

Lifecycle
    One helper per process that asks for one, started (``spawn``: a fresh interpreter, never a fork
    of a process with threads) when a web process starts (``asgi.py``), else on its first large
    batch. A batch that finds the helper still loading (a few seconds), busy with another thread's
    batch, dead or late, or every core of the machine busy (other web processes masking: the helper
    would only share a core), is detected in the calling process alone: nothing waits for the
    helper or fails because of it. A helper that died or did not answer is stopped and started
    again on the next large batch. It is a daemon child: it ends when its process exits, and stops
    by itself when orphaned.

What crosses the pipe
    The texts and the policy (its pseudonym key included) go to the helper; the detections come
    back. Nothing is logged: an error in the helper is answered with no detections, and the
    caller detects that half itself, so an error is raised, if at all, where the text came from.
"""

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

#: Batches shorter than this many characters are detected in the calling process alone: the
#: helper's round trip (about a millisecond) is worth it from a few notes on; this keeps it to
#: batches of ~30 notes and more.
MIN_CHARACTERS = 8_000

#: The longest wait for the helper's half, as a multiple of the time the caller took for its own
#: half, and at least ``MIN_WAIT_SECONDS``. Past it, the helper is stopped and the caller detects
#: that half too.
WAIT_FACTOR = 4
MIN_WAIT_SECONDS = 10.0

#: How often an idle helper checks that the process that started it is still alive.
ORPHAN_CHECK_SECONDS = 5.0

_CONTEXT = multiprocessing.get_context("spawn")

#: Detects a list of texts and returns one list of detections per text (``Masker._detect_all``).
Detect = Callable[[list[str]], list[list[Any]]]


def split_point(texts: Sequence[str]) -> int:
    """The index that splits ``texts`` into two parts of about the same number of characters, each
    with one text at least (``len(texts) >= 2``)."""
    half = sum(len(text) for text in texts) / 2
    seen = 0
    for index, text in enumerate(texts):
        seen += len(text)
        if seen >= half:
            return min(index + 1, len(texts) - 1)
    return len(texts) - 1


def spare_core(loadavg_path: str = "/proc/loadavg") -> bool:
    """Whether the machine has a core that no task is running on now: fewer runnable tasks than
    cores, this thread included (Linux's ``/proc/loadavg``). True where that cannot be read."""
    try:
        with open(loadavg_path, encoding="ascii") as loadavg:
            runnable = int(loadavg.read().split()[3].partition("/")[0])
    except (OSError, ValueError, IndexError):
        return True
    return runnable < (os.cpu_count() or 1)


class MaskingHelper:
    """The helper process of this process, for ``detect_together``; one caller at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._connection: Connection | None = None
        self._version: str | None = None  # what the helper reported; None while it loads
        self._sent = 0  # request number, echoed in each answer
        #: Batches whose second half the helper detected (the rest were detected by the caller alone).
        self.answered = 0

    def detect_together(self, texts: list[str], policy: object, detect_here: Detect, version: str) -> list[list]:
        """``detect_here(texts)``, with the second half (by characters) of a large batch detected by
        the helper meanwhile; ``version`` is the caller's ``Masker.version``, which the helper's
        must equal. Whatever happens to the helper, the result is ``detect_here(texts)``'s."""
        if len(texts) < 2 or sum(len(text) for text in texts) < MIN_CHARACTERS:
            return detect_here(texts)
        if not spare_core():
            return detect_here(texts)  # the helper would only take a share of a busy core
        if not self._lock.acquire(blocking=False):
            return detect_here(texts)  # another thread of this process holds the helper
        try:
            if not self._ready(version):
                return detect_here(texts)
            split = split_point(texts)
            number = self._send(texts[split:], policy)
            if number is None:
                return detect_here(texts)
            started = time.monotonic()
            first = detect_here(texts[:split])  # if it raises, the answer is skipped by its number
            second = self._receive(number, max(MIN_WAIT_SECONDS, WAIT_FACTOR * (time.monotonic() - started)))
            if second is None or len(second) != len(texts) - split:
                second = detect_here(texts[split:])
            else:
                self.answered += 1
            return first + second
        finally:
            self._lock.release()

    def start(self) -> None:
        """Start the helper unless it is running: it loads while the caller goes on."""
        with self._lock:
            self._start_unless_running()

    def state(self, version: str) -> str:
        """``"ready"`` (up, and its masker's version is ``version``), ``"busy"`` (a batch of another
        thread holds it) or ``"loading"`` (started now if it was not running)."""
        if not self._lock.acquire(blocking=False):
            return "busy"
        try:
            return "ready" if self._ready(version) else "loading"
        finally:
            self._lock.release()

    def stop(self) -> None:
        """End the helper process, if any; the next large batch starts another."""
        with self._lock:
            self._stop()

    # The methods below use the pipe: the caller holds the lock.

    def _ready(self, version: str) -> bool:
        """Whether the helper is up and reported ``version``; starts it when it is not running."""
        if not self._start_unless_running():
            return False
        if self._version is None:
            try:
                if not self._connection.poll(0):  # type: ignore[union-attr]
                    return False
                self._version = self._connection.recv()  # type: ignore[union-attr]
            except (EOFError, OSError):
                self._stop()
                return False
        return self._version == version

    def _start_unless_running(self) -> bool:
        """True when the helper was already running; else starts it and returns False."""
        if self._process is not None and self._process.is_alive():
            return True
        self._stop()
        self._start()
        return False

    def _stop(self) -> None:
        process, connection = self._process, self._connection
        self._process, self._connection, self._version = None, None, None
        if connection is not None:
            connection.close()
        if process is not None and process.is_alive():
            process.kill()
            process.join(timeout=5)

    def _start(self) -> None:
        parent_end, child_end = _CONTEXT.Pipe()
        process = _CONTEXT.Process(target=serve, args=(child_end, os.getpid()), name="pii-helper", daemon=True)
        try:
            process.start()
        except (OSError, AssertionError):  # cannot fork here, or this is a daemonic process
            parent_end.close()
            return
        finally:
            child_end.close()
        self._process, self._connection = process, parent_end

    def _send(self, texts: list[str], policy: object) -> int | None:
        self._sent += 1
        try:
            self._connection.send((self._sent, texts, policy))  # type: ignore[union-attr]
        except (OSError, ValueError):
            self._stop()
            return None
        return self._sent

    def _receive(self, number: int, timeout: float) -> list[list] | None:
        """The helper's answer to request ``number`` (None when it failed on that batch), or None,
        the helper stopped, when it dies or has not answered within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        try:
            while self._connection.poll(max(0.0, deadline - time.monotonic())):  # type: ignore[union-attr]
                answered, detections = self._connection.recv()  # type: ignore[union-attr]
                if answered == number:
                    return detections
        except (EOFError, OSError):
            pass
        self._stop()
        return None


def serve(connection: Connection, parent_pid: int) -> None:
    """The helper process: build the masker, report its version, then answer each
    ``(number, texts, policy)`` with ``(number, detections)`` (None on any error) until the pipe
    closes or the process that started it is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent decides
    from memory_service.pii.engine import get_masker

    masker = get_masker()
    connection.send(masker.version)
    while True:
        try:
            if not connection.poll(ORPHAN_CHECK_SECONDS):
                if os.getppid() != parent_pid:
                    return
                continue
            number, texts, policy = connection.recv()
        except (EOFError, OSError):
            return
        try:
            detections = masker.detect_many(texts, policy)
        except Exception:  # noqa: BLE001 - the caller detects this half itself and raises there
            detections = None
        connection.send((number, detections))


_helper = MaskingHelper()


def shared_helper() -> MaskingHelper:
    """This process's helper."""
    return _helper
