"""A second process that masks the later parts of a large batch, so that one request's masking uses
two cores.

A request is served by one process, and masking a bulk write is most of its time: the name tier's
model reads a note in ~2.5 ms of one core (bench/RESULTS.md, "Bulk writes"). A bulk write of at
least ``MIN_CHARACTERS``, with an item for each part at least, is masked and stored in parts
(``part_ranges``); with ``PII_HELPER_PROCESS`` on, ``Masker.mask_parts(..., parallel=True)`` has
this process's helper detect every part after the first, one after another, while the caller
detects the first and then stores each part as it comes back, so the database work of a part
overlaps the masking of the next (``MaskingHelper.detect_parts``). The detections are the same as
in one process: the helper builds the same masker from the same installed packages, and is used
only when it reports the same ``Masker.version``.

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
    caller detects that part itself, so an error is raised, if at all, where the text came from.
"""

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from typing import Any

#: Batches shorter than this many characters are detected in the calling process alone: the
#: helper's round trip (about a millisecond) is worth it from a few notes on; this keeps it to
#: batches of ~30 notes and more.
MIN_CHARACTERS = 8_000

#: The longest wait for a part the helper detects, as a multiple of the time the caller would take
#: for it at the pace of its own part, and at least ``MIN_WAIT_SECONDS``. Past it, the helper is
#: stopped and the caller detects that part and the rest too.
WAIT_FACTOR = 4
MIN_WAIT_SECONDS = 10.0
#: The pace assumed when the caller's own part is quicker than this, in seconds per character
#: (about five times the name tier's measured pace): an empty or tiny first part cannot shorten
#: the wait for large later ones.
SLOWEST_PACE = 50e-6

#: How often an idle helper checks that the process that started it is still alive.
ORPHAN_CHECK_SECONDS = 5.0

_CONTEXT = multiprocessing.get_context("spawn")

#: Detects a list of texts and returns one list of detections per text (``Masker._detect_all``).
Detect = Callable[[list[str]], list[list[Any]]]


#: The shares of a batch's characters in its parts (``part_ranges``): the caller detects the first
#: part itself and stores it while the helper detects the others in turn; it then stores each as it
#: comes back. The caller also does all the database work, so it takes the smaller share, and the
#: last part is small, so little is stored after the helper is done (bench/RESULTS.md, "Bulk writes").
PART_SHARES = (0.3, 0.3, 0.25, 0.15)


