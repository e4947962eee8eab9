"""sqlmq for Python: durable, transactional queues stored in MySQL/MariaDB or SQLite.

The package is the Rust library (``sqlmq._sqlmq``) with a Python face: every call runs in the
library, on its own threads, with the GIL released while it waits on the database.

    import sqlmq
    client = sqlmq.Client.connect("sqlite://jobs.db")   # or mysql://user@host/db
    client.migrate()
    emails = client.create_queue("emails")
    emails.send(b'{"order": 42}')
    for d in emails.receive(10, lease=30):
        print(d.id, d.body, d.attempt)
        emails.ack(d.receipt)
"""

from ._sqlmq import (
    BatchCreated,
    BatchNotFound,
    BatchStatus,
    Client,
    Conflict,
    DatabaseError,
    DeadLetter,
    Deleted,
    Delivery,
    DependencyNotFound,
    Error,
    FairnessKey,
    Group,
    InvalidInput,
    InvalidName,
    JobContext,
    LeaseLost,
    Cancelled,
    Message,
    MessageNotFound,
    NotFound,
    PayloadTooLarge,
    Published,
    Queue,
    QueueStats,
    QueuedMessage,
    Receipt,
    Retry,
    Schedule,
    SchemaMismatch,
    Sent,
    Settled,
    Snooze,
    Topic,
    UnknownGroup,
    UnknownQueue,
    UnknownSchedule,
    UnknownTopic,
    __version__,
)
from .worker import Worker, WorkerReport

__all__ = [
    "BatchCreated",
    "BatchNotFound",
    "BatchStatus",
    "Client",
    "Conflict",
    "DatabaseError",
    "DeadLetter",
    "Deleted",
    "Delivery",
    "DependencyNotFound",
    "Error",
    "FairnessKey",
    "Group",
    "InvalidInput",
    "InvalidName",
    "JobContext",
    "LeaseLost",
    "Cancelled",
    "Message",
    "MessageNotFound",
    "NotFound",
    "PayloadTooLarge",
    "Published",
    "Queue",
    "QueueStats",
    "QueuedMessage",
    "Receipt",
    "Retry",
    "Schedule",
    "SchemaMismatch",
    "Sent",
    "Settled",
    "Snooze",
    "Topic",
    "UnknownGroup",
    "UnknownQueue",
    "UnknownSchedule",
    "UnknownTopic",
    "Worker",
    "WorkerReport",
    "__version__",
]
