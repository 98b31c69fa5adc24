//! The cloud adapters and AWS event queues this process drives, built from the environment.

use std::sync::Arc;

use anyhow::Context;

use super::state::AppState;
use crate::config::ServeConfig;
use crate::provider::Provider;
use crate::provider::alibaba::{AlibabaProvider, AlibabaSettings};
use crate::provider::aws::sqs::{Queue, SqsClient};
use crate::provider::aws::{AwsProvider, AwsSettings};
use crate::provider::gcp::{GcpProvider, GcpSettings};
use crate::provider::metered::Metered;
use crate::provider::registry::Providers;
use crate::provider::static_provider::{StaticProvider, StaticSettings};

/// The provider adapters this process can drive: the static provider always, AWS and
/// Alibaba Cloud when their credentials are in the environment, GCP always (with a key file
/// from `GOOGLE_APPLICATION_CREDENTIALS`, or else the metadata server, asked at first use).
pub fn providers_from_env(state: &AppState, serve: &ServeConfig) -> anyhow::Result<Providers> {
    let capacity = StaticSettings::parse_capacity(&serve.static_capacity)
        .map_err(|e| anyhow::anyhow!("TRAINSCALER_STATIC_CAPACITY: {e}"))?;
    let static_provider = StaticProvider::new(
        state.store.clone(),
        StaticSettings {
            startup_delay: std::time::Duration::from_secs(serve.static_startup_delay_sec),
            capacity,
        },
    );
    let alibaba = match AlibabaSettings::from_env() {
        Some(settings) => Some(metered(
            state,
            Arc::new(AlibabaProvider::new(settings).context("Alibaba Cloud provider")?),
        )),
        None => None,
    };
    let aws_settings = AwsSettings::from_env()
        .map_err(anyhow::Error::msg)
        .context("AWS credentials")?;
    let aws = match aws_settings {
        Some(settings) => Some(metered(
            state,
            Arc::new(AwsProvider::new(settings).context("AWS provider")?),
        )),
        None => None,
    };
    let gcp = GcpProvider::new(GcpSettings::from_env()).context("GCP provider")?;
    let gcp = metered(state, Arc::new(gcp));
    for adapter in [&aws, &alibaba, &Some(gcp.clone())].into_iter().flatten() {
        state.provider_status.register(adapter.clone());
    }
    Ok(Providers {
        static_provider: metered(state, Arc::new(static_provider)),
        aws,
        alibaba,
        gcp: Some(gcp),
    })
}

/// The SQS client and queues of `--aws-events-queue-url`, or `None` when none is set. The
/// queues need AWS credentials.
pub fn event_queues_from_env(
    serve: &ServeConfig,
) -> anyhow::Result<Option<(Arc<SqsClient>, Vec<Queue>)>> {
    let urls: Vec<&str> = serve
        .aws_events_queue_urls
        .iter()
        .map(|u| u.trim())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        return Ok(None);
    }
    let settings = AwsSettings::from_env()
        .map_err(|e| anyhow::anyhow!("AWS credentials: {e}"))?
        .context(
            "TRAINSCALER_AWS_EVENTS_QUEUE_URL is set but no AWS credential source is: see \
             docs/providers/aws.md for the chain (environment, profile, web identity, \
             container, instance profile)",
        )?;
    event_queues(settings, &urls).map(Some)
}

/// An SQS client over `settings` and the queues at `urls`.
pub fn event_queues(
    settings: AwsSettings,
    urls: &[&str],
) -> anyhow::Result<(Arc<SqsClient>, Vec<Queue>)> {
    let queues = urls
        .iter()
        .map(|u| Queue::new(u, &settings))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("TRAINSCALER_AWS_EVENTS_QUEUE_URL: {e}"))?;
    let client = SqsClient::new(settings).context("SQS client")?;
    Ok((Arc::new(client), queues))
}

/// Wraps an adapter in the metrics decorator, which also records its calls' outcomes for
/// `GET /v1/providers/status`.
pub fn metered(state: &AppState, p: Arc<dyn Provider>) -> Arc<dyn Provider> {
    Arc::new(Metered::new(p, state.metrics.clone()).with_status(state.provider_status.clone()))
}
