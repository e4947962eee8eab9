//! A topic's records: publish (atomically), query by offset, key or time, trace one record
//! across every group.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use utoipa::{IntoParams, ToSchema};

use super::messages::batch;
use crate::body::{decode, encode, rfc3339};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Query};
use crate::state::AppState;

/// One record to publish.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OutgoingRecord {
    /// The key: picks the partition (per-key order) and can be queried.
    pub key: Option<String>,
    /// Headers.
    pub headers: Option<BTreeMap<String, String>>,
    /// The body as text.
    pub body: Option<String>,
    /// The body as base64.
    pub body_base64: Option<String>,
    /// Publish to this partition instead of the key's.
    pub partition: Option<u32>,
    /// Use this record id (a UUID): publishing it again is a no-op.
    pub id: Option<String>,
}

impl OutgoingRecord {
    fn into_record(self) -> ApiResult<sqlmq::Record> {
        let mut r = sqlmq::Record::new(decode(self.body, self.body_base64)?);
        if let Some(k) = self.key {
            r = r.key(k);
        }
        if let Some(p) = self.partition {
            r = r.partition(p);
        }
        if let Some(id) = self.id {
            r = r.with_id(id.parse()?);
        }
        for (k, v) in self.headers.unwrap_or_default() {
            r = r.header(k, v);
        }
        Ok(r)
    }
}

/// `POST /v1/topics/{topic}/records`: records published in one transaction.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishRequest {
    /// 1 to 10 000 records.
    pub records: Vec<OutgoingRecord>,
}

/// A published record (its offset is given right after the commit).
#[derive(Serialize, ToSchema)]
pub struct PublishedOut {
    /// Its id.
    pub id: String,
    /// Its partition.
    pub partition: u32,
    /// True when a record with this id already existed: nothing was written.
    pub duplicate: bool,
}

/// The published records, in the order given.
#[derive(Serialize, ToSchema)]
pub struct PublishResponse {
    /// One per record.
    pub records: Vec<PublishedOut>,
}

/// A record as stored in the topic's log.
#[derive(Serialize, ToSchema)]
pub struct RecordOut {
    /// Its id.
    pub id: String,
    /// Its partition.
    pub partition: u32,
    /// Its offset.
    pub offset: i64,
    /// Its key.
    pub key: Option<String>,
    /// Headers.
    pub headers: BTreeMap<String, String>,
    /// The body, when it is UTF-8 text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body in base64, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// When it was published (RFC 3339).
    pub published_at: String,
    /// When it got its offset (RFC 3339).
    pub sequenced_at: String,
}

impl From<sqlmq::topic::StreamRecord> for RecordOut {
    fn from(r: sqlmq::topic::StreamRecord) -> RecordOut {
        let (body, body_base64) = encode(r.body);
        RecordOut {
            id: r.id.to_string(),
            partition: r.partition,
            offset: r.offset,
            key: r.key,
            headers: r.headers,
            body,
            body_base64,
            published_at: rfc3339(r.published_at),
            sequenced_at: rfc3339(r.sequenced_at),
        }
    }
}

/// Records.
#[derive(Serialize, ToSchema)]
pub struct RecordsResponse {
    /// The records found.
    pub records: Vec<RecordOut>,
}

/// Which records: by `partition` and `offset`, by `key`, or by time (`since`, `until`).
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RecordsQuery {
    /// Partition to read (0 when `offset` alone is given). Not with `key` or `since`.
    #[param(minimum = 0)]
    pub partition: Option<u32>,
    /// First offset (0 when `partition` alone is given). Not with `key` or `since`.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// Records with this key.
    pub key: Option<String>,
    /// Records sequenced at or after this time: RFC 3339, or a duration ago such as `10m`.
    pub since: Option<String>,
    /// With `since`: before this time (default now).
    pub until: Option<String>,
    /// Most records (default 100, at most 10 000).
    #[param(minimum = 1, maximum = 10000, default = 100)]
    pub limit: Option<usize>,
}

/// RFC 3339, or a duration meaning that long ago.
pub(crate) fn parse_time(field: &str, text: &str) -> ApiResult<SystemTime> {
    if let Some(t) = crate::body::parse_rfc3339(text) {
        return Ok(t);
    }
    humantime::parse_duration(text)
        .ok()
        .and_then(|ago| SystemTime::now().checked_sub(ago))
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "{field} must be an RFC 3339 time or a duration ago such as 10m, got {text:?}"
            ))
        })
}

/// Query records.
pub(crate) async fn query<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    q: RecordsQuery,
) -> ApiResult<Vec<sqlmq::topic::StreamRecord>> {
    let topic = state.topic(topic).await?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=sqlmq::Topic::MAX_QUERY).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be 1..=10000, got {limit}"
        )));
    }
    let positional = q.partition.is_some() || q.offset.is_some();
    let records = match (&q.key, &q.since) {
        (Some(_), Some(_)) => return Err(ApiError::invalid("give key or since, not both")),
        (Some(_), None) | (None, Some(_)) if positional => {
            return Err(ApiError::invalid(
                "partition/offset cannot be combined with key or since",
            ));
        }
        (Some(key), None) => topic.query_key(key, limit).await?,
        (None, Some(since)) => {
            let from = parse_time("since", since)?;
            let to = match &q.until {
                Some(t) => parse_time("until", t)?,
                None => SystemTime::now() + Duration::from_secs(3600),
            };
            topic.query_time(from, to, limit).await?
        }
        (None, None) => {
            let offset = q.offset.unwrap_or(0);
            if offset < 0 {
                return Err(ApiError::invalid("offset must not be negative"));
            }
            topic
                .query_offsets(q.partition.unwrap_or(0), offset, limit)
                .await?
        }
    };
    Ok(records)
}

/// Publish records in one transaction: all or none.
#[utoipa::path(post, operation_id = "records_publish", path = "/v1/topics/{topic}/records", tag = "records",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = PublishRequest,
    responses((status = 200, description = "The records' ids and partitions", body = PublishResponse,
        links(
            ("RecordTrace" = (operation_id = "record_trace",
                parameters(("topic" = "$request.path.topic"), ("id" = "$response.body#/records/0/id")),
                description = "The first record's state in every group")),
        ))))]
pub async fn publish<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<PublishRequest>,
) -> ApiResult<Json<PublishResponse>> {
    let records = batch(request.records, "records", OutgoingRecord::into_record)?;
    let topic = state.topic(&name).await?;
    let published = topic.publish_batch(records).await?;
    state.wakeups.wake(&format!("t:{name}"));
    Ok(Json(PublishResponse {
        records: published
            .into_iter()
            .map(|p| PublishedOut {
                id: p.id.to_string(),
                partition: p.partition,
                duplicate: p.duplicate,
            })
            .collect(),
    }))
}

/// Read records by partition and offset, by key, or by time.
#[utoipa::path(get, operation_id = "records_list", path = "/v1/topics/{topic}/records", tag = "records",
    params(("topic" = String, Path, description = "Topic name"), RecordsQuery),
    responses((status = 200, description = "Records", body = RecordsResponse)))]
pub async fn list<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Query(q): Query<RecordsQuery>,
) -> ApiResult<Json<RecordsResponse>> {
    let records = query(&state, &name, q).await?;
    Ok(Json(RecordsResponse {
        records: records.into_iter().map(RecordOut::from).collect(),
    }))
}
