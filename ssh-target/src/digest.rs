//! SHA-256 as this project spells it: lowercase hex, compared as a string, so
//! that no other spelling of the same hash is accepted anywhere.

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
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
    }
}
