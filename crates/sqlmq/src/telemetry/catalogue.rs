//! Every metric sqlmq emits, each named once with its kind, unit and help text: those the
//! library records through the `metrics` facade, and those of `sqlmq serve` (its HTTP figures).
//!
//! A metric is recorded only under the name of a [`Metric`] of this list
//! (`counter!(MESSAGES_SENT.name())`),
//! and a [`Metric`] can be made only here, inside [`METRICS`]: so every metric that can be
//! emitted has its help text, whatever path emits it first. A test reads the library's and the
//! server's sources and fails on a metric recorded under any other name; `sqlmq serve` hands
//! the texts to its recorder with [`describe_metrics`]. (A metric without one once failed
//! `promtool check metrics` on `/metrics` — `sqlmq_schedule_fires_total`, whenever a schedule
//! fired before a scrape.)
//!
//! Consumers' metrics carry a `queue` label (the queue's name) or a `group` label
//! (`topic/group`). The gauges `sqlmq serve` reads from the database (queue depths, lag, …)
//! are rendered by the server with their own help texts and are not in this list.

use metrics::{KeyName, SharedString, Unit};

/// What a metric is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// A count that only goes up.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// A distribution of observations.
    Histogram,
}

/// One metric: its name, kind, unit and help text. Made only by this module's list.
///
/// ```
/// let m = sqlmq::telemetry::METRICS.iter().find(|m| m.name() == "sqlmq_send_seconds").unwrap();
/// assert_eq!(m.kind(), sqlmq::telemetry::MetricKind::Histogram);
/// assert!(!m.help().is_empty());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Metric {
    name: &'static str,
    kind: MetricKind,
    unit: Option<Unit>,
    help: &'static str,
}

impl Metric {
    /// The name it is recorded under.
    ///
    /// ```
    /// assert!(sqlmq::telemetry::METRICS.iter().all(|m| m.name().starts_with("sqlmq_")));
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Counter, gauge or histogram.
    ///
    /// ```
    /// # let m = sqlmq::telemetry::METRICS[0];
    /// println!("{} is a {:?}", m.name(), m.kind());
    /// ```
    pub fn kind(&self) -> MetricKind {
        self.kind
    }

    /// The unit, where it has one (seconds).
    ///
    /// ```
    /// # let m = sqlmq::telemetry::METRICS[0];
    /// println!("{:?}", m.unit());
    /// ```
    pub fn unit(&self) -> Option<Unit> {
        self.unit
    }

    /// The help text (Prometheus' `# HELP`).
    ///
    /// ```
    /// assert!(sqlmq::telemetry::METRICS.iter().all(|m| !m.help().is_empty()));
    /// ```
    pub fn help(&self) -> &'static str {
        self.help
    }
}

/// The catalogue: a constant per metric (what call sites record it under), and [`METRICS`]
/// listing them all.
macro_rules! catalogue {
    ($( $konst:ident: $kind:ident $(in $unit:ident)? = $name:literal, $help:literal; )*) => {
        $(
            #[doc = concat!("`", $name, "`: ", $help, ".")]
            ///
            /// ```
            #[doc = concat!(
                "assert_eq!(sqlmq::telemetry::catalogue::", stringify!($konst), ".name(), \"",
                $name, "\");"
            )]
            /// ```
            pub const $konst: Metric = Metric {
                name: $name,
                kind: MetricKind::$kind,
                unit: catalogue!(@unit $($unit)?),
                help: $help,
            };
        )*
        /// Every metric sqlmq emits (the library's and `sqlmq serve`'s), with its help text.
        ///
        /// ```
        /// for m in sqlmq::telemetry::METRICS {
        ///     println!("{} ({:?}): {}", m.name(), m.kind(), m.help());
        /// }
        /// ```
        pub const METRICS: &[Metric] = &[$($konst),*];
    };
    (@unit) => { None };
    (@unit $unit:ident) => { Some(Unit::$unit) };
}

