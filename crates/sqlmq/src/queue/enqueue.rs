//! The full send, in a transaction (the engine's or the caller's): idempotency keys first (a
//! duplicate returns the original id and writes nothing), then the message rows in statements
//! within the server's limits, then each message where it belongs — `ready`, `scheduled`
//! (delayed) or behind an earlier message of its ordering key. Each step is a statement of
//! the store's `SqlStore`; the decisions are here.

use std::collections::{HashMap, HashSet};

use super::resend::{PendingRow, mark_known, pending_ids, skip_known};
use crate::domain::{Message, MessageId, Result, Role, Sent, micros_of, micros_of_time};
use crate::store::rows::{Entry, FlowItem, Keyed, MessageRow, SendBatch};
use crate::store::statements::{MAX_LIST, run_within, split_into_buckets};
use crate::store::{Backend, SqlStore, line_key_of_message};

/// How often a batch re-checks its idempotency keys after losing a race to a concurrent sender
/// of the same key (the loser's insert fails with a duplicate key once the winner commits).
const DEDUP_RACE_RETRIES: usize = 5;

/// Bytes one message row adds to an INSERT (a generous estimate: binary protocol values).
fn row_bytes(m: &Message, headers: Option<&str>) -> usize {
    64 + m.body.len()
        + headers.map_or(0, str::len)
        + m.ordering_key.as_ref().map_or(0, String::len)
        + m.concurrency_key.as_ref().map_or(0, |k| k.len() + 1)
        + usize::from(m.tracked())
        + m.idempotency_key.as_ref().map_or(0, String::len)
        + m.fairness_key.as_ref().map_or(0, String::len)
}

/// Enqueue `batch` in `conn`'s transaction. Returns one [`Sent`] per message, in order.
/// Statements are split to respect the batch's byte budget and the list limit; atomicity comes
/// from the enclosing transaction.
pub(crate) async fn send<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    batch: &SendBatch<'_>,
) -> Result<Vec<Sent>> {
    let SendBatch {
        queue_id,
        dedup_window,
        messages: msgs,
        budget,
    } = *batch;
    let mut out: Vec<Sent> = msgs.iter().map(|m| Sent::new(m.id)).collect();
    let mut fresh =
        check_idempotency::<B>(store, conn, queue_id, dedup_window, msgs, &mut out).await?;
    if fresh.is_empty() {
        return Ok(out);
    }
    // Ids sent before (or twice in this batch) are no-ops returning the original.
    let known = insert_messages::<B>(store, conn, queue_id, msgs, &fresh, budget).await?;
    mark_known(known, &mut out, &mut fresh);
    let timed: Vec<_> = fresh
        .iter()
        .map(|&i| &msgs[i])
        .filter(|m| m.timed())
        .map(|m| timing(m.id, m))
        .collect();
    store.set_timing(conn, &timed).await?;

    let mut placed = Vec::new();
    let mut keyed = Vec::new();
    let mut flow = Vec::new();
    for m in fresh.iter().map(|&i| &msgs[i]) {
        let entry = Entry {
            id: m.id,
            priority: m.priority,
            attempts: 0,
            token: 0,
        };
        let delay_us = micros_of(m.delay);
        if m.tracked() {
            // Batches' messages, dependencies and dependants (`store/body/flows.rs`).
            let part = m.flow.as_ref();
            flow.push(FlowItem {
                id: m.id,
                priority: m.priority,
                delay_us,
                line_key: line_key_of_message(m),
                batch: part.and_then(|p| p.batch),
                step: part.and_then(|p| p.step.clone()),
                role: part.map_or(Role::Member, |p| p.role),
                depends_on: m.depends_on.clone(),
            });
            continue;
        }
        // Ordering and concurrency keys both go in line behind their key (`store/body/keys.rs`).
        match line_key_of_message(m) {
            None => placed.push((entry, delay_us)),
            Some(key) => keyed.push(Keyed {
                key,
                entry,
                delay_us,
            }),
        }
    }
    store.place(conn, queue_id, &placed).await?;
    store.enqueue_keyed(conn, queue_id, keyed).await?;
    store.flow_send(conn, queue_id, &flow).await?;
    Ok(out)
}

