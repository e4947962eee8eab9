"""Type hints of the Rust extension ``sqlmq._sqlmq`` (see ``sqlmq/__init__.py``)."""

import asyncio
import datetime
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union

__version__: str

Body = Union[bytes, str]
"""A message body: bytes as they are, str as its UTF-8."""

class Client:
    """A pool of connections to one database (MySQL/MariaDB or SQLite)."""

    @staticmethod
    def connect(
        url: str,
        *,
        table_prefix: Optional[str] = None,
        max_connections: Optional[int] = None,
        max_payload_bytes: Optional[int] = None,
        connect_timeout: Optional[float] = None,
    ) -> "Client":
        """Connect to ``mysql://user:password@host:port/db`` or ``sqlite://path/file.db``."""
    def migrate(self) -> None:
        """Create sqlmq's tables, or upgrade them to this version's schema."""
    def create_queue(
        self,
        name: str,
        *,
        max_attempts: Optional[int] = None,
        backoff: Optional[Sequence[float]] = None,
        dedup_window: Optional[float] = None,
        max_in_flight: Optional[int] = None,
        concurrency_limit: Optional[int] = None,
        fair: bool = False,
    ) -> "Queue":
        """Create the queue (or update its settings) and return it."""
    def queue(self, name: str) -> "Queue":
        """The queue ``name``; ``UnknownQueue`` when there is none."""
    def queues(self) -> List["QueueStats"]:
        """Every queue's counts by state."""
    def delete_queue(self, name: str) -> None:
        """Delete the queue with every message in it."""
    def create_topic(
        self, name: str, *, partitions: int = 1, retention: Optional[float] = None
    ) -> "Topic":
        """Create the topic and return it."""
    def topic(self, name: str) -> "Topic":
        """The topic ``name``; ``UnknownTopic`` when there is none."""
    def create_schedule(
        self,
        name: str,
        *,
        queue: Optional[str] = None,
        topic: Optional[str] = None,
        every: Optional[float] = None,
        cron: Optional[str] = None,
        tz: str = "UTC",
        body: Optional[Body] = None,
        key: Optional[str] = None,
        priority: int = 0,
        headers: Optional[Dict[str, str]] = None,
    ) -> "Schedule":
        """Create (or replace) a recurring schedule: every ``every`` seconds or on ``cron``."""
    def schedules(self) -> List["Schedule"]: ...
    def delete_schedule(self, name: str) -> None: ...
    def create_batch(
        self,
        queue: str,
        members: List[Union["Message", Body]],
        *,
        on_success: Optional[Tuple[str, Union["Message", Body]]] = None,
        on_failure: Optional[Tuple[str, Union["Message", Body]]] = None,
        on_complete: Optional[Tuple[str, Union["Message", Body]]] = None,
    ) -> "BatchCreated":
        """Send ``members`` as one batch; each callback is sent once when it finishes."""
    def batch(self, id: str) -> "BatchStatus": ...
    @property
    def backend(self) -> str:
        """``"mysql"`` or ``"sqlite"``."""
    def close(self) -> None:
        """Close the pool."""

