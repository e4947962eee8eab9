//! Recurring schedules: list, create or replace, describe, delete, pause, resume. The server
//! also fires them (`Server::run` runs the library's `run_schedules`), as every worker does.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
use utoipa::ToSchema;

use crate::body::{decode, encode, rfc3339};
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use crate::state::AppState;

/// The time zone of a cron expression given without one.
pub const DEFAULT_TIME_ZONE: &str = "UTC";

/// What becomes of missed fire times: those found more than a minute late (no process ran, or
/// the database was unreachable). Fire times found late but within the minute always fire.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CatchUpPolicy {
    /// Missed fire times are dropped.
    Skip,
    /// The latest missed fire time fires once, however late; the others are dropped.
    One,
    /// Every missed fire time fires, oldest first, up to `catch_up_limit`.
    All,
}

impl From<CatchUpPolicy> for sqlmq::schedule::CatchUp {
    fn from(p: CatchUpPolicy) -> sqlmq::schedule::CatchUp {
        match p {
            CatchUpPolicy::Skip => sqlmq::schedule::CatchUp::Skip,
            CatchUpPolicy::One => sqlmq::schedule::CatchUp::One,
            CatchUpPolicy::All => sqlmq::schedule::CatchUp::All,
        }
    }
}

impl From<sqlmq::schedule::CatchUp> for CatchUpPolicy {
    fn from(c: sqlmq::schedule::CatchUp) -> CatchUpPolicy {
        match c {
            sqlmq::schedule::CatchUp::Skip => CatchUpPolicy::Skip,
            sqlmq::schedule::CatchUp::One => CatchUpPolicy::One,
            sqlmq::schedule::CatchUp::All => CatchUpPolicy::All,
        }
    }
}

/// `PUT /v1/schedules/{schedule}`: the whole schedule (a replaced schedule keeps what it fired,
/// whether it is paused, and its next fire time when the timing is unchanged). Give `cron` or
/// `every`, and `queue` or `topic`.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"every": "1m", "queue": "jobs", "body": "{\"task\":\"sweep\"}"}))]
pub struct ScheduleRequest {
    /// A cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with
    /// seconds first, such as `0 3 * * *`.
    pub cron: Option<String>,
    /// The IANA time zone `cron` is read in, such as `Europe/Paris` (default `UTC`; only with
    /// `cron`).
    pub time_zone: Option<String>,
    /// An interval such as `30s`, `5m` or `1h 30m` (at least 1 s, whole milliseconds): fires at
    /// its multiples since the Unix epoch. Or give `every_ms`.
    pub every: Option<String>,
    /// The interval in milliseconds (at least 1000), as responses show it; instead of `every`.
    #[schema(minimum = 1000)]
    pub every_ms: Option<u64>,
    /// Send a message to this queue.
    pub queue: Option<String>,
    /// Publish a record to this topic.
    pub topic: Option<String>,
    /// The body of each message as text (default empty).
    pub body: Option<String>,
    /// The body of each message as base64 (for bytes that are not text).
    pub body_base64: Option<String>,
    /// Headers of each message (besides `sqlmq-schedule` and `sqlmq-fire-time`).
    pub headers: Option<BTreeMap<String, String>>,
    /// The ordering key of each message (queue) or the record key (topic), 1 to 128 bytes.
    pub key: Option<String>,
    /// Priority of each message (queue; lower first; default 0).
    pub priority: Option<i16>,
    /// What becomes of missed fire times (default `skip`).
    pub catch_up: Option<CatchUpPolicy>,
    /// Most missed fire times `all` fires at once (1 to 10 000, default 100).
    #[schema(minimum = 1, maximum = 10000)]
    pub catch_up_limit: Option<u32>,
}

