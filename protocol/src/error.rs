//! The protocol's error: a request that breaks the contract.

/// A request the contract refuses. The text says what is wrong and where (field, index).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(pub String, pub Option<String>);

impl Error {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into(), None)
    }

    /// An error about parameter `name`, which got no values (a `grid` or `sample` without it,
    /// a `params` tuple too short): a server that knows the dataset adds a hint when the name
    /// looks like one of its columns (docs/language.md v1.4).
    pub fn unvalued(msg: impl Into<String>, name: &str) -> Self {
        Self(msg.into(), Some(name.to_owned()))
    }

    /// The parameter that got no values, for [`Error::unvalued`] errors.
    pub fn unvalued_param(&self) -> Option<&str> {
        self.1.as_deref()
    }

    /// The same error with its message changed by `f`.
    #[must_use]
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        Self(f(self.0), self.1)
    }
}

/// `Result` with the protocol's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
