//! The protocol's error: a request that breaks the contract.

/// A request the contract refuses. The text says what is wrong and where (field, index).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(pub String);

impl Error {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// `Result` with the protocol's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
