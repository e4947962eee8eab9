//! The conformance suite: every guarantee scenario of the library, written once, generic over
//! the backend, and run against every backend (`sqlmq_testkit::conformance!` makes one test per
//! scenario and backend: `queue_basics::mysql::fifo_within_a_priority`). Each scenario gets a
//! throwaway database of its own. Backend-only tests live beside it (`tests/mysql/`, and the
//! EXPLAIN test inside the MySQL backend's folder).
//!
//! | module | guarantee |
//! |---|---|
//! | `queue_basics` | send, receive, ack, nack, retries, dead letters, delays, priorities, idempotent sends |
//! | `concurrent_sends` | concurrent sends and publishes share commits; each keeps its own outcome |
//! | `atomic_batch` | a batch of any size becomes visible at once at commit, or not at all |
//! | `bad_input` | typed errors, nothing written |
//! | `browse` | messages looked at by state, id and key: ordered pages without gaps, nothing changed |
//! | `competing_consumers` | exclusive leases with fencing across tasks and processes |
//! | `limits` | a queue's limits across clients: never more in flight than `max_in_flight` (a dead consumer's slots back when its leases end), never more deliveries in a window than the rate limit |
//! | `lock_held` | `receive_in` (claim, effects and acks) and `take_in` (claim and remove) in the caller's transaction; rollback or `kill -9` gives the batch back at once; concurrent takers remove each message once |
//! | `long_polls` | `receive_wait`: first come first served, woken across clients by the shared probe, a wait that ends claims nothing |
//! | `fairness` | fair queues: a tenant with 100 000 messages waiting delays no other (first in, first out starves them), weights 3:1 share claims 3:1 in every stretch, retries and due messages take their turn by key |
//! | `exactly_once` | `ack_in` commits the handler's writes and the ack together |
//! | `pipeline` | consume, publish the result and ack in one transaction: exactly one result per input across `kill -9` |
//! | `ordering` | strict per-key FIFO under retries, delays and concurrency |
//! | `schedules` | recurring schedules: each fire time sent once by competing clients, one dying mid-fire; catch-up policies; create, replace, pause, resume, delete |
//! | `schema` | migrations, version checks, table prefixes |
//! | `upgrade` | a database in every state migrated from every earlier version keeps every message; `migrate_to` down and up; workers across an upgrade |
//! | `topic_publish`, `topic_groups`, `topic_stress`, `topic_worker` | topics: dense offsets, groups, retention, lag, trace |
//! | `worker`, `worker_processes` | the worker runtime, liveness, graceful shutdown |
//! | `batch_worker` | batch handlers: a whole claim per call, its effects committed with its acks in one transaction, the outcome for every message the handler left, a lost lease failing the whole commit, leases kept while a batch runs |
//! | `broadcast_worker` | broadcast members on the worker: order, retries in place, member dead letters, checkpoints |
//! | `deadlines` | a message past its deadline is never delivered (the claim or the take that finds it late dead-letters it, in its own transaction or the caller's); a worker stops a handler at its message's deadline or run timeout (its cancellation fires), dead-letters it and never retries it; a run timeout counts per attempt |
//! | `durable` | durable execution: a completed step never runs again, a `step_in`'s writes commit with its record, a sleep holds no slot and spends no attempt, an emit wakes its waiting run, a timeout fires once, racing emits and a timeout resolve to one outcome, typed errors |
//! | `durable_processes` | a five-step durable workflow on three worker processes killed with `kill -9` at random: every step's writes once, every run finished |
//! | `running` | control of running messages: a cancel from another client reaches the running handler within a second, its ack fails and rolls back, the message is removed and never delivered again (at its lease's end when the handler ignores it, its slot held until then); progress visible while the handler runs, gone after its ack |
//! | `uniqueness` | replacing sends take their key's waiting message's place, concurrent ones leave one waiting message per key; a debounced key is delivered once after its sends stop, with the last body |
//! | `workflows` | batches: every callback sent once, by the end that finishes the batch; dependencies: a step runs after its dependencies' acks and reads their results, a dead one holds, a cancelled one cancels |
//! | `late_committer` | (shared) producer B of the late-committer scenarios |

mod atomic_batch;
mod bad_input;
mod batch_worker;
mod broadcast_worker;
mod browse;
mod competing_consumers;
mod concurrency_keys;
mod concurrent_sends;
mod deadlines;
mod durable;
mod durable_processes;
mod exactly_once;
mod fairness;
mod late_committer;
mod limits;
mod lock_held;
mod long_polls;
mod ordering;
mod pipeline;
mod queue_basics;
mod running;
mod schedules;
mod schema;
mod topic_groups;
mod topic_publish;
mod topic_stress;
mod topic_worker;
mod uniqueness;
mod upgrade;
mod worker;
mod worker_processes;
mod workflows;
