//! Request extractors whose rejections are the API's own errors: a malformed body, a wrong
//! content type or a bad query string is a 4xx in the `{"error":…}` shape, never axum's plain
//! text.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body. Syntax errors are 400 `bad_request`, a body of the wrong shape or with unknown
/// fields is 422 `invalid_argument`, a missing `Content-Type: application/json` is 415
/// `unsupported_media_type`, and a body over the limit is 413 `payload_too_large`.
///
/// ```
/// async fn handler(sqlmq_serve::Json(v): sqlmq_serve::Json<serde_json::Value>) -> String {
///     v.to_string()
/// }
/// # let _: axum::Router = axum::Router::new().route("/", axum::routing::post(handler));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Json(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    let message = rejection.body_text();
    match rejection {
        JsonRejection::JsonDataError(_) => ApiError::invalid(message),
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected a JSON body with Content-Type: application/json",
        ),
        JsonRejection::BytesRejection(_) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
        }
        _ => ApiError::bad_request(message),
    }
}

/// A query string. Unparsable values and unknown parameters are 400 `bad_request`.
///
/// ```
/// #[derive(serde::Deserialize)]
/// struct Page { limit: Option<usize> }
/// async fn handler(sqlmq_serve::Query(p): sqlmq_serve::Query<Page>) -> String {
///     format!("{:?}", p.limit)
/// }
/// # let _: axum::Router = axum::Router::new().route("/", axum::routing::get(handler));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(rejection @ QueryRejection::FailedToDeserializeQueryString(_)) => {
                Err(ApiError::bad_request(rejection.body_text()))
            }
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

impl<T: serde::Serialize> axum::response::IntoResponse for Json<T> {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self.0).into_response()
    }
}