impl ScheduleRequest {
    /// The library's configuration, or why the request is contradictory. The values themselves
    /// (expression, zone, interval, names, headers, key, limit) are checked by the library.
    pub(crate) fn into_config(self) -> ApiResult<ScheduleConfig> {
        let every = match (self.every, self.every_ms) {
            (Some(text), None) => Some(parse_every(&text)?),
            (None, Some(ms)) => Some(Duration::from_millis(ms)),
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid("give either every or every_ms, not both"));
            }
            (None, None) => None,
        };
        let timing = match (self.cron, every) {
            (Some(expr), None) => Timing::cron(
                expr,
                self.time_zone
                    .unwrap_or_else(|| DEFAULT_TIME_ZONE.to_owned()),
            ),
            (None, Some(every)) => {
                if self.time_zone.is_some() {
                    return Err(ApiError::invalid("time_zone goes with cron, not every"));
                }
                Timing::Every(every)
            }
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid("give either cron or every, not both"));
            }
            (None, None) => return Err(ApiError::invalid("missing cron (or every)")),
        };
        let target = match (self.queue, self.topic) {
            (Some(q), None) => ScheduleTarget::Queue(q),
            (None, Some(t)) => ScheduleTarget::Topic(t),
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid("give either queue or topic, not both"));
            }
            (None, None) => return Err(ApiError::invalid("missing queue (or topic)")),
        };
        let body = match (self.body, self.body_base64) {
            (None, None) => Vec::new(),
            (body, base64) => decode(body, base64)?,
        };
        let mut config = ScheduleConfig::new(timing, target).body(body);
        for (k, v) in self.headers.unwrap_or_default() {
            config = config.header(k, v);
        }
        if let Some(key) = self.key {
            config = config.key(key);
        }
        if let Some(p) = self.priority {
            config = config.priority(p);
        }
        if let Some(c) = self.catch_up {
            config = config.catch_up(c.into());
        }
        if let Some(n) = self.catch_up_limit {
            config = config.catch_up_limit(n);
        }
        Ok(config)
    }
}

/// An interval in humantime's form (`90s`, `1m`, `1h 30m`).
fn parse_every(text: &str) -> ApiResult<Duration> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        ApiError::invalid(format!(
            "every {text:?} is not a duration such as 30s, 5m or 1h: {e}"
        ))
    })
}

/// A schedule: when it fires (`cron` and `time_zone`, or `every`), where it sends (`queue` or
/// `topic`), what it sends, and what it fired.
#[derive(Serialize, ToSchema)]
pub struct ScheduleOut {
    /// The schedule's name.
    pub name: String,
    /// The cron expression (cron schedules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The IANA time zone the expression is read in (cron schedules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// The interval in milliseconds (interval schedules); `every_ms` accepts it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// The queue each fire sends a message to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The topic each fire publishes a record to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The body, when it is UTF-8 text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body in base64, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Headers of each message.
    pub headers: BTreeMap<String, String>,
    /// Ordering key (queue) or record key (topic) of each message.
    pub key: Option<String>,
    /// Priority of each message (queue; lower first).
    pub priority: i16,
    /// What becomes of missed fire times.
    pub catch_up: CatchUpPolicy,
    /// Most missed fire times `all` fires at once.
    pub catch_up_limit: u32,
    /// Paused schedules fire nothing; resuming skips what they would have fired meanwhile.
    pub paused: bool,
    /// The next fire time (RFC 3339); null when there is none (or it is after the year 9999).
    pub next_fire: Option<String>,
    /// The latest fire time fired (RFC 3339); null before the first.
    pub last_fired: Option<String>,
    /// Messages (or records) fired so far.
    pub fired: u64,
    /// When it was created (RFC 3339, database clock).
    pub created_at: String,
    /// When it was last created, replaced, paused or resumed (RFC 3339, database clock).
    pub updated_at: String,
}

/// RFC 3339 (as [`rfc3339`]) when the time has that form: from the Unix epoch to the end of the
/// year 9999 (an interval of millennia puts its first fire time past it).
pub(crate) fn rfc3339_within(t: SystemTime) -> Option<String> {
    const YEAR_10000: Duration = Duration::from_secs(253_402_300_800);
    let since = t.duration_since(UNIX_EPOCH).ok()?;
    (since < YEAR_10000).then(|| rfc3339(t))
}

