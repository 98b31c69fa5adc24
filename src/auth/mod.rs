//! Who may call the API: scoped API keys (hashed at rest, checked per request, optionally
//! restricted to pools), signed webhooks, Google-signed Pub/Sub push tokens, the first-start
//! admin key, the per-key ingestion budgets, and the `keys` command.

pub mod cli;
pub mod gate;
pub mod google_oidc;
pub mod issue;
pub mod pools;
pub mod scope;
pub mod token;
pub mod verifier;
pub mod webhook_signature;

pub use gate::Auth;
