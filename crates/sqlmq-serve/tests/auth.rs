//! Authentication: 401 without a token, 403 for writes with the read-only token, loopback only
//! without a token.

mod common;

use common::{TestServer, assert_error, test_config};
use serde_json::json;

const FULL: &str = "full-secret";
const READ: &str = "read-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_grant_full_or_read_access() {
    let s = TestServer::with(test_config().token(FULL).read_token(READ)).await;
    let put = |token: Option<&str>| {
        let mut r = s.http.put(s.url("/v1/queues/q")).json(&json!({}));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r
    };
    // No token, a wrong token: 401 with WWW-Authenticate.
    let r = put(None).send().await.unwrap();
    assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"sqlmq\"");
    assert_error(&common::split(r).await, 401, "unauthorized");
    assert_error(
        &common::split(put(Some("guess")).send().await.unwrap()).await,
        401,
        "unauthorized",
    );
    assert_error(&s.get("/v1/queues").await, 401, "unauthorized");
    assert_error(&s.get("/metrics").await, 401, "unauthorized");
    // Read-only: GETs yes, writes 403.
    assert_error(
        &common::split(put(Some(READ)).send().await.unwrap()).await,
        403,
        "read_only",
    );
    // Full: writes.
    assert_eq!(put(Some(FULL)).send().await.unwrap().status(), 200);
    let get = |path: &str, token: &str| s.http.get(s.url(path)).bearer_auth(token).send();
    assert_eq!(get("/v1/queues", READ).await.unwrap().status(), 200);
    assert_eq!(get("/v1/queues/q", READ).await.unwrap().status(), 200);
    assert_eq!(get("/metrics", READ).await.unwrap().status(), 200);
    for path in [
        "/v1/queues/q/receive",
        "/v1/queues/q/purge",
        "/v1/queues/q/pause",
    ] {
        let r = s
            .http
            .post(s.url(path))
            .bearer_auth(READ)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_error(&common::split(r).await, 403, "read_only");
    }
    let r = s
        .http
        .delete(s.url("/v1/queues/q"))
        .bearer_auth(READ)
        .send()
        .await
        .unwrap();
    assert_error(&common::split(r).await, 403, "read_only");
    // Probes and the API description need no token.
    assert_eq!(s.get("/healthz").await.0, 200);
    assert_eq!(s.get("/readyz").await.0, 200);
    assert_eq!(s.get("/openapi.json").await.0, 200);
    // A browser without a token is sent to the login page; the cookie it gets works.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_redirects
        .get(s.url("/"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login");
    let r = no_redirects
        .post(s.url("/login"))
        .form(&[("token", "guess")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = no_redirects
        .post(s.url("/login"))
        .form(&[("token", READ)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let r = no_redirects
        .get(s.url("/"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = no_redirects
        .post(s.url("/ui/queues/q/purge"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "the read-only cookie cannot act");
    let r = no_redirects
        .post(s.url("/logout"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "but it can sign out");
    assert!(
        r.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_only_loopback_is_accepted() {
    let db = common::TestDb::new().await;
    let client = db.client().await;
    let open = test_config().listen("0.0.0.0:0".parse().unwrap());
    let err = sqlmq_serve::Server::bind(client.clone(), open.clone())
        .await
        .err()
        .expect("a non-loopback address without a token is refused");
    assert!(
        matches!(err, sqlmq_serve::ServeError::NonLoopbackWithoutToken(_)),
        "{err}"
    );
    assert!(err.to_string().contains("--token"), "{err}");
    // With a token the same address is fine.
    let server = sqlmq_serve::Server::bind(client.clone(), open.token(FULL))
        .await
        .unwrap();
    drop(server);
    // Inconsistent tokens are refused.
    let same = test_config().token("x").read_token("x");
    assert!(
        sqlmq_serve::Server::bind(client.clone(), same)
            .await
            .is_err()
    );
    let empty = test_config().token(" ");
    assert!(sqlmq_serve::Server::bind(client, empty).await.is_err());
    db.drop().await;
}
