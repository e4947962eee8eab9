//! Records and lags for humans and for JSON, shared by the topic commands (`query`,
//! `subscribe`, `groups`, `lag`, `topic describe`, `trace`).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use sqlmq::topic::{GroupLag, StreamRecord};
use sqlmq::{Backend, Client, Delivery, Error};

use crate::output::{JsonBody, json_time, short_duration};

/// A topic record in `--json` output.
#[derive(Serialize)]
pub struct JsonRecord<'a> {
    id: String,
    partition: Option<u32>,
    offset: Option<i64>,
    key: Option<&'a str>,
    headers: &'a BTreeMap<String, String>,
    /// Cluster deliveries: which attempt this is.
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    published_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sequenced_at: Option<String>,
    #[serde(flatten)]
    body: JsonBody,
}

impl<'a> From<&'a StreamRecord> for JsonRecord<'a> {
    fn from(r: &'a StreamRecord) -> Self {
        JsonRecord {
            id: r.id.to_string(),
            partition: Some(r.partition),
            offset: Some(r.offset),
            key: r.key.as_deref(),
            headers: &r.headers,
            attempt: None,
            published_at: Some(json_time(r.published_at)),
            sequenced_at: Some(json_time(r.sequenced_at)),
            body: JsonBody::new(&r.body),
        }
    }
}

impl<'a> From<&'a Delivery> for JsonRecord<'a> {
    fn from(d: &'a Delivery) -> Self {
        JsonRecord {
            id: d.id.to_string(),
            partition: d.partition,
            offset: d.offset,
            key: d.ordering_key.as_deref(),
            headers: &d.headers,
            attempt: Some(d.attempt),
            published_at: Some(json_time(d.enqueued_at)),
            sequenced_at: None,
            body: JsonBody::new(&d.body),
        }
    }
}

/// `PARTITION:OFFSET  ID  [key=KEY  ]BODY` on one line (the body as lossy UTF-8).
pub fn record_line(
    partition: Option<u32>,
    offset: Option<i64>,
    id: sqlmq::MessageId,
    key: Option<&str>,
    body: &[u8],
) -> String {
    let at = match (partition, offset) {
        (Some(p), Some(o)) => format!("{p}:{o}"),
        _ => "-".to_owned(),
    };
    let key = key.map_or_else(String::new, |k| format!("key={k}  "));
    format!("{at}  {id}  {key}{}", String::from_utf8_lossy(body))
}

/// An age for humans, `-` when there is none.
pub fn age(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_owned(), short_duration)
}

/// The lag of every group of `topic` (of every topic when `None`), by topic then group;
/// only `group` when given (an unknown group is an error).
pub async fn group_lags<B: Backend>(
    client: &Client<B>,
    topic: Option<&str>,
    group: Option<&str>,
    member_silence: std::time::Duration,
) -> Result<Vec<GroupLag>> {
    let topics = match topic {
        Some(name) => vec![client.topic(name).await?],
        None => client.topics().await?,
    };
    let mut out = Vec::new();
    for t in &topics {
        let groups = match group {
            Some(name) => match t.group(name).await {
                Ok(g) => vec![g],
                // Looking through every topic: skip the topics without this group.
                Err(Error::UnknownGroup { .. }) if topic.is_none() => continue,
                Err(e) => return Err(e.into()),
            },
            None => t.groups().await?,
        };
        for g in groups {
            out.push(g.lag_with(member_silence).await?);
        }
    }
    if let (None, Some(name)) = (topic, group)
        && out.is_empty()
    {
        anyhow::bail!("no topic has a consumer group {name:?}");
    }
    Ok(out)
}

/// One table row per group: lag, age of the oldest unconsumed record, in flight, retrying and
/// dead (first the topic, when `with_topic`).
pub fn print_lags(lags: &[GroupLag], with_topic: bool) {
    let mut headers = vec!["TOPIC"];
    headers.extend([
        "GROUP",
        "MODE",
        "LAG",
        "OLDEST",
        "IN-FLIGHT",
        "RETRYING",
        "DEAD",
    ]);
    let skip = usize::from(!with_topic);
    let rows: Vec<Vec<String>> = lags
        .iter()
        .map(|l| {
            let row = [
                l.topic.clone(),
                l.group.clone(),
                l.mode.to_string(),
                l.unconsumed.to_string(),
                age(l.oldest_unconsumed_age),
                l.in_flight.to_string(),
                l.retrying.to_string(),
                l.dead.to_string(),
            ];
            row[skip..].to_vec()
        })
        .collect();
    crate::output::print_table(&headers[skip..], &rows);
}
