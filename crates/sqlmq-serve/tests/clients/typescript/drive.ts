// Drives a live `sqlmq serve` through a TypeScript client: types generated from its
// /openapi.json by openapi-typescript (schema.d.ts, beside this file at test time), requests
// made by openapi-fetch. A queue and a topic end to end, and a schedule; `tsc` type-checks
// every call against the document first. Run by crates/sqlmq-serve/tests/clients.rs with
// SQLMQ_URL set.

import createClient from "openapi-fetch";
import type { paths } from "./schema";

declare const process: { env: Record<string, string | undefined>; exitCode?: number };

const client = createClient<paths>({ baseUrl: process.env.SQLMQ_URL });

function check(ok: unknown, step: string, detail?: unknown): asserts ok {
  if (!ok) throw new Error(`${step}: ${JSON.stringify(detail)}`);
}

const queue = { path: { queue: "ts-jobs" } };
const topic = { path: { topic: "ts-events" } };
const group = { path: { topic: "ts-events", group: "ts-billing" } };

async function queues(): Promise<void> {
  const put = await client.PUT("/v1/queues/{queue}", { params: queue, body: { max_attempts: 1 } });
  check(put.data, "queue_put", put.error);
  const sent = await client.POST("/v1/queues/{queue}/messages", {
    params: queue,
    body: { messages: [{ body: "first" }, { body: "second" }] },
  });
  check(sent.data, "messages_send", sent.error);
  const ids = sent.data.messages.map((m) => m.id);

  const page = await client.GET("/v1/queues/{queue}/messages", {
    params: { ...queue, query: { state: "ready", limit: 1 } },
  });
  check(page.data?.messages[0]?.id === ids[0] && page.data.next, "queue_messages_list", page);
  const rest = await client.GET("/v1/queues/{queue}/messages", {
    params: { ...queue, query: { after: page.data.next } },
  });
  check(rest.data?.messages.map((m) => m.id).join() === ids[1], "queue_messages_list after", rest);

  const got = await client.POST("/v1/queues/{queue}/receive", {
    params: queue,
    body: { max: 1, wait_ms: 1000, lease_ms: 30000 },
  });
  const first = got.data?.messages[0];
  check(first?.body === "first", "messages_receive", got);
  const held = await client.GET("/v1/queues/{queue}/messages/{id}", {
    params: { path: { queue: "ts-jobs", id: first.id } },
  });
  check(held.data?.state === "in_flight", "queue_message_get", held);
  const acked = await client.POST("/v1/queues/{queue}/ack", {
    params: queue,
    body: { receipts: [first.receipt] },
  });
  check(acked.data?.results[0]?.result === "ok", "messages_ack", acked);
  const gone = await client.GET("/v1/queues/{queue}/messages/{id}", {
    params: { path: { queue: "ts-jobs", id: first.id } },
  });
  check(gone.response.status === 404 && gone.error?.error.code === "not_found", "acked is gone", gone.error);

  const second = (await client.POST("/v1/queues/{queue}/receive", { params: queue, body: { wait_ms: 1000 } })).data
    ?.messages[0];
  check(second, "messages_receive again");
  const nacked = await client.POST("/v1/queues/{queue}/nack", {
    params: queue,
    body: { receipts: [second.receipt], error: "broken" },
  });
  check(nacked.data?.results[0]?.outcome === "dead", "messages_nack", nacked);
  const dead = await client.GET("/v1/queues/{queue}/dead", { params: { ...queue, query: { limit: 10 } } });
  check(dead.data?.dead_letters[0]?.errors[0]?.error === "broken", "queue_dead_letters_list", dead);
  const redriven = await client.POST("/v1/queues/{queue}/dead/redrive", { params: queue, body: { all: true } });
  check(redriven.data?.count === 1, "queue_dead_letters_redrive", redriven);
  const described = await client.GET("/v1/queues/{queue}", { params: queue });
  check(described.data?.ready === 1, "queue_get", described);
}

async function topics(): Promise<void> {
  const put = await client.PUT("/v1/topics/{topic}", { params: topic, body: { partitions: 2 } });
  check(put.data, "topic_put", put.error);
  const g = await client.PUT("/v1/topics/{topic}/groups/{group}", { params: group, body: { start: "earliest" } });
  check(g.data, "group_put", g.error);
  const published = await client.POST("/v1/topics/{topic}/records", {
    params: topic,
    body: { records: [{ body: "paid", key: "order-1" }] },
  });
  const id = published.data?.records[0]?.id;
  check(id, "records_publish", published);
  // On MySQL a record gets its offset (and is readable) a moment after its publish commits.
  const deadline = Date.now() + 10_000;
  let records;
  do {
    records = await client.GET("/v1/topics/{topic}/records", {
      params: { ...topic, query: { key: "order-1" } },
    });
    if (records.data?.records.length) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  } while (Date.now() < deadline);
  check(records.data?.records.map((r) => r.id).join() === id, "records_list", records);
  const got = await client.POST("/v1/topics/{topic}/groups/{group}/receive", {
    params: group,
    body: { wait_ms: 5000 },
  });
  const record = got.data?.messages[0];
  check(record?.body === "paid", "group_receive", got);
  const acked = await client.POST("/v1/topics/{topic}/groups/{group}/ack", {
    params: group,
    body: { receipts: [record.receipt] },
  });
  check(acked.data?.results[0]?.result === "ok", "group_ack", acked);
}

async function schedules(): Promise<void> {
  const schedule = { path: { schedule: "ts-nightly" } };
  const put = await client.PUT("/v1/schedules/{schedule}", {
    params: schedule,
    body: { every: "1h", queue: "ts-jobs", body: "report", catch_up: "all", catch_up_limit: 3 },
  });
  check(
    put.response.status === 201 && put.data?.every_ms === 3600000 && put.data.catch_up === "all",
    "schedule_put",
    put.data ?? put.error,
  );
  const paused = await client.POST("/v1/schedules/{schedule}/pause", { params: schedule });
  check(paused.data?.paused === true, "schedule_pause", paused.data ?? paused.error);
  const listed = await client.GET("/v1/schedules");
  check(listed.data?.schedules.map((s) => s.name).join() === "ts-nightly", "schedules_list", listed.data);
  const deleted = await client.DELETE("/v1/schedules/{schedule}", { params: schedule });
  check(deleted.response.status === 204, "schedule_delete", deleted.error);
  const gone = await client.GET("/v1/schedules/{schedule}", { params: schedule });
  check(
    gone.response.status === 404 && gone.error?.error.code === "unknown_schedule",
    "schedule_get after delete",
    gone.error,
  );
}

try {
  await queues();
  await topics();
  await schedules();
  console.log("typescript client: every step passed");
} catch (e) {
  console.error(e);
  process.exitCode = 1;
}
