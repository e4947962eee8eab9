//! Starting a worker: resolve its sources, register the process, and spawn its tasks — per
//! source an acker and its claim loops; per process a prober and a heartbeat. What the shutdown
//! protocol needs to stop them is returned as [`Running`].

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::acker::Acker;
use super::broadcast::{self, MemberRuntime};
use super::budget::Budget;
use super::builder::WorkerBuilder;
use super::consumer::{self, ConsumerConfig, Slots};
use super::execute::SourceRuntime;
use super::liveness::Registration;
use super::outstanding::Outstanding;
use super::poll::{self, PollState, ProberConfig};
use super::schema::{self, SchemaWatch};
use super::tally::Tally;
use crate::domain::{Error, ErrorClass, GroupMode, Result, TopicConfig};
use crate::source::Source;
use crate::store::Backend;
use crate::topic::Group;

/// A started worker: its tasks, and the signals that stop them (see `shutdown.rs`).
pub(super) struct Running<B: Backend> {
    /// The worker's own token, a child of the caller's: cancelled by the caller or by a
    /// consumer's fatal error. Consumers stop claiming when it is cancelled.
    pub stop: CancellationToken,
    /// Stops the prober and the heartbeat (last, after the acks are flushed).
    pub services: CancellationToken,
    /// Becomes true when the grace period is over: handlers still running are stopped.
    pub kill: watch::Sender<bool>,
    /// Ends the grace period early (a second Ctrl-C).
    pub kill_early: CancellationToken,
    pub grace: std::time::Duration,
    /// The claim loops; each returns with an error retrying cannot fix, or `Ok` once stopped.
    pub consumers: JoinSet<Result<()>>,
    /// Every claim loop's slots: all free means every started message has settled.
    pub slots: Vec<Arc<Slots>>,
    /// The batch ackers: each ends once every handle to it (held by jobs and runtimes) is gone.
    pub ackers: Vec<JoinHandle<()>>,
    pub prober: JoinHandle<()>,
    pub heartbeat: JoinHandle<()>,
    /// Fires the database's recurring schedules (unless the builder said not to).
    pub scheduler: Option<JoinHandle<()>>,
    pub registration: Arc<Registration<B>>,
    /// What the consumers and the prober share; holds a source the prober found gone.
    pub poll: Arc<PollState>,
    pub tally: Arc<Tally>,
}

impl<B: Backend> WorkerBuilder<B> {
    /// Resolve the sources and the broadcast members' groups, and register the process.
    async fn resolve_and_register(
        &self,
    ) -> Result<(Vec<Source<B>>, Vec<Group<B>>, Registration<B>)> {
        let mut sources = Vec::new();
        for (name, _) in &self.sources {
            sources.push(name.resolve(&self.client).await?);
        }
        let mut groups = Vec::new();
        for (spec, _) in &self.members {
            let topic = self.client.topic(&spec.topic).await?;
            groups.push(topic.group(&spec.group).await?);
        }
        let registration = Registration {
            client: self.client.clone(),
            sources: sources.clone(),
            interval: self.heartbeat_interval,
            schema: SchemaWatch::default(),
        };
        registration.register().await?;
        Ok((sources, groups, registration))
    }

