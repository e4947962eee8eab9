//! What running a scenario gave ([`Outcome`]): the one type the scenario files share with the
//! registry that runs them. It lives here, below both, so that imports point one way:
//! `registry.rs` → the scenarios → this file (and `report.rs`, for the figures).

use super::report::{Figure, PeerInfo, Unavailable};

/// What running a scenario gave.
pub enum Outcome {
    /// Figures of sqlmq or of a raw baseline.
    Ran(Vec<Figure>),
    /// Figures, and figures of the same scenario that mean nothing on this backend.
    Partly(Vec<Figure>, Vec<Unavailable>),
    /// Figures of a peer, with its server's facts.
    Peer(PeerInfo, Vec<Figure>),
    /// Not run, with the reason (a peer's server did not answer).
    Skipped(String),
    /// Not run because it means nothing on this backend, with the reason ("not available on
    /// SQLite: …").
    NotAvailable(String),
}
