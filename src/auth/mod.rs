//! Who may call the API: scoped API keys (hashed at rest, checked per request), signed
//! webhooks, the first-start admin key, and the `keys` command.

pub mod cli;
pub mod issue;
pub mod scope;
pub mod token;
pub mod verifier;
pub mod webhook_signature;
