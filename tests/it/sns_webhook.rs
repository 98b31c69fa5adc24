//! `POST /v1/webhooks/sns` end to end: envelopes signed exactly as AWS documents (SHA256withRSA,
//! SignatureVersion 2) with a test key whose self-signed certificate wiremock serves at the
//! `SigningCertURL`; good and bad signatures, a topic not allowed, an untrusted certificate
//! host, a replay, and a subscription confirmed by fetching its `SubscribeURL`.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{Backend, TestApp, TestDb, serve_config};
use crate::http_pools::{create_pool, put, rfc3339_ago, t4_policy};

const TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:trainscaler-spot";
const KEY: &[u8] = include_bytes!("../fixtures/sns/signing-key.pem");
const CERT: &str = include_str!("../fixtures/sns/signing-cert.pem");

/// Signs `e` as SNS does for SignatureVersion 2: the documented fields, in order, each as
/// `Name\nvalue\n`, with RSA PKCS#1 v1.5 over SHA-256.
fn sign(e: &mut Value) {
    let names: &[&str] = if e["Type"] == "Notification" {
        &[
            "Message",
            "MessageId",
            "Subject",
            "Timestamp",
            "TopicArn",
            "Type",
        ]
    } else {
        &[
            "Message",
            "MessageId",
            "SubscribeURL",
            "Timestamp",
            "Token",
            "TopicArn",
            "Type",
        ]
    };
    let text: String = names
        .iter()
        .filter_map(|n| e[*n].as_str().map(|v| format!("{n}\n{v}\n")))
        .collect();
    let der = PrivatePkcs8KeyDer::from_pem_slice(KEY).expect("the test key");
    let key = ring::signature::RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).expect("RSA key");
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        text.as_bytes(),
        &mut signature,
    )
    .expect("signed");
    e["SignatureVersion"] = json!("2");
    e["Signature"] = json!(STANDARD.encode(signature));
}

fn notification(cert_url: &str, event: &Value, timestamp: &str) -> Value {
    let mut e = json!({
        "Type": "Notification",
        "MessageId": "da41e39f-ea4d-435a-b922-c6aae3915ebe",
        "TopicArn": TOPIC,
        "Subject": null,
        "Message": event.to_string(),
        "Timestamp": timestamp,
        "SigningCertURL": cert_url,
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe"
    });
    e.as_object_mut().expect("object").remove("Subject");
    sign(&mut e);
    e
}