/// Insert the rows of `msgs[fresh]`, one statement at a time, each within `budget` bytes and
/// the list limit. Returns the indices (into `msgs`) of messages not inserted because their id
/// is stored already or repeats an earlier one of the batch (see `store/resend.rs`): a
/// statement that fails on an id inserted nothing, so its rows are looked up, the known ones
/// dropped, and the rest inserted again.
async fn insert_messages<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    queue_id: i32,
    msgs: &[Message],
    fresh: &[usize],
    budget: usize,
) -> Result<Vec<usize>> {
    let headers: Vec<Option<String>> = fresh
        .iter()
        .map(|&i| &msgs[i])
        .map(|m| {
            (!m.headers.is_empty())
                .then(|| serde_json::to_string(&m.headers))
                .transpose()
        })
        .collect::<Result<_, _>>()?;
    let mut rows: Vec<PendingRow<'_>> = fresh
        .iter()
        .zip(headers.iter().map(Option::as_ref))
        .map(|(&i, h)| (i, &msgs[i], h))
        .collect();
    let mut known = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        // As many rows as the byte budget allows, then the largest list size that fits: one
        // statement.
        let end = run_within(start, rows.len(), MAX_LIST, budget, |i| {
            row_bytes(rows[i].1, rows[i].2.map(String::as_str))
        });
        let size = split_into_buckets(end - start, MAX_LIST)[0];
        let statement: Vec<MessageRow<'_>> = rows[start..start + size]
            .iter()
            .map(|(_, m, h)| (*m, h.map(String::as_str)))
            .collect();
        match store.insert_messages(conn, queue_id, &statement).await {
            Ok(()) => start += size,
            Err(e) if e.is_duplicate_key() => {
                let ids = pending_ids(&rows, start);
                let stored = store.stored_messages(conn, &ids).await?;
                skip_known(e, &mut rows, start, &stored, &mut known)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(known)
}

/// Resolve idempotency keys: fills `out` for duplicates and returns the indices of the
/// messages to insert, in order. The keys of new messages are recorded here, first, so that a
/// concurrent sender of the same key waits on them (on a server: their row locks) and then
/// sees a duplicate.
async fn check_idempotency<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    queue_id: i32,
    dedup_window: std::time::Duration,
    msgs: &[Message],
    out: &mut [Sent],
) -> Result<Vec<usize>> {
    let mut fresh = Vec::with_capacity(msgs.len());
    let mut first_with_key: HashMap<&str, usize> = HashMap::new();
    let mut in_batch_dups = Vec::new();
    let mut keyed = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        match m.idempotency_key.as_deref() {
            None => fresh.push(i),
            Some(k) => match first_with_key.get(k) {
                Some(&first) => in_batch_dups.push((i, first)),
                None => {
                    first_with_key.insert(k, i);
                    keyed.push(i);
                }
            },
        }
    }
    if keyed.is_empty() {
        return Ok(fresh);
    }
    let ours: HashSet<MessageId> = keyed.iter().map(|&i| msgs[i].id).collect();
    let key_of = |i: usize| msgs[i].idempotency_key.as_deref().unwrap_or_default();
    let keys: Vec<&str> = keyed.iter().map(|&i| key_of(i)).collect();

    let mut attempt = 0;
    let mut new_keys = loop {
        attempt += 1;
        let existing = store.recorded_keys(conn, queue_id, &keys).await?;
        let mut stale = Vec::new();
        let mut to_record = Vec::new();
        let mut new_keys = Vec::new();
        let mut moved = false;
        for &i in &keyed {
            match existing.get(key_of(i)) {
                Some(&(id, _)) if ours.contains(&id) => new_keys.push(i), // recorded earlier
                Some(&(id, _)) if msgs[i].replace => {
                    match replace(store, conn, queue_id, id, &msgs[i], dedup_window).await? {
                        Replaced::Waiting => out[i] = Sent::in_place_of(id),
                        Replaced::Gone => to_record.push(i),
                        // After the last look, recording fails as a lost race does.
                        Replaced::Moved if attempt >= DEDUP_RACE_RETRIES => to_record.push(i),
                        Replaced::Moved => moved = true,
                    }
                }
                Some(&(id, true)) => out[i] = Sent::duplicate_of(id),
                Some(&(_, false)) => {
                    stale.push(key_of(i));
                    to_record.push(i);
                }
                None => to_record.push(i),
            }
        }
        if moved {
            // A concurrent sender gave a replacing key to a message of its own: look again
            // (what was replaced meanwhile is replaced again, harmlessly).
            continue;
        }
        store.forget_keys(conn, queue_id, &stale).await?;
        // One statement per window: a replacing key is kept its message's delay longer.
        let window_of = |i: usize| key_window(&msgs[i], dedup_window);
        let mut windows: Vec<std::time::Duration> =
            to_record.iter().map(|&i| window_of(i)).collect();
        windows.sort_unstable();
        windows.dedup();
        let mut recorded = Ok(());
        for window in windows {
            let records: Vec<(&str, MessageId)> = to_record
                .iter()
                .filter(|&&i| window_of(i) == window)
                .map(|&i| (key_of(i), msgs[i].id))
                .collect();
            recorded = store.record_keys(conn, queue_id, &records, window).await;
            if recorded.is_err() {
                break;
            }
        }
        match recorded {
            Ok(()) => {
                new_keys.extend(to_record);
                break new_keys;
            }
            // A concurrent sender committed one of these keys while we looked: look again.
            // The failed statement changed nothing; earlier ones are recognised as ours.
            Err(e) if e.is_duplicate_key() && attempt < DEDUP_RACE_RETRIES => continue,
            Err(e) => return Err(e),
        }
    };
    for (dup, first) in in_batch_dups {
        out[dup] = Sent::duplicate_of(out[first].id);
    }
    fresh.append(&mut new_keys);
    fresh.sort_unstable();
    Ok(fresh)
}