impl From<sqlmq::schedule::Schedule> for ScheduleOut {
    fn from(s: sqlmq::schedule::Schedule) -> ScheduleOut {
        let c = s.config;
        let (cron, time_zone, every) = match c.timing {
            Timing::Cron { expr, zone } => (Some(expr), Some(zone), None),
            Timing::Every(d) => (None, None, Some(d.as_millis() as u64)),
        };
        let (queue, topic) = match c.target {
            ScheduleTarget::Queue(q) => (Some(q), None),
            ScheduleTarget::Topic(t) => (None, Some(t)),
        };
        let (body, body_base64) = encode(c.body);
        ScheduleOut {
            name: s.name,
            cron,
            time_zone,
            every_ms: every,
            queue,
            topic,
            body,
            body_base64,
            headers: c.headers,
            key: c.key,
            priority: c.priority,
            catch_up: c.catch_up.into(),
            catch_up_limit: c.catch_up_limit,
            paused: s.paused,
            next_fire: s.next_fire.and_then(rfc3339_within),
            last_fired: s.last_fired.and_then(rfc3339_within),
            fired: s.fired,
            created_at: rfc3339(s.created_at),
            updated_at: rfc3339(s.updated_at),
        }
    }
}

/// An interval for humans (`1m`, `1h 30m`), as the dashboard shows it; `every` accepts it back.
pub(crate) fn every_text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Every schedule, by name.
#[derive(Serialize, ToSchema)]
pub struct SchedulesResponse {
    /// The schedules.
    pub schedules: Vec<ScheduleOut>,
}

/// List schedules with their next and last fire times.
#[utoipa::path(get, operation_id = "schedules_list", path = "/v1/schedules", tag = "schedules",
    responses((status = 200, description = "Every schedule, by name", body = SchedulesResponse)))]
pub async fn list<B: Backend>(
    State(state): State<AppState<B>>,
) -> ApiResult<Json<SchedulesResponse>> {
    let schedules = state.client.schedules().await?;
    Ok(Json(SchedulesResponse {
        schedules: schedules.into_iter().map(ScheduleOut::from).collect(),
    }))
}

/// Describe a schedule: its settings, next and last fire times, and how many it fired.
#[utoipa::path(get, operation_id = "schedule_get", path = "/v1/schedules/{schedule}", tag = "schedules",
    params(("schedule" = String, Path, description = "Schedule name")),
    responses((status = 200, description = "The schedule", body = ScheduleOut)))]
pub async fn get<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<Json<ScheduleOut>> {
    Ok(Json(state.client.schedule(&name).await?.into()))
}

/// Create a schedule, or replace an existing one's settings (what it fired is kept, so is
/// whether it is paused, and so is its next fire time when the timing is the same). The target
/// queue or topic must exist.
#[utoipa::path(put, operation_id = "schedule_put", path = "/v1/schedules/{schedule}", tag = "schedules",
    params(("schedule" = String, Path, description = "Schedule name")),
    request_body = ScheduleRequest,
    responses(
        (status = 200, description = "The schedule, replaced", body = ScheduleOut,
            links(("ScheduleGet" = (operation_id = "schedule_get",
                parameters(("schedule" = "$request.path.schedule")))))),
        (status = 201, description = "The schedule, created", body = ScheduleOut,
            links(
                ("ScheduleGet" = (operation_id = "schedule_get",
                    parameters(("schedule" = "$request.path.schedule")))),
                ("SchedulePause" = (operation_id = "schedule_pause",
                    parameters(("schedule" = "$request.path.schedule")))),
                ("ScheduleDelete" = (operation_id = "schedule_delete",
                    parameters(("schedule" = "$request.path.schedule")))),
            )),
    ))]
pub async fn put<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<ScheduleRequest>,
) -> ApiResult<(StatusCode, Json<ScheduleOut>)> {
    sqlmq::admin::validate_name("schedule", &name)?;
    let config = request.into_config()?;
    let created = match state.client.schedule(&name).await {
        Ok(_) => false,
        Err(sqlmq::Error::UnknownSchedule(_)) => true,
        Err(e) => return Err(e.into()),
    };
    let schedule = state.client.create_schedule(&name, config).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(schedule.into())))
}

