//! TLS to PostgreSQL, as managed databases require: `sslmode` in the database URL is honoured,
//! the service's own connections are encrypted, and a server certificate that the configured
//! root did not sign stops start-up instead of being trusted.

use crate::common::{Backend, TestDb, serve_config};
use sqlx::Connection;
use trainscaler::config::DatabaseUrl;

/// The URL with `param` added to its query string.
fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_encrypts_the_services_connections() {
    let db = TestDb::new(Backend::Postgres).await;
    let admin = std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
    let ssl: String = sqlx::query_scalar("SHOW ssl")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        ssl, "on",
        "PostgreSQL at {admin} has ssl off; this test needs it on (Debian's clusters have \
         `ssl = on` with the snakeoil certificate in postgresql.conf)"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut serve = serve_config(false);
    serve.admin_key_file = dir.path().join("admin.key");
    let mut config = db.config();
    config.database_url = DatabaseUrl::new(with_param(&db.url, "sslmode=require"));
    let _state = trainscaler::app::prepare(&config, &serve)
        .await
        .expect("start-up over TLS");
    let name = db.url.rsplit('/').next().unwrap().to_string();
    let (connections, encrypted): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE s.ssl)
           FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
          WHERE a.datname = $1",
    )
    .bind(&name)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(
        connections >= 1,
        "the service holds no connection to {name}"
    );
    assert_eq!(encrypted, connections, "some connections are not encrypted");

    // verify-full against a root that did not sign the server's certificate: refused.
    let stranger = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let root = dir.path().join("root.crt");
    std::fs::write(&root, stranger.cert.pem()).unwrap();
    let mut config = db.config();
    config.database_url = DatabaseUrl::new(with_param(
        &db.url,
        &format!("sslmode=verify-full&sslrootcert={}", root.display()),
    ));
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        trainscaler::app::prepare(&config, &serve),
    )
    .await
    .expect("start-up gave up within a minute");
    let err = match refused {
        Ok(_) => panic!("an untrusted server certificate was accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        err.to_lowercase().contains("certificate") || err.contains("tls"),
        "{err}"
    );
}