/// Message `id`'s deadline and run timeout as `m` gives them, for `SqlStore::set_timing`.
fn timing(id: MessageId, m: &Message) -> (MessageId, Option<i64>, Option<i64>) {
    (
        id,
        m.deadline.map(micros_of_time),
        m.run_timeout.map(micros_of),
    )
}

/// What a replacing send found of the message its key names.
enum Replaced {
    /// It waited: replaced.
    Waiting,
    /// It no longer waits (claimed, dead, gone): the key was freed for a new message.
    Gone,
    /// The key names another message already: a concurrent sender moved it.
    Moved,
}

/// How long `m`'s key is remembered: the queue's dedup window, from the message's due time for
/// a replacing one (a debounced message waits its delay, and its key must name it until it is
/// delivered, and a window beyond, as for any key).
fn key_window(m: &Message, dedup_window: std::time::Duration) -> std::time::Duration {
    if m.replace {
        dedup_window.saturating_add(m.delay)
    } else {
        dedup_window
    }
}

/// Replace message `id`, which `m`'s key names, with `m` if it still waits (its content, due
/// time, deadline and run timeout, and how long its key is kept); else free the key.
async fn replace<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    queue_id: i32,
    id: MessageId,
    m: &Message,
    dedup_window: std::time::Duration,
) -> Result<Replaced> {
    let headers = (!m.headers.is_empty())
        .then(|| serde_json::to_string(&m.headers))
        .transpose()?;
    let content = (m.body.as_slice(), headers.as_deref());
    let key = m.idempotency_key.as_deref().unwrap_or_default();
    if store
        .replace_waiting(conn, queue_id, id, content, micros_of(m.delay))
        .await?
    {
        store.set_timing(conn, &[timing(id, m)]).await?;
        store
            .extend_key(conn, queue_id, key, key_window(m, dedup_window))
            .await?;
        return Ok(Replaced::Waiting);
    }
    Ok(if store.unrecord_key(conn, queue_id, key, id).await? {
        Replaced::Gone
    } else {
        Replaced::Moved
    })
}
