"""The worker runtime with Python handlers.

The Rust library's worker claims messages in batches sized to the free slots, extends each lease
every third of it while the handler runs, retries failures on the queue's backoff, dead-letters
messages whose attempts are spent, registers the process and heartbeats (peers release a dead
process's claims at once), and shuts down gracefully. A Python function handles each message::

    worker = sqlmq.Worker(client, concurrency=8)

    @worker.queue("emails")
    def send_email(d, ctx):              # raising an exception means: retry
        mail(d.body)

    worker.run()                         # until SIGTERM / SIGINT

A handler returns ``None`` (done: the message is acked), ``sqlmq.Retry(after, reason)``,
``sqlmq.Snooze(after)`` or ``sqlmq.DeadLetter(reason)``; an exception is a failed attempt, its
text and traceback kept in the message's error history. Plain functions run on threads of the
runtime (the GIL is held only while Python runs); coroutine functions (``async def``) run on the
asyncio loop of ``run_async`` (``run`` starts one when any handler is a coroutine function).
"""

import asyncio
import inspect
import signal
import threading
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from . import _sqlmq

# How long ``run`` waits on the worker between two chances for Python's signal handlers.
_WAIT_STEP = 0.2


@dataclass(frozen=True)
class WorkerReport:
    """What a worker did, counted when it stopped."""

    acked: int
    retried: int
    snoozed: int
    dead_lettered: int
    released: int
    lease_lost: int
    unsettled: int


class Worker:
    """Handlers for queues and consumer groups, run by the library's worker runtime.

    ``concurrency``: messages handled at once per queue (10); ``lease``: seconds each claim
    holds a message before it comes back, extended while its handler runs (30);
    ``timeout``: seconds a handler may run before it is stopped and its message retried (600);
    ``max_batch``: most messages per claim (100); ``shutdown_grace``: seconds running handlers
    get to finish at shutdown (30); ``poll_interval``: the idle poll's first and longest pause in
    seconds ((0.01, 0.1)).
    """

    def __init__(
        self,
        client: "_sqlmq.Client",
        *,
        concurrency: int = 10,
        lease: float = 30.0,
        timeout: float = 600.0,
        max_batch: Optional[int] = None,
        shutdown_grace: float = 30.0,
        poll_interval: Tuple[float, float] = (0.01, 0.1),
    ) -> None:
        self._client = client
        self._sources: List[Tuple[str, Callable[..., Any], bool, Optional[int]]] = []
        self._settings = {
            "concurrency": concurrency,
            "lease": lease,
            "timeout": timeout,
            "max_batch": max_batch,
            "shutdown_grace": shutdown_grace,
            "poll_floor": poll_interval[0],
            "poll_ceiling": poll_interval[1],
        }

    def queue(self, name: str, *, concurrency: Optional[int] = None) -> Callable:
        """Decorator: handle the queue ``name`` with the decorated function ``(delivery, ctx)``."""

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self._add(name, handler, concurrency)
            return handler

        return register

    def group(self, topic: str, group: str, *, concurrency: Optional[int] = None) -> Callable:
        """Decorator: handle the cluster consumer group ``group`` of ``topic``."""

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self._add(f"{topic}/{group}", handler, concurrency)
            return handler

        return register

    def _add(self, name: str, handler: Callable[..., Any], concurrency: Optional[int]) -> None:
        if not callable(handler):
            raise TypeError(f"a handler is a function, not {type(handler).__name__}")
        is_async = inspect.iscoroutinefunction(handler)
        self._sources.append((name, handler, is_async, concurrency))

    def run(
        self, *, stop_when_drained: bool = False, max_messages: Optional[int] = None
    ) -> WorkerReport:
        """Run until SIGTERM or SIGINT (a second one stops running handlers at once), or until
        the queues are drained (``stop_when_drained``), or ``max_messages`` were handled.

        Signals are caught only when called from the main thread; elsewhere stop it from your
        own code through ``run_async``'s task, or use ``stop_when_drained``/``max_messages``.
        """
        if any(is_async for _, _, is_async, _ in self._sources):
            return asyncio.run(
                self.run_async(stop_when_drained=stop_when_drained, max_messages=max_messages)
            )
        running = _sqlmq.start_worker(
            self._client, self._sources, self._run_settings(stop_when_drained, max_messages)
        )
        with _stopped_by_signals(running):
            while True:
                report = running.wait(_WAIT_STEP)
                if report is not None:
                    return WorkerReport(**report)

    async def run_async(
        self, *, stop_when_drained: bool = False, max_messages: Optional[int] = None
    ) -> WorkerReport:
        """``run`` on the running asyncio loop; coroutine handlers run on this loop. Cancelling
        the awaiting task stops the worker gracefully."""
        loop = asyncio.get_running_loop()
        running = _sqlmq.start_worker(
            self._client,
            self._sources,
            self._run_settings(stop_when_drained, max_messages),
            loop,
        )
        installed = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, _stopper(running))
                    installed.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        try:
            while True:
                try:
                    report = await loop.run_in_executor(None, running.wait, _WAIT_STEP)
                except asyncio.CancelledError:
                    running.stop()
                    report = await loop.run_in_executor(None, running.wait)
                    return WorkerReport(**report)
                if report is not None:
                    return WorkerReport(**report)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def _run_settings(self, stop_when_drained: bool, max_messages: Optional[int]) -> dict:
        return dict(self._settings, stop_when_drained=stop_when_drained, max_messages=max_messages)


def _stopper(running: "_sqlmq.RunningWorker") -> Callable[..., None]:
    """A signal handler: the first signal stops claiming, the second stops running handlers."""
    signals = [0]

    def stop(*_: Any) -> None:
        signals[0] += 1
        if signals[0] == 1:
            running.stop()
        else:
            running.kill()

    return stop


class _stopped_by_signals:
    """While in use, SIGINT and SIGTERM stop ``running`` (main thread only)."""

    def __init__(self, running: "_sqlmq.RunningWorker") -> None:
        self._running = running
        self._previous: dict = {}

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        handler = _stopper(self._running)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, handler)

    def __exit__(self, *_: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
