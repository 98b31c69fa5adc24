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

/// Headless Chromium renders `/docs` with every request to another host sent to a local
/// proxy that records it and refuses it (loopback never goes through a proxy): the page
/// renders the spec's operations (an operation's summary is in the DOM), and the proxy saw
/// nothing.
async fn the_reference_page_makes_no_request_off_the_machine(backend: Backend) {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};

    let app = TestApp::spawn(backend).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut line = String::new();
            let _ = BufReader::new(&stream).read_line(&mut line);
            log.lock().unwrap().push(line.trim().to_string());
            let _ = (&stream).write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let dom = crate::fleet_browser::dump_dom_with(
        &app.url("/docs"),
        &[
            format!("--proxy-server=http://{proxy}"),
            "--virtual-time-budget=8000".to_string(),
        ],
    )
    .await;
    // The viewer ran and read the spec: an operation of ours is on the page.
    assert!(
        dom.contains("Offerings matching the filters, cheapest first"),
        "the reference did not render: {dom}"
    );
    // Chromium's own background services (clock, component updates, sign-in, autofill,
    // optimisation hints) talk to Google's hosts whatever the page does; they are not the
    // page's requests. Google's font hosts are, and stay counted.
    let host = |line: &str| -> String {
        let target = line.split_whitespace().nth(1).unwrap_or("");
        let rest = target.split_once("://").map_or(target, |(_, r)| r);
        rest.split(['/', ':']).next().unwrap_or("").to_string()
    };
    let browser_own = |h: &str| {
        !h.starts_with("fonts.")
            && [".google.com", ".googleapis.com", ".gvt1.com"]
                .iter()
                .any(|d| h.ends_with(d))
    };
    let off_machine: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|l| !browser_own(&host(l)))
        .cloned()
        .collect();
    assert_eq!(
        off_machine,
        Vec::<String>::new(),
        "requests that left the machine"
    );
}

on_both_backends!(
    the_reference_page_and_its_script_are_served_locally,
    the_reference_page_makes_no_request_off_the_machine,
);
