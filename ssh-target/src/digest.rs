//! SHA-256 as this project spells it: lowercase hex, compared as a string, so
//! that no other spelling of the same hash is accepted anywhere.

use sha2::Digest;

/// The SHA-256 of `bytes`, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `s` is lowercase hex digits only (an empty `s` is).
pub fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `s` is a SHA-256 as [`sha256_hex`] spells it: 64 lowercase hex
/// digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && is_lower_hex(s)
}

/// A SHA-256 in its one spelling, as an approval names it: made only from
/// the bytes it is the hash of ([`Sha256::of`]) or from text already in that
/// spelling ([`Sha256::parse`]), so that an approval can never hold another
/// spelling of the same hash, and two are equal exactly when their hashes are.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256(String);

impl Sha256 {
    /// The SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Sha256 {
        Sha256(sha256_hex(bytes))
    }

    /// `text` as a SHA-256, when it is 64 lowercase hex digits.
    pub fn parse(text: &str) -> Option<Sha256> {
        is_sha256_hex(text).then(|| Sha256(text.to_string()))
    }

    /// The 64 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl core::fmt::Display for Sha256 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_of_a_hash() {
        let empty = sha256_hex(b"");
        assert_eq!(
            empty,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(is_sha256_hex(&empty));
        assert!(!is_sha256_hex(&empty.to_uppercase()));
        assert!(!is_sha256_hex(&empty[1..]));
        assert!(!is_sha256_hex(&format!("{}g", &empty[1..])));
        assert_eq!(Sha256::parse(&empty), Some(Sha256::of(b"")));
        assert_eq!(Sha256::of(b"").to_string(), empty);
        assert_eq!(Sha256::parse(&empty.to_uppercase()), None);
    }
}