def part_ranges(sizes: Sequence[int]) -> list[range]:
    """Consecutive ranges of the indexes of ``sizes`` (the characters of each item of a batch), with
    about ``PART_SHARES`` of the characters each, and at least one item each; one range for a batch
    of fewer than ``MIN_CHARACTERS`` characters or fewer items than shares."""
    total = sum(sizes)
    if total < MIN_CHARACTERS or len(sizes) < len(PART_SHARES):
        return [range(len(sizes))]
    ranges: list[range] = []
    start, seen, goal = 0, 0, 0.0
    for share in PART_SHARES[:-1]:
        goal += share * total
        end = start + 1  # at least one item, and at least one left for each later part
        seen += sizes[start]
        while end < len(sizes) - (len(PART_SHARES) - 1 - len(ranges)) and seen + sizes[end] <= goal:
            seen += sizes[end]
            end += 1
        ranges.append(range(start, end))
        start = end
    ranges.append(range(start, len(sizes)))
    return ranges


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
    """The helper process of this process, for ``detect_parts``; one caller at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._connection: Connection | None = None
        self._version: str | None = None  # what the helper reported; None while it loads
        self._sent = 0  # request number, echoed in each answer
        #: Parts of batches that the helper detected (the rest were detected by the caller).
        self.answered = 0

    def detect_parts(
        self, parts: list[list[str]], policy: object, detect_here: Detect, version: str
    ) -> Iterator[list[list]]:
        """``detect_here(part)`` of each part, in order, one at a time: the caller may work on a
        part's detections before asking for the next. ``version`` is the caller's
        ``Masker.version``, which the helper's must equal.

        The helper takes every part after the first, in one request, and answers each as soon as it
        is detected, while the caller detects the first. It is used for two parts or more of
        ``MIN_CHARACTERS`` in all, on a machine with an idle core, when it is ready and no other
        thread of this process holds it. A part the helper fails, or does not answer in time (more
        than ``WAIT_FACTOR`` × the caller's pace, at least ``MIN_WAIT_SECONDS``: the helper is then
        stopped), is detected here: whatever happens to the helper, each part's detections are
        ``detect_here(part)``'s. Close the iterator, or read it to the end, to free the helper;
        closed (or failed) before the helper's last answer was read, it stops the helper, whose
        unread answers could otherwise block the pipe, and the next large batch starts another.
        """
        characters = sum(len(text) for part in parts for text in part)
        # On a busy machine the helper would only share a core; the lock is taken last, and only
        # when it is free (another thread of this process may hold the helper).
        if len(parts) < 2 or characters < MIN_CHARACTERS or not spare_core() or not self._lock.acquire(blocking=False):
            yield from map(detect_here, parts)
            return
        unread = 0  # answers the helper still owes this request
        held = True
        try:
            number = self._send(parts[1:], policy) if self._ready(version) else None
            if number is None:
                yield from map(detect_here, parts)
                return
            unread = len(parts) - 1
            started = time.monotonic()
            first = detect_here(parts[0])
            own = sum(len(text) for text in parts[0])
            pace = max(SLOWEST_PACE, (time.monotonic() - started) / own) if own else SLOWEST_PACE
            yield first
            waiting = 0
            for index, part in enumerate(parts[1:]):
                waiting += sum(len(text) for text in part)
                found = None
                if self._connection is not None:
                    found = self._receive(number, index, max(MIN_WAIT_SECONDS, WAIT_FACTOR * pace * waiting))
                    unread -= 1
                if found is None or len(found) != len(part):
                    found = detect_here(part)
                else:
                    self.answered += 1
                if index == len(parts) - 2:
                    # Every answer is read: another thread may have the helper while the caller
                    # stores the last part.
                    held = False
                    self._lock.release()
                yield found
        finally:
            if held:
                if unread > 0 and self._connection is not None:
                    # Left before every answer was read (an error here, or the caller stopped
                    # asking): unread answers could fill the pipe and block the helper, and the
                    # next request behind it. A new helper is started on the next large batch.
                    self._stop()
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

    def _send(self, parts: list[list[str]], policy: object) -> int | None:
        self._sent += 1
        try:
            self._connection.send((self._sent, parts, policy))  # type: ignore[union-attr]
        except (OSError, ValueError):
            self._stop()
            return None
        return self._sent

    def _receive(self, number: int, index: int, timeout: float) -> list[list] | None:
        """The helper's answer for part ``index`` of request ``number`` (None when it failed on
        that part), or None, the helper stopped, when it dies or has not answered within
        ``timeout`` seconds. Answers to earlier requests (a caller that gave up on them) are skipped."""
        deadline = time.monotonic() + timeout
        try:
            while self._connection.poll(max(0.0, deadline - time.monotonic())):  # type: ignore[union-attr]
                answered, part, detections = self._connection.recv()  # type: ignore[union-attr]
                if (answered, part) == (number, index):
                    return detections
        except (EOFError, OSError):
            pass
        self._stop()
        return None


def serve(connection: Connection, parent_pid: int) -> None:
    """The helper process: build the masker, report its version, then answer each part of each
    ``(number, parts, policy)`` with ``(number, index, detections)`` (None on any error), in
    order, until the pipe closes or the process that started it is gone."""
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
            number, parts, policy = connection.recv()
        except (EOFError, OSError):
            return
        for index, texts in enumerate(parts):
            try:
                detections = masker.detect_many(texts, policy)
            except Exception:  # noqa: BLE001 - the caller detects this part itself and raises there
                detections = None
            connection.send((number, index, detections))


_helper = MaskingHelper()


def shared_helper() -> MaskingHelper:
    """This process's helper."""
    return _helper
