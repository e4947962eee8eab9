//! The JSON API under `/v1`, plus probes and `/metrics`: one file per resource.
//!
//! | file | routes |
//! |---|---|
//! | `queues.rs` | `/v1/queues`, `/v1/queues/{queue}` (+ pause, resume, purge) |
//! | `messages.rs` | send, receive, ack, nack, extend, progress, cancel of a queue |
//! | `batches.rs` | `/v1/batches` (create, list), `/v1/batches/{id}` (+ messages, seal): batches and workflows |
//! | `results.rs` | `/v1/messages/{id}/result`, `/v1/messages/{id}/dependencies` |
//! | `runs.rs` | durable runs: `/v1/queues/{queue}/runs/{receipt}/…` (steps, sleep, wait, ack), `/v1/messages/{id}/journal`, `/v1/events` |
//! | `browse.rs` | a queue's messages looked at: by state, by key, one by id |
//! | `dead.rs` | a queue's dead letters |
//! | `fairness.rs` | a fair queue's keys (`…/keys`) and weights (`…/weights`) |
//! | `topics.rs` | `/v1/topics`, `/v1/topics/{topic}` |
//! | `records.rs`, `trace.rs` | publish, query, trace |
//! | `groups.rs` | groups with lag |
//! | `group_consume.rs` | cluster-group receive, ack, nack, extend |
//! | `group_admin.rs` | reset, replay, retries, a group's dead letters |
//! | `broadcast.rs` | broadcast members' poll and checkpoint |
//! | `schedules.rs` | `/v1/schedules`, `/v1/schedules/{schedule}` (+ pause, resume) |
//! | `system.rs` | `/healthz`, `/readyz`, `/metrics`, `/v1/processes` |
//! | `consume.rs`, `model.rs` | what queues and groups share |

pub mod batches;
pub mod broadcast;
pub mod browse;
pub(crate) mod consume;
pub mod dead;
pub mod fairness;
pub mod group_admin;
pub mod group_consume;
pub mod groups;
pub mod messages;
pub mod model;
pub mod queues;
pub mod records;
pub mod results;
pub mod runs;
pub mod schedules;
pub mod system;
pub mod topics;
pub mod trace;

use axum::Router;
use axum::routing::{delete, get, post, put};
use sqlmq::Backend;

use crate::state::AppState;

/// Every API route.
pub(crate) fn routes<B: Backend>() -> Router<AppState<B>> {
    let q = "/v1/queues/{queue}";
    let t = "/v1/topics/{topic}";
    let g = "/v1/topics/{topic}/groups/{group}";
    let s = "/v1/schedules/{schedule}";
    Router::new()
        .route("/healthz", get(system::healthz))
        .route("/readyz", get(system::readyz))
        .route("/metrics", get(system::metrics))
        .route("/v1/processes", get(system::processes))
        .route("/v1/queues", get(queues::list))
        .route(q, get(queues::get).put(queues::put).delete(queues::delete))
        .route(&format!("{q}/pause"), post(queues::pause))
        .route(&format!("{q}/resume"), post(queues::resume))
        .route(&format!("{q}/purge"), post(queues::purge))
        .route(&format!("{q}/keys"), get(fairness::keys))
        .route(&format!("{q}/weights"), put(fairness::set_weight))
        .route(
            &format!("{q}/messages"),
            get(browse::list).post(messages::send),
        )
        .route(
            &format!("{q}/messages/{{id}}"),
            get(browse::get).delete(messages::cancel),
        )
        .route(&format!("{q}/receive"), post(messages::receive))
        .route(&format!("{q}/ack"), post(messages::ack))
        .route(&format!("{q}/nack"), post(messages::nack))
        .route(&format!("{q}/extend"), post(messages::extend))
        .route(&format!("{q}/progress"), post(messages::progress))
        .route(&format!("{q}/dead"), get(dead::list).delete(dead::purge))
        .route(&format!("{q}/dead/redrive"), post(dead::redrive_handler))
        .route("/v1/batches", post(batches::create).get(batches::list))
        .route("/v1/batches/{id}", get(batches::get))
        .route("/v1/batches/{id}/messages", post(batches::add))
        .route("/v1/batches/{id}/seal", post(batches::seal))
        .route("/v1/messages/{id}/result", get(results::result))
        .route("/v1/messages/{id}/dependencies", get(results::dependencies))
        .route("/v1/messages/{id}/journal", get(runs::journal))
        .route(
            &format!("{q}/runs/{{receipt}}/steps/{{name}}"),
            get(runs::step).put(runs::record_step),
        )
        .route(&format!("{q}/runs/{{receipt}}/sleep"), post(runs::sleep))
        .route(&format!("{q}/runs/{{receipt}}/wait"), post(runs::wait))
        .route(&format!("{q}/runs/{{receipt}}/ack"), post(runs::ack))
        .route("/v1/events", get(runs::awaited))
        .route("/v1/events/{name}", post(runs::emit))
        .route("/v1/topics", get(topics::list))
        .route(t, get(topics::get).put(topics::put).delete(topics::delete))
        .route(
            &format!("{t}/records"),
            get(records::list).post(records::publish),
        )
        .route(&format!("{t}/records/{{id}}/trace"), get(trace::trace))
        .route(&format!("{t}/groups"), get(groups::list))
        .route(g, get(groups::get).put(groups::put).delete(groups::delete))
        .route(&format!("{g}/receive"), post(group_consume::receive))
        .route(&format!("{g}/ack"), post(group_consume::ack))
        .route(&format!("{g}/nack"), post(group_consume::nack))
        .route(&format!("{g}/extend"), post(group_consume::extend))
        .route(&format!("{g}/reset"), post(group_admin::reset))
        .route(&format!("{g}/replay"), post(group_admin::replay))
        .route(&format!("{g}/retries"), get(group_admin::retries))
        .route(
            &format!("{g}/retries/retry-now"),
            post(group_admin::retry_now_handler),
        )
        .route(
            &format!("{g}/dead"),
            get(group_admin::dead).delete(group_admin::purge_dead),
        )
        .route(
            &format!("{g}/dead/redrive"),
            post(group_admin::redrive_handler),
        )
        .route(&format!("{g}/members/{{member}}"), delete(broadcast::leave))
        .route(
            &format!("{g}/members/{{member}}/poll"),
            post(broadcast::poll),
        )
        .route(
            &format!("{g}/members/{{member}}/checkpoint"),
            post(broadcast::checkpoint),
        )
        .route("/v1/schedules", get(schedules::list))
        .route(
            s,
            get(schedules::get)
                .put(schedules::put)
                .delete(schedules::delete),
        )
        .route(&format!("{s}/pause"), post(schedules::pause))
        .route(&format!("{s}/resume"), post(schedules::resume))
}
