"""Drives a live `sqlmq serve` through the Python client that openapi-python-client generated
from its /openapi.json (package `sqlmq_client`, on PYTHONPATH): a queue and a topic end to end,
and a schedule.
Run by crates/sqlmq-serve/tests/clients.rs with SQLMQ_URL set; exits non-zero on any surprise.
"""

import os
import time

from sqlmq_client import Client
from sqlmq_client.api.dead_letters import (
    queue_dead_letters_list,
    queue_dead_letters_redrive,
)
from sqlmq_client.api.group_consumption import group_ack, group_receive
from sqlmq_client.api.groups import group_put
from sqlmq_client.api.messages import (
    messages_ack,
    messages_nack,
    messages_receive,
    messages_send,
    queue_message_get,
    queue_messages_list,
)
from sqlmq_client.api.queues import queue_get, queue_put
from sqlmq_client.api.records import records_list, records_publish
from sqlmq_client.api.runs import (
    event_emit,
    events_awaited,
    message_journal,
    run_ack,
    run_sleep,
    run_step_get,
    run_step_record,
    run_wait,
)
from sqlmq_client.api.schedules import (
    schedule_delete,
    schedule_get,
    schedule_pause,
    schedule_put,
    schedules_list,
)
from sqlmq_client.api.topics import topic_put
from sqlmq_client.models import (
    AckRequest,
    CatchUpPolicy,
    EmitRequest,
    GroupConfigRequest,
    IdsRequest,
    ListedState,
    NackRequest,
    OutgoingMessage,
    OutgoingRecord,
    PublishRequest,
    QueueConfigRequest,
    ReceiveRequest,
    ScheduleRequest,
    SendRequest,
    SleepRequest,
    StepRequest,
    TopicConfigRequest,
    WaitRequest,
)


def ok(response, status=200):
    assert response.status_code == status, (response.status_code, response.content)
    return response.parsed


client = Client(base_url=os.environ["SQLMQ_URL"], raise_on_unexpected_status=True)

# A queue: send, long-poll receive, ack; nack to a dead letter, list, redrive; browse.
ok(queue_put.sync_detailed("py-jobs", client=client, body=QueueConfigRequest(max_attempts=1)))
sent = ok(
    messages_send.sync_detailed(
        "py-jobs",
        client=client,
        body=SendRequest(messages=[OutgoingMessage(body="first"), OutgoingMessage(body="second")]),
    )
)
ids = [m.id for m in sent.messages]
page = ok(queue_messages_list.sync_detailed("py-jobs", client=client, state=ListedState.READY, limit=1))
assert [m.id for m in page.messages] == ids[:1] and page.next_, page
page = ok(queue_messages_list.sync_detailed("py-jobs", client=client, after=page.next_, limit=1))
assert [m.id for m in page.messages] == ids[1:], page

got = ok(
    messages_receive.sync_detailed(
        "py-jobs", client=client, body=ReceiveRequest(max_=1, wait_ms=1000, lease_ms=30000)
    )
).messages
assert [m.body for m in got] == ["first"], got
held = ok(queue_message_get.sync_detailed("py-jobs", ids[0], client=client))
assert held.state == "in_flight", held
acked = ok(messages_ack.sync_detailed("py-jobs", client=client, body=AckRequest(receipts=[got[0].receipt])))
assert acked.results[0].result == "ok", acked
assert queue_message_get.sync_detailed("py-jobs", ids[0], client=client).status_code == 404

got = ok(messages_receive.sync_detailed("py-jobs", client=client, body=ReceiveRequest(wait_ms=1000))).messages
nacked = ok(
    messages_nack.sync_detailed(
        "py-jobs", client=client, body=NackRequest(receipts=[got[0].receipt], error="broken")
    )
)
assert nacked.results[0].outcome == "dead", nacked
dead = ok(queue_dead_letters_list.sync_detailed("py-jobs", client=client, limit=10)).dead_letters
assert [d.id for d in dead] == ids[1:] and dead[0].errors[0].error == "broken", dead
redriven = ok(queue_dead_letters_redrive.sync_detailed("py-jobs", client=client, body=IdsRequest(all_=True)))
assert redriven.count == 1, redriven
assert ok(queue_get.sync_detailed("py-jobs", client=client)).ready == 1

# A topic: publish, read records, a cluster group's receive and ack.
ok(topic_put.sync_detailed("py-events", client=client, body=TopicConfigRequest(partitions=2)))
ok(group_put.sync_detailed("py-events", "py-billing", client=client, body=GroupConfigRequest(start="earliest")))
published = ok(
    records_publish.sync_detailed(
        "py-events",
        client=client,
        body=PublishRequest(records=[OutgoingRecord(body="paid", key="order-1")]),
    )
).records
# On MySQL a record gets its offset (and is readable) a moment after its publish commits.
deadline = time.monotonic() + 10
while True:
    records = ok(records_list.sync_detailed("py-events", client=client, key="order-1")).records
    if records or time.monotonic() > deadline:
        break
    time.sleep(0.05)
