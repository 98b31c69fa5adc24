//! API keys over HTTP (admin scope, on a key that reaches every pool): `POST /v1/keys` makes
//! one (optionally restricted to pools) and shows its token once, `GET /v1/keys` lists them
//! without secrets, `DELETE /v1/keys/{id}` revokes one.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, FieldError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::list::{ListParams, page, time_then};
use crate::app::AppState;
use crate::auth::issue::mint;
use crate::auth::pools::{POOL_NAME_RULE, PoolScope, is_pool_name};
use crate::auth::scope::{Scope, Scopes};
use crate::store::KeyRow;
use crate::timefmt::{format_ms, now_ms};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyIn {
    /// A label for people: who or what uses the key (1 to 100 characters).
    // The handler trims it and then counts characters, so it needs one non-space character
    // and at most 100 in all.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = r"\S",
        example = "ci-ingest"
    )]
    pub name: String,
    /// At least one of read, decide, ingest, admin (admin implies the others).
    #[schema(min_items = 1, example = json!(["ingest"]))]
    pub scopes: Vec<Scope>,
    /// The pools the key reaches; absent or empty: every pool. A restricted key gets 403 on
    /// any other pool and on routes that reach every pool at once (the key list, catalog
    /// imports, `/metrics`). The pools need not exist yet.
    #[serde(default)]
    #[schema(example = json!(["gpu-t4", "gpu-a100"]))]
    pub pools: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyOut {
    /// The 12 hex digits after `tsk_` in the token.
    pub id: String,
    pub name: String,
    pub scopes: Vec<Scope>,
    /// The pools it reaches; empty: every pool.
    pub pools: Vec<String>,
    pub created_at: String,
    /// When it was revoked; absent while it works.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub key: KeyOut,
    /// The bearer token. Shown in this answer only: the server keeps just its hash.
    pub token: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    /// Keys, revoked ones included, oldest first.
    pub items: Vec<KeyOut>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next: Option<String>,
}

fn key_out(row: &KeyRow) -> KeyOut {
    KeyOut {
        id: row.id.clone(),
        name: row.name.clone(),
        scopes: row.scopes.iter().collect(),
        pools: row.pools.names().to_vec(),
        created_at: format_ms(row.created_at_ms),
        revoked_at: row.revoked_at_ms.map(format_ms),
    }
}

/// Makes an API key.
#[utoipa::path(post, path = "/v1/keys", tag = "keys", request_body = KeyIn,
    responses(
        (status = 201, description = "Created; the token is in this answer only", body = CreatedKey),
        (status = 400, description = "Not JSON, an unknown field or scope", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An empty name, no scope, or something in `pools` that is not a pool name", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn create_key(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<KeyIn>,
) -> Result<Response, ApiError> {
    let name = body.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::invalid("name", "must be 1 to 100 characters"));
    }
    let scopes = Scopes::new(body.scopes);
    if scopes.is_empty() {
        return Err(ApiError::invalid("scopes", "must name at least one scope"));
    }
    let pools = body.pools.unwrap_or_default();
    let errors: Vec<FieldError> = pools
        .iter()
        .enumerate()
        .filter(|(_, p)| !is_pool_name(p))
        .map(|(i, _)| FieldError {
            field: format!("pools[{i}]"),
            problem: POOL_NAME_RULE.to_string(),
            line: None,
        })
        .take(20)
        .collect();
    if !errors.is_empty() {
        return Err(ApiError::invalid_fields(errors));
    }
    let issued =
        mint(name, scopes, PoolScope::only(pools), now_ms()).map_err(ApiError::internal)?;
    state.store.create_key(&issued.row).await?;
    let out = CreatedKey {
        key: key_out(&issued.row),
        token: issued.token,
    };
    Ok((StatusCode::CREATED, Json(out)).into_response())
}

/// Lists API keys (never their secrets); admin keys only.
#[utoipa::path(get, path = "/v1/keys", tag = "keys", params(ListParams),
    responses(
        (status = 200, description = "A page of keys, oldest first", body = KeyList),
        (status = 400, description = "Unknown parameter or bad cursor", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`limit` out of range", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_keys(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<KeyList>, ApiError> {
    let (rows, next) = page(
        state.store.keys().await?,
        |k| time_then(k.created_at_ms, &k.id),
        params.limit.as_deref(),
        params.cursor.as_deref(),
    )?;
    Ok(Json(KeyList {
        items: rows.iter().map(key_out).collect(),
        next,
    }))
}

/// Revokes an API key: at once on this replica, within 10 s on the others.
#[utoipa::path(delete, path = "/v1/keys/{id}", tag = "keys",
    params(("id" = String, Path, description = "Key id (the 12 hex digits after `tsk_`)")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No live key with this id", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn revoke_key(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    if !state.store.revoke_key(&id, now_ms()).await? {
        return Err(ApiError::not_found("id", format!("no live key `{id}`")));
    }
    state.auth.forget(&id);
    Ok(StatusCode::NO_CONTENT)
}
