//! The GCP adapter against a mock of Google's documented wire format: every request must have
//! the documented method, path, query parameters, body and bearer token, and the token
//! exchange must post a JWT assertion whose header and claims are the documented ones and
//! whose RS256 signature verifies under the service account's public key (checked here with
//! `ring` and, once, with the `openssl` command). Answers are documented response bodies and
//! error shapes from `tests/fixtures/gcp/`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Match, Mock, MockServer, Request, ResponseTemplate};

use trainscaler::core::catalog::Market;
use trainscaler::provider::gcp::{CredentialSource, GcpProvider, GcpSettings};
use trainscaler::provider::retry::RetryPolicy;
use trainscaler::provider::{
    CapacitySpec, Distribution, GroupRef, Provider, ProviderError, Target, WorkerState,
};

use crate::common::{Backend, TestApp};

pub const PROJECT: &str = "trainscaler-test";
pub const ZONE: &str = "us-central1-a";
pub const STANDARD: &str =
    "projects/trainscaler-test/zones/us-central1-a/instanceGroupManagers/trainers";
pub const SPOT: &str =
    "projects/trainscaler-test/zones/us-central1-a/instanceGroupManagers/trainers-spot";
const REGIONAL: &str =
    "projects/trainscaler-test/regions/europe-west4/instanceGroupManagers/trainers-eu";
pub const TOKEN: &str = "ya29.c.b0AXv0zTMockAccessToken-1";
const CLIENT_EMAIL: &str = "trainscaler@trainscaler-test.iam.gserviceaccount.com";
const KEY_ID: &str = "8d4b2f0c1a9e7d6b5c4a3f2e1d0c9b8a7f6e5d4c";
pub const START_MS: i64 = 1_800_000_000_000;

pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/gcp/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub fn json_fixture(name: &str) -> Value {
    serde_json::from_str(&fixture(&format!("{name}.json"))).expect("fixture is JSON")
}

pub fn answer(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json; charset=UTF-8")
        .set_body_string(fixture(&format!("{name}.json")))
}

// ---- request matchers --------------------------------------------------------------------

/// One documented Compute Engine or Billing call: exactly these query parameters (a
/// `requestId` must be a UUID when `request_id`), this JSON body (none when `None`), and the
/// bearer token.
pub struct Call {
    method: &'static str,
    path: String,
    query: BTreeMap<String, String>,
    request_id: bool,
    body: Option<Value>,
}

pub fn call(method: &'static str, path: impl Into<String>, query: &[(&str, &str)]) -> Call {
    Call {
        method,
        path: path.into(),
        query: query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        request_id: false,
        body: None,
    }
}

impl Call {
    pub fn with_request_id(mut self) -> Self {
        self.request_id = true;
        self
    }

    pub fn with_body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    fn problems(&self, r: &Request) -> Vec<String> {
        let mut bad = Vec::new();
        let auth = r
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if auth != format!("Bearer {TOKEN}") {
            bad.push(format!("authorization {auth:?}"));
        }
        let mut query: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in r.url.query_pairs() {
            if query.insert(k.to_string(), v.to_string()).is_some() {
                bad.push(format!("{k} twice"));
            }
        }
        match query.remove("requestId") {
            Some(id) if self.request_id => {
                if uuid::Uuid::parse_str(&id).map(|u| u.get_version_num()) != Ok(4) {
                    bad.push(format!("requestId {id} is not a UUID"));
                }
            }
            None if !self.request_id => {}
            other => bad.push(format!("requestId {other:?}")),
        }
        if query != self.query {
            bad.push(format!("query {query:?}, expected {:?}", self.query));
        }
        match &self.body {
            Some(want) => {
                let got: Option<Value> = serde_json::from_slice(&r.body).ok();
                if got.as_ref() != Some(want) {
                    bad.push(format!("body {got:?}, expected {want}"));
                }
                let json = r
                    .headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|t| t.starts_with("application/json"));
                if !json {
                    bad.push("content-type is not application/json".into());
                }
            }
            None if !r.body.is_empty() => bad.push(format!("a body: {:?}", r.body)),
            None => {}
        }
        bad
    }
}

impl Match for Call {
    fn matches(&self, r: &Request) -> bool {
        if r.method.as_str() != self.method || r.url.path() != self.path {
            return false;
        }
        let bad = self.problems(r);
        if !bad.is_empty() {
            eprintln!("{} {} did not match: {bad:?}", self.method, self.path);
        }
        bad.is_empty()
    }
}

/// `/compute/v1/` + a MIG path + `/method`.
pub fn compute(path: &str) -> String {
    format!("/compute/v1/{path}")
}

/// The token exchange: a form post of the JWT-bearer grant with a valid assertion.
pub struct TokenExchange {
    pub token_uri: String,
    pub clock: Arc<AtomicI64>,
}

