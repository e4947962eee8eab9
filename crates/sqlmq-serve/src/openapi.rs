//! The OpenAPI 3.1 document, generated from the handlers' annotations (utoipa), served at
//! `/openapi.json`.
//!
//! Error answers are the same for every operation, so they are added to each one here rather
//! than repeated in every annotation.

use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, ResponseBuilder, content::ContentBuilder};
use utoipa::{Modify, OpenApi};

use crate::api;
use crate::error::ErrorBody;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "sqlmq",
        description = "Durable, transactional queues, topics, batches and workflows, and recurring \
            schedules stored in the application's database. Errors are `{\"error\":{\"code\",\"message\"}}`; 503 answers carry `Retry-After`.",
    ),
    paths(
        api::system::healthz, api::system::readyz, api::system::metrics, api::system::processes,
        api::queues::list, api::queues::get, api::queues::put, api::queues::delete,
        api::queues::pause, api::queues::resume, api::queues::purge,
        api::fairness::keys, api::fairness::set_weight,
        api::messages::send, api::messages::receive, api::messages::ack, api::messages::nack,
        api::messages::extend, api::messages::progress, api::messages::cancel, api::browse::list, api::browse::get,
        api::dead::list, api::dead::redrive_handler, api::dead::purge,
        api::batches::create, api::batches::list, api::batches::get, api::batches::add,
        api::batches::seal,
        api::results::result, api::results::dependencies,
        api::runs::journal, api::runs::step, api::runs::record_step, api::runs::sleep,
        api::runs::wait, api::runs::ack, api::runs::emit, api::runs::awaited,
        api::topics::list, api::topics::get, api::topics::put, api::topics::delete,
        api::records::publish, api::records::list, api::trace::trace,
        api::groups::list, api::groups::get, api::groups::put, api::groups::delete,
        api::group_consume::receive, api::group_consume::ack, api::group_consume::nack,
        api::group_consume::extend,
        api::group_admin::reset, api::group_admin::replay, api::group_admin::retries,
        api::group_admin::retry_now_handler, api::group_admin::dead,
        api::group_admin::redrive_handler, api::group_admin::purge_dead,
        api::broadcast::poll, api::broadcast::checkpoint, api::broadcast::leave,
        api::schedules::list, api::schedules::get, api::schedules::put, api::schedules::delete,
        api::schedules::pause, api::schedules::resume,
    ),
    components(schemas(ErrorBody, api::browse::ListedState, api::schedules::CatchUpPolicy)),
    modifiers(&Common),
)]
struct ApiDoc;

/// Adds the bearer scheme and the error answers every operation can give.
struct Common;

const ERRORS: &[(&str, &str)] = &[
    ("400", "Malformed request (JSON syntax, query string)"),
    ("401", "Missing or invalid bearer token"),
    ("403", "Read-only token used for a write"),
    (
        "404",
        "Unknown queue, topic, group, message, schedule or batch",
    ),
    (
        "409",
        "Conflict (message in flight, lease lost, message cancelled, busy member, sealed batch, step mismatch)",
    ),
    ("413", "Body or message too large"),
    ("415", "Body is not application/json"),
    (
        "422",
        "Invalid value (name, range, receipt, id, unknown dependency, dependency cycle)",
    ),
    (
        "503",
        "Database unreachable or schema incompatible; see Retry-After",
    ),
];

impl Modify for Common {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        doc.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
        for item in doc.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                for p in op.parameters.iter_mut().flatten() {
                    if p.parameter_in == ParameterIn::Path {
                        p.schema = Some(RefOr::T(path_schema(&p.name)));
                    }
                }
            }
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                for (status, description) in ERRORS {
                    let response = ResponseBuilder::new()
                        .description(*description)
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                                    "ErrorBody",
                                ))))
                                .build(),
                        )
                        .build();
                    op.responses
                        .responses
                        .entry((*status).to_owned())
                        .or_insert(RefOr::T(response));
                }
            }
        }
    }
}

/// The schema of a path parameter: names follow the library's rule, ids are UUIDs. The
/// examples name the objects a first try (or a test) would create.
fn path_schema(name: &str) -> Schema {
    let (pattern, max, example) = match name {
        "id" => (
            "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
            36,
            "01a209cb-5b43-778c-a723-afcb3faf372d",
        ),
        "queue" => ("^[A-Za-z0-9._-]{1,128}$", 128, "jobs"),
        "topic" => ("^[A-Za-z0-9._-]{1,128}$", 128, "orders"),
        "group" => ("^[A-Za-z0-9._-]{1,128}$", 128, "billing"),
        "schedule" => ("^[A-Za-z0-9._-]{1,128}$", 128, "nightly"),
        _ => ("^[A-Za-z0-9._-]{1,128}$", 128, "member-1"),
    };
    Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(pattern))
            .min_length(Some(1))
            .max_length(Some(max))
            .examples([serde_json::json!(example)])
            .build(),
    )
}