catalogue! {
    // Producing.
    MESSAGES_SENT: Counter = "sqlmq_messages_sent_total",
        "Messages sent to a queue by this process (duplicates of an idempotency key excepted)";
    MESSAGES_DUPLICATE: Counter = "sqlmq_messages_duplicate_total",
        "Messages this process sent to a queue that their idempotency key found sent already (not sent again)";
    SEND_SECONDS: Histogram in Seconds = "sqlmq_send_seconds",
        "Time of a send call of this process, from the call to its answer, by queue";
    RECORDS_PUBLISHED: Counter = "sqlmq_records_published_total",
        "Records published to a topic by this process";
    RECORDS_SEQUENCED: Counter = "sqlmq_records_sequenced_total",
        "Records this process gave their offsets (the sequencer)";
    KEY_RATE_DEFERRALS: Counter = "sqlmq_key_rate_deferrals_total",
        "Claimed messages put back because their concurrency key was over its rate";
    SEQUENCE_RETRIES: Counter = "sqlmq_sequence_retries_total",
        "Sequencer steps started again because a pending record was not visible yet";
    RECORDS_EXPIRED: Counter = "sqlmq_records_expired_total",
        "Records a topic's retention removed, by topic (in this process)";
    SCHEDULE_FIRES: Counter = "sqlmq_schedule_fires_total",
        "Fire times of a recurring schedule this process sent or published (each fire time is sent once, by one process), by schedule";
    // Consuming: queues (messages) and consumer groups (records).
    MESSAGES_CLAIMED: Counter = "sqlmq_messages_claimed_total",
        "Messages of a queue claimed by this process";
    MESSAGES_ACKED: Counter = "sqlmq_messages_acked_total",
        "Messages of a queue this process settled for good (acked, or taken)";
    MESSAGES_RETRIED: Counter = "sqlmq_messages_retried_total",
        "Messages of a queue this process nacked for a later attempt";
    MESSAGES_SNOOZED: Counter = "sqlmq_messages_snoozed_total",
        "Messages of a queue this process snoozed (delivered again later without spending an attempt)";
    MESSAGES_DEAD_LETTERED: Counter = "sqlmq_messages_dead_lettered_total",
        "Messages of a queue dead-lettered by this process (attempts used up, given up, or the last lease expired)";
    RECORDS_CLAIMED: Counter = "sqlmq_records_claimed_total",
        "Records of a group claimed by this process";
    RECORDS_ACKED: Counter = "sqlmq_records_acked_total",
        "Records of a group this process settled for good (acked, or taken)";
    RECORDS_RETRIED: Counter = "sqlmq_records_retried_total",
        "Records of a group this process nacked for a later attempt";
    RECORDS_SNOOZED: Counter = "sqlmq_records_snoozed_total",
        "Records of a group this process snoozed (delivered again later without spending an attempt)";
    RECORDS_DEAD_LETTERED: Counter = "sqlmq_records_dead_lettered_total",
        "Records of a group dead-lettered by this process (attempts used up, given up, or the last lease expired)";
    CLAIM_SECONDS: Histogram in Seconds = "sqlmq_claim_seconds",
        "Time of a claim of this process, by queue or group";
    LEASES_LOST: Counter = "sqlmq_leases_lost_total",
        "Acks of this process refused because the lease was lost (it expired or was released), by queue or group";
    LEASE_EXTENSIONS: Counter = "sqlmq_lease_extensions_total",
        "Lease extensions made by this process, by queue or group";
    LEASES_EXPIRED: Counter = "sqlmq_leases_expired_total",
        "Expired leases this process released for another attempt, by queue or group";
    ACK_BATCH_SIZE: Histogram = "sqlmq_ack_batch_size",
        "Acks a worker of this process committed together in one transaction, by queue or group";
    HANDLER_SECONDS: Histogram in Seconds = "sqlmq_handler_seconds",
        "Time a worker handler of this process took for one message or record, by queue or group";
    RELEASED_FROM_DEAD_PROCESS: Counter = "sqlmq_released_from_dead_process_total",
        "Claims of dead (silent) worker processes this process released";
    GROUP_SKIPPED_BY_RETENTION: Counter = "sqlmq_group_skipped_by_retention_total",
        "Records retention removed before a group consumed them, found by this process's claims";
    GROUP_LAG: Gauge = "sqlmq_group_lag",
        "Records of a group not consumed yet, as this process last read them (group = topic/group)";
    GROUP_LAG_SECONDS: Gauge in Seconds = "sqlmq_group_lag_seconds",
        "Age of a group's oldest unconsumed record, as this process last read it (group = topic/group)";
    GROUP_CONSUME_TIMEOUTS: Gauge = "sqlmq_group_consume_timeouts",
        "Records of a group leased longer than its consume-timeout threshold, as this process's maintenance last counted them (group = topic/group)";
    // The database.
    DB_RETRIES: Counter = "sqlmq_db_retries_total",
        "Transactions of this process retried after a transient failure, by transaction (op) and error class";
    DATABASE_WAITS: Counter = "sqlmq_database_waits_total",
        "Times this process began waiting for an unavailable database, by kind (unreachable, no_connection, connection_limit, out_of_space)";
    DATABASE_WAITING: Gauge = "sqlmq_database_waiting",
        "1 while this process waits for an unavailable database, else 0";
    // `sqlmq serve`.
    HTTP_REQUESTS: Counter = "sqlmq_http_requests_total",
        "HTTP requests answered by sqlmq serve, by route template, method and status";
    HTTP_REQUEST_DURATION: Histogram in Seconds = "sqlmq_http_request_duration_seconds",
        "Time to answer an HTTP request (long polls included), by route template";
    HTTP_PANICS: Counter = "sqlmq_http_panics_total",
        "Request handlers that panicked (answered 500 with code internal; a bug to report)";
}

/// Give the installed `metrics` recorder the help text and unit of every metric of
/// [`METRICS`] (a recorder installed later gets nothing: call it after installing one).
///
/// ```
/// // After installing a recorder (metrics-exporter-prometheus, say):
/// sqlmq::telemetry::describe_metrics();
/// ```
pub fn describe_metrics() {
    metrics::with_recorder(|recorder| {
        for m in METRICS {
            let (key, help) = (
                KeyName::from_const_str(m.name),
                SharedString::const_str(m.help),
            );
            match m.kind {
                MetricKind::Counter => recorder.describe_counter(key, m.unit, help),
                MetricKind::Gauge => recorder.describe_gauge(key, m.unit, help),
                MetricKind::Histogram => recorder.describe_histogram(key, m.unit, help),
            }
        }
    });
}
