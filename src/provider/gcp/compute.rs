//! Compute Engine calls on a managed instance group (`instanceGroupManagers` and
//! `regionInstanceGroupManagers`, API `compute/v1`): read the group and its managed
//! instances, read an instance template, `resize`, `deleteInstances` and `recreateInstances`,
//! each changing call followed to the end of its `Operation`. Response types model only the
//! fields used; all are optional because Compute Engine leaves out empty ones.

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::api::{Api, Operation, OperationErrors, Service};
use super::errors::ErrorContext;
use super::path::MigPath;
use super::shapes;
use crate::core::catalog::Market;
use crate::provider::{ProviderError, ProviderResult, WorkerState};

/// The documented maximum page size of list calls.
const PAGE_SIZE: &str = "500";
/// The most instances one `deleteInstances` or `recreateInstances` call may name.
pub const MAX_INSTANCES_PER_CALL: usize = 1000;
const MAX_PAGES: usize = 100;

/// An `InstanceGroupManager`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manager {
    #[serde(default)]
    pub instance_template: Option<String>,
    #[serde(default)]
    pub target_size: u32,
    #[serde(default)]
    pub versions: Vec<Version>,
    #[serde(default)]
    pub status: Option<ManagerStatus>,
}

impl Manager {
    /// The template new instances are made from: the group's, or its first version's.
    pub fn template(&self) -> Option<&str> {
        self.instance_template.as_deref().or_else(|| {
            self.versions
                .iter()
                .find_map(|v| v.instance_template.as_deref())
        })
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    #[serde(default)]
    pub instance_template: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagerStatus {
    /// Set when an autoscaler drives the group; it would undo every resize.
    #[serde(default)]
    pub autoscaler: Option<String>,
}

/// One entry of `listManagedInstances`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedInstance {
    /// Exists even before the instance does.
    #[serde(default)]
    pub name: String,
    /// `https://.../projects/P/zones/Z/instances/NAME`, once the group has placed it.
    #[serde(default)]
    pub instance: Option<String>,
    #[serde(default)]
    pub instance_status: Option<String>,
    #[serde(default)]
    pub current_action: Option<String>,
    #[serde(default)]
    pub version: Option<Version>,
    #[serde(default)]
    pub last_attempt: Option<LastAttempt>,
    #[serde(default)]
    pub properties_from_flexibility_policy: Option<FlexibilityProperties>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct LastAttempt {
    #[serde(default)]
    pub errors: Option<OperationErrors>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlexibilityProperties {
    #[serde(default)]
    pub machine_type: Option<String>,
}

impl ManagedInstance {
    /// The zone, from the instance's URL.
    pub fn zone(&self) -> Option<String> {
        let url = self.instance.as_deref()?;
        let (_, rest) = url.split_once("/zones/")?;
        rest.split('/').next().map(str::to_string)
    }

    /// What `deleteInstances` and `recreateInstances` take: `zones/Z/instances/NAME` once
    /// the instance is placed, else the bare name (queued instances have no URL yet).
    pub fn reference(&self) -> String {
        match self.zone() {
            Some(z) => format!("zones/{z}/instances/{}", self.name),
            None => self.name.clone(),
        }
    }

    /// Whether the group is still trying to create it.
    pub fn is_being_created(&self) -> bool {
        matches!(
            self.current_action.as_deref(),
            Some("CREATING" | "CREATING_WITHOUT_RETRIES" | "RECREATING")
        )
    }

    /// The errors of the group's last attempt on it.
    pub fn attempt_errors(&self) -> &[super::errors::OperationError] {
        self.last_attempt
            .as_ref()
            .and_then(|a| a.errors.as_ref())
            .map_or(&[], |e| e.errors.as_slice())
    }
}

/// A managed instance as capacity. The group keeps its target size: an instance that stops,
/// is preempted or is lost is recreated (the same name again), so it counts as pending, not
/// gone; only deleting and abandoning take it away.
pub fn worker_state(m: &ManagedInstance) -> WorkerState {
    match m.current_action.as_deref() {
        Some("DELETING" | "ABANDONING") => return WorkerState::Terminating,
        Some("NONE" | "REFRESHING") | None => {}
        // CREATING, RECREATING, VERIFYING, RESTARTING, STARTING, RESUMING, ...
        Some(_) => return WorkerState::Pending,
    }
    match m.instance_status.as_deref() {
        Some("RUNNING") => WorkerState::Running,
        _ => WorkerState::Pending,
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedInstancesPage {
    #[serde(default)]
    managed_instances: Vec<ManagedInstance>,
    #[serde(default)]
    next_page_token: Option<String>,
}

/// An `InstanceTemplate`'s properties that decide the type and the market.
#[derive(Debug, Default, Deserialize)]
struct Template {
    #[serde(default)]
    properties: TemplateProperties,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TemplateProperties {
    #[serde(default)]
    machine_type: String,
    #[serde(default)]
    guest_accelerators: Vec<Accelerator>,
    #[serde(default)]
    scheduling: Option<Scheduling>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Accelerator {
    #[serde(default)]
    accelerator_type: String,
    #[serde(default)]
    accelerator_count: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Scheduling {
    #[serde(default)]
    provisioning_model: Option<String>,
    #[serde(default)]
    preemptible: Option<bool>,
}

/// What a template launches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateFacts {
    /// In the catalog's naming (see [`shapes::catalog_type`]).
    pub instance_type: String,
    /// Spot for `provisioningModel: SPOT` or the older `preemptible: true`.
    pub market: Market,
}

/// The API path of a resource URL (`https://.../compute/v1/projects/...` → `projects/...`),
/// so that it is read through the configured endpoint.
pub fn api_path(url: &str) -> Option<&str> {
    url.find("projects/").map(|i| &url[i..])
}

pub async fn manager(api: &Api, mig: &MigPath) -> ProviderResult<Manager> {
    let ctx = context("get", mig);
    api.call(
        Method::GET,
        Service::Compute,
        &mig.api_path(),
        &[],
        None,
        &ctx,
    )
    .await
}

/// Every managed instance of the group, all pages.
pub async fn managed_instances(api: &Api, mig: &MigPath) -> ProviderResult<Vec<ManagedInstance>> {
    let ctx = context("listManagedInstances", mig);
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut query = vec![("maxResults", PAGE_SIZE.to_string())];
        if let Some(t) = &token {
            query.push(("pageToken", t.clone()));
        }
        let page: ManagedInstancesPage = api
            .call(
                Method::POST,
                Service::Compute,
                &mig.method_path("listManagedInstances"),
                &query,
                None,
                &ctx,
            )
            .await?;
        out.extend(page.managed_instances);
        match page.next_page_token.filter(|t| !t.is_empty()) {
            Some(next) if token.as_ref() != Some(&next) => token = Some(next),
            _ => return Ok(out),
        }
    }
    Err(ProviderError::Other(format!(
        "{}: still more pages after {MAX_PAGES}",
        ctx.what
    )))
}

/// The type and market of a template (`global/instanceTemplates/X` or regional).
pub async fn template(api: &Api, url: &str) -> ProviderResult<TemplateFacts> {
    let path = api_path(url).ok_or_else(|| {
        ProviderError::InvalidRequest(format!("`{url}` is not an instance template URL"))
    })?;
    let ctx = ErrorContext {
        what: format!("get of {path}"),
        ..ErrorContext::default()
    };
    let t: Template = api
        .call(Method::GET, Service::Compute, path, &[], None, &ctx)
        .await?;
    let p = t.properties;
    let accelerators: Vec<(String, u32)> = p
        .guest_accelerators
        .into_iter()
        .map(|a| (a.accelerator_type, a.accelerator_count))
        .collect();
    let spot = p.scheduling.as_ref().is_some_and(|s| {
        s.provisioning_model.as_deref() == Some("SPOT") || s.preemptible == Some(true)
    });
    Ok(TemplateFacts {
        instance_type: shapes::catalog_type(&p.machine_type, &accelerators),
        market: if spot { Market::Spot } else { Market::OnDemand },
    })
}

/// `resize` to `size`, followed to the end.
pub async fn resize(
    api: &Api,
    mig: &MigPath,
    size: u32,
    instance_type: Option<&str>,
) -> ProviderResult<()> {
    let mut ctx = context(&format!("resize to {size}"), mig);
    ctx.instance_type = instance_type.map(str::to_string);
    // One request id for every attempt: a retried resize is not applied twice.
    let query = [
        ("size", size.to_string()),
        ("requestId", uuid::Uuid::new_v4().to_string()),
    ];
    let op: Operation = api
        .call(
            Method::POST,
            Service::Compute,
            &mig.method_path("resize"),
            &query,
            None,
            &ctx,
        )
        .await?;
    api.follow(mig, op, &ctx).await
}

/// The instance name in a worker id or reference: the last segment of
/// `zones/Z/instances/NAME` or of a full instance URL, else the id itself.
pub fn instance_name(id: &str) -> &str {
    match id.trim_end_matches('/').rsplit_once("/instances/") {
        Some((_, name)) if !name.is_empty() && !name.contains('/') => name,
        _ => id,
    }
}

/// `deleteInstances` (the group's target size drops by as many) or `recreateInstances` (it
/// does not; the group makes new ones), each followed to the end, in calls of at most
/// [`MAX_INSTANCES_PER_CALL`] instances. Stops at the first failing call.
pub async fn remove(
    api: &Api,
    mig: &MigPath,
    references: &[String],
    decrement: bool,
) -> ProviderResult<()> {
    for chunk in references.chunks(MAX_INSTANCES_PER_CALL) {
        remove_one_call(api, mig, chunk, decrement).await?;
    }
    Ok(())
}

async fn remove_one_call(
    api: &Api,
    mig: &MigPath,
    references: &[String],
    decrement: bool,
) -> ProviderResult<()> {
    let (method, body) = if decrement {
        (
            "deleteInstances",
            // An instance already gone must not keep the others from being deleted.
            json!({"instances": references, "skipInstancesOnValidationError": true}),
        )
    } else {
        ("recreateInstances", json!({"instances": references}))
    };
    let ctx = context(method, mig);
    let query = [("requestId", uuid::Uuid::new_v4().to_string())];
    let op: Operation = api
        .call(
            Method::POST,
            Service::Compute,
            &mig.method_path(method),
            &query,
            Some(&body),
            &ctx,
        )
        .await?;
    api.follow(mig, op, &ctx).await
}

fn context(what: &str, mig: &MigPath) -> ErrorContext {
    ErrorContext {
        what: format!("{what} of {mig}"),
        zone: mig.zone().map(str::to_string),
        instance_type: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managed(action: Option<&str>, status: Option<&str>) -> ManagedInstance {
        ManagedInstance {
            name: "t-1".into(),
            current_action: action.map(str::to_string),
            instance_status: status.map(str::to_string),
            ..ManagedInstance::default()
        }
    }

    #[test]
    fn the_group_keeps_what_it_does_not_delete() {
        use WorkerState::*;
        for (action, status, want) in [
            (Some("NONE"), Some("RUNNING"), Running),
            (Some("REFRESHING"), Some("RUNNING"), Running),
            (Some("NONE"), Some("STAGING"), Pending),
            (Some("CREATING"), None, Pending),
            (
                Some("CREATING_WITHOUT_RETRIES"),
                Some("PROVISIONING"),
                Pending,
            ),
            (Some("VERIFYING"), Some("RUNNING"), Pending),
            (Some("RECREATING"), Some("TERMINATED"), Pending),
            (Some("NONE"), Some("TERMINATED"), Pending),
            (Some("NONE"), Some("STOPPING"), Pending),
            (Some("DELETING"), Some("RUNNING"), Terminating),
            (Some("ABANDONING"), Some("RUNNING"), Terminating),
        ] {
            assert_eq!(
                worker_state(&managed(action, status)),
                want,
                "{action:?} {status:?}"
            );
        }
    }

    #[test]
    fn references_and_zones_come_from_the_instance_url() {
        let mut m = managed(Some("NONE"), Some("RUNNING"));
        assert_eq!((m.zone(), m.reference()), (None, "t-1".to_string()));
        m.instance = Some(
            "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b/instances/t-1"
                .into(),
        );
        assert_eq!(m.zone().as_deref(), Some("us-central1-b"));
        assert_eq!(m.reference(), "zones/us-central1-b/instances/t-1");
        for id in [
            "t-1",
            "zones/us-central1-b/instances/t-1",
            "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b/instances/t-1",
        ] {
            assert_eq!(instance_name(id), "t-1", "{id}");
        }
        assert_eq!(instance_name("zones/z/instances/"), "zones/z/instances/");
        assert_eq!(
            api_path("https://www.googleapis.com/compute/v1/projects/p/global/instanceTemplates/t"),
            Some("projects/p/global/instanceTemplates/t")
        );
    }
}
