//! The API reference page, `/docs`: Scalar's viewer over `/openapi.json`, with the viewer's
//! script served by this binary (vendored from npm, `assets/scalar/`), so the page works
//! without internet access and no request leaves the machine.

use axum::Router;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;

use crate::app::AppState;

/// The vendored `@scalar/api-reference` 1.76.0 (see `assets/scalar/README.md`).
const SCALAR_JS: &[u8] = include_bytes!("../../assets/scalar/scalar-api-reference-1.76.0.js");
/// The release is in the script's URL, so a browser never runs a cached script of another
/// version.
const SCRIPT_PATH: &str = "/docs/scalar-api-reference-1.76.0.js";

/// `withDefaultFonts: false` keeps the viewer from loading its fonts from Scalar's CDN;
/// the system fonts are used instead.
fn page() -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>trainscaler API reference</title>\n</head>\n<body>\n\
         <div id=\"app\"></div>\n<script src=\"{SCRIPT_PATH}\"></script>\n\
         <script>Scalar.createApiReference('#app', {{url: '/openapi.json', \
         withDefaultFonts: false, hideClientButton: true}})</script>\n</body>\n</html>\n"
    )
}

async fn docs() -> Html<String> {
    Html(page())
}

async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            // The version is in the path, so the file never changes under its URL.
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
        ],
        SCALAR_JS,
    )
}

/// `/docs` and its script; both are open to callers without a key, like `/openapi.json`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/docs", get(docs))
        .route(SCRIPT_PATH, get(script))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_trainscaler_and_loads_nothing_from_elsewhere() {
        let html = page();
        assert!(html.contains("<title>trainscaler API reference</title>"));
        assert!(html.contains(&format!("src=\"{SCRIPT_PATH}\"")));
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "{html}"
        );
    }
}