/// Why an assertion is not what Google documents; empty when it is.
pub fn assertion_problems(assertion: &str, token_uri: &str, now_secs: i64) -> Vec<String> {
    let mut bad = Vec::new();
    let parts: Vec<&str> = assertion.split('.').collect();
    let [h, c, s] = parts.as_slice() else {
        return vec![format!("assertion has {} parts", parts.len())];
    };
    let decode = |p: &str| -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap_or_default())
            .unwrap_or(Value::Null)
    };
    let header = decode(h);
    if header != json!({"alg": "RS256", "typ": "JWT", "kid": KEY_ID}) {
        bad.push(format!("header {header}"));
    }
    let claims = decode(c);
    let want = json!({
        "iss": CLIENT_EMAIL,
        "scope": "https://www.googleapis.com/auth/cloud-platform",
        "aud": token_uri,
        "iat": now_secs,
        "exp": now_secs + 3600,
    });
    if claims != want {
        bad.push(format!("claims {claims}, expected {want}"));
    }
    let jwk: Value = serde_json::from_str(&fixture("service_account.jwk.json")).unwrap();
    let n = URL_SAFE_NO_PAD.decode(jwk["n"].as_str().unwrap()).unwrap();
    let e = URL_SAFE_NO_PAD.decode(jwk["e"].as_str().unwrap()).unwrap();
    let signature = URL_SAFE_NO_PAD.decode(s).unwrap_or_default();
    let signed = format!("{h}.{c}");
    let key = ring::signature::RsaPublicKeyComponents { n: &n, e: &e };
    let verified = key.verify(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        signed.as_bytes(),
        &signature,
    );
    if verified.is_err() {
        bad.push("the signature does not verify under the service account's key".into());
    }
    bad
}

fn form(r: &Request) -> BTreeMap<String, String> {
    form_urlencoded::parse(&r.body)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Match for TokenExchange {
    fn matches(&self, r: &Request) -> bool {
        if r.method.as_str() != "POST" || r.url.path() != "/token" {
            return false;
        }
        let mut bad = Vec::new();
        let ct = r
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if ct != "application/x-www-form-urlencoded" {
            bad.push(format!("content-type {ct}"));
        }
        let f = form(r);
        if f.len() != 2
            || f.get("grant_type").map(String::as_str)
                != Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
        {
            bad.push(format!("form {f:?}"));
        }
        let now_secs = self.clock.load(Ordering::SeqCst) / 1000;
        bad.extend(assertion_problems(
            f.get("assertion").map(String::as_str).unwrap_or(""),
            &self.token_uri,
            now_secs,
        ));
        if !bad.is_empty() {
            eprintln!("token exchange did not match: {bad:?}");
        }
        bad.is_empty()
    }
}

// ---- scaffolding ---------------------------------------------------------------------------

/// A mock Google (Compute, Billing and the token endpoint on one server), a key file naming
/// its token endpoint, and a clock the test moves.
pub struct Google {
    pub server: MockServer,
    pub clock: Arc<AtomicI64>,
    pub key_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Google {
    pub async fn start() -> Self {
        let server = MockServer::start().await;
        let dir = tempfile::tempdir().expect("temporary folder");
        let key_file = dir.path().join("key.json");
        let key = fixture("service_account.json")
            .replace("TOKEN_URI", &format!("{}/token", server.uri()));
        std::fs::write(&key_file, key).expect("write the key file");
        Self {
            server,
            clock: Arc::new(AtomicI64::new(START_MS)),
            key_file,
            _dir: dir,
        }
    }

    /// A mock Google whose token endpoint answers once, with a token good for an hour.
    pub async fn with_token() -> Self {
        let g = Self::start().await;
        g.mount_token(3599, 1).await;
        g
    }

    pub fn token_uri(&self) -> String {
        format!("{}/token", self.server.uri())
    }

    pub fn settings(&self) -> GcpSettings {
        let mut s = GcpSettings::new(CredentialSource::KeyFile(self.key_file.clone()));
        s.compute_endpoint = self.server.uri();
        s.billing_endpoint = self.server.uri();
        s.retry = RetryPolicy {
            max_retries: 4,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        };
        let clock = self.clock.clone();
        s.clock = Arc::new(move || clock.load(Ordering::SeqCst));
        s
    }

    pub fn provider(&self) -> GcpProvider {
        GcpProvider::new(self.settings()).expect("provider")
    }

    /// The token endpoint, answering with a token that lasts `expires_in` seconds.
    pub async fn mount_token(&self, expires_in: i64, times: u64) {
        Mock::given(TokenExchange {
            token_uri: self.token_uri(),
            clock: self.clock.clone(),
        })
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "access_token": TOKEN, "expires_in": expires_in, "token_type": "Bearer"
        })))
        .expect(times)
        .mount(&self.server)
        .await;
    }

    pub async fn mount(&self, call: Call, response: ResponseTemplate, times: u64) {
        Mock::given(call)
            .respond_with(response)
            .expect(times)
            .mount(&self.server)
            .await;
    }

    /// `get` and `listManagedInstances` of a MIG, and its template.
    pub async fn mount_group(&self, mig: &str, igm: &str, managed: &str) {
        self.mount_group_times(mig, igm, managed, 1).await;
    }

    pub async fn mount_group_times(&self, mig: &str, igm: &str, managed: &str, times: u64) {
        self.mount(get_group(mig), answer(200, igm), times).await;
        self.mount(
            call(
                "POST",
                compute(&format!("{mig}/listManagedInstances")),
                &[("maxResults", "500")],
            ),
            answer(200, managed),
            times,
        )
        .await;
    }

    /// Both MIGs of [`group_ref`], each read once (the spot one answered by the `spot_igm`
    /// and `spot_managed` fixtures), and the templates.
    pub async fn mount_groups(&self, spot_igm: &str, spot_managed: &str) {
        self.mount_group(STANDARD, "igm_standard", "managed_standard")
            .await;
        self.mount_group(SPOT, spot_igm, spot_managed).await;
        self.mount_templates().await;
    }

    /// The standard MIG alone, read once, and the templates.
    pub async fn mount_standard(&self) {
        self.mount_group(STANDARD, "igm_standard", "managed_standard")
            .await;
        self.mount_templates().await;
    }

    pub async fn mount_templates(&self) {
        for (name, file) in [
            ("trainer-t4", "template_t4"),
            ("trainer-t4-spot", "template_t4_spot"),
            ("trainer-l4", "template_l4"),
        ] {
            Mock::given(call(
                "GET",
                compute(&format!(
                    "projects/{PROJECT}/global/instanceTemplates/{name}"
                )),
                &[],
            ))
            .respond_with(answer(200, file))
            .mount(&self.server)
            .await;
        }
    }
}

