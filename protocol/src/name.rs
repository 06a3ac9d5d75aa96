//! Dataset names.

use crate::{Error, Result};

/// Longest dataset name the contract allows.
pub const MAX_NAME_LEN: usize = 128;

/// Checks a dataset name: 1-128 characters from `A-Z a-z 0-9 . _ -`.
///
/// # Errors
/// [`Error`] saying what is wrong.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(Error::new(format!(
            "dataset name must be 1-{MAX_NAME_LEN} characters, got {}",
            name.chars().count()
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Error::new(format!(
            "dataset name {name:?} has character {c:?}; allowed: A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["paper", "a", "A.b_c-9", &"x".repeat(128)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", &"x".repeat(129)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}
