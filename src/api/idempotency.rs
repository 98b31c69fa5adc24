//! `Idempotency-Key` on ingestion batches (the IETF httpapi draft's header): a client that
//! retries a batch with the same key gets the first answer again, marked
//! `Idempotent-Replayed: true`, and nothing is written twice.
//!
//! The middleware runs after authentication on every `POST` that needs the `ingest` scope. It
//! validates the key, hashes method, route and body, and answers from the store when the key
//! is already recorded for this caller and route (the stored answer, or 422 for another
//! body). Otherwise it hands the handler an [`IdempotencyClaim`], which the handler passes to
//! the store: the key is claimed and the answer stored in the batch's own transaction (see
//! `store::idempotency`). A request that fails stores nothing, so a corrected retry with the
//! same key is accepted.
//!
//! Racing duplicates: the store makes the later ones wait for the first transaction and then
//! find the key taken; they answer 409, which this middleware turns into the first request's
//! stored answer. So every duplicate of a committed batch gets the replay; a 409 with
//! `Retry-After` is left only when the key's answer cannot be read back.

use axum::Extension;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::auth::{Access, access};
use super::error::ApiError;
use super::extract::read_limited;
use crate::app::AppState;
use crate::auth::scope::Scope;
use crate::auth::verifier::Principal;
use crate::store::{IdempotencyClaim, Once, StoredKey, StoredResponse};

/// The request header that names a batch.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// Set to `true` on an answer that is a stored one sent again.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// Longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 255;

/// The key a handler was handed, if the request sent one.
pub type Claim = Option<Extension<IdempotencyClaim>>;

/// What a handler passes to the store: the claim and how to render the answer.
pub fn once<'a, R>(
    claim: Option<&'a IdempotencyClaim>,
    respond: &'a (dyn Fn(&R) -> StoredResponse + Send + Sync),
) -> Option<Once<'a, R>> {
    claim.map(|claim| Once { claim, respond })
}

/// A JSON answer as `axum::Json` sends it.
pub fn json_answer<T: Serialize>(status: StatusCode, value: &T) -> StoredResponse {
    StoredResponse {
        status: status.as_u16(),
        content_type: "application/json".into(),
        // Serialising plain output structs cannot fail.
        body: serde_json::to_vec(value).unwrap_or_default(),
    }
}

/// Checks a key: 1 to 255 printable ASCII characters. The draft sends it as a structured
/// field string (`"..."`); a bare token is accepted too, and both name the same key.
pub fn parse_key(value: &HeaderValue) -> Result<String, ApiError> {
    let bytes = value.as_bytes();
    let inner = match bytes {
        [b'"', inner @ .., b'"'] => inner,
        _ => bytes,
    };
    if inner.is_empty() {
        return Err(ApiError::bad_idempotency_key("must not be empty"));
    }
    if inner.len() > MAX_KEY_LEN {
        return Err(ApiError::bad_idempotency_key(format!(
            "is {} characters long; at most {MAX_KEY_LEN}",
            inner.len()
        )));
    }
    if !inner.iter().all(|b| (0x20..=0x7e).contains(b)) {
        return Err(ApiError::bad_idempotency_key(
            "must be printable ASCII characters only",
        ));
    }
    // Checked ASCII above, so this never fails.
    Ok(String::from_utf8_lossy(inner).into_owned())
}

/// Whom keys are scoped to: the API key's id, the webhook source, or `""` without auth.
fn caller_of(principal: Option<&Principal>) -> String {
    match principal.map(|p| p.name.as_str()) {
        Some(name) => match name.strip_prefix("key:") {
            Some(id) => id.to_string(),
            None if name == "anonymous" => String::new(),
            None => name.to_string(),
        },
        None => String::new(),
    }
}

/// SHA-256 of method, route and body, separated so that no two requests share an input.
fn request_hash(method: &Method, route: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(method.as_str().as_bytes());
    h.update([0]);
    h.update(route.as_bytes());
    h.update([0]);
    h.update(body);
    hex::encode(h.finalize())
}

/// The answer for a key already recorded.
fn answer_stored(stored: StoredKey, hash: &str) -> Response {
    if stored.request_hash != hash {
        return ApiError::idempotency_key_reused().into_response();
    }
    let Some(answer) = stored.response else {
        return ApiError::idempotency_key_in_flight().into_response();
    };
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut response = (status, answer.body).into_response();
    let headers = response.headers_mut();
    if let Ok(ct) = HeaderValue::from_str(&answer.content_type) {
        headers.insert(header::CONTENT_TYPE, ct);
    }
    headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    response
}