assert [r.id for r in records] == [published[0].id], records
got = ok(
    group_receive.sync_detailed(
        "py-events", "py-billing", client=client, body=ReceiveRequest(wait_ms=5000)
    )
).messages
assert [m.body for m in got] == ["paid"], got
acked = ok(
    group_ack.sync_detailed("py-events", "py-billing", client=client, body=AckRequest(receipts=[got[0].receipt]))
)
assert acked.results[0].result == "ok", acked

# A schedule: created (201) on the queue, paused, listed, deleted.
created = ok(
    schedule_put.sync_detailed(
        "py-nightly",
        client=client,
        body=ScheduleRequest(
            cron="0 3 * * *", time_zone="Europe/Paris", queue="py-jobs", body="report", catch_up=CatchUpPolicy.ONE
        ),
    ),
    201,
)
assert created.cron == "0 3 * * *" and created.time_zone == "Europe/Paris", created
assert created.catch_up == CatchUpPolicy.ONE and created.next_fire and not created.paused, created
assert ok(schedule_pause.sync_detailed("py-nightly", client=client)).paused
assert [s.name for s in ok(schedules_list.sync_detailed(client=client)).schedules] == ["py-nightly"]
assert schedule_delete.sync_detailed("py-nightly", client=client).status_code == 204
assert schedule_get.sync_detailed("py-nightly", client=client).status_code == 404
# A durable run driven by its receipt: a step recorded once, a sleep that suspends and
# resumes, an event wait woken by an emit, the ack that forgets the journal.
ok(queue_put.sync_detailed("py-flows", client=client, body=QueueConfigRequest(max_attempts=1)))
flow_id = ok(
    messages_send.sync_detailed("py-flows", client=client, body=SendRequest(messages=[OutgoingMessage(body="order-7")]))
).messages[0].id


def receive_flow():
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        got = ok(
            messages_receive.sync_detailed("py-flows", client=client, body=ReceiveRequest(max_=1, wait_ms=1000))
        ).messages
        if got:
            return got[0]
    raise AssertionError("the run did not come back")


m = receive_flow()
assert run_step_get.sync_detailed("py-flows", m.receipt, "charge", client=client).status_code == 404
step = ok(run_step_record.sync_detailed("py-flows", m.receipt, "charge", client=client, body=StepRequest(result={"id": "ch_7"})))
assert step.result == {"id": "ch_7"}, step
again = ok(run_step_record.sync_detailed("py-flows", m.receipt, "charge", client=client, body=StepRequest(result="other")))
assert again.result == {"id": "ch_7"}, again
slept = ok(run_sleep.sync_detailed("py-flows", m.receipt, client=client, body=SleepRequest(name="nap", duration_ms=300)))
assert slept.state == "suspended", slept

m = receive_flow()
assert m.attempt == 1, m
assert ok(run_step_get.sync_detailed("py-flows", m.receipt, "charge", client=client)).result == {"id": "ch_7"}
slept = ok(run_sleep.sync_detailed("py-flows", m.receipt, client=client, body=SleepRequest(name="nap", duration_ms=300)))
assert slept.state == "awake", slept
waited = ok(run_wait.sync_detailed("py-flows", m.receipt, client=client, body=WaitRequest(event="order-7-shipped", timeout_ms=600000)))
assert waited.state == "suspended", waited
journal = ok(message_journal.sync_detailed(flow_id, client=client))
assert [(s.kind, s.name, s.state) for s in journal.steps] == [
    ("step", "charge", "done"),
    ("sleep", "nap", "done"),
    ("event", "order-7-shipped", "waiting"),
], journal
assert journal.waiting_for == ["order-7-shipped"], journal
awaited = ok(events_awaited.sync_detailed(client=client)).events
assert [(e.name, e.runs) for e in awaited] == [("order-7-shipped", 1)], awaited
emitted = ok(event_emit.sync_detailed("order-7-shipped", client=client, body=EmitRequest(payload={"carrier": "DHL"})))
assert emitted.kept and emitted.woken == 1, emitted

m = receive_flow()
waited = ok(run_wait.sync_detailed("py-flows", m.receipt, client=client, body=WaitRequest(event="order-7-shipped", timeout_ms=600000)))
assert waited.state == "event" and waited.payload == {"carrier": "DHL"}, waited
assert run_ack.sync_detailed("py-flows", m.receipt, client=client).status_code == 204
assert ok(message_journal.sync_detailed(flow_id, client=client)).steps == []
print("python client: every step passed")