    /// Validate, resolve the sources (an unknown queue or group, or a broadcast group, is an
    /// error here, before anything runs), register the process, and spawn every task. While
    /// the database is unavailable this waits (`Outage::wait_out`); `None` when `shutdown` came
    /// first.
    pub(super) async fn start(self, shutdown: CancellationToken) -> Result<Option<Running<B>>> {
        self.validate()?;
        if !schema::wait_for_migration(&self.client, &shutdown).await? {
            return Ok(None);
        }
        let this = &self;
        let resolved = self
            .client
            .outage()
            .wait_out(&shutdown, || async move {
                // A transient conflict that outlasted the transaction's own retries (a
                // deadlock; SQLite's "database is locked" while peers start beside a process
                // killed mid-write) is tried again, as an outage is, not the worker's end.
                let mut conflicts = 0;
                loop {
                    match this.resolve_and_register().await {
                        Err(e) if is_conflict(&e) && conflicts < START_CONFLICTS => {
                            conflicts += 1;
                            tracing::warn!("starting the worker: {e}; trying again");
                            tokio::time::sleep(std::time::Duration::from_millis(100) * conflicts)
                                .await;
                        }
                        other => return other,
                    }
                }
            })
            .await?;
        let Some((sources, groups, registration)) = resolved else {
            return Ok(None);
        };

        let stop = shutdown.child_token();
        let services = CancellationToken::new();
        let (kill, kill_rx) = watch::channel(false);
        let poll = Arc::new(PollState::default());
        let tally = Arc::new(Tally::default());
        let mut ackers = Vec::new();
        let mut consumers = JoinSet::new();
        let mut all_slots = Vec::new();
        let budget = Arc::new(Budget::new(self.max_messages));
        for ((name, handler), source) in self.sources.into_iter().zip(sources.iter()) {
            let outstanding = Arc::new(Outstanding::new(self.stop_when_drained));
            let (acker, acker_task) = Acker::start(
                source.clone(),
                self.lease,
                stop.clone(),
                tally.clone(),
                Arc::clone(&outstanding),
            );
            ackers.push(acker_task);
            let (label, value) = source.metric_label();
            let rt = Arc::new(SourceRuntime {
                source: source.clone(),
                handler,
                lease: self.lease,
                timeout: self.timeout,
                time_up_grace: self.time_up_grace,
                acker,
                outstanding,
                kill: kill_rx.clone(),
                cancels: match source {
                    crate::source::Source::Queue(q) => {
                        Some(super::cancel::CancelWatch::start(q.clone()))
                    }
                    crate::source::Source::Group(_) => None,
                },
                handler_seconds: metrics::histogram!(crate::telemetry::catalogue::HANDLER_SECONDS.name(), label => value),
            });
            let config = ConsumerConfig {
                concurrency: self
                    .per_queue_concurrency
                    .get(&name.to_string())
                    .copied()
                    .unwrap_or(self.concurrency),
                max_batch: self.max_batch,
                stop_when_drained: self.stop_when_drained,
                budget: budget.clone(),
            };
            // The source's slots, split between its claim loops.
            let loops = self.claimers.min(config.concurrency);
            for i in 0..loops {
                let share =
                    config.concurrency / loops + usize::from(i < config.concurrency % loops);
                let config = ConsumerConfig {
                    concurrency: share,
                    budget: budget.clone(),
                    ..config
                };
                let slots = Arc::new(Slots::new(share));
                all_slots.push(Arc::clone(&slots));
                let (poll, tally, stop, rt) =
                    (poll.clone(), tally.clone(), stop.clone(), rt.clone());
                consumers.spawn(async move {
                    let result =
                        consumer::run_consumer(rt, &config, &slots, &poll, &tally, &stop).await;
                    if result.is_err() {
                        stop.cancel();
                    }
                    result
                });
            }
        }
        for ((spec, handler), group) in self.members.into_iter().zip(groups) {
            if group.config().mode != GroupMode::Broadcast {
                return Err(Error::InvalidArgument(format!(
                    "group {} is a cluster group: run it with topic_group",
                    spec.label()
                )));
            }
            let concurrency = self
                .per_queue_concurrency
                .get(&spec.label())
                .copied()
                .unwrap_or(self.concurrency);
            // One task per partition, each holding a slot while it lives (the drain waits
            // for their last checkpoints).
            let alive = Arc::new(Slots::new(TopicConfig::MAX_PARTITIONS as usize));
            all_slots.push(Arc::clone(&alive));
            let rt = Arc::new(MemberRuntime {
                handler_seconds: metrics::histogram!(crate::telemetry::catalogue::HANDLER_SECONDS.name(), "group" => spec.label()),
                group,
                member: spec.member,
                handler,
                timeout: self.timeout,
                checkpointing: self.checkpointing,
                poll: (self.poll_floor, self.poll_ceiling),
                stop_when_drained: self.stop_when_drained,
                running: Arc::new(Semaphore::new(concurrency)),
                alive,
                budget: budget.clone(),
                tally: tally.clone(),
                kill: kill_rx.clone(),
                fatal: Mutex::new(None),
                live: AtomicUsize::new(0),
                exited: Notify::new(),
            });
            let stop = stop.clone();
            consumers.spawn(broadcast::run_member(rt, stop));
        }
        let prober = tokio::spawn(poll::run_prober(
            sources.clone(),
            Arc::clone(&poll),
            ProberConfig {
                floor: self.poll_floor,
                ceiling: self.poll_ceiling,
                maintenance_interval: self.maintenance_interval,
            },
            services.clone(),
            stop.clone(),
        ));
        let registration = Arc::new(registration);
        let heartbeat = {
            let (registration, services, claims) =
                (registration.clone(), services.clone(), stop.clone());
            tokio::spawn(async move { registration.run(services, claims).await })
        };
        let scheduler = self.fire_schedules.then(|| {
            let (client, services) = (self.client.clone(), services.clone());
            tokio::spawn(async move { client.run_schedules(services).await })
        });
        tracing::info!(
            process = self.client.owner_id(),
            sources = sources.len(),
            "worker started"
        );
        Ok(Some(Running {
            stop,
            services,
            kill,
            kill_early: self.kill.unwrap_or_default(),
            grace: self.grace,
            consumers,
            slots: all_slots,
            ackers,
            prober,
            heartbeat,
            scheduler,
            registration,
            poll,
            tally,
        }))
    }
}

/// Transient conflicts at start tried again before the worker gives up.
const START_CONFLICTS: u32 = 20;

/// A conflict worth trying again: the server (or SQLite) rolled the work back or timed out a
/// lock wait; an outage (unreachable, busy, full) is `Outage::wait_out`'s.
fn is_conflict(e: &Error) -> bool {
    matches!(
        e.class(),
        Some(ErrorClass::RetryTransaction | ErrorClass::RetryStatement)
    )
}
