//! The API reference page works offline: `/docs` and the viewer's script are served by the
//! binary, open without a key, and the page names no other host.

use crate::common::{Backend, TestApp};
use crate::on_both_backends;

async fn the_reference_page_and_its_script_are_served_locally(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let anonymous = reqwest::Client::new();

    let page = anonymous.get(app.url("/docs")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<title>trainscaler API reference</title>"),
        "{html}"
    );
    assert!(html.contains("'/openapi.json'"), "{html}");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page must load nothing from another host: {html}"
    );

    // The one script the page loads, at the path it names.
    let src = html
        .split("<script src=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a script element with src")
        .to_string();
    assert!(src.starts_with("/docs/"), "{src}");
    let script = anonymous.get(app.url(&src)).send().await.unwrap();
    assert_eq!(script.status(), 200);
    assert_eq!(
        script.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    let js = script.text().await.unwrap();
    // The standalone build defines the entry point the page calls.
    assert!(js.contains("createApiReference"));
    assert!(js.len() > 1_000_000, "{} bytes", js.len());

    // The spec the page reads is open too.
    let spec = anonymous
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(spec.status(), 200);
}

on_both_backends!(the_reference_page_and_its_script_are_served_locally);
