//! Spot and capacity events from SQS queues (the usual AWS wiring: an EventBridge rule whose
//! target is a queue), polled by the replica that holds the leader lease.
//!
//! Each queue is long-polled (`WaitTimeSeconds=20`, ten messages at a time). A message's body
//! is an EventBridge event, an Alibaba ECS event, an array of them, any other body
//! `POST /v1/webhooks/events` accepts, or an SNS `Notification` envelope around one (an SNS
//! topic subscribed to the queue without raw message delivery). It is recorded through the same
//! function and transaction as the webhook, and deleted only after that commit: delivery is at
//! least once, and a redelivered event is a duplicate of its id, recorded once.
//!
//! A poison message (not JSON, or an event that fails validation) is counted in
//! `trainscaler_event_queue_poison_messages_total{reason}`, logged once with its body, and
//! deleted: retrying cannot fix it, and leaving it to a redrive policy would log it on every
//! receive and, without one, forever. A database error leaves the message for redelivery
//! after the queue's visibility timeout, and the poller backs off.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use crate::app::AppState;
use crate::ingest::cloud_events;
use crate::ingest::notices::{self, MAX_NOTICES};
use crate::metrics::{QueueOutcomeLabels, QueuePoisonLabels};
use crate::provider::aws::sqs::{MAX_MESSAGES, MAX_WAIT_SECONDS, Message, Queue, SqsClient};
use crate::store::NoticeOutcome;
use crate::timefmt::now_ms;

/// The most of a poison message's body written to the log.
const LOGGED_BODY_CHARS: usize = 2_000;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Why a message was poison: the `reason` label's fixed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poison {
    /// The body is not JSON (nor an SNS envelope holding JSON).
    NotJson,
    /// JSON, but not an event we read, or an event that fails validation.
    InvalidEvent,
    /// More notices than one webhook batch may hold.
    TooManyNotices,
}

impl Poison {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotJson => "not_json",
            Self::InvalidEvent => "invalid_event",
            Self::TooManyNotices => "too_many_notices",
        }
    }
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Recorded (or already recorded, unmatched, or of a kind we ignore), then to be deleted;
    /// the label names which.
    Done(&'static str),
    Poison(Poison, String),
}

/// The event inside a message body: the body itself, or the `Message` of an SNS envelope.
pub fn event_of(body: &str) -> Result<Value, (Poison, String)> {
    let value: Value = serde_json::from_str(body)
        .map_err(|e| (Poison::NotJson, format!("the body is not JSON: {e}")))?;
    if value.get("Type").and_then(Value::as_str) == Some("Notification")
        && let Some(inner) = value.get("Message").and_then(Value::as_str)
    {
        return serde_json::from_str(inner).map_err(|e| {
            (
                Poison::NotJson,
                format!("the SNS envelope's Message is not JSON: {e}"),
            )
        });
    }
    Ok(value)
}

/// Records one message's events; `Err` is a store failure, to be retried by redelivery.
pub async fn handle(state: &AppState, body: &str) -> Result<Handled, crate::store::StoreError> {
    let event = match event_of(body) {
        Ok(v) => v,
        Err((reason, problem)) => return Ok(Handled::Poison(reason, problem)),
    };
    let now = now_ms();
    let parsed = match cloud_events::parse(&event, now) {
        Ok(p) => p,
        Err(errors) => {
            let problem = errors
                .iter()
                .take(5)
                .map(|e| format!("{}: {}", e.field, e.problem))
                .collect::<Vec<_>>()
                .join("; ");
            return Ok(Handled::Poison(Poison::InvalidEvent, problem));
        }
    };
    if parsed.notices.len() > MAX_NOTICES {
        return Ok(Handled::Poison(
            Poison::TooManyNotices,
            format!("{} notices; at most {MAX_NOTICES}", parsed.notices.len()),
        ));
    }
    let outcomes = notices::record(state, &parsed, now, None).await?;
    let has = |f: fn(&NoticeOutcome) -> bool| outcomes.iter().any(f);
    Ok(Handled::Done(
        if has(|o| matches!(o, NoticeOutcome::Recorded { .. })) {
            "recorded"
        } else if has(|o| matches!(o, NoticeOutcome::Duplicate { .. })) {
            "duplicate"
        } else if has(|o| matches!(o, NoticeOutcome::Unmatched)) {
            "unmatched"
        } else {
            "ignored"
        },
    ))
}

