//! What a database failure says about the database rather than about the request: whether it
//! could not be reached (or is shutting down, or starting), whether the write met a
//! conflicting one, or neither. The API answers the first two with 503 and `Retry-After`, so
//! a client retries instead of reading a 500 as a bug; the KEDA scaler maps them to gRPC
//! `UNAVAILABLE` the same way.

use super::StoreError;

/// The kind of a store failure, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The database cannot be reached, or it refuses sessions while it shuts down or starts:
    /// retry once it is back. Nothing was acknowledged; a commit may or may not have landed,
    /// which is why every write is idempotent.
    Unavailable,
    /// A deadlock or serialisation failure (or SQLite's busy file): nothing was written and
    /// the same request may succeed at once.
    Conflict,
    /// Anything else: a bug or bad data, not a passing condition.
    Other,
}

impl StoreError {
    pub fn fault(&self) -> Fault {
        match self {
            Self::Database(e) => classify(e),
            Self::Shared { fault, .. } => *fault,
            _ => Fault::Other,
        }
    }
}

/// Classifies one sqlx error.
pub fn classify(e: &sqlx::Error) -> Fault {
    match e {
        // No connection in time (the server refuses or does not answer), or the pool is
        // shutting down with the process.
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => Fault::Unavailable,
        // The socket failed: reset, refused, closed mid-statement.
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) => Fault::Unavailable,
        sqlx::Error::Database(db) => db.code().as_deref().map_or(Fault::Other, classify_code),
        _ => Fault::Other,
    }
}

/// PostgreSQL SQLSTATEs and SQLite result codes (both arrive as text).
fn classify_code(code: &str) -> Fault {
    match code {
        // Serialization failure and deadlock; SQLite's SQLITE_BUSY, SQLITE_LOCKED,
        // SQLITE_BUSY_RECOVERY and SQLITE_BUSY_SNAPSHOT.
        "40001" | "40P01" | "5" | "6" | "261" | "517" => Fault::Conflict,
        // admin_shutdown, crash_shutdown, cannot_connect_now (starting up or in recovery),
        // and too_many_connections: the server will take us again shortly.
        "57P01" | "57P02" | "57P03" | "53300" => Fault::Unavailable,
        // Class 08: connection exceptions.
        c if c.len() == 5 && c.starts_with("08") => Fault::Unavailable,
        _ => Fault::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_loss_and_shutdown_are_outages() {
        for code in [
            "08000", "08003", "08006", "08001", "57P01", "57P02", "57P03",
        ] {
            assert_eq!(classify_code(code), Fault::Unavailable, "{code}");
        }
        assert_eq!(classify(&sqlx::Error::PoolTimedOut), Fault::Unavailable);
        assert_eq!(classify(&sqlx::Error::PoolClosed), Fault::Unavailable);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(classify(&sqlx::Error::Io(reset)), Fault::Unavailable);
    }

    #[test]
    fn conflicts_are_told_apart_from_outages_and_bugs() {
        assert_eq!(classify_code("40001"), Fault::Conflict);
        assert_eq!(classify_code("40P01"), Fault::Conflict);
        assert_eq!(classify_code("5"), Fault::Conflict);
        // A unique violation, a syntax error, a missing row: not something a retry fixes.
        assert_eq!(classify_code("23505"), Fault::Other);
        assert_eq!(classify_code("42601"), Fault::Other);
        assert_eq!(classify_code("08"), Fault::Other);
        assert_eq!(classify(&sqlx::Error::RowNotFound), Fault::Other);
        assert_eq!(
            StoreError::UnknownProvider("x".into()).fault(),
            Fault::Other
        );
    }
}