pub fn group_ref() -> GroupRef {
    GroupRef {
        pool: "trainers".into(),
        region: "us-central1".into(),
        group: STANDARD.into(),
        spot_group: Some(SPOT.into()),
    }
}

/// [`group_ref`] without its spot MIG.
pub fn standard_only() -> GroupRef {
    GroupRef {
        spot_group: None,
        ..group_ref()
    }
}

/// `get` of `mig`.
pub fn get_group(mig: &str) -> Call {
    call("GET", compute(mig), &[])
}

/// `resize` of `mig` to `size` instances.
pub fn resize(mig: &str, size: &str) -> Call {
    call("POST", compute(&format!("{mig}/resize")), &[("size", size)]).with_request_id()
}

/// `wait` on the zonal operation `op`.
pub fn zone_wait(op: &str) -> Call {
    call(
        "POST",
        compute(&format!(
            "projects/{PROJECT}/zones/{ZONE}/operations/{op}/wait"
        )),
        &[],
    )
}

/// `deleteInstances` of `mig` naming `instances` (a JSON array of references), skipping
/// those that are gone.
pub fn delete_instances(mig: &str, instances: Value) -> Call {
    call("POST", compute(&format!("{mig}/deleteInstances")), &[])
        .with_request_id()
        .with_body(json!({
            "instances": instances,
            "skipInstancesOnValidationError": true
        }))
}

pub fn spec(od: u32, spot: u32) -> CapacitySpec {
    let target = |market, count| Target {
        instance_type: "n1-highmem-4+T4x1".into(),
        market,
        count,
        zones: vec![],
    };
    CapacitySpec {
        desired: od + spot,
        min: 0,
        max: 8,
        distribution: Distribution {
            on_demand_base: 0,
            on_demand_percentage_above_base: 20,
            instance_types: vec!["n1-highmem-4+T4x1".into()],
        },
        targets: [(Market::OnDemand, od), (Market::Spot, spot)]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(m, n)| target(m, n))
            .collect(),
    }
}

// ---- describe ------------------------------------------------------------------------------

#[tokio::test]
async fn describe_reads_both_migs_their_managed_instances_and_templates() {
    let g = Google::with_token().await;
    g.mount_group_times(STANDARD, "igm_standard", "managed_standard", 2)
        .await;
    g.mount_group_times(SPOT, "igm_spot", "managed_spot", 2)
        .await;
    g.mount_templates().await;
    let p = g.provider();
    let cap = p.describe(&group_ref()).await.expect("describe");
    // One standard instance, three spot: the standard MIG is the on-demand base.
    assert_eq!((cap.desired, cap.min, cap.max), (4, 0, 4));
    assert_eq!(
        cap.distribution,
        Some(Distribution {
            on_demand_base: 1,
            on_demand_percentage_above_base: 0,
            instance_types: vec!["n1-highmem-4+T4x1".into()],
        })
    );
    let w = &cap.workers;
    assert_eq!(w.len(), 4);
    assert_eq!(
        (w[0].id.as_str(), w[0].market, w[0].state),
        ("trainers-9m2x", Market::OnDemand, WorkerState::Running)
    );
    assert_eq!(w[0].instance_type, "n1-highmem-4+T4x1");
    assert_eq!(w[0].zone.as_deref(), Some(ZONE));
    assert_eq!(
        (w[1].market, w[1].state),
        (Market::Spot, WorkerState::Running)
    );
    assert_eq!(
        w[2].state,
        WorkerState::Pending,
        "VERIFYING: not in service yet"
    );
    assert_eq!(w[3].state, WorkerState::Pending, "CREATING");
    assert!(w.iter().all(|w| w.launched_at_ms.is_none()));
    // Templates are read once each; a second describe reads only the groups.
    let before = template_reads(&g).await;
    p.describe(&group_ref()).await.expect("describe again");
    assert_eq!(template_reads(&g).await, before);
    assert_eq!(before, 2);
}