/// Delete a schedule (what it already sent stays).
#[utoipa::path(delete, operation_id = "schedule_delete", path = "/v1/schedules/{schedule}", tag = "schedules",
    params(("schedule" = String, Path, description = "Schedule name")),
    responses((status = 204, description = "Deleted")))]
pub async fn delete<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    state.client.delete_schedule(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pause or resume; the schedule as it is now.
pub(crate) async fn set_paused<B: Backend>(
    state: &AppState<B>,
    name: &str,
    paused: bool,
) -> ApiResult<sqlmq::schedule::Schedule> {
    Ok(if paused {
        state.client.pause_schedule(name).await?
    } else {
        state.client.resume_schedule(name).await?
    })
}

/// Stop a schedule firing until it is resumed.
#[utoipa::path(post, operation_id = "schedule_pause", path = "/v1/schedules/{schedule}/pause", tag = "schedules",
    params(("schedule" = String, Path, description = "Schedule name")),
    responses((status = 200, description = "The schedule, paused", body = ScheduleOut,
        links(("ScheduleResume" = (operation_id = "schedule_resume",
            parameters(("schedule" = "$request.path.schedule"))))))))]
pub async fn pause<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<Json<ScheduleOut>> {
    Ok(Json(set_paused(&state, &name, true).await?.into()))
}

/// Fire a paused schedule again, from its first fire time after now (what it would have fired
/// while paused is not caught up).
#[utoipa::path(post, operation_id = "schedule_resume", path = "/v1/schedules/{schedule}/resume", tag = "schedules",
    params(("schedule" = String, Path, description = "Schedule name")),
    responses((status = 200, description = "The schedule, resumed", body = ScheduleOut)))]
pub async fn resume<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<Json<ScheduleOut>> {
    Ok(Json(set_paused(&state, &name, false).await?.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(v: serde_json::Value) -> ApiResult<ScheduleConfig> {
        serde_json::from_value::<ScheduleRequest>(v)
            .unwrap()
            .into_config()
    }

    #[test]
    fn exactly_one_timing_and_one_target() {
        let c = request(serde_json::json!({"cron": "0 3 * * *", "queue": "q"})).unwrap();
        assert_eq!(c.timing, Timing::cron("0 3 * * *", "UTC"));
        assert!(c.body.is_empty());
        let c =
            request(serde_json::json!({"every": "1h 30m", "topic": "t", "body_base64": "/w=="}))
                .unwrap();
        assert_eq!(c.timing, Timing::Every(Duration::from_secs(5400)));
        assert_eq!(c.body, vec![0xff]);
        let c = request(serde_json::json!({"every_ms": 90_000, "queue": "q"})).unwrap();
        assert_eq!(c.timing, Timing::Every(Duration::from_secs(90)));
        for bad in [
            serde_json::json!({"every": "1m", "every_ms": 60_000, "queue": "q"}),
            serde_json::json!({"cron": "* * * * *", "every": "1m", "queue": "q"}),
            serde_json::json!({"queue": "q"}),
            serde_json::json!({"every": "1m"}),
            serde_json::json!({"every": "1m", "queue": "q", "topic": "t"}),
            serde_json::json!({"every": "1m", "time_zone": "UTC", "queue": "q"}),
            serde_json::json!({"every": "soon", "queue": "q"}),
            serde_json::json!({"every": "1m", "queue": "q", "body": "a", "body_base64": "YQ=="}),
        ] {
            let e = request(bad.clone()).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code),
                (422, "invalid_argument"),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_interval_reads_back_as_it_is_shown() {
        for d in [1, 60, 5400, 86_400 * 400] {
            let d = Duration::from_secs(d);
            assert_eq!(parse_every(&every_text(d)).unwrap(), d);
        }
    }

    #[test]
    fn times_past_the_year_9999_have_no_rfc3339_form() {
        let t = UNIX_EPOCH + Duration::from_secs(253_402_300_799);
        assert_eq!(
            rfc3339_within(t).as_deref(),
            Some("9999-12-31T23:59:59.000Z")
        );
        assert_eq!(rfc3339_within(t + Duration::from_secs(1)), None);
    }
}
