//! RabbitMQ, durable: a durable classic queue, persistent messages (delivery mode 2), publisher
//! confirms awaited for every message before the producer sends the next (as `send` returns
//! only once the message is committed), and manual acks. 16 producers fill the queue, then 8
//! consumers with a prefetch of 100 drain it, acking each message.
//!
//! RabbitMQ confirms a persistent message routed to a durable queue once it is written to
//! disk, so a confirmed message survives a broker crash. Acks, on the other hand, are sent
//! without waiting for any answer (AMQP has none): a consumer does not learn whether its ack
//! was recorded, where sqlmq's `ack_batch` returns after the deletion committed.
//!
//! Every producer and consumer has its own AMQP connection, like every sqlmq producer and
//! consumer has its own database connection. lapin sets `TCP_NODELAY` itself.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use tokio::task::JoinSet;

use super::{CONNECT_TIMEOUT, ranges, reach};
use crate::args::{CONSUMERS, MANY, RECEIVE_BATCH};
use crate::backend::Db;
use crate::context::Ctx;
use crate::measure::{body, body_value};
use crate::outcome::Outcome;
use crate::raw;
use crate::report::{Figure, PeerInfo};
use crate::track::Tracker;

/// AMQP delivery mode of persistent messages.
const PERSISTENT: u8 = 2;
/// How long a consumer waits for a delivery before checking whether to stop.
const WAIT: Duration = Duration::from_millis(100);

/// `peer.rabbitmq`.
pub async fn run<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let url = &ctx.peers.amqp;
    if let Err(why) = reach("RabbitMQ", url, 5672).await {
        return Ok(Outcome::Skipped(why));
    }
    let conn = match connect(url).await {
        Ok(conn) => conn,
        Err(e) => return Ok(Outcome::Skipped(format!("RabbitMQ: cannot connect: {e:#}"))),
    };
    ctx.touch_peer("rabbitmq");
    let queue = ctx.peer_name("queue");
    let channel = conn.create_channel().await?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue.as_str().into(), durable, FieldTable::default())
        .await?;
    let _ = conn.close(200, "bye".into()).await;

    let n = ctx.plan.peer_messages;
    let bar = ctx.bar("peer.rabbitmq");
    bar.phase(&format!("publish+confirm, {MANY} producers"), n);
    // Connections and channels are opened before the clock starts.
    let mut producers = Vec::with_capacity(MANY);
    for range in ranges(n, MANY) {
        let conn = connect(url).await?;
        let channel = conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        producers.push((conn, channel, range));
    }
    let started = Instant::now();
    let mut set = JoinSet::new();
    for (conn, channel, range) in producers {
        let (queue, bar) = (queue.clone(), bar.clone());
        set.spawn(async move {
            let persistent = BasicProperties::default().with_delivery_mode(PERSISTENT);
            for seq in range {
                let confirm = channel
                    .basic_publish(
                        "".into(),
                        queue.as_str().into(),
                        BasicPublishOptions::default(),
                        &body(seq),
                        persistent.clone(),
                    )
                    .await?
                    .await?;
                if !confirm.is_ack() {
                    bail!("RabbitMQ refused message {seq}");
                }
                bar.inc(1);
            }
            let _ = conn.close(200, "bye".into()).await;
            anyhow::Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    let produced = started.elapsed();

    bar.phase(&format!("drain, {CONSUMERS} consumers"), n);
    let tracker = Arc::new(Tracker::new(n));
    tracker.sending_done();
    let mut consumers = Vec::with_capacity(CONSUMERS);
    for i in 0..CONSUMERS {
        let conn = connect(url).await?;
        let channel = conn.create_channel().await?;
        channel
            .basic_qos(RECEIVE_BATCH as u16, BasicQosOptions::default())
            .await?;
        consumers.push((conn, channel, format!("bench-{i}")));
    }
    let started = Instant::now();
    let mut set = JoinSet::new();
    for (conn, channel, tag) in consumers {
        let (queue, tracker, bar) = (queue.clone(), Arc::clone(&tracker), bar.clone());
        set.spawn(async move {
            let mut consumer = channel
                .basic_consume(
                    queue.as_str().into(),
                    tag.as_str().into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await?;
            while !tracker.should_stop() {
                let delivery = match tokio::time::timeout(WAIT, consumer.next()).await {
                    Err(_) => continue,
                    Ok(None) => break,
                    Ok(Some(delivery)) => delivery?,
                };
                delivery.ack(BasicAckOptions::default()).await?;
                tracker.record([body_value(&delivery.data).unwrap_or(u64::MAX)]);
                bar.inc(1);
            }
            let _ = conn.close(200, "bye".into()).await;
            anyhow::Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    let drained = tracker.last_delivery().saturating_duration_since(started);
    let check = tracker.check((0..n).collect::<Vec<_>>().iter());
    bar.finish();

    let info = PeerInfo {
        version: None,
        durable: true,
        durability: "durable queue, persistent messages, publisher confirms: a confirmed \
                     message is on disk"
            .to_owned(),
        settings: BTreeMap::from([
            ("queue_type".to_owned(), "classic".to_owned()),
            ("prefetch".to_owned(), RECEIVE_BATCH.to_string()),
        ]),
    };
    Ok(Outcome::Peer(
        info,
        vec![
            Figure::rate(
                "peer.rabbitmq.produce.16",
                format!("RabbitMQ publish, {MANY} producers"),
                n,
                produced,
            )
            .against(raw::INSERT_MANY),
            Figure::rate(
                "peer.rabbitmq.drain.8",
                format!("RabbitMQ drain, {CONSUMERS} consumers"),
                n,
                drained,
            )
            .against(raw::LIFECYCLE)
            .checked(check),
        ],
    ))
}

/// One AMQP connection, within [`CONNECT_TIMEOUT`].
async fn connect(url: &str) -> Result<Connection> {
    let connect = Connection::connect(url, ConnectionProperties::default());
    Ok(tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {CONNECT_TIMEOUT:?}"))??)
}

/// Delete this run's queue.
pub async fn cleanup<B: Db>(ctx: &Ctx<B>) -> Result<()> {
    let conn = connect(&ctx.peers.amqp).await?;
    let channel = conn.create_channel().await?;
    channel
        .queue_delete(
            ctx.peer_name("queue").as_str().into(),
            QueueDeleteOptions::default(),
        )
        .await?;
    let _ = conn.close(200, "bye".into()).await;
    Ok(())
}