async fn template_reads(g: &Google) -> usize {
    g.server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path().contains("/instanceTemplates/"))
        .count()
}

#[tokio::test]
async fn a_standard_group_whose_template_is_spot_is_refused() {
    let g = Google::with_token().await;
    g.mount_group(SPOT, "igm_spot", "managed_spot").await;
    g.mount_templates().await;
    let mut swapped = group_ref();
    swapped.group = SPOT.into();
    swapped.spot_group = None;
    let err = g.provider().describe(&swapped).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::InvalidRequest(t) if t.contains("not STANDARD")),
        "{err:?}"
    );
}

// ---- resize and delete with operation polling ---------------------------------------------

#[tokio::test]
async fn set_capacity_resizes_each_mig_to_its_markets_share_and_follows_the_operation() {
    let g = Google::with_token().await;
    g.mount_groups("igm_spot", "managed_spot").await;
    let p = g.provider();
    let current = p.describe(&group_ref()).await.unwrap();
    // 1 + 3 now; the decision wants 3 on-demand and 1 spot (spot moved after a capacity error).
    g.mount(resize(STANDARD, "3"), answer(200, "op_resize_running"), 1)
        .await;
    g.mount(resize(SPOT, "1"), answer(200, "op_resize_running"), 1)
        .await;
    let op = "operation-1733335200000-61f2b3a4c5d6e-7f8a9b0c-1d2e3f4a";
    // `wait` answers RUNNING once (it may return before the operation is done), then DONE.
    Mock::given(zone_wait(op))
        .respond_with(answer(200, "op_resize_running"))
        .up_to_n_times(1)
        .expect(1)
        .mount(&g.server)
        .await;
    Mock::given(zone_wait(op))
        .respond_with(answer(200, "op_resize_done"))
        .expect(2)
        .mount(&g.server)
        .await;
    p.set_capacity(&group_ref(), &current, &spec(3, 1))
        .await
        .expect("set_capacity");
    let resizes: Vec<String> = g
        .server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path().ends_with("/resize"))
        .map(|r| r.url.path().to_string())
        .collect();
    assert_eq!(
        resizes,
        [
            compute(&format!("{STANDARD}/resize")),
            compute(&format!("{SPOT}/resize"))
        ],
        "the growing MIG first, so the pool never dips"
    );
    // Unchanged, no call at all.
    let sent = p.requests_sent();
    let mut now = current.clone();
    now.desired = 4;
    now.distribution.as_mut().unwrap().on_demand_base = 3;
    p.set_capacity(&group_ref(), &now, &spec(3, 1))
        .await
        .unwrap();
    assert_eq!(p.requests_sent(), sent);
}

#[tokio::test]
async fn regional_instances_are_deleted_by_reference_through_region_operations() {
    let g = Google::with_token().await;
    g.mount_group(REGIONAL, "igm_regional", "managed_regional")
        .await;
    g.mount_templates().await;
    let group = GroupRef {
        pool: "eu".into(),
        region: "europe-west4".into(),
        group: REGIONAL.into(),
        spot_group: None,
    };
    let p = g.provider();
    let cap = p.describe(&group).await.unwrap();
    assert_eq!(cap.workers[0].zone.as_deref(), Some("europe-west4-a"));
    assert_eq!(cap.workers[0].instance_type, "g2-standard-8");
    assert_eq!(cap.workers[1].state, WorkerState::Terminating, "DELETING");
    g.mount(
        delete_instances(
            REGIONAL,
            json!(["zones/europe-west4-a/instances/trainers-eu-4hs1"]),
        ),
        answer(200, "op_delete_pending"),
        1,
    )
    .await;
    let op = "operation-1733335260000-61f2b3a4c5d6f-7f8a9b0c-2e3f4a5b";
    g.mount(
        call(
            "POST",
            compute(&format!(
                "projects/{PROJECT}/regions/europe-west4/operations/{op}/wait"
            )),
            &[],
        ),
        answer(200, "op_delete_done"),
        1,
    )
    .await;
    p.terminate(&group, &["trainers-eu-4hs1".to_string()], true)
        .await
        .expect("terminate");
}

#[tokio::test]
async fn a_wait_may_hold_the_request_longer_than_other_calls_may_take() {
    let g = Google::with_token().await;
    g.mount_standard().await;
    let mut settings = g.settings();
    // Every other call must answer within a second; `wait` holds this one for 1.5 s, as it
    // may for up to two minutes.
    settings.http.timeout = Duration::from_secs(1);
    let p = GcpProvider::new(settings).unwrap();
    let group = standard_only();
    let current = p.describe(&group).await.unwrap();
    g.mount(resize(STANDARD, "2"), answer(200, "op_resize_running"), 1)
        .await;
    let op = "operation-1733335200000-61f2b3a4c5d6e-7f8a9b0c-1d2e3f4a";
    g.mount(
        zone_wait(op),
        answer(200, "op_resize_done").set_delay(Duration::from_millis(1500)),
        1,
    )
    .await;
    p.set_capacity(&group, &current, &spec(2, 0))
        .await
        .expect("the wait is not cut off by the client's timeout");
}