fn spot_warning(instance: &str) -> Value {
    json!({
        "version": "0", "id": format!("sns-{instance}"),
        "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
        "account": "123456789012", "time": rfc3339_ago(5), "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1a:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    })
}

async fn deliver(app: &TestApp, e: &Value) -> (u16, Value) {
    let r = app
        .client
        .post(app.url("/v1/webhooks/sns"))
        .header("content-type", "text/plain; charset=UTF-8")
        .header("x-amz-sns-message-type", e["Type"].as_str().unwrap_or(""))
        .body(e.to_string())
        .send()
        .await
        .expect("answer");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn field(problem: &Value) -> &str {
    problem["errors"][0]["field"].as_str().unwrap_or("")
}

async fn sns_envelopes_are_checked_then_recorded_or_confirmed(backend: Backend) {
    let mock = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/SimpleNotificationService-test.pem"))
        .respond_with(ResponseTemplate::new(200).set_body_string(CERT))
        // Fetched once for every envelope below: the certificate is cached.
        .expect(1)
        .mount(&mock)
        .await;
    Mock::given(method("GET"))
        .and(path("/confirm"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<ConfirmSubscriptionResponse/>"))
        .expect(1)
        .mount(&mock)
        .await;
    let mut serve = serve_config(false);
    serve.sns_topic_arns = vec![TOPIC.to_string()];
    serve.sns_trusted_url_prefix = Some(format!("{}/", mock.uri()));
    let app = TestApp::spawn_with(Arc::new(TestDb::new(backend).await), serve).await;
    create_pool(&app, "spot", &t4_policy()).await;
    let r = put(
        &app,
        "/v1/pools/spot/workers/i-0bbb",
        &json!({"instance_type": "g4dn.12xlarge", "market": "spot", "zone": "us-east-1a"}),
    )
    .await;
    assert_eq!(r.status(), 201);
    let cert_url = format!("{}/SimpleNotificationService-test.pem", mock.uri());
    let now = rfc3339_ago(1);

    let good = notification(&cert_url, &spot_warning("i-0bbb"), &now);
    let (status, out) = deliver(&app, &good).await;
    assert_eq!(
        (status, out["notices"]["recorded"].as_u64()),
        (200, Some(1)),
        "{out}"
    );
    // SNS redelivers after a timeout: the same event is a duplicate, not a second warning.
    let (status, out) = deliver(&app, &good).await;
    assert_eq!(
        (status, out["notices"]["duplicates"].as_u64()),
        (200, Some(1)),
        "{out}"
    );

    let mut tampered = good.clone();
    tampered["Message"] = json!(spot_warning("i-0ccc").to_string());
    let (status, out) = deliver(&app, &tampered).await;
    assert_eq!((status, field(&out)), (403, "Signature"), "{out}");

    let mut other_topic = good.clone();
    other_topic["TopicArn"] = json!("arn:aws:sns:us-east-1:999999999999:someone-else");
    sign(&mut other_topic);
    let (status, out) = deliver(&app, &other_topic).await;
    assert_eq!((status, field(&out)), (403, "TopicArn"), "{out}");

    let elsewhere = notification(
        "https://sns.us-east-1.amazonaws.com.evil.example/cert.pem",
        &spot_warning("i-0bbb"),
        &now,
    );
    let (status, out) = deliver(&app, &elsewhere).await;
    assert_eq!((status, field(&out)), (403, "SigningCertURL"), "{out}");

    let replay = notification(&cert_url, &spot_warning("i-0bbb"), &rfc3339_ago(2 * 3600));
    let (status, out) = deliver(&app, &replay).await;
    assert_eq!((status, field(&out)), (403, "Timestamp"), "{out}");

    let mut broken_event = spot_warning("i-0bbb");
    broken_event["detail"] = json!({});
    let (status, out) = deliver(&app, &notification(&cert_url, &broken_event, &now)).await;
    assert_eq!(
        (status, field(&out)),
        (422, "Message.detail.instance-id"),
        "{out}"
    );

    let mut confirmation = json!({
        "Type": "SubscriptionConfirmation",
        "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
        "Token": "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736",
        "TopicArn": TOPIC,
        "Message": format!("You have chosen to subscribe to the topic {TOPIC}.\nTo confirm the subscription, visit the SubscribeURL included in this message."),
        "SubscribeURL": format!("{}/confirm?Action=ConfirmSubscription&TopicArn={TOPIC}&Token=2336", mock.uri()),
        "Timestamp": now,
        "SigningCertURL": cert_url,
    });
    sign(&mut confirmation);
    let (status, out) = deliver(&app, &confirmation).await;
    assert_eq!(
        (status, out["confirmed"].as_bool()),
        (200, Some(true)),
        "{out}"
    );

    let events = app.get_json("/v1/pools/spot/events").await;
    let warnings = events["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|e| e["kind"] == "interruption_warning")
        .count();
    assert_eq!(warnings, 1, "{events}");
    mock.verify().await;
}

async fn sns_route_is_off_without_topics(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let body = json!({"Type": "Notification"});
    let (status, _) = deliver(&app, &body).await;
    assert_eq!(status, 404);
}

/// Anyone can post an envelope naming a new `SigningCertURL`: the server fetches at most
/// `CERT_FETCHES_PER_MINUTE` uncached certificates a minute for them (then 503, which SNS
/// retries) and stops reading an answer larger than a certificate.
#[tokio::test]
async fn anonymous_envelopes_cannot_make_the_server_fetch_without_bound() {
    let mock = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/huge.pem"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(vec![b'A'; 1 << 20]))
        .mount(&mock)
        .await;
    Mock::given(method("GET"))
        .and(path_regex(r"^/SimpleNotificationService-[0-9]+\.pem$"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&mock)
        .await;
    let mut serve = serve_config(false);
    serve.sns_topic_arns = vec![TOPIC.to_string()];
    serve.sns_trusted_url_prefix = Some(format!("{}/", mock.uri()));
    let app = TestApp::spawn_with(Arc::new(TestDb::new(Backend::Sqlite).await), serve).await;
    let now = rfc3339_ago(0);

    let (status, out) = deliver(
        &app,
        &notification(
            &format!("{}/huge.pem", mock.uri()),
            &spot_warning("i-0a"),
            &now,
        ),
    )
    .await;
    assert_eq!(status, 503, "{out}");
    assert!(
        out["detail"]
            .as_str()
            .unwrap_or("")
            .contains("larger than 16384 bytes"),
        "{out}"
    );

    let mut refused = 0;
    for i in 0..20 {
        let url = format!("{}/SimpleNotificationService-{i}.pem", mock.uri());
        let (status, out) = deliver(&app, &notification(&url, &spot_warning("i-0a"), &now)).await;
        assert_eq!(status, 503, "{out}");
        if out["detail"]
            .as_str()
            .unwrap_or("")
            .contains("new signing certificates")
        {
            refused += 1;
        }
    }
    let fetched = mock.received_requests().await.map_or(0, |r| r.len());
    // One more may fit if the test straddles the budget's refill (one every ten seconds).
    assert!(
        (6..=7).contains(&fetched),
        "{fetched} certificate fetches for 21 envelopes"
    );
    assert_eq!(
        refused,
        21 - fetched,
        "the rest were refused without a fetch"
    );
}

crate::on_both_backends!(
    sns_envelopes_are_checked_then_recorded_or_confirmed,
    sns_route_is_off_without_topics
);
