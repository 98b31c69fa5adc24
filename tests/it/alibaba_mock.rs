//! The Alibaba Cloud adapter against a mock of the documented wire format: every request must
//! carry exactly the documented common and per-call parameters, and its `Signature` must verify
//! under a second implementation of signature version 1.0 written here from the documentation
//! (anchored by the published DescribeRegions example) and, once, under Python's standard
//! library. Answers are documented response bodies from `tests/fixtures/alibaba/`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use wiremock::matchers::method;
use wiremock::{Match, Mock, MockServer, Request, ResponseTemplate};

use trainscaler::core::catalog::Market;
use trainscaler::provider::alibaba::{AlibabaProvider, AlibabaSettings};
use trainscaler::provider::retry::RetryPolicy;
use trainscaler::provider::{
    Capacity, CapacitySpec, Distribution, GroupRef, Provider, ProviderError, WorkerState,
};

const KEY_ID: &str = "testid";
const SECRET: &str = "testsecret";
const ECS: &str = "2014-05-26";
const ESS: &str = "2014-08-28";
const GROUP: &str = "asg-bp1igpak5ft1flyp****";
const REGION: &str = "cn-shanghai";

/// The parameters every request carries, checked separately from the call's own.
const COMMON: &[&str] = &[
    "Format",
    "Version",
    "AccessKeyId",
    "SignatureMethod",
    "Timestamp",
    "SignatureVersion",
    "SignatureNonce",
    "Action",
    "RegionId",
    "Signature",
];

// ---- a second, plain implementation of the documented signature --------------------------