#[tokio::test]
async fn terminating_without_decrement_recreates_the_instances() {
    let g = Google::with_token().await;
    // Not described before: the adapter reads the groups to find the instance.
    g.mount_groups("igm_spot", "managed_spot").await;
    g.mount(
        call("POST", compute(&format!("{SPOT}/recreateInstances")), &[])
            .with_request_id()
            .with_body(json!({"instances": ["zones/us-central1-a/instances/trainers-spot-x7k2"]})),
        answer(200, "op_resize_done"),
        1,
    )
    .await;
    g.provider()
        .terminate(
            &group_ref(),
            &["trainers-spot-x7k2".to_string(), "gone-already".to_string()],
            false,
        )
        .await
        .expect("terminate");
}

#[tokio::test]
async fn deletes_name_instances_as_references_in_calls_of_at_most_a_thousand() {
    let g = Google::with_token().await;
    let n = 1001;
    let names: Vec<String> = (0..n).map(|i| format!("trainers-{i:04}")).collect();
    let managed: Vec<Value> = names
        .iter()
        .map(|name| {
            json!({
                "instance": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/{name}"),
                "name": name,
                "currentAction": "NONE",
                "instanceStatus": "RUNNING",
            })
        })
        .collect();
    let mut igm = json_fixture("igm_standard");
    igm["targetSize"] = json!(n);
    g.mount(
        get_group(STANDARD),
        ResponseTemplate::new(200).set_body_json(igm),
        1,
    )
    .await;
    g.mount(
        call(
            "POST",
            compute(&format!("{STANDARD}/listManagedInstances")),
            &[("maxResults", "500")],
        ),
        ResponseTemplate::new(200).set_body_json(json!({"managedInstances": managed})),
        1,
    )
    .await;
    g.mount_templates().await;
    let group = standard_only();
    let p = g.provider();
    assert_eq!(p.describe(&group).await.unwrap().workers.len(), n);
    let reference = |name: &String| format!("zones/{ZONE}/instances/{name}");
    for chunk in [&names[..1000], &names[1000..]] {
        g.mount(
            delete_instances(
                STANDARD,
                json!(chunk.iter().map(reference).collect::<Vec<_>>()),
            ),
            answer(200, "op_resize_done"),
            1,
        )
        .await;
    }
    // Workers named by their name, their reference or their full URL are the same instances.
    let ids: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, name)| match i % 3 {
            0 => name.clone(),
            1 => reference(name),
            _ => format!(
                "https://www.googleapis.com/compute/v1/projects/{PROJECT}/{}",
                reference(name)
            ),
        })
        .collect();
    p.terminate(&group, &ids, true).await.expect("terminate");
    let deletes = g
        .server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path().ends_with("/deleteInstances"))
        .count();
    assert_eq!(deletes, 2, "1000 instances, then the last one");
}

#[tokio::test]
async fn after_a_failed_resize_the_group_is_read_again() {
    let g = Google::with_token().await;
    // Read by `describe`, and once more after the failure; never from a stale cache.
    g.mount_group_times(STANDARD, "igm_standard", "managed_standard", 2)
        .await;
    g.mount_templates().await;
    let group = standard_only();
    let p = g.provider();
    let current = p.describe(&group).await.unwrap();
    Mock::given(resize(STANDARD, "3"))
        .respond_with(answer(403, "error_quota"))
        .up_to_n_times(1)
        .expect(1)
        .with_priority(1)
        .mount(&g.server)
        .await;
    g.mount(resize(STANDARD, "3"), answer(200, "op_resize_done"), 1)
        .await;
    let err = p
        .set_capacity(&group, &current, &spec(3, 0))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::InsufficientCapacity { .. }),
        "{err:?}"
    );
    p.set_capacity(&group, &current, &spec(3, 0))
        .await
        .expect("the second try reads the group and resizes");
}

// ---- errors ---------------------------------------------------------------------------------