/// Polls every queue while `leader` is true, until `stopped` turns true.
pub async fn run(
    state: AppState,
    client: Arc<SqsClient>,
    queues: Vec<Queue>,
    leader: watch::Receiver<bool>,
    stopped: watch::Receiver<bool>,
) {
    let polls: Vec<_> = queues
        .into_iter()
        .map(|queue| {
            tokio::spawn(poll_queue(
                state.clone(),
                client.clone(),
                queue,
                leader.clone(),
                stopped.clone(),
            ))
        })
        .collect();
    for p in polls {
        let _ = p.await;
    }
}

async fn poll_queue(
    state: AppState,
    client: Arc<SqsClient>,
    queue: Queue,
    mut leader: watch::Receiver<bool>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        // Only the leader polls: two replicas would each hold messages the other then waits
        // out a visibility timeout for.
        tokio::select! {
            _ = crate::reconcile::until_true(&mut stopped) => return,
            led = leader.wait_for(|l| *l) => if led.is_err() { return },
        }
        let received = tokio::select! {
            _ = crate::reconcile::until_true(&mut stopped) => return,
            // Losing the lease abandons the poll; its messages come back after the timeout.
            _ = leader.wait_for(|l| !*l) => continue,
            r = client.receive(&queue, MAX_WAIT_SECONDS, MAX_MESSAGES) => r,
        };
        let messages = match received {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(queue = %queue.url, error = %e, retry_in_ms = backoff.as_millis() as u64,
                    "cannot receive from the events queue");
                if sleep_or_stop(backoff, &mut stopped).await {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        match process(&state, &client, &queue, messages).await {
            Ok(()) => backoff = FIRST_BACKOFF,
            Err(()) => {
                if sleep_or_stop(backoff, &mut stopped).await {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Records and deletes each message; `Err` after a failure that should slow the loop down.
async fn process(
    state: &AppState,
    client: &SqsClient,
    queue: &Queue,
    messages: Vec<Message>,
) -> Result<(), ()> {
    let mut failed = false;
    for m in messages {
        let outcome = match handle(state, &m.body).await {
            Ok(Handled::Done(outcome)) => outcome,
            Ok(Handled::Poison(reason, problem)) => {
                state
                    .metrics
                    .event_queue_poison
                    .get_or_create(&QueuePoisonLabels {
                        reason: reason.as_str(),
                    })
                    .inc();
                let body: String = m.body.chars().take(LOGGED_BODY_CHARS).collect();
                tracing::warn!(queue = %queue.url, message_id = %m.message_id,
                    receive_count = m.attributes.get("ApproximateReceiveCount").map(String::as_str),
                    reason = reason.as_str(), %problem, %body,
                    "poison message on the events queue: counted and deleted");
                "poison"
            }
            Err(e) => {
                // Not deleted: SQS delivers it again after the visibility timeout.
                tracing::warn!(queue = %queue.url, message_id = %m.message_id, error = %e,
                    "cannot record an event from the queue; it will be delivered again");
                failed = true;
                continue;
            }
        };
        state
            .metrics
            .event_queue_messages
            .get_or_create(&QueueOutcomeLabels { outcome })
            .inc();
        if let Err(e) = client.delete(queue, &m.receipt_handle).await {
            // Recorded already: the redelivery is a duplicate, so nothing is lost or doubled.
            tracing::warn!(queue = %queue.url, message_id = %m.message_id, error = %e,
                "cannot delete a handled message; it will be delivered again");
            failed = true;
        }
    }
    if failed { Err(()) } else { Ok(()) }
}

/// Sleeps `d`; true when `stopped` turned true meanwhile.
async fn sleep_or_stop(d: Duration, stopped: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = crate::reconcile::until_true(stopped) => true,
        _ = tokio::time::sleep(d) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sns_envelope_is_unwrapped_and_bad_bodies_are_poison_by_reason() {
        let inner = r#"{"detail-type":"EC2 Spot Instance Interruption Warning"}"#;
        let envelope = serde_json::json!({"Type": "Notification", "MessageId": "m",
            "Message": inner})
        .to_string();
        assert_eq!(
            event_of(&envelope).unwrap()["detail-type"],
            "EC2 Spot Instance Interruption Warning"
        );
        assert_eq!(
            event_of(inner).unwrap()["detail-type"],
            "EC2 Spot Instance Interruption Warning"
        );
        assert_eq!(event_of("spot!").unwrap_err().0, Poison::NotJson);
        let broken =
            serde_json::json!({"Type": "Notification", "Message": "{not json"}).to_string();
        assert_eq!(event_of(&broken).unwrap_err().0, Poison::NotJson);
    }
}