class Queue:
    """A queue of the database. Every method blocks with the GIL released; each ``_async``
    twin returns an awaitable."""

    @property
    def name(self) -> str: ...
    def send(self, message: Union["Message", Body]) -> "Sent":
        """Send one message; durable when this returns."""
    def send_async(self, message: Union["Message", Body]) -> Awaitable["Sent"]: ...
    def send_batch(self, messages: List[Union["Message", Body]]) -> List["Sent"]:
        """Send every message in one transaction: all visible at once, or none."""
    def send_batch_async(self, messages: List[Union["Message", Body]]) -> Awaitable[List["Sent"]]: ...
    def receive(self, n: int = 1, lease: float = 30.0) -> List["Delivery"]:
        """Claim up to ``n`` ready messages, each leased for ``lease`` seconds."""
    def receive_async(self, n: int = 1, lease: float = 30.0) -> Awaitable[List["Delivery"]]: ...
    def receive_wait(self, n: int = 1, lease: float = 30.0, wait: float = 20.0) -> List["Delivery"]:
        """As ``receive``, waiting up to ``wait`` seconds for a message (a long poll)."""
    def ack(self, receipt: Union["Receipt", str]) -> None:
        """The message is done. ``LeaseLost`` when the lease ended or was taken over."""
    def ack_async(self, receipt: Union["Receipt", str]) -> Awaitable[None]: ...
    def ack_batch(self, receipts: List[Union["Receipt", str]]) -> List["Receipt"]:
        """Ack in one transaction; returns the receipts whose leases were lost."""
    def nack(
        self, receipt: Union["Receipt", str], error: str = "", retry_in: Optional[float] = None
    ) -> str:
        """A failed attempt; returns ``"retried"`` or ``"dead"``."""
    def extend(self, receipt: Union["Receipt", str], lease: float = 30.0) -> None:
        """Push the lease's end to ``lease`` seconds from now."""
    def stats(self) -> "QueueStats": ...
    def browse(
        self, state: str = "ready", after: Optional[str] = None, limit: int = 100
    ) -> Tuple[List["QueuedMessage"], Optional[str]]:
        """Look without taking: a page of messages in ``state`` and the next page's cursor."""
    def message(self, id: str) -> Optional["QueuedMessage"]:
        """The message ``id`` in whatever state it is, or None."""
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def cancel(self, id: str) -> str:
        """Cancel a message in any state: "removed" (it was waiting) or "running" (its handler
        is told; its ack fails with ``Cancelled``)."""
    def purge(self) -> int:
        """Remove every message but the dead letters and those in flight."""
    def dead_letters(self, limit: int = 100) -> List[Tuple[str, int, Optional[str]]]:
        """(id, attempts, last error) of each dead letter, oldest first."""
    def set_weight(self, key: str, weight: int) -> None:
        """A fairness key's weight on a fair queue: its share of deliveries while others wait."""
    def fairness_keys(self, limit: int = 20) -> List["FairnessKey"]:
        """A fair queue's busiest keys, most messages ready first."""
    def redrive(self, ids: Optional[List[str]] = None) -> int:
        """Send dead letters back (all when ``ids`` is None); returns how many."""

class Topic:
    """An append-only stream of records in partitions; consumer groups read it independently."""

    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> int: ...
    def publish(
        self, body: Body, *, key: Optional[str] = None, headers: Optional[Dict[str, str]] = None
    ) -> "Published": ...
    def publish_async(
        self, body: Body, *, key: Optional[str] = None, headers: Optional[Dict[str, str]] = None
    ) -> Awaitable["Published"]: ...
    def publish_batch(self, records: List[Union[Body, Tuple[Body, Optional[str]]]]) -> List["Published"]: ...
    def create_group(
        self, name: str, *, start: Union[str, int, None] = None, max_attempts: Optional[int] = None
    ) -> "Group": ...
    def group(self, name: str) -> "Group": ...

class Group:
    """A cluster consumer group: each record to one consumer, acked, retried, dead-lettered."""

    @property
    def name(self) -> str: ...
    def receive(self, n: int = 1, lease: float = 30.0) -> List["Delivery"]: ...
    def receive_async(self, n: int = 1, lease: float = 30.0) -> Awaitable[List["Delivery"]]: ...
    def ack(self, receipt: Union["Receipt", str]) -> None: ...
    def ack_async(self, receipt: Union["Receipt", str]) -> Awaitable[None]: ...
    def nack(
        self, receipt: Union["Receipt", str], error: str = "", retry_in: Optional[float] = None
    ) -> str: ...
    def extend(self, receipt: Union["Receipt", str], lease: float = 30.0) -> None: ...

class Published:
    id: str
    partition: int
    duplicate: bool

class Schedule:
    name: str
    paused: bool
    next_fire: Optional[datetime.datetime]
    last_fired: Optional[datetime.datetime]
    fired: int

class BatchCreated:
    id: str
    members: List[str]

class BatchStatus:
    id: str
    state: str
    members: int
    pending: int
    succeeded: int
    dead: int
    cancelled: int

class Message:
    """A message to send: a body and its options."""

    def __init__(
        self,
        body: Body,
        *,
        id: Optional[str] = None,
        priority: int = 0,
        delay: Optional[float] = None,
        ordering_key: Optional[str] = None,
        concurrency_key: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None,
        depends_on: Optional[List[str]] = None,
        deadline: Optional[datetime.datetime] = None,
        run_timeout: Optional[float] = None,
        replace_key: Optional[str] = None,
        debounce: Optional[float] = None,
        fairness_key: Optional[str] = None,
    ) -> None: ...
    @property
    def id(self) -> str: ...

class Sent:
    id: str
    duplicate: bool
    replaced: bool

