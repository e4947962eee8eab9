//! Bearer-token authentication: a full-access token and a read-only token, compared in
//! constant time.
//!
//! A request's token is its `Authorization: Bearer …` header or, for browsers on the
//! dashboard, the `sqlmq_token` cookie set by `/login` (`HttpOnly`, `SameSite=Strict`, so
//! other sites cannot make a browser use it). Without any configured token every request has
//! full access: the server then listens on loopback only (see [`ServeConfig`](crate::ServeConfig)).

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sqlmq::Backend;
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::state::AppState;

/// Name of the dashboard's session cookie.
///
/// ```
/// assert_eq!(sqlmq_serve::COOKIE, "sqlmq_token");
/// ```
pub const COOKIE: &str = "sqlmq_token";

/// What a request may do.
///
/// ```
/// use sqlmq_serve::Access;
/// assert!(Access::Full.can_write());
/// assert!(!Access::Read.can_write());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Everything.
    Full,
    /// GET requests only; the dashboard shows no actions.
    Read,
}

impl Access {
    /// Whether state-changing requests are allowed.
    ///
    /// ```
    /// assert!(sqlmq_serve::Access::Full.can_write());
    /// ```
    pub fn can_write(self) -> bool {
        self == Access::Full
    }
}

/// The configured tokens.
#[derive(Clone, Default)]
pub(crate) struct Tokens {
    pub full: Option<String>,
    pub read: Option<String>,
}

impl Tokens {
    /// The access a presented token grants, or None. Both tokens are always compared, so the
    /// time taken does not tell which one (if any) matched.
    pub(crate) fn grant(&self, presented: &[u8]) -> Option<Access> {
        let eq = |t: &Option<String>| {
            t.as_ref()
                .is_some_and(|t| bool::from(t.as_bytes().ct_eq(presented)))
        };
        let (full, read) = (eq(&self.full), eq(&self.read));
        if full {
            Some(Access::Full)
        } else if read {
            Some(Access::Read)
        } else {
            None
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.full.is_some() || self.read.is_some()
    }

    /// The access of a request: `Ok(None)` when it carries no token, `Err` for a wrong one.
    pub(crate) fn check(&self, req: &axum::http::request::Parts) -> Result<Option<Access>, ()> {
        if !self.enabled() {
            return Ok(Some(Access::Full));
        }
        match presented(req) {
            None => Ok(None),
            Some(token) => self.grant(token.as_bytes()).map(Some).ok_or(()),
        }
    }
}

/// The token a request carries: bearer header first, then the dashboard cookie.
fn presented(req: &axum::http::request::Parts) -> Option<String> {
    if let Some(value) = req.headers.get(header::AUTHORIZATION) {
        let value = value.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_owned());
    }
    req.headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| percent_decode(v))
}

/// Undo the `%XX` escapes the login page puts in the cookie.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Paths served to anyone: probes, the API description, signing in and out.
fn public(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/openapi.json" | "/login" | "/logout"
    )
}

/// Whether the request comes from a browser page (it gets a redirect to the login page
/// instead of a JSON 401).
fn wants_html(req: &axum::http::request::Parts) -> bool {
    req.method == Method::GET
        && req
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"))
}

/// Middleware: authenticate, enforce read-only access, and hand the [`Access`] to handlers
/// as a request extension.
pub(crate) async fn layer<B: Backend>(
    State(state): State<AppState<B>>,
    req: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = req.into_parts();
    let access = if public(parts.uri.path()) {
        state
            .tokens
            .check(&parts)
            .ok()
            .flatten()
            .unwrap_or(Access::Read)
    } else {
        match state.tokens.check(&parts) {
            Ok(Some(access)) => access,
            Ok(None) if wants_html(&parts) => return Redirect::to("/login").into_response(),
            Ok(None) => {
                return unauthorized("missing bearer token (Authorization: Bearer …)");
            }
            Err(()) => return unauthorized("invalid token"),
        }
    };
    let safe = matches!(parts.method, Method::GET | Method::HEAD);
    if !safe && !access.can_write() && !public(parts.uri.path()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only",
            "this token has read-only access",
        )
        .into_response();
    }
    parts.extensions.insert(access);
    next.run(Request::from_parts(parts, body)).await
}

fn unauthorized(message: &str) -> Response {
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"sqlmq\""),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(auth: Option<&str>, cookie: Option<&str>) -> axum::http::request::Parts {
        let mut b = axum::http::Request::builder().uri("/v1/queues");
        if let Some(a) = auth {
            b = b.header(header::AUTHORIZATION, a);
        }
        if let Some(c) = cookie {
            b = b.header(header::COOKIE, c);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn tokens_grant_their_level() {
        let t = Tokens {
            full: Some("f".into()),
            read: Some("r".into()),
        };
        assert_eq!(
            t.check(&parts(Some("Bearer f"), None)),
            Ok(Some(Access::Full))
        );
        assert_eq!(
            t.check(&parts(Some("bearer r"), None)),
            Ok(Some(Access::Read))
        );
        assert_eq!(t.check(&parts(Some("Bearer x"), None)), Err(()));
        assert_eq!(t.check(&parts(None, None)), Ok(None));
        assert_eq!(
            t.check(&parts(None, Some("a=b; sqlmq_token=%72"))),
            Ok(Some(Access::Read))
        );
        assert_eq!(
            Tokens::default().check(&parts(None, None)),
            Ok(Some(Access::Full))
        );
    }
}
