//! The studio's HTTP server: the routes, the reading pages' handlers, and the guard every
//! request passes — a `Host` the studio
//! answers to (no DNS rebinding), the token on anything that changes a run, and headers that
//! keep other sites from framing or scripting the pages. Actions are in `actions.rs`, the
//! live stream in `live.rs`. Must not serve a file from disk: everything comes from the
//! binary.

use super::html::{self, esc};
use super::state::{Action, Shared, Studio, StudioError};
use super::{actions, graph, list, live, run_page};
use crate::history::StoredRunView;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

/// The largest request body the studio reads (an event sent from a form, say).
pub(super) const MAX_BODY: usize = 1024 * 1024 + 4096;

/// An error for a JSON route: `{"error": {"code", "message"}}`.
pub(super) fn json_error(e: StudioError) -> Response {
    let body = serde_json::json!({"error": {"code": e.code, "message": e.message}}).to_string();
    (e.status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(super) fn json_response(value: &serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// Every route.
pub(super) fn router(studio: Shared) -> Router {
    Router::new()
        .route("/", get(list_page))
        .route("/graph", get(graph_page))
        .route("/login", get(login_page).post(login))
        .route("/runs", post(actions::start))
        .route("/runs/{id}", get(run_page))
        .route("/runs/{id}/live", get(live::stream))
        .route("/runs/{id}/send", post(actions::send))
        .route("/runs/{id}/cancel", post(actions::cancel))
        .route("/runs/{id}/fork", post(actions::fork))
        .route("/runs/{id}/replay", post(actions::replay))
        .route("/api/runs", get(api_list))
        .route("/api/runs/{id}", get(api_run))
        .route("/static/studio.css", get(css))
        .route("/static/studio.js", get(js))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(studio.clone(), guard))
        .with_state(studio)
}

/// Checked before any route: the `Host` (a page rebound to another name is refused), the
/// token and origin of a request that changes something, and protective headers on every
/// answer.
async fn guard(State(studio): State<Shared>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !studio.hosts.iter().any(|h| h == host) {
        return StudioError {
            status: StatusCode::FORBIDDEN,
            code: "SAAP-U004",
            message: format!(
                "this studio answers to {} only, not to host `{}`",
                studio.hosts.join(", "),
                host.chars().take(64).collect::<String>()
            ),
        }
        .into_response();
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        // A form posted from another site's page carries that site's origin.
        let origin = request
            .headers()
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok());
        if let Some(o) = origin
            && !studio.hosts.iter().any(|h| o == format!("http://{h}"))
        {
            return StudioError {
                status: StatusCode::FORBIDDEN,
                code: "SAAP-U004",
                message: format!(
                    "a request from another origin (`{}`) may not act on runs",
                    o.chars().take(64).collect::<String>()
                ),
            }
            .into_response();
        }
        // A studio that acts on nothing says so, whoever asks.
        if request.uri().path() != "/login"
            && !studio.acts()
            && let Err(e) = studio.allow(Action::Send)
        {
            return e.into_response();
        }
        if request.uri().path() != "/login" && !studio.signed_in(request.headers()) {
            return StudioError {
                status: StatusCode::UNAUTHORIZED,
                code: "SAAP-U003",
                message: "this action needs the studio's token: open the link the studio printed when it started (…/?token=…), paste the token at /login, or send it as `Authorization: Bearer TOKEN`".to_string(),
            }
            .into_response();
        }
    }
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    for (name, value) in [
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        // Not no-referrer: with it a browser posts forms with `Origin: null`.
        ("referrer-policy", "same-origin"),
        ("cache-control", "no-store"),
        (
            "content-security-policy",
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
        ),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

#[derive(serde::Deserialize)]
struct ListParams {
    #[serde(flatten)]
    list: list::ListQuery,
    /// The token, from the link the studio printed: sets the cookie, then the URL drops it.
    #[serde(default)]
    token: Option<String>,
}

async fn list_page(
    State(studio): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<ListParams>,
) -> Response {
    if let Some(t) = &q.token {
        return sign_in(&studio, t);
    }
    match list::read(&studio, &q.list).await {
        Ok(page) => {
            let body = list::render(&studio, &q.list, &page, studio.signed_in(&headers));
            studio.page(&headers, "runs", &body)
        }
        Err(e) => e.into_response(),
    }
}

async fn api_list(State(studio): State<Shared>, Query(q): Query<list::ListQuery>) -> Response {
    match list::read(&studio, &q).await {
        Ok(page) => json_response(&list::json(&page)),
        Err(e) => json_error(e),
    }
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RunParams {
    #[serde(default)]
    events: Option<usize>,
    #[serde(default)]
    xs: Option<usize>,
    /// What the action that led here did (a fixed set of notes).
    #[serde(default)]
    note: Option<String>,
}

async fn run_page(
    State(studio): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<RunParams>,
) -> Response {
    let (agent, stored, effects) = match studio.read_run(&id).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let view = match StoredRunView::rebuild(&agent, &stored) {
        Ok(v) => v,
        Err(e) => return StudioError::internal(e.to_string()).into_response(),
    };
    let notice = q.note.as_deref().and_then(|n| match n {
        "sent" => Some("Event sent: the page follows the run.".to_string()),
        "cancelled" => Some("Cancelled: the run ended with a RunCancelledEvent.".to_string()),
        "forked" => Some("This run is a fork, just started: the page follows it.".to_string()),
        "started" => Some("Run started: the page follows it.".to_string()),
        _ => None,
    });
    let body = run_page::render(&run_page::RunPage {
        view: &view,
        stored: &stored,
        effects: &effects,
        spec: agent.spec(),
        offers: studio.offers(&headers),
        events_from: q.events.unwrap_or(0),
        executions_from: q.xs.unwrap_or(0),
        notice,
    });
    studio.page(&headers, &format!("run {}", view.run_id), &body)
}

async fn api_run(State(studio): State<Shared>, Path(id): Path<String>) -> Response {
    let (agent, stored, effects) = match studio.read_run(&id).await {
        Ok(r) => r,
        Err(e) => return json_error(e),
    };
    match StoredRunView::rebuild(&agent, &stored) {
        Ok(view) => json_response(&super::super::show::run_json(
            &view, &stored, &effects, None,
        )),
        Err(e) => json_error(StudioError::internal(e.to_string())),
    }
}

async fn graph_page(
    State(studio): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<list::ListQuery>,
) -> Response {
    let agent = match studio.agent(q.agent.as_deref()) {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let body = format!(
        "<h1>The graph of <b>{}</b></h1><p class=\"hint\">Event types (rounded) feed the steps \
         that take them (boxes); steps return the types their arrows point to. A run's page \
         draws its path on this graph.</p><div class=\"graph-box\">{}</div>",
        esc(agent.name()),
        graph::svg(agent.spec(), None)
    );
    studio.page(&headers, "graph", &body)
}

async fn login_page(State(studio): State<Shared>, headers: HeaderMap) -> Response {
    let body = "<h1>Sign in</h1><p>Paste the token the studio printed when it started: it \
                enables the actions (send, cancel, fork, replay) in this browser.</p>\
                <form method=\"post\" action=\"/login\"><input name=\"token\" type=\"password\" \
                autocomplete=\"off\" aria-label=\"token\"> <button type=\"submit\">Sign in</button></form>";
    studio.page(&headers, "sign in", body)
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
}

async fn login(State(studio): State<Shared>, axum::Form(form): axum::Form<LoginForm>) -> Response {
    sign_in(&studio, &form.token)
}

/// Sets the token's cookie when `given` is the token, and goes to the run list.
fn sign_in(studio: &Studio, given: &str) -> Response {
    if !studio.token.matches(given) {
        return StudioError {
            status: StatusCode::UNAUTHORIZED,
            code: "SAAP-U003",
            message: "that is not this studio's token (a new one is printed at every start)"
                .to_string(),
        }
        .into_response();
    }
    let cookie = format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/",
        studio.cookie,
        studio.token.reveal()
    );
    let mut response = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        html::CSS,
    )
        .into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        html::JS,
    )
        .into_response()
}

async fn not_found(request: Request) -> Response {
    StudioError::not_found(format!(
        "nothing is at `{}`: the studio serves the run list at /, runs at /runs/RUN, the graph at /graph",
        request.uri().path().chars().take(100).collect::<String>()
    ))
    .into_response()
}