class Receipt:
    """Proof of a claim; ``str(receipt)`` is ``ID:TOKEN``."""

    @staticmethod
    def parse(text: str) -> "Receipt": ...
    @property
    def id(self) -> str: ...
    @property
    def token(self) -> int: ...

class Delivery:
    """A claimed message."""

    @property
    def id(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def ordering_key(self) -> Optional[str]: ...
    @property
    def concurrency_key(self) -> Optional[str]: ...
    @property
    def headers(self) -> Dict[str, str]: ...
    @property
    def enqueued_at(self) -> datetime.datetime: ...
    @property
    def lease_expires_at(self) -> datetime.datetime: ...
    @property
    def deadline(self) -> Optional[datetime.datetime]: ...
    @property
    def run_timeout(self) -> Optional[float]: ...
    @property
    def partition(self) -> Optional[int]: ...
    @property
    def offset(self) -> Optional[int]: ...
    @property
    def receipt(self) -> Receipt: ...

class QueueStats:
    name: str
    paused: bool
    ready: int
    scheduled: int
    blocked: int
    waiting: int
    in_flight: int
    dead: int
    oldest_ready_age: Optional[float]
    @property
    def pending(self) -> int: ...

class FairnessKey:
    """A fair queue's key; ``arrived`` and ``settled`` are counters (their rates: the key's
    arrival and completion rates)."""

    key: str
    weight: int
    ready: int
    in_flight: int
    oldest_ready_age: float
    arrived: int
    settled: int

class QueuedMessage:
    """A message as stored, looked at without taking it."""

    @property
    def id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def priority(self) -> int: ...
    @property
    def attempts(self) -> int: ...
    @property
    def ordering_key(self) -> Optional[str]: ...
    @property
    def headers(self) -> Dict[str, str]: ...
    @property
    def enqueued_at(self) -> datetime.datetime: ...
    @property
    def run_at(self) -> Optional[datetime.datetime]: ...
    @property
    def lease_until(self) -> Optional[datetime.datetime]: ...
    @property
    def owner(self) -> Optional[str]: ...
    @property
    def errors(self) -> List[Tuple[int, str]]: ...

class JobContext:
    """A handler's context: its message's attempt, receipt and source, and its lease."""

    @property
    def attempt(self) -> int: ...
    @property
    def receipt(self) -> Receipt: ...
    @property
    def source(self) -> str: ...
    @property
    def lease_lost(self) -> bool: ...
    @property
    def cancelled(self) -> bool: ...
    @property
    def deadline(self) -> Optional[datetime.datetime]: ...
    def progress(self, value: Any) -> None: ...
    def extend(self, lease: float) -> None: ...
    def extend_async(self, lease: float) -> Awaitable[None]: ...

class Retry:
    """A failed attempt, retried after ``after`` seconds."""

    after: float
    reason: str
    def __init__(self, after: float, reason: str = "") -> None: ...

class Snooze:
    """Deliver again after ``after`` seconds, the attempt not counted."""

    after: float
    def __init__(self, after: float) -> None: ...

class DeadLetter:
    """Give up: a dead letter now."""

    reason: str
    def __init__(self, reason: str) -> None: ...

class Settled:
    """The handler acked the message itself (``CALL sqlmq_ack`` in its own transaction)."""

    def __init__(self) -> None: ...

class RunningWorker:
    def stop(self) -> None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: Optional[float] = None) -> Optional[Dict[str, int]]: ...

def start_worker(
    client: Client,
    sources: List[Tuple[str, Callable[..., Any], bool, Optional[int]]],
    settings: Dict[str, Any],
    event_loop: Optional[asyncio.AbstractEventLoop] = None,
) -> RunningWorker: ...

class Error(Exception): ...
class InvalidInput(Error): ...
class InvalidName(InvalidInput): ...
class PayloadTooLarge(InvalidInput): ...
class NotFound(Error): ...
class UnknownQueue(NotFound): ...
class UnknownTopic(NotFound): ...
class UnknownGroup(NotFound): ...
class UnknownSchedule(NotFound): ...
class MessageNotFound(NotFound): ...
class DependencyNotFound(NotFound): ...
class BatchNotFound(NotFound): ...
class Deleted(NotFound): ...
class LeaseLost(Error): ...
class Cancelled(LeaseLost): ...
class Conflict(Error): ...
class SchemaMismatch(Error): ...

class DatabaseError(Error):
    retryable: bool
    error_class: str