/// The idempotency step of the route guard (`super::route_guard`), after the key check that
/// put the [`Principal`] here. `route` is the matched template.
pub async fn run(state: &AppState, route: &str, req: Request, next: Next) -> Response {
    if req.method() != Method::POST
        || access(req.method(), route, false) != Access::Needs(Scope::Ingest)
    {
        return next.run(req).await;
    }
    let mut values = req.headers().get_all(IDEMPOTENCY_KEY).iter();
    let key = match (values.next(), values.next()) {
        (None, _) => return next.run(req).await,
        (Some(_), Some(_)) => {
            return ApiError::bad_idempotency_key("must be sent once").into_response();
        }
        (Some(value), None) => match parse_key(value) {
            Ok(key) => key,
            Err(e) => return e.into_response(),
        },
    };
    let caller = caller_of(req.extensions().get::<Principal>());
    let (parts, body) = req.into_parts();
    // The route's own limit (it is layered inside this middleware), so a keyed request is
    // refused at the size it would be without a key.
    let limit = state.ingest_body_limits.for_route(route);
    let bytes = match read_limited(body, limit).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    let hash = request_hash(&parts.method, route, &bytes);
    // The application's clock: a key's time to live is the service's own rule, so tests move
    // time forward instead of waiting it out.
    let now = state.clock.now_ms();
    match state.store.idempotency_key(&caller, route, &key, now).await {
        Ok(Some(stored)) => return answer_stored(stored, &hash),
        Ok(None) => {}
        Err(e) => return ApiError::from(e).into_response(),
    }
    let claim = IdempotencyClaim {
        caller,
        route: route.to_owned(),
        key,
        request_hash: hash,
        now_ms: now,
        expires_at_ms: now.saturating_add(state.idempotency_ttl_ms),
    };
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(claim.clone());
    let response = next.run(req).await;
    if response.status() != StatusCode::CONFLICT {
        return response;
    }
    // A 409 may be the key taken by a duplicate that committed while this one waited: answer
    // as the duplicate was answered. Any other 409 (a conflicting price) finds no key.
    match state
        .store
        .idempotency_key(
            &claim.caller,
            &claim.route,
            &claim.key,
            state.clock.now_ms(),
        )
        .await
    {
        Ok(Some(stored)) => answer_stored(stored, &claim.request_hash),
        _ => response,
    }
}

/// Adds the `Idempotency-Key` parameter to every ingestion `POST` of `spec`, with the answers
/// it can cause and the `Idempotent-Replayed` header on replayed successes.
pub fn document(spec: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::header::HeaderBuilder;
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::{ObjectBuilder, RefOr, Required, Type};

    let problem = super::error::problem_response;
    let key_schema = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_KEY_LEN))
        .pattern(Some("^[\\x20-\\x7E]+$"));
    let parameter = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Names this batch (1 to 255 printable ASCII characters; a quoted string as the IETF \
             draft sends it is the same key). A retry with the same key and body within the \
             key's lifetime (24 h by default) writes nothing and gets the first answer again, \
             with `Idempotent-Replayed: true`. Keys are per API key and route; a request that \
             fails keeps no key.",
        ))
        .schema(Some(key_schema))
        .build();
    let replayed = HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["true"])),
        )
        .description(Some(
            "`true` when this is the stored answer to an earlier request with the same \
             Idempotency-Key",
        ))
        .build();
    let add =
        |responses: &mut std::collections::BTreeMap<String, RefOr<utoipa::openapi::Response>>,
         status: &str,
         why: &str| {
            match responses.get_mut(status) {
                Some(RefOr::T(r)) => r.description = format!("{}; or {why}", r.description),
                Some(RefOr::Ref(_)) => {}
                None => {
                    let mut first = why.to_string();
                    if let Some(c) = first.get_mut(0..1) {
                        c.make_ascii_uppercase();
                    }
                    responses.insert(status.into(), problem(&first).into());
                }
            }
        };
    for (path, item) in spec.paths.paths.iter_mut() {
        let Some(op) = &mut item.post else { continue };
        if access(&Method::POST, path, false) != Access::Needs(Scope::Ingest) {
            continue;
        }
        op.parameters
            .get_or_insert_with(Vec::new)
            .push(parameter.clone());
        let responses = &mut op.responses.responses;
        for (status, response) in responses.iter_mut() {
            if let (true, RefOr::T(r)) = (status.starts_with('2'), response) {
                r.headers
                    .insert("Idempotent-Replayed".into(), replayed.clone());
            }
        }
        add(responses, "400", "a malformed Idempotency-Key");
        add(
            responses,
            "409",
            "a request with this Idempotency-Key is still in progress (see Retry-After)",
        );
        add(
            responses,
            "422",
            "the Idempotency-Key was used before with a different body (`/problems/idempotency-key-reused`)",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        let ok = |s: &str| parse_key(&HeaderValue::from_str(s).expect("header value"));
        assert_eq!(ok("abc-123").ok().as_deref(), Some("abc-123"));
        assert_eq!(ok("\"abc-123\"").ok().as_deref(), Some("abc-123"));
        assert!(ok("").is_err());
        assert!(ok("\"\"").is_err());
        assert!(ok(&"k".repeat(MAX_KEY_LEN)).is_ok());
        assert!(ok(&"k".repeat(MAX_KEY_LEN + 1)).is_err());
        let tab = HeaderValue::from_bytes(b"a\tb").expect("header value");
        assert!(parse_key(&tab).is_err());
        let high = HeaderValue::from_bytes(&[b'a', 0xe9]).expect("header value");
        assert!(parse_key(&high).is_err());
    }

    #[test]
    fn callers_are_key_ids() {
        let p = |name: &str| {
            Principal::everywhere(name, crate::auth::scope::Scopes::new([Scope::Ingest]))
        };
        assert_eq!(caller_of(Some(&p("key:abc"))), "abc");
        assert_eq!(caller_of(Some(&p("anonymous"))), "");
        assert_eq!(caller_of(Some(&p("webhook:ci"))), "webhook:ci");
        assert_eq!(caller_of(None), "");
    }

    #[test]
    fn hashes_cover_method_route_and_body() {
        let a = request_hash(&Method::POST, "/v1/prices", b"{}");
        assert_eq!(a, request_hash(&Method::POST, "/v1/prices", b"{}"));
        assert_ne!(a, request_hash(&Method::POST, "/v1/prices", b"{ }"));
        assert_ne!(a, request_hash(&Method::POST, "/v1/benchmarks", b"{}"));
        assert_ne!(a, request_hash(&Method::PUT, "/v1/prices", b"{}"));
    }
}
