//! `POST /v1/webhooks/sns`: an Amazon SNS HTTPS subscription's endpoint. SNS posts JSON
//! envelopes as `text/plain` and cannot send an API key, so the route is authenticated by the
//! envelope itself: an allowed topic, SNS's signature and a recent timestamp
//! (`crate::ingest::sns`). A `Notification` carries an EventBridge or Alibaba event, recorded
//! as `POST /v1/webhooks/events` records it; a `SubscriptionConfirmation` is confirmed.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, FieldError, Problem};
use super::webhooks::{MAX_NOTICES, NoticesOut, notices_out};
use crate::app::AppState;
use crate::ingest::event_queue::event_of;
use crate::ingest::sns::SnsError;
use crate::ingest::sns_signature::{
    Envelope, NOTIFICATION, SUBSCRIPTION_CONFIRMATION, SignatureError, UNSUBSCRIBE_CONFIRMATION,
};
use crate::ingest::{cloud_events, notices};
use crate::timefmt::now_ms;

/// The answer to an SNS delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnsOut {
    /// The envelope's `Type`.
    #[serde(rename = "type")]
    pub kind: String,
    /// For a `Notification`: what became of its events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notices: Option<NoticesOut>,
    /// For a `SubscriptionConfirmation`: whether the subscription was confirmed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
}

/// An SNS delivery: `Notification` (an EventBridge or Alibaba event in `Message`),
/// `SubscriptionConfirmation` (confirmed by fetching `SubscribeURL`) or
/// `UnsubscribeConfirmation` (logged). Authenticated by its signature and topic, not an API key.
#[utoipa::path(post, path = "/v1/webhooks/sns", tag = "signals",
    request_body(content = String, content_type = "text/plain", description = "The SNS JSON envelope"),
    responses(
        (status = 200, description = "Recorded or confirmed", body = SnsOut),
        (status = 400, description = "Not an SNS envelope", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "A topic not allowed, a bad signature, an untrusted certificate URL or a replay", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No SNS topic is configured (TRAINSCALER_SNS_TOPIC_ARN)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "The notification's event is malformed; nothing was stored", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The certificate or the database is unavailable; SNS retries", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn post_sns(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: String,
) -> Result<Json<SnsOut>, ApiError> {
    let sns = state.auth.sns();
    if !sns.enabled() {
        return Err(ApiError::not_found(
            "TopicArn",
            "no SNS topic is configured on this server (TRAINSCALER_SNS_TOPIC_ARN)",
        ));
    }
    let envelope: Envelope = serde_json::from_str(&body)
        .map_err(|e| ApiError::bad_request("body", format!("not an SNS envelope: {e}")))?;
    if let Some(t) = headers.get("x-amz-sns-message-type")
        && t.as_bytes() != envelope.kind.as_bytes()
    {
        return Err(ApiError::bad_request(
            "x-amz-sns-message-type",
            "differs from the envelope's Type",
        ));
    }
    let now = now_ms();
    sns.check(&envelope, now).await.map_err(|e| match e {
        SnsError::Fetch { .. } | SnsError::TooManyFetches => ApiError::unavailable(e.to_string()),
        SnsError::Topic(_) => ApiError::refused("TopicArn", e.to_string()),
        SnsError::Stale(_) => ApiError::refused("Timestamp", e.to_string()),
        SnsError::Signature(ref s @ SignatureError::UntrustedUrl(_)) => {
            ApiError::refused("SigningCertURL", s.to_string())
        }
        SnsError::Signature(s) => ApiError::refused("Signature", s.to_string()),
    })?;
    match envelope.kind.as_str() {
        NOTIFICATION => notification(&state, &envelope, now).await,
        SUBSCRIPTION_CONFIRMATION => {
            sns.confirm(&envelope)
                .await
                .map_err(|e| ApiError::unavailable(e.to_string()))?;
            tracing::info!(topic = %envelope.topic_arn, "confirmed the SNS subscription");
            Ok(Json(SnsOut {
                kind: envelope.kind,
                notices: None,
                confirmed: Some(true),
            }))
        }
        UNSUBSCRIBE_CONFIRMATION => {
            tracing::warn!(topic = %envelope.topic_arn,
                "the SNS subscription was removed; no more events arrive from this topic");
            Ok(Json(SnsOut {
                kind: envelope.kind,
                notices: None,
                confirmed: None,
            }))
        }
        // string_to_sign refused other types already.
        other => Err(ApiError::bad_request("Type", format!("unknown `{other}`"))),
    }
}

async fn notification(
    state: &AppState,
    envelope: &Envelope,
    now: i64,
) -> Result<Json<SnsOut>, ApiError> {
    let event = event_of(&envelope.message)
        .map_err(|(_, problem)| ApiError::invalid("Message", problem))?;
    let parsed = cloud_events::parse(&event, now).map_err(|errors| {
        ApiError::invalid_fields(
            errors
                .into_iter()
                .take(20)
                .map(|e| FieldError {
                    field: format!(
                        "Message{}{}",
                        if e.field.starts_with('[') { "" } else { "." },
                        e.field
                    ),
                    problem: e.problem,
                    line: None,
                })
                .collect(),
        )
    })?;
    if parsed.notices.len() > MAX_NOTICES {
        return Err(ApiError::invalid(
            "Message",
            format!("at most {MAX_NOTICES} notices"),
        ));
    }
    let outcomes = notices::record(state, &parsed, now, None).await?;
    let indexes: Vec<usize> = parsed.notices.iter().map(|(i, _)| *i).collect();
    Ok(Json(SnsOut {
        kind: envelope.kind.clone(),
        notices: Some(notices_out(&indexes, &outcomes, parsed.ignored.clone())),
        confirmed: None,
    }))
}
