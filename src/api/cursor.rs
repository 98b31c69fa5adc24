//! Opaque page cursors: a sort key and an id, base64url-encoded so clients treat them as
//! tokens and do not build them by hand.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::error::ApiError;

/// Encodes a (key, id) pair as a cursor token.
pub fn encode(key: i64, id: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{key}:{id}"))
}

/// Decodes a token made by [`encode`]; anything else is a 400 naming `cursor`.
pub fn decode(token: &str) -> Result<(i64, i64), ApiError> {
    let bad = || ApiError::bad_request("cursor", "is not a cursor this service issued");
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (key, id) = text.split_once(':').ok_or_else(bad)?;
    Ok((
        key.parse().map_err(|_| bad())?,
        id.parse().map_err(|_| bad())?,
    ))
}

/// Encodes a text sort key as a cursor token (for lists paged by name or time and name).
pub fn encode_key(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("k:{key}"))
}

/// Decodes a token made by [`encode_key`]; anything else is a 400 naming `cursor`.
pub fn decode_key(token: &str) -> Result<String, ApiError> {
    let bad = || ApiError::bad_request("cursor", "is not a cursor this service issued");
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    text.strip_prefix("k:").map(str::to_owned).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_forgeries() {
        assert_eq!(decode(&encode(21_957_642, 7)).unwrap(), (21_957_642, 7));
        assert!(decode("not-a-cursor").is_err());
        assert!(decode(&URL_SAFE_NO_PAD.encode("1:x")).is_err());
    }

    #[test]
    fn key_cursors_round_trip_and_reject_other_tokens() {
        assert_eq!(decode_key(&encode_key("gpu-t4")).unwrap(), "gpu-t4");
        assert!(decode_key(&encode(1, 2)).is_err());
        assert!(decode_key("%%").is_err());
    }
}