/// The OpenAPI document.
///
/// ```
/// let doc = sqlmq_serve::openapi();
/// assert!(doc.paths.paths.contains_key("/v1/queues/{queue}/receive"));
/// ```
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The document as served: [`openapi`] in JSON, with its response links spelled as OpenAPI
/// spells them (utoipa 5.5 writes a link's `operationId`, `operationRef` and `requestBody` in
/// snake case, which validators and generators reject).
fn served_json() -> String {
    let mut doc = serde_json::to_value(openapi()).expect("the document serializes");
    let links = doc["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut())
        .filter_map(|op| op.get_mut("responses").and_then(|r| r.as_object_mut()))
        .flat_map(|responses| responses.values_mut())
        .filter_map(|response| response.get_mut("links").and_then(|l| l.as_object_mut()))
        .flat_map(|links| links.values_mut())
        .filter_map(|link| link.as_object_mut());
    for link in links {
        for (snake, camel) in [
            ("operation_id", "operationId"),
            ("operation_ref", "operationRef"),
            ("request_body", "requestBody"),
        ] {
            if let Some(v) = link.remove(snake) {
                link.insert(camel.to_owned(), v);
            }
        }
    }
    doc.to_string()
}

/// `GET /openapi.json`.
pub(crate) async fn serve() -> Response {
    static DOC: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let text = DOC.get_or_init(served_json);
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text.clone(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use utoipa::openapi::path::ParameterIn;

    /// What generators need of a document and a validator checks: each operation has its own
    /// id, every `{name}` of a path is a path parameter and every path parameter is in the
    /// path (a query parameter declared `in: path` made generators drop the operation).
    #[test]
    fn operation_ids_are_unique_and_parameters_are_where_they_say() {
        let doc = super::openapi();
        let mut ids = HashSet::new();
        for (path, item) in &doc.paths.paths {
            for op in [&item.get, &item.put, &item.post, &item.delete]
                .into_iter()
                .flatten()
            {
                let id = op.operation_id.clone().expect("every operation has an id");
                assert!(ids.insert(id.clone()), "operation id {id} used twice");
                let mut in_path = HashSet::new();
                for p in op.parameters.iter().flatten() {
                    let marker = format!("{{{}}}", p.name);
                    if p.parameter_in == ParameterIn::Path {
                        assert!(path.contains(&marker), "{id}: {} is not in {path}", p.name);
                        in_path.insert(p.name.clone());
                    } else {
                        assert!(!path.contains(&marker), "{id}: {} is the path's", p.name);
                    }
                }
                let wanted = path.matches('{').count();
                assert_eq!(
                    in_path.len(),
                    wanted,
                    "{id}: every path parameter of {path}"
                );
            }
        }
        assert!(ids.len() >= 59, "{} operations", ids.len());
    }

    /// Every link names an operation of the document, in OpenAPI's spelling.
    #[test]
    fn links_name_operations_in_openapis_spelling() {
        let doc: serde_json::Value = serde_json::from_str(&super::served_json()).unwrap();
        let text = doc.to_string();
        assert!(
            !text.contains("\"operation_id\""),
            "snake case left in a link"
        );
        let ids: HashSet<String> = super::openapi()
            .paths
            .paths
            .values()
            .flat_map(|i| [&i.get, &i.put, &i.post, &i.delete])
            .flatten()
            .filter_map(|op| op.operation_id.clone())
            .collect();
        let mut links = 0;
        for item in doc["paths"].as_object().unwrap().values() {
            for op in item.as_object().unwrap().values() {
                for response in op["responses"].as_object().into_iter().flatten() {
                    for link in response.1["links"].as_object().into_iter().flatten() {
                        let target = link.1["operationId"].as_str().unwrap();
                        assert!(ids.contains(target), "link to unknown {target}");
                        links += 1;
                    }
                }
            }
        }
        assert!(links >= 8, "{links} links");
    }

    /// The API's one form of times and durations, as the document declares it: a property
    /// named as a time (`…_at`, `next_fire`, …) is a string (RFC 3339, as the HTTP tests and
    /// the CLI's JSON test check the values), a duration is whole milliseconds in a field
    /// ending in `_ms`;
    /// the only duration given as text is a schedule request's `every` (`every_ms` beside it).
    #[test]
    fn times_and_durations_have_one_form() {
        let doc = serde_json::to_value(super::openapi()).unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let mut checked = 0;
        for (schema, body) in schemas {
            let Some(props) = body["properties"].as_object() else {
                continue;
            };
            for (name, prop) in props {
                let types = prop["type"].clone();
                let is =
                    |t: &str| types == t || types.as_array().is_some_and(|a| a.contains(&t.into()));
                let time = name.ends_with("_at")
                    || ["at", "since", "lease_until", "next_fire", "last_fired"]
                        .contains(&name.as_str());
                if time {
                    assert!(is("string"), "{schema}.{name} is a time: {prop}");
                    checked += 1;
                } else if name.ends_with("_ms") {
                    assert!(is("integer"), "{schema}.{name} is whole ms: {prop}");
                    checked += 1;
                } else {
                    let bare = [
                        "age",
                        "window",
                        "timeout",
                        "retention",
                        "interval",
                        "every",
                        "lease",
                        "wait",
                        "delay",
                    ]
                    .iter()
                    .any(|w| name == w || name.ends_with(&format!("_{w}")));
                    assert!(
                        !bare || (schema == "ScheduleRequest" && name == "every"),
                        "{schema}.{name}: a duration without _ms"
                    );
                }
            }
        }
        assert!(checked > 20, "only {checked} properties checked");
    }
}
