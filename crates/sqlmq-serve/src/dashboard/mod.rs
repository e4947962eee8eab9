//! The web dashboard (placeholder while the API is assembled).

use axum::Router;

use crate::state::AppState;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}