#[tokio::test]
async fn an_operation_that_ends_in_a_stockout_is_insufficient_capacity_in_its_zone() {
    let g = Google::with_token().await;
    g.mount_groups("igm_spot", "managed_spot").await;
    let p = g.provider();
    let current = p.describe(&group_ref()).await.unwrap();
    g.mount(resize(SPOT, "5"), answer(200, "op_done_stockout"), 1)
        .await;
    match p.set_capacity(&group_ref(), &current, &spec(1, 5)).await {
        Err(ProviderError::InsufficientCapacity {
            instance_type,
            zone,
            message,
        }) => {
            assert_eq!(instance_type.as_deref(), Some("n1-highmem-4+T4x1"));
            assert_eq!(zone.as_deref(), Some(ZONE));
            assert!(
                message.contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn instances_the_mig_cannot_create_count_as_missing_and_the_mig_is_not_grown_over_them() {
    let g = Google::with_token().await;
    g.mount_groups("igm_spot", "managed_spot_stockout").await;
    let p = g.provider();
    let current = p.describe(&group_ref()).await.unwrap();
    let states: Vec<WorkerState> = current.workers.iter().map(|w| w.state).collect();
    assert_eq!(
        states,
        [
            WorkerState::Running,
            WorkerState::Running,
            WorkerState::Terminating,
            WorkerState::Terminating
        ]
    );
    // Asked to keep three spot: the cloud has no room, said without a call.
    let sent = p.requests_sent();
    match p.set_capacity(&group_ref(), &current, &spec(1, 3)).await {
        Err(ProviderError::InsufficientCapacity {
            instance_type,
            zone,
            ..
        }) => {
            assert_eq!(instance_type.as_deref(), Some("n1-highmem-4+T4x1"));
            assert_eq!(zone.as_deref(), Some(ZONE));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.requests_sent(), sent);
    // Moved to on-demand: the two it cannot create are deleted, no resize of the spot MIG.
    g.mount(
        delete_instances(
            SPOT,
            json!([
                "zones/us-central1-a/instances/trainers-spot-b41q",
                "zones/us-central1-a/instances/trainers-spot-p0ld"
            ]),
        ),
        answer(200, "op_resize_done"),
        1,
    )
    .await;
    g.mount(resize(STANDARD, "3"), answer(200, "op_resize_done"), 1)
        .await;
    p.set_capacity(&group_ref(), &current, &spec(3, 1))
        .await
        .expect("set_capacity");
    let spot_resizes = g
        .server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == compute(&format!("{SPOT}/resize")))
        .count();
    assert_eq!(spot_resizes, 0);
}

/// `describe` answered by `response` on the first call, then the real group.
async fn first_get_fails(g: &Google, status: u16, error: &str, times: u64) {
    Mock::given(get_group(STANDARD))
        .respond_with(answer(status, error))
        .up_to_n_times(times)
        .expect(times)
        .with_priority(1)
        .mount(&g.server)
        .await;
}

#[tokio::test]
async fn rate_limits_are_retried_with_backoff_until_the_call_passes() {
    let g = Google::with_token().await;
    first_get_fails(&g, 403, "error_rate_limit", 2).await;
    g.mount_standard().await;
    let group = standard_only();
    let cap = g
        .provider()
        .describe(&group)
        .await
        .expect("retried through");
    assert_eq!(cap.desired, 1);
}

#[tokio::test]
async fn each_error_class_maps_to_its_kind() {
    use trainscaler::provider::error::ErrorKind;
    for (status, fixture, times, kind) in [
        (403, "error_rate_limit", 5, ErrorKind::Throttled),
        (403, "error_quota", 1, ErrorKind::InsufficientCapacity),
        (403, "error_forbidden", 1, ErrorKind::Unauthorized),
        (404, "error_not_found", 1, ErrorKind::NotFound),
    ] {
        let g = Google::with_token().await;
        g.mount(get_group(STANDARD), answer(status, fixture), times)
            .await;
        let err = g.provider().describe(&group_ref()).await.unwrap_err();
        assert_eq!(err.kind(), kind, "{fixture}: {err}");
        assert!(err.to_string().contains(STANDARD), "names the group: {err}");
    }
}

#[tokio::test]
async fn a_refused_token_is_fetched_again_once_and_a_second_refusal_is_unauthorized() {
    let g = Google::start().await;
    g.mount_token(3599, 2).await;
    first_get_fails(&g, 401, "error_unauthenticated", 1).await;
    g.mount_standard().await;
    let group = standard_only();
    let p = g.provider();
    p.describe(&group).await.expect("a new token works");
    assert_eq!(p.tokens_fetched(), 2);

    let g = Google::start().await;
    g.mount_token(3599, 2).await;
    g.mount(get_group(STANDARD), answer(401, "error_unauthenticated"), 2)
        .await;
    let err = g.provider().describe(&group).await.unwrap_err();
    assert!(matches!(err, ProviderError::Unauthorized(_)), "{err:?}");
}

#[tokio::test]
async fn an_autoscaled_mig_is_not_resized() {
    let g = Google::with_token().await;
    g.mount_groups("igm_spot_autoscaled", "managed_spot").await;
    let p = g.provider();
    let current = p.describe(&group_ref()).await.unwrap();
    let err = p
        .set_capacity(&group_ref(), &current, &spec(1, 4))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProviderError::InvalidRequest(t) if t.contains("autoscaler")),
        "{err:?}"
    );
}

// ---- tokens ---------------------------------------------------------------------------------

#[tokio::test]
async fn the_assertion_is_signed_and_claims_what_google_documents_and_openssl_agrees() {
    let g = Google::with_token().await;
    g.mount(get_group(STANDARD), answer(404, "error_not_found"), 1)
        .await;
    let _ = g.provider().describe(&group_ref()).await;
    let requests = g.server.received_requests().await.unwrap();
    let exchange = requests
        .iter()
        .find(|r| r.url.path() == "/token")
        .expect("a token request");
    let assertion = form(exchange).remove("assertion").unwrap();
    assert_eq!(
        assertion_problems(&assertion, &g.token_uri(), START_MS / 1000),
        Vec::<String>::new()
    );
    // A second, independent check of the RS256 signature.
    let dir = tempfile::tempdir().unwrap();
    let (h, rest) = assertion.split_once('.').unwrap();
    let (c, s) = rest.split_once('.').unwrap();
    std::fs::write(dir.path().join("signed"), format!("{h}.{c}")).unwrap();
    std::fs::write(dir.path().join("sig"), URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap();
    let public = format!(
        "{}/tests/fixtures/gcp/service_account.pub.pem",
        env!("CARGO_MANIFEST_DIR")
    );
    match Command::new("openssl")
        .args(["dgst", "-sha256", "-verify", &public, "-signature"])
        .arg(dir.path().join("sig"))
        .arg(dir.path().join("signed"))
        .output()
    {
        Ok(out) => assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "Verified OK",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("openssl is not available ({e}); cross-check skipped"),
    }
}

#[tokio::test]
async fn a_cached_token_is_reused_and_fetched_again_five_minutes_before_it_expires() {
    let g = Google::start().await;
    g.mount_token(3600, 2).await;
    g.mount(get_group(STANDARD), answer(404, "error_not_found"), 3)
        .await;
    let p = g.provider();
    let group = standard_only();
    let _ = p.describe(&group).await;
    // 54 minutes on, the token has six minutes left: still used.
    g.clock.store(START_MS + 54 * 60_000, Ordering::SeqCst);
    let _ = p.describe(&group).await;
    assert_eq!(p.tokens_fetched(), 1);
    let status = p.credential_status();
    assert_eq!(status.source, "service_account_key");
    assert_eq!(status.identity, CLIENT_EMAIL);
    assert_eq!(status.token_expires_at_ms, Some(START_MS + 3_600_000));
    // 56 minutes on, four minutes left: fetched again, with a new assertion for the new time.
    g.clock.store(START_MS + 56 * 60_000, Ordering::SeqCst);
    let _ = p.describe(&group).await;
    assert_eq!(p.tokens_fetched(), 2);
    assert_eq!(
        p.credential_status().token_expires_at_ms,
        Some(START_MS + 56 * 60_000 + 3_600_000)
    );
}

#[tokio::test]
async fn the_metadata_server_gives_the_token_when_no_key_file_is_set() {
    let server = MockServer::start().await;
    let host = server.address().to_string();
    Mock::given(method("GET"))
        .and(path(
            "/computeMetadata/v1/instance/service-accounts/default/token",
        ))
        .and(wiremock::matchers::header("Metadata-Flavor", "Google"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "access_token": TOKEN, "expires_in": 3599, "token_type": "Bearer"
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(get_group(STANDARD))
        .respond_with(answer(404, "error_not_found"))
        .expect(1)
        .mount(&server)
        .await;
    let uri = server.uri();
    let mut settings = GcpSettings::from_lookup(|name| match name {
        "GCE_METADATA_HOST" => Some(host.clone()),
        "TRAINSCALER_GCP_COMPUTE_ENDPOINT" => Some(uri.clone()),
        _ => None,
    });
    settings.retry.min_delay = Duration::from_millis(1);
    assert_eq!(
        settings.credentials,
        CredentialSource::MetadataServer(host.clone())
    );
    let p = GcpProvider::new(settings).unwrap();
    let group = standard_only();
    let err = p.describe(&group).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::NotFound(_)),
        "the call went out with the token: {err:?}"
    );
    assert_eq!(p.credential_status().source, "metadata_server");

    // Outside GCP nothing answers: the error says what to set.
    let mut settings = GcpSettings::from_lookup(|name| match name {
        "GCE_METADATA_HOST" => Some("127.0.0.1:9".to_string()),
        _ => None,
    });
    settings.compute_endpoint = server.uri();
    let err = GcpProvider::new(settings)
        .unwrap()
        .describe(&group)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProviderError::Unauthorized(t) if t.contains("GOOGLE_APPLICATION_CREDENTIALS")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_key_file_that_is_not_a_service_account_key_stops_the_adapter_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("adc.json");
    std::fs::write(&file, r#"{"type": "authorized_user", "client_id": "x", "client_secret": "y", "refresh_token": "z"}"#).unwrap();
    let err = GcpProvider::new(GcpSettings::new(CredentialSource::KeyFile(file))).unwrap_err();
    assert!(err.to_string().contains("authorized_user"), "{err}");
    let err = GcpProvider::new(GcpSettings::new(CredentialSource::KeyFile(
        dir.path().join("missing.json"),
    )))
    .unwrap_err();
    assert!(err.to_string().contains("missing.json"), "{err}");
}

// ---- prices ---------------------------------------------------------------------------------

pub async fn mount_skus(g: &Google) {
    mount_skus_times(g, 1).await;
}

/// Both SKU pages, each expected `times` times.
pub async fn mount_skus_times(g: &Google, times: u64) {
    let skus = "services/6F81-5844-456A/skus";
    g.mount(
        call(
            "GET",
            format!("/v1/{skus}"),
            &[("currencyCode", "USD"), ("pageSize", "5000")],
        ),
        answer(200, "skus_page1"),
        times,
    )
    .await;
    g.mount(
        call(
            "GET",
            format!("/v1/{skus}"),
            &[
                ("currencyCode", "USD"),
                ("pageSize", "5000"),
                ("pageToken", "CAESBgoEMDM5Rg"),
            ],
        ),
        answer(200, "skus_page2"),
        times,
    )
    .await;
}

#[tokio::test]
async fn a_refresh_prices_gpus_plus_host_vcpus_and_memory_from_both_sku_pages() {
    let g = Google::with_token().await;
    mount_skus(&g).await;
    let p = g.provider();
    let types = vec![
        "n1-highmem-4+T4x1".to_string(),
        "n1-highmem-8+T4x2".to_string(),
        "a2-highgpu-1g".to_string(),
    ];
    let r = p.refresh("us-central1", &types, 0).await.expect("refresh");
    let price = |t: &str, m: Market| {
        r.prices
            .iter()
            .find(|q| q.instance_type == t && q.market == m)
            .map(|q| (q.dollars_per_hour * 1e6).round() / 1e6)
    };
    // 0.35 + 4 × 0.031611 + 26 × 0.004237; spot 0.14 + 4 × 0.007469 + 26 × 0.001001.
    assert_eq!(price("n1-highmem-4+T4x1", Market::OnDemand), Some(0.586606));
    assert_eq!(price("n1-highmem-4+T4x1", Market::Spot), Some(0.195902));
    // 2 × 0.35 + 8 × 0.031611 + 52 × 0.004237.
    assert_eq!(price("n1-highmem-8+T4x2", Market::OnDemand), Some(1.173212));
    assert!(
        r.prices.iter().all(|q| q.zone.is_none()),
        "list prices hold region-wide"
    );
    // No A100 or A2 SKU in the answer: that type is not sold here and not reported.
    assert!(r.types.iter().all(|t| t.instance_type != "a2-highgpu-1g"));
    assert_eq!(r.types.len(), 2);
    // The VWS and commitment SKUs priced T4 differently and were not taken for it.
    assert_eq!(r.prices.len(), 4);
    // Another region of the same answer: on-demand only (no spot SKUs listed there).
    let eu = p
        .refresh("europe-west4", &["g2-standard-8".to_string()], 0)
        .await
        .unwrap();
    assert_eq!(eu.prices.len(), 1);
    assert_eq!(
        (eu.prices[0].dollars_per_hour * 1e6).round() / 1e6,
        0.939638
    );
}

#[tokio::test]
async fn a_refresh_of_every_gpu_type_names_each_count_by_its_cheapest_host_as_the_catalog_does() {
    let g = Google::with_token().await;
    mount_skus(&g).await;
    let r = g
        .provider()
        .refresh("us-central1", &[], 0)
        .await
        .expect("refresh");
    let mut names: Vec<&str> = r.types.iter().map(|t| t.instance_type.as_str()).collect();
    names.sort();
    // Only T4s are priced in the answer; one wants 4 vCPUs and 16 GiB, two 8 and 32, four
    // 48 and 192: the cheapest N1 sizes that hold them, as the bundled catalog names them.
    assert_eq!(
        names,
        [
            "n1-highmem-4+T4x1",
            "n1-highmem-8+T4x2",
            "n1-standard-64+T4x4"
        ]
    );
    let four = r
        .prices
        .iter()
        .find(|q| q.instance_type == "n1-standard-64+T4x4" && q.market == Market::OnDemand)
        .unwrap();
    // 4 × 0.35 + 64 × 0.031611 + 240 × 0.004237.
    assert_eq!((four.dollars_per_hour * 1e6).round() / 1e6, 4.439984);
}

#[tokio::test]
async fn the_refresh_lands_in_the_catalog_for_the_region_and_its_zones() {
    let g = Google::with_token().await;
    mount_skus(&g).await;
    let app = TestApp::spawn(Backend::Sqlite).await;
    let catalog = app.state.catalog.get().expect("catalog");
    let report = trainscaler::provider::refresh::refresh_region(
        &app.state.store,
        &catalog,
        &g.provider(),
        "us-central1",
        &["n1-highmem-4+T4x1".to_string()],
        trainscaler::timefmt::now_ms(),
    )
    .await
    .expect("refresh");
    assert_eq!(
        report.offerings_added, 1,
        "the region-wide offering is new: {report:?}"
    );
    app.state
        .catalog
        .refresh_after_write(&app.state.store)
        .await;
    let o = app.get_json("/v1/offerings/gcp/n1-highmem-4+T4x1").await;
    let central: Vec<&Value> = o["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["region"] == "us-central1")
        .collect();
    // The bundle's four zones and the region: each at the refreshed prices.
    assert_eq!(central.len(), 5, "{o:#}");
    for l in central {
        assert_eq!(l["on_demand_price"], json!(0.586606), "{l}");
        assert_eq!(l["spot_price"], json!(0.195902), "{l}");
    }
    let from_api = o["price_history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"] == "gcp-api")
        .count();
    assert_eq!(from_api, 10, "two markets in five places: {o:#}");
}

#[test]
fn the_fixtures_are_the_documented_shapes_the_code_reads() {
    // Guards against a fixture edit that would make a test pass for the wrong reason.
    let op = json_fixture("op_done_stockout");
    assert_eq!(op["status"], "DONE");
    assert_eq!(
        op["error"]["errors"][0]["code"],
        "ZONE_RESOURCE_POOL_EXHAUSTED"
    );
    let m = json_fixture("managed_spot_stockout");
    assert_eq!(
        m["managedInstances"][1]["lastAttempt"]["errors"]["errors"][0]["code"],
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    );
}
