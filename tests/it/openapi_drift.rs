//! The committed OpenAPI document must be what the code generates.

#[test]
fn committed_openapi_matches_the_code() {
    let generated = trainscaler::api::openapi().to_pretty_json().unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json"))
            .unwrap();
    assert!(
        generated.trim_end() == committed.trim_end(),
        "openapi/openapi.json is out of date; regenerate it with \
         `cargo run -- openapi > openapi/openapi.json` and commit it"
    );
}
