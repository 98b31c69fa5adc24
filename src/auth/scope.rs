//! What an API key may do. Four scopes, each a group of routes; `admin` implies the others so
//! that the first key a deployment gets can do everything.

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One permission an API key carries.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// GET routes: the catalog, prices, pools, the fleet, KEDA's metrics-api scaler.
    Read,
    /// Decisions and what-ifs: `POST /decide`, benchmark plans, the simulator.
    Decide,
    /// Signals arriving from outside: webhooks, price observations, benchmark results.
    Ingest,
    /// Changes to what the service drives: pools, workers, the catalog, API keys.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Decide, Scope::Ingest, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Decide => "decide",
            Scope::Ingest => "ingest",
            Scope::Admin => "admin",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| format!("unknown scope `{s}`: use read, decide, ingest or admin"))
    }
}

/// The scopes one key carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    pub fn new(scopes: impl IntoIterator<Item = Scope>) -> Self {
        Self(scopes.into_iter().fold(0, |bits, s| bits | s.bit()))
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether a request that needs `required` may go ahead: `admin` allows everything.
    pub fn allows(self, required: Scope) -> bool {
        self.0 & (required.bit() | Scope::Admin.bit()) != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL
            .into_iter()
            .filter(move |s| self.0 & s.bit() != 0)
    }

    /// The stored form: `read,ingest`.
    pub fn to_csv(self) -> String {
        self.iter().map(Scope::as_str).collect::<Vec<_>>().join(",")
    }

    /// Reads the stored form; unknown names are an error so that a typo in a migration or a
    /// hand-edited row cannot silently widen or narrow a key.
    pub fn from_csv(s: &str) -> Result<Self, String> {
        s.split(',')
            .filter(|p| !p.is_empty())
            .map(str::parse::<Scope>)
            .collect::<Result<Vec<_>, _>>()
            .map(Self::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_allows_everything_and_the_others_only_themselves() {
        let admin = Scopes::new([Scope::Admin]);
        assert!(Scope::ALL.iter().all(|s| admin.allows(*s)));
        let ingest = Scopes::new([Scope::Ingest]);
        assert!(ingest.allows(Scope::Ingest));
        assert!(!ingest.allows(Scope::Read));
        assert!(!ingest.allows(Scope::Admin));
        let read_decide = Scopes::new([Scope::Read, Scope::Decide]);
        assert!(read_decide.allows(Scope::Decide) && read_decide.allows(Scope::Read));
        assert!(!read_decide.allows(Scope::Ingest));
        assert!(!Scopes::default().allows(Scope::Read));
    }

    #[test]
    fn the_stored_form_round_trips_and_refuses_unknown_names() {
        let s = Scopes::new([Scope::Ingest, Scope::Read]);
        assert_eq!(s.to_csv(), "read,ingest");
        assert_eq!(Scopes::from_csv("read,ingest"), Ok(s));
        assert!(Scopes::from_csv("read,root").is_err());
        assert_eq!(Scopes::from_csv(""), Ok(Scopes::default()));
    }
}
