//! The API's error shape, `{"error":{"code":"…","message":"…"}}`, and how library errors map
//! onto HTTP statuses.
//!
//! The rule: a client's mistake is always a 4xx with a stable `code` a program can match on;
//! a database that cannot be reached is a 503 with `Retry-After` (a load balancer or a client
//! retries); only a fault of ours or of the database's data is a 500.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Seconds a client is told to wait before retrying while the database is unreachable.
pub const RETRY_AFTER_SECS: u32 = 2;

/// An error answer: its HTTP status, a stable machine-readable code and a message for humans.
///
/// ```
/// use sqlmq_serve::ApiError;
/// let e = ApiError::from(sqlmq::Error::UnknownQueue("emails".into()));
/// assert_eq!(e.status.as_u16(), 404);
/// assert_eq!(e.code, "unknown_queue");
/// ```
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// Stable code (`unknown_queue`, `invalid_argument`, `lease_lost`, …).
    pub code: &'static str,
    /// What went wrong, for a human.
    pub message: String,
}

/// The JSON body of every error answer.
///
/// ```
/// let body = sqlmq_serve::ErrorBody {
///     error: sqlmq_serve::ErrorDetail { code: "unknown_queue".into(), message: "…".into() },
/// };
/// assert_eq!(serde_json::to_value(&body).unwrap()["error"]["code"], "unknown_queue");
/// ```
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The code and message of an error answer.
///
/// ```
/// let d = sqlmq_serve::ErrorDetail { code: "lease_lost".into(), message: "expired".into() };
/// assert_eq!(d.code, "lease_lost");
/// ```
#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code, such as `unknown_queue` or `invalid_argument`.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    ///
    /// ```
    /// let e = sqlmq_serve::ApiError::new(axum::http::StatusCode::CONFLICT, "busy", "try later");
    /// assert_eq!(e.code, "busy");
    /// ```
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the request is malformed (syntax, types, unknown query parameters).
    ///
    /// ```
    /// assert_eq!(sqlmq_serve::ApiError::bad_request("no").status.as_u16(), 400);
    /// ```
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 422: well-formed, but a value is out of range or contradicts another.
    ///
    /// ```
    /// assert_eq!(sqlmq_serve::ApiError::invalid("max must be 1..=1000").status.as_u16(), 422);
    /// ```
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_argument",
            message,
        )
    }

    /// 404 for something other than a queue, topic or group.
    ///
    /// ```
    /// assert_eq!(sqlmq_serve::ApiError::not_found("no such page").code, "not_found");
    /// ```
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl From<sqlmq::Error> for ApiError {
    fn from(err: sqlmq::Error) -> ApiError {
        use sqlmq::Error as E;
        use sqlmq::error::ErrorClass as C;
        let message = err.to_string();
        let (status, code) = match &err {
            E::InvalidName { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_name"),
            E::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            E::InvalidArgument(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_argument"),
            E::UnknownQueue(_) => (StatusCode::NOT_FOUND, "unknown_queue"),
            E::UnknownTopic(_) => (StatusCode::NOT_FOUND, "unknown_topic"),
            E::UnknownGroup { .. } => (StatusCode::NOT_FOUND, "unknown_group"),
            E::UnknownSchedule(_) => (StatusCode::NOT_FOUND, "unknown_schedule"),
            E::MessageNotFound(_) => (StatusCode::NOT_FOUND, "message_not_found"),
            // A value of the request's body, not the resource its path names (a 404 on a
            // send would read as an unknown queue).
            E::DependencyNotFound(_) => (StatusCode::UNPROCESSABLE_ENTITY, "dependency_not_found"),
            E::BatchNotFound(_) => (StatusCode::NOT_FOUND, "batch_not_found"),
            E::BatchSealed(_) => (StatusCode::CONFLICT, "batch_sealed"),
            E::MessageInFlight(_) => (StatusCode::CONFLICT, "message_in_flight"),
            E::LeaseLost { .. } => (StatusCode::CONFLICT, "lease_lost"),
            E::Cancelled { .. } => (StatusCode::CONFLICT, "cancelled"),
            E::StepMismatch { .. } => (StatusCode::CONFLICT, "step_mismatch"),
            // A step's JSON that does not parse: the request's value (HTTP bodies are JSON, so
            // only a library caller meets it).
            E::Json(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_json"),
            E::SchemaTooNew { .. } | E::SchemaOutdated { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "schema_incompatible")
            }
            E::ConnectionLimit { .. } => (StatusCode::SERVICE_UNAVAILABLE, "database_unavailable"),
            E::DatabaseFull { .. } => (StatusCode::SERVICE_UNAVAILABLE, "database_full"),
            E::Database { class, .. } => match class {
                C::Fatal => (StatusCode::INTERNAL_SERVER_ERROR, "database_error"),
                // Unreachable, failing over, out of pooled connections, or a deadlock that
                // survived the library's own retries: all transient, all worth a retry.
                _ => (StatusCode::SERVICE_UNAVAILABLE, "database_unavailable"),
            },
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        // A database that is unavailable for a while is logged once, by the refresher's
        // outage (`snapshot.rs`), not once per request.
        if status.is_server_error() && sqlmq::client::Outage::kind_of(&err).is_none() {
            tracing::warn!(error = %message, code, "request failed");
        }
        ApiError {
            status,
            code,
            message,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        response
    }
}

/// What every handler returns.
///
/// ```
/// fn check(n: u32) -> sqlmq_serve::ApiResult<u32> {
///     if n == 0 { Err(sqlmq_serve::ApiError::invalid("n must be positive")) } else { Ok(n) }
/// }
/// assert!(check(0).is_err());
/// ```
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_mistakes_are_4xx() {
        let cases = [
            (sqlmq::Error::InvalidArgument("x".into()), 422),
            (sqlmq::Error::PayloadTooLarge { size: 2, limit: 1 }, 413),
            (sqlmq::Error::UnknownTopic("t".into()), 404),
            (sqlmq::Error::UnknownSchedule("s".into()), 404),
            (sqlmq::Error::MessageInFlight(sqlmq::MessageId::new()), 409),
            (
                sqlmq::Error::Cancelled {
                    id: sqlmq::MessageId::new(),
                    reason: "r".into(),
                },
                409,
            ),
            (
                sqlmq::Error::DependencyNotFound(sqlmq::MessageId::new()),
                422,
            ),
            (
                sqlmq::Error::BatchNotFound(sqlmq::flow::BatchId::new()),
                404,
            ),
            (sqlmq::Error::BatchSealed(sqlmq::flow::BatchId::new()), 409),
        ];
        for (err, status) in cases {
            assert_eq!(ApiError::from(err).status.as_u16(), status);
        }
        let e = ApiError::from(sqlmq::Error::UnknownSchedule("nightly".into()));
        assert_eq!(e.code, "unknown_schedule");
    }

    #[test]
    fn an_unreachable_database_is_503_with_retry_after() {
        let err = sqlmq::Error::from(sqlx::Error::PoolTimedOut);
        let response = ApiError::from(err).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn a_full_database_or_a_connection_limit_is_503_with_a_code_of_its_own() {
        let full = sqlmq::Error::DatabaseFull {
            source: sqlx::Error::Protocol("The table 'sqlmq_messages' is full".into()),
        };
        let e = ApiError::from(full);
        assert_eq!((e.status.as_u16(), e.code), (503, "database_full"));
        assert!(e.message.contains("out of space"), "{}", e.message);
        let limit = sqlmq::Error::ConnectionLimit {
            limit: "max_connections",
            source: sqlx::Error::Protocol("Too many connections".into()),
        };
        let e = ApiError::from(limit);
        assert_eq!((e.status.as_u16(), e.code), (503, "database_unavailable"));
    }
}
