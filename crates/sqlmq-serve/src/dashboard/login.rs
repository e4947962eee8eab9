//! `/login` and `/logout`: browsers cannot send a bearer header on navigation, so the
//! dashboard keeps the token in an `HttpOnly`, `SameSite=Strict` cookie (other sites cannot
//! make the browser send it, which is also what protects the action forms from CSRF).

use axum::Form;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use sqlmq::Backend;

use super::layout::{Chrome, Nav, page};
use crate::auth::COOKIE;
use crate::state::AppState;

/// The login form's field.
#[derive(Deserialize)]
pub struct Login {
    token: String,
}

fn form_page(error: Option<&str>) -> Markup {
    let body = html! {
        h1 { "Sign in" }
        @if let Some(e) = error { p.err #login-error { (e) } }
        form method="post" action="/login" {
            input type="password" name="token" placeholder="API token (full or read-only)" size="40" autofocus;
            " " button type="submit" { "Sign in" }
        }
        p.muted { "The read-only token shows the dashboard without its actions." }
    };
    page("Sign in", Nav::None, Chrome::default(), body)
}

/// `GET /login`.
pub async fn form<B: Backend>(State(state): State<AppState<B>>) -> Response {
    if !state.tokens.enabled() {
        return Redirect::to("/").into_response();
    }
    Html(form_page(None).into_string()).into_response()
}

/// `POST /login`: check the token, set the cookie.
pub async fn submit<B: Backend>(
    State(state): State<AppState<B>>,
    Form(login): Form<Login>,
) -> Response {
    let token = login.token.trim();
    if state.tokens.grant(token.as_bytes()).is_none() {
        let page = form_page(Some("That token is not valid."));
        return (StatusCode::UNAUTHORIZED, Html(page.into_string())).into_response();
    }
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        super::layout::enc(token)
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
}

/// `POST /logout`: forget the cookie.
pub async fn logout() -> Response {
    let cookie = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    ([(header::SET_COOKIE, cookie)], Redirect::to("/login")).into_response()
}
