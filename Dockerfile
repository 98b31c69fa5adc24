# Container image for the trainscaler service.
#   docker build -t trainscaler .
#   docker run -p 8080:8080 trainscaler            # SQLite under /var/lib/trainscaler/data
# See docker-compose.yml for the service with PostgreSQL.

# ---- build ------------------------------------------------------------------------------------
FROM rust:1-bookworm AS builder
WORKDIR /src

# Dependencies first, in their own layer, so that editing the sources does not rebuild them:
# compile the locked dependency graph against placeholder sources, then forget our own crate's
# build results so the real build below always recompiles it.
# (The manifest declares the bench target benches/offerings_query.rs, so it must be present.)
COPY Cargo.toml Cargo.lock ./
COPY benches benches
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src target/release/.fingerprint/trainscaler-* target/release/deps/trainscaler-* \
        target/release/deps/libtrainscaler-* target/release/trainscaler target/release/trainscaler.d

# The real sources; migrations, catalog and the API page's script are compiled into the
# binary (sqlx::migrate!, include_str!, include_bytes!).
COPY src src
COPY migrations migrations
COPY catalog catalog
COPY assets assets
RUN cargo build --release --locked

# ---- runtime ----------------------------------------------------------------------------------
FROM debian:bookworm-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# An unprivileged user that owns the working directory, where the default database
# (sqlite://data/trainscaler.db) is created on first start.
RUN groupadd --system --gid 10001 trainscaler \
    && useradd --system --uid 10001 --gid trainscaler --no-log-init \
        --home-dir /var/lib/trainscaler --shell /usr/sbin/nologin trainscaler \
    && install -d -o trainscaler -g trainscaler -m 0750 /var/lib/trainscaler

COPY --from=builder /src/target/release/trainscaler /usr/local/bin/trainscaler

# Numeric, so that platforms can verify the image does not run as root.
USER 10001:10001
WORKDIR /var/lib/trainscaler

# gRPC carries no API key: it stays on the container's loopback until it is given mutual TLS
# (TRAINSCALER_GRPC_CLIENT_CA) or told TRAINSCALER_GRPC_INSECURE=true with
# TRAINSCALER_GRPC_BIND=0.0.0.0:9090, as deploy/k8s and the Helm chart do.
ENV TRAINSCALER_BIND=0.0.0.0:8080 \
    TRAINSCALER_GRPC_BIND=127.0.0.1:9090
# 8080: HTTP API; 9090: gRPC (KEDA external scaler).
EXPOSE 8080 9090

# No HEALTHCHECK: the image has no curl or wget. Probe GET /healthz (liveness) and
# GET /readyz (readiness) from the orchestrator instead.
ENTRYPOINT ["/usr/local/bin/trainscaler"]
CMD ["serve"]
