//! The domain: plain types shared by the engine and every backend, and nothing else.
//!
//! This module is a leaf: it imports nothing from the engine (`client`, `queue`, `topic`,
//! `worker`, `consume`) nor from any backend (`store`). Backends read and write rows of these
//! types; the engine decides what happens to them; the public API re-exports them at the
//! crate root.
//!
//! | file | types |
//! |---|---|
//! | `error.rs` | [`Error`], [`ErrorClass`], [`Result`] |
//! | `id.rs` | [`MessageId`], [`Receipt`] |
//! | `name.rs` | name and key validation |
//! | `message.rs` | [`Message`], [`Sent`], [`Delivery`], [`DeadLetter`], [`AttemptError`] |
//! | `record.rs` | [`Record`], [`Published`], [`StreamRecord`], key hashing |
//! | `backoff.rs` | [`Backoff`] |
//! | `browse.rs` | [`MessageState`], [`QueuedMessage`], [`MessagePage`]: messages looked at |
//! | `queue_config.rs`, `topic_config.rs`, `group_config.rs` | settings, with their defaults |
//! | `queue_stats.rs`, `lag.rs`, `trace.rs`, `process.rs` | what operators look at |
//! | `reports.rs` | what an operation did |
//! | `server.rs` | [`ServerInfo`], [`HistoryListLength`] |
//! | `flow.rs` | [`Batch`], [`BatchId`], [`BatchStatus`]: batches, workflows, results |
//! | `durable.rs` | [`Emitted`], [`MAX_STEP_RESULT`]: durable execution's limits |
//! | `settle.rs` | claims that end without an ack: why, and what becomes of them |
//! | `deadline.rs` | when a delivery's time is up (its deadline, its run timeout), and why |
//! | `json_time.rs`, `millis.rs` | JSON's one form of times (RFC 3339 UTC, milliseconds) and durations (whole milliseconds) |

mod backoff;
mod browse;
mod deadline;
mod durable;
mod error;
mod fair;
mod flow;
mod grants;
mod group_config;
#[cfg(test)]
mod hostile;
mod id;
mod json_time;
mod lag;
mod message;
mod millis;
mod name;
mod process;
mod queue_config;
mod queue_stats;
mod rate_limit;
mod record;
mod reports;
mod running;
mod schedule;
mod server;
mod settle;
mod topic_config;
mod trace;

pub use backoff::Backoff;
pub(crate) use browse::After;
pub use browse::{MessagePage, MessageState, QueuedMessage};
pub(crate) use deadline::{DEADLINE_PASSED, overdue, time_up};
pub use durable::{
    AwaitedEvent, ChildRun, Emitted, MAX_STEP_RESULT, PARENT_HEADER, Resumed, RunJournal, RunStep,
    RunStepState, StepKind, WaitingRun,
};
pub(crate) use durable::{
    DONE, FAILED, JOIN_POLL, KIND_EVENT, KIND_JOIN, KIND_SLEEP, KIND_STEP, TIMED_OUT, WAITING,
    check_durable_name, check_durable_size, check_wait, child_event,
};
pub(crate) use error::check_not_newer;
pub use error::{Error, ErrorClass, Result};
pub use fair::{FairnessKey, MAX_WEIGHT};
pub(crate) use fair::{NO_KEY, check_weight, start_time};
pub use flow::{
    BATCH_HEADER, Batch, BatchCreated, BatchId, BatchState, BatchStatus, BatchStep, FLOW_RETENTION,
    MAX_RESULT_BYTES, Role, StepState,
};
pub(crate) use flow::{FlowPart, check_trackable_key};
pub use grants::GrantRole;
pub(crate) use grants::{MIGRATION_GRANTS_NEEDED, RUNTIME_GRANTS_NEEDED};
pub use group_config::{GroupConfig, GroupMode, StartAt, default_group_ladder};
pub use id::{MessageId, Receipt};
pub(crate) use json_time::from_micros as json_time_of;
pub use lag::{GroupLag, MemberLag, PartitionInfo, PartitionLag, TopicStats};
pub use message::{AttemptError, DeadLetter, Delivery, Message, Sent};
pub(crate) use message::{
    MAX_ERROR_HISTORY, TAKEN_TOKEN, append_error, check_headers, duration_from_micros,
    encode_errors, error_json, micros_of, micros_of_time, millis_of, parse_errors,
    time_from_micros,
};
pub use name::validate_name;
pub(crate) use name::{
    MAX_NAME_LEN, validate_concurrency_key, validate_key, validate_table_prefix,
};
pub use process::ProcessInfo;
pub use queue_config::QueueConfig;
pub use queue_stats::QueueStats;
pub use rate_limit::RateLimit;
pub(crate) use rate_limit::Room;
pub use record::{Published, Record, StreamRecord, partition_for_key};
pub use reports::{
    AckReport, GroupMaintenance, MaintenanceReport, MigrationReport, NackOutcome, RetentionReport,
};
pub(crate) use running::{CANCELLED_BY_REQUEST, progress_text};
pub use running::{Cancelled, MAX_PROGRESS, Progress};
pub use schedule::{
    CATCH_UP_GRACE, CatchUp, FIRE_TIME_HEADER, SCHEDULE_HEADER, Schedule, ScheduleConfig,
    ScheduleTarget, Timing,
};
pub(crate) use schedule::{NEVER, Plan, plan};
pub use server::{Flavor, HistoryListLength, ServerInfo};
pub use settle::{Decide, Failure, Released, Settlement};
pub use topic_config::TopicConfig;
#[cfg(feature = "mysql")]
pub(crate) use trace::group_events_kept;
pub use trace::{DeliveryEvent, GroupTrace, PendingRetry, Trace, TraceState};
pub(crate) use trace::{GROUP_EVENTS_KEPT, parse_events, rfc3339};