/// RFC 3986 as the signature topic words it: A-Z, a-z, 0-9, `-`, `_`, `.`, `~` stay; every
/// other byte of the UTF-8 text becomes `%XY` with upper-case hex.
fn doc_encode(text: &str) -> String {
    const KEEP: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~";
    text.bytes()
        .map(|b| {
            if KEEP.as_bytes().contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub(crate) fn doc_signature(secret: &str, params: &BTreeMap<String, String>) -> String {
    let mut pairs: Vec<String> = params
        .iter()
        .filter(|(k, _)| k.as_str() != "Signature")
        .map(|(k, v)| format!("{}={}", doc_encode(k), doc_encode(v)))
        .collect();
    pairs.sort();
    let canonical = pairs.join("&");
    let to_sign = format!("GET&{}&{}", doc_encode("/"), doc_encode(&canonical));
    let mut mac = Hmac::<Sha1>::new_from_slice(format!("{secret}&").as_bytes()).expect("hmac key");
    mac.update(to_sign.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

pub(crate) fn decoded_query(request: &Request) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (k, v) in request.url.query_pairs() {
        // A repeated name would make the signed text ambiguous.
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return None;
        }
    }
    Some(out)
}

fn timestamp_is_documented_form(ts: &str) -> bool {
    let b = ts.as_bytes();
    b.len() == 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z'
        && ts
            .chars()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19].contains(&i) || c.is_ascii_digit())
}

/// One documented RPC call: its Action and Version, and exactly these own parameters.
struct RpcCall {
    action: &'static str,
    version: &'static str,
    params: BTreeMap<String, String>,
}

fn call(action: &'static str, version: &'static str, params: &[(&str, &str)]) -> RpcCall {
    RpcCall {
        action,
        version,
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

impl RpcCall {
    fn problems(&self, request: &Request) -> Vec<String> {
        let mut bad = Vec::new();
        if request.url.path() != "/" {
            bad.push(format!("path {}", request.url.path()));
        }
        let Some(q) = decoded_query(request) else {
            return vec!["a parameter is repeated".into()];
        };
        let want = |name: &str, value: &str, bad: &mut Vec<String>| {
            if q.get(name).map(String::as_str) != Some(value) {
                bad.push(format!("{name}={:?}, expected {value}", q.get(name)));
            }
        };
        want("Format", "JSON", &mut bad);
        want("Version", self.version, &mut bad);
        want("AccessKeyId", KEY_ID, &mut bad);
        want("SignatureMethod", "HMAC-SHA1", &mut bad);
        want("SignatureVersion", "1.0", &mut bad);
        want("RegionId", REGION, &mut bad);
        if !q
            .get("Timestamp")
            .is_some_and(|t| timestamp_is_documented_form(t))
        {
            bad.push(format!("Timestamp {:?}", q.get("Timestamp")));
        }
        let nonce_is_v4 = q
            .get("SignatureNonce")
            .and_then(|n| uuid::Uuid::parse_str(n).ok())
            .is_some_and(|u| u.get_version_num() == 4);
        if !nonce_is_v4 {
            bad.push(format!("SignatureNonce {:?}", q.get("SignatureNonce")));
        }
        let own: BTreeMap<String, String> = q
            .iter()
            .filter(|(k, _)| !COMMON.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if own != self.params {
            bad.push(format!("parameters {own:?}, expected {:?}", self.params));
        }
        match q.get("Signature") {
            Some(sig) if *sig == doc_signature(SECRET, &q) => {}
            other => bad.push(format!("Signature {other:?} does not verify")),
        }
        bad
    }
}

impl Match for RpcCall {
    fn matches(&self, request: &Request) -> bool {
        let same_action = request
            .url
            .query_pairs()
            .any(|(k, v)| k == "Action" && v == self.action);
        if !same_action {
            return false;
        }
        let bad = self.problems(request);
        if !bad.is_empty() {
            // wiremock answers an unmatched request with 404; say why it did not match.
            eprintln!("{} request did not match: {bad:?}", self.action);
        }
        bad.is_empty()
    }
}

// ---- scaffolding ---------------------------------------------------------------------------

pub(crate) fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/alibaba/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn answer(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json;charset=utf-8")
        .set_body_string(fixture(name))
}

fn provider(server: &MockServer) -> AlibabaProvider {
    let uri = server.uri();
    let mut settings = AlibabaSettings::from_lookup(|name| match name {
        "ALIBABA_CLOUD_ACCESS_KEY_ID" => Some(KEY_ID.to_string()),
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET" => Some(SECRET.to_string()),
        "ALIBABA_CLOUD_REGION_ID" => Some("cn-hangzhou".to_string()),
        "ALIBABA_CLOUD_ENDPOINT_URL" => Some(uri.clone()),
        _ => None,
    })
    .expect("settings");
    settings.retry = RetryPolicy {
        max_retries: 4,
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
    };
    AlibabaProvider::new(settings).expect("provider")
}

fn group() -> GroupRef {
    GroupRef {
        pool: "trainers".into(),
        region: REGION.into(),
        group: GROUP.into(),
        spot_group: None,
    }
}

fn types() -> Vec<String> {
    vec![
        "ecs.gn7i-c16g1.4xlarge".to_string(),
        "ecs.gn7i-c8g1.2xlarge".to_string(),
    ]
}

fn current() -> Capacity {
    Capacity {
        desired: 3,
        min: 0,
        max: 16,
        distribution: Some(Distribution {
            on_demand_base: 1,
            on_demand_percentage_above_base: 0,
            instance_types: types(),
        }),
        workers: vec![],
    }
}

fn spec_like(current: &Capacity) -> CapacitySpec {
    CapacitySpec {
        desired: current.desired,
        min: current.min,
        max: current.max,
        distribution: current.distribution.clone().unwrap_or_default(),
        targets: vec![],
    }
}

/// Answers `expected` with `status` and the fixture `name`, and expects it exactly once.
async fn expect_once(server: &MockServer, expected: RpcCall, status: u16, name: &str) {
    Mock::given(method("GET"))
        .and(expected)
        .respond_with(answer(status, name))
        .expect(1)
        .mount(server)
        .await;
}

/// DescribeScalingGroups of [`GROUP`].
fn describe_groups() -> RpcCall {
    call("DescribeScalingGroups", ESS, &[("ScalingGroupId.1", GROUP)])
}

/// RemoveInstances of i-uf6a0001 from [`GROUP`], released and lowering the desired capacity.
fn remove_one() -> RpcCall {
    call(
        "RemoveInstances",
        ESS,
        &[
            ("ScalingGroupId", GROUP),
            ("DecreaseDesiredCapacity", "true"),
            ("RemovePolicy", "release"),
            ("InstanceIds.1", "i-uf6a0001"),
        ],
    )
}

/// ModifyScalingGroup of [`GROUP`] sending exactly `changed` besides the group's id.
fn modify(changed: &[(&str, &str)]) -> RpcCall {
    let mut params = vec![("ScalingGroupId", GROUP)];
    params.extend_from_slice(changed);
    call("ModifyScalingGroup", ESS, &params)
}

/// `set_capacity` from [`current`] to its spec as `change` leaves it.
async fn set_capacity(
    server: &MockServer,
    change: impl FnOnce(&mut CapacitySpec),
) -> Result<(), ProviderError> {
    let current = current();
    let mut spec = spec_like(&current);
    change(&mut spec);
    provider(server)
        .set_capacity(&group(), &current, &spec)
        .await
}

// ---- the signature verifier itself ---------------------------------------------------------

#[test]
fn the_test_verifier_reproduces_the_published_signature_example() {
    let params: BTreeMap<String, String> = [
        ("AccessKeyId", "testid"),
        ("Action", "DescribeRegions"),
        ("Format", "XML"),
        ("SignatureMethod", "HMAC-SHA1"),
        ("SignatureNonce", "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf"),
        ("SignatureVersion", "1.0"),
        ("Timestamp", "2016-02-23T12:46:24Z"),
        ("Version", "2014-05-26"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(
        doc_signature("testsecret", &params),
        "OLeaidS1JvxuMvnyHOwuJ+uX5qY="
    );
}

#[tokio::test]
async fn pythons_standard_library_agrees_with_the_signatures_the_adapter_sends() {
    let server = MockServer::start().await;
    expect_once(&server, remove_one(), 200, "remove_instances").await;
    provider(&server)
        .terminate(&group(), &["i-uf6a0001".to_string()], true)
        .await
        .expect("terminate");

    let requests = server.received_requests().await.expect("recorded");
    let query = requests[0].url.query().expect("query").to_string();
    let script = r#"
import base64, hashlib, hmac, sys, urllib.parse
pairs = urllib.parse.parse_qsl(sys.argv[1], keep_blank_values=True)
sent = dict(pairs)["Signature"]
enc = lambda s: urllib.parse.quote(s, safe="~")
canon = "&".join(sorted(enc(k) + "=" + enc(v) for k, v in pairs if k != "Signature"))
to_sign = "GET&" + enc("/") + "&" + enc(canon)
mine = base64.b64encode(hmac.new(b"testsecret&", to_sign.encode(), hashlib.sha1).digest()).decode()
print("ok" if mine == sent else "mismatch " + mine + " " + sent)
"#;
    match Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&query)
        .output()
    {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                text.trim(),
                "ok",
                "python says {text} / {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Err(e) => eprintln!("python3 is not available ({e}); cross-check skipped"),
    }
}

// ---- describe ------------------------------------------------------------------------------

#[tokio::test]
async fn describe_reads_the_group_its_instances_and_their_markets_zones_and_launch_times() {
    let server = MockServer::start().await;
    expect_once(&server, describe_groups(), 200, "describe_scaling_groups").await;
    expect_once(
        &server,
        call(
            "DescribeScalingInstances",
            ESS,
            &[
                ("ScalingGroupId", GROUP),
                ("PageNumber", "1"),
                ("PageSize", "50"),
            ],
        ),
        200,
        "describe_scaling_instances",
    )
    .await;
    expect_once(
        &server,
        call(
            "DescribeInstances",
            ECS,
            &[
                ("InstanceIds", r#"["i-uf6a0001","i-uf6a0002","i-uf6a0003"]"#),
                ("MaxResults", "100"),
            ],
        ),
        200,
        "describe_instances",
    )
    .await;

    let cap = provider(&server)
        .describe(&group())
        .await
        .expect("describe");
    assert_eq!((cap.desired, cap.min, cap.max), (3, 0, 16));
    assert_eq!(
        cap.distribution,
        Some(Distribution {
            on_demand_base: 1,
            on_demand_percentage_above_base: 0,
            instance_types: types(),
        })
    );
    let w = &cap.workers;
    assert_eq!(w.len(), 3);
    assert_eq!(w[0].id, "i-uf6a0001");
    assert_eq!(w[0].instance_type, "ecs.gn7i-c16g1.4xlarge");
    assert_eq!(w[0].market, Market::OnDemand);
    assert_eq!(w[0].zone.as_deref(), Some("cn-shanghai-l"));
    assert_eq!(w[0].state, WorkerState::Running);
    // 2026-12-01T08:00Z
    assert_eq!(w[0].launched_at_ms, Some(1_796_112_000_000));
    // The host name dcgm-exporter reports as `Hostname`, and the VPC address.
    assert_eq!(w[0].aliases, ["iZuf6a0001Z", "172.16.0.11"]);
    assert_eq!(w[1].aliases, ["trainer-2"]);
    assert!(
        w[2].aliases.is_empty(),
        "no HostName, no VPC address: no alias"
    );
    assert_eq!(w[1].market, Market::Spot);
    assert_eq!(w[1].state, WorkerState::Pending);
    assert_eq!(w[1].zone.as_deref(), Some("cn-shanghai-m"));
    assert_eq!(w[2].market, Market::Spot);
    assert_eq!(w[2].state, WorkerState::Terminating);
}

#[tokio::test]
async fn an_unknown_scaling_group_is_not_found() {
    let server = MockServer::start().await;
    expect_once(
        &server,
        describe_groups(),
        200,
        "describe_scaling_groups_empty",
    )
    .await;
    let err = provider(&server).describe(&group()).await.unwrap_err();
    assert!(matches!(err, ProviderError::NotFound(_)), "{err:?}");
}

#[tokio::test]
async fn removing_from_a_scaling_group_that_is_gone_is_not_found() {
    let server = MockServer::start().await;
    expect_once(&server, remove_one(), 404, "error_scaling_group_not_found").await;
    let err = provider(&server)
        .terminate(&group(), &["i-uf6a0001".to_string()], true)
        .await
        .unwrap_err();
    match err {
        ProviderError::NotFound(m) => assert!(m.contains("InvalidScalingGroupId.NotFound"), "{m}"),
        other => panic!("{other:?}"),
    }
}

// ---- set_capacity ----------------------------------------------------------------------------

#[tokio::test]
async fn set_capacity_sends_one_modify_with_exactly_the_changed_parameters() {
    let server = MockServer::start().await;
    expect_once(
        &server,
        modify(&[
            ("DesiredCapacity", "5"),
            ("MaxSize", "20"),
            ("OnDemandPercentageAboveBaseCapacity", "25"),
        ]),
        200,
        "modify_scaling_group",
    )
    .await;
    set_capacity(&server, |spec| {
        spec.desired = 5;
        spec.max = 20;
        spec.distribution.on_demand_percentage_above_base = 25;
    })
    .await
    .expect("set_capacity");
}

#[tokio::test]
async fn set_capacity_rewrites_the_type_overrides_in_priority_order() {
    let server = MockServer::start().await;
    expect_once(
        &server,
        modify(&[
            (
                "LaunchTemplateOverride.1.InstanceType",
                "ecs.gn7i-c8g1.2xlarge",
            ),
            (
                "LaunchTemplateOverride.2.InstanceType",
                "ecs.gn7i-c16g1.4xlarge",
            ),
            ("AllocationStrategy", "priority"),
            ("SpotAllocationStrategy", "priority"),
        ]),
        200,
        "modify_scaling_group",
    )
    .await;
    set_capacity(&server, |spec| spec.distribution.instance_types.reverse())
        .await
        .expect("set_capacity");
}

#[tokio::test]
async fn set_capacity_makes_no_request_when_nothing_changed() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(answer(200, "modify_scaling_group"))
        .expect(0)
        .mount(&server)
        .await;
    set_capacity(&server, |_| {}).await.expect("set_capacity");
}

#[tokio::test]
async fn a_no_stock_answer_is_insufficient_capacity() {
    let server = MockServer::start().await;
    expect_once(
        &server,
        modify(&[("DesiredCapacity", "8")]),
        403,
        "error_no_stock",
    )
    .await;
    let err = set_capacity(&server, |spec| spec.desired = 8)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::InsufficientCapacity { .. }),
        "{err:?}"
    );
}

// ---- terminate -----------------------------------------------------------------------------

#[tokio::test]
async fn terminate_removes_the_chosen_instances_and_releases_them() {
    let server = MockServer::start().await;
    expect_once(
        &server,
        call(
            "RemoveInstances",
            ESS,
            &[
                ("ScalingGroupId", GROUP),
                ("DecreaseDesiredCapacity", "false"),
                ("RemovePolicy", "release"),
                ("InstanceIds.1", "i-uf6a0002"),
                ("InstanceIds.2", "i-uf6a0003"),
            ],
        ),
        200,
        "remove_instances",
    )
    .await;
    provider(&server)
        .terminate(
            &group(),
            &["i-uf6a0002".to_string(), "i-uf6a0003".to_string()],
            false,
        )
        .await
        .expect("terminate");
}

// ---- refresh -------------------------------------------------------------------------------

#[tokio::test]
async fn refresh_reads_instance_types_on_demand_prices_and_the_newest_spot_price_per_zone() {
    let server = MockServer::start().await;
    let gn7i = "ecs.gn7i-c16g1.4xlarge";
    let h20 = "ecs.ebmgn8v.48xlarge";
    expect_once(
        &server,
        call(
            "DescribeInstanceTypes",
            ECS,
            &[("MinimumGPUAmount", "1"), ("MaxResults", "100")],
        ),
        200,
        "describe_instance_types_page1",
    )
    .await;
    expect_once(
        &server,
        call(
            "DescribeInstanceTypes",
            ECS,
            &[
                ("MinimumGPUAmount", "1"),
                ("MaxResults", "100"),
                ("NextToken", "e71d8a535bd9cc11"),
            ],
        ),
        200,
        "describe_instance_types_page2",
    )
    .await;
    for (t, body) in [
        (gn7i, "describe_price_gn7i"),
        (h20, "describe_price_ebmgn8v"),
    ] {
        expect_once(
            &server,
            call(
                "DescribePrice",
                ECS,
                &[
                    ("ResourceType", "instance"),
                    ("InstanceType", t),
                    ("PriceUnit", "Hour"),
                    ("SystemDisk.Category", "cloud_essd"),
                ],
            ),
            200,
            body,
        )
        .await;
    }
    // Three pages for the A10 type; the H20 type has no spot history.
    let now_ms = trainscaler::timefmt::now_ms();
    let since_ms = now_ms - 3_600_000;
    let start = trainscaler::timefmt::format_ms(since_ms - since_ms.rem_euclid(1000));
    for (offset, body) in [
        (None, "spot_history_page1"),
        (Some("3"), "spot_history_page2"),
        (Some("4"), "spot_history_end"),
    ] {
        let mut params = vec![
            ("NetworkType", "vpc"),
            ("InstanceType", gn7i),
            ("StartTime", start.as_str()),
        ];
        if let Some(o) = offset {
            params.push(("Offset", o));
        }
        expect_once(
            &server,
            call("DescribeSpotPriceHistory", ECS, &params),
            200,
            body,
        )
        .await;
    }
    expect_once(
        &server,
        call(
            "DescribeSpotPriceHistory",
            ECS,
            &[
                ("NetworkType", "vpc"),
                ("InstanceType", h20),
                ("StartTime", start.as_str()),
            ],
        ),
        200,
        "spot_history_end",
    )
    .await;

    let refresh = provider(&server)
        .refresh(REGION, &[], since_ms)
        .await
        .expect("refresh");

    assert_eq!(refresh.types.len(), 2);
    let a10 = &refresh.types[0];
    assert_eq!(a10.instance_type, gn7i);
    assert_eq!((a10.vcpus, a10.memory_gib), (16.0, 60.0));
    assert_eq!(a10.gpu_model.as_deref(), Some("NVIDIA A10"));
    assert_eq!((a10.gpu_count, a10.gpu_memory_gib), (1.0, 24.0));
    assert_eq!(a10.network.as_deref(), Some("16 Gigabit"));
    assert!(!a10.rdma);
    assert_eq!(a10.local_nvme_gb, Some(0.0));
    assert_eq!(a10.arch.as_deref(), Some("x86_64"));
    let h = &refresh.types[1];
    assert_eq!(h.instance_type, h20);
    assert_eq!((h.gpu_count, h.gpu_memory_gib), (8.0, 96.0));
    assert!(h.rdma, "EriQuantity 8 means eRDMA");
    assert_eq!(h.network.as_deref(), Some("160 Gigabit"));
    // 4 disks x 3576 GiB
    assert_eq!(h.local_nvme_gb, Some(15359.0));

    let on_demand: Vec<_> = refresh
        .prices
        .iter()
        .filter(|p| p.market == Market::OnDemand)
        .map(|p| (p.instance_type.as_str(), p.zone.clone(), p.dollars_per_hour))
        .collect();
    assert_eq!(on_demand, vec![(gn7i, None, 2.613), (h20, None, 38.4)]);
    let spot: Vec<_> = refresh
        .prices
        .iter()
        .filter(|p| p.market == Market::Spot)
        .map(|p| (p.zone.as_deref(), p.dollars_per_hour, p.at_ms))
        .collect();
    assert_eq!(
        spot,
        vec![
            // 2026-12-02T00:00:00Z and 2026-12-02T06:00:00Z, the newest of each zone
            (Some("cn-shanghai-l"), 0.64, 1_796_169_600_000),
            (Some("cn-shanghai-m"), 0.55, 1_796_191_200_000),
        ]
    );
}

// ---- errors --------------------------------------------------------------------------------

#[tokio::test]
async fn a_throttled_call_is_retried_until_it_succeeds() {
    let server = MockServer::start().await;
    let min_size = || modify(&[("MinSize", "2")]);
    Mock::given(method("GET"))
        .and(min_size())
        .respond_with(answer(400, "error_throttling_user"))
        .up_to_n_times(2)
        .expect(2)
        .mount(&server)
        .await;
    expect_once(&server, min_size(), 200, "modify_scaling_group").await;
    set_capacity(&server, |spec| spec.min = 2)
        .await
        .expect("set_capacity after two throttled attempts");

    // Each attempt is signed afresh: a nonce the server has seen is rejected as a replay.
    let requests = server.received_requests().await.expect("recorded");
    assert_eq!(requests.len(), 3);
    let nonces: std::collections::HashSet<String> = requests
        .iter()
        .filter_map(|r| decoded_query(r)?.get("SignatureNonce").cloned())
        .collect();
    assert_eq!(nonces.len(), 3);
}

#[tokio::test]
async fn a_signature_mismatch_is_unauthorized_and_not_retried() {
    let server = MockServer::start().await;
    expect_once(
        &server,
        describe_groups(),
        400,
        "error_signature_does_not_match",
    )
    .await;
    let err = provider(&server).describe(&group()).await.unwrap_err();
    match err {
        ProviderError::Unauthorized(m) => assert!(m.contains("SignatureDoesNotMatch"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Guards the guard: the mock must refuse a request whose signature was made with another key,
/// or every test above would pass with a broken signer.
#[tokio::test]
async fn the_mock_refuses_a_request_signed_with_another_secret() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(describe_groups())
        .respond_with(answer(200, "describe_scaling_groups"))
        .expect(0)
        .mount(&server)
        .await;
    let uri = server.uri();
    let settings = AlibabaSettings::from_lookup(|name| match name {
        "ALIBABA_CLOUD_ACCESS_KEY_ID" => Some(KEY_ID.to_string()),
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET" => Some("not-the-secret".to_string()),
        "ALIBABA_CLOUD_ENDPOINT_URL" => Some(uri.clone()),
        _ => None,
    })
    .expect("settings");
    let wrong = AlibabaProvider::new(settings).expect("provider");
    let err = wrong.describe(&group()).await.unwrap_err();
    assert!(matches!(err, ProviderError::Other(_)), "{err:?}");
}
