//! The ceiling for `bench/run.sh`: a bare axum server with one `/healthz` route and no
//! middleware, built from the same axum, hyper and tokio as trainscaler (same lock file, same
//! features, same release profile, same allocator), answering the same JSON body. The harness
//! measures trainscaler's `/healthz` as a ratio of this one's, so the figure says what the
//! service's own request path costs rather than what the machine can do.
//!
//! usage: cargo run --release --example bare_healthz -- 127.0.0.1:PORT

use axum::Router;
use axum::http::header;
use axum::routing::get;

// The same allocator as trainscaler's binary, so the ratio compares request paths, not
// allocators.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".to_owned());
    // Same bytes and content type as trainscaler's `Json(Health { status: "ok" })`, without
    // serialising: this is the floor of what an axum handler can cost.
    let app = Router::new().route(
        "/healthz",
        get(|| async {
            (
                [(header::CONTENT_TYPE, "application/json")],
                r#"{"status":"ok"}"#,
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await
}
