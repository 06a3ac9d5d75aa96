//! The kernel's error type: what a caller can get wrong, and cancellation.

/// Everything the kernel can refuse or stop with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A window length (or the length a combo is derived from) below 1.
    #[error("window `{field}` must be >= 1, got {value}")]
    InvalidWindow {
        /// Which of the combo's windows (`length`, `half`, `full`, `sqrt`, `p3`, `p2`, `p`).
        field: &'static str,
        /// The value given.
        value: i64,
    },
    /// A fee that is negative, NaN or infinite.
    #[error("fee must be finite and >= 0, got {0}")]
    InvalidFee(f64),
    /// A strategy parameter outside its range (strategies.md).
    #[error("parameter `{param}` {message}")]
    InvalidParam {
        /// The parameter's wire name (`params` for a tuple of the wrong arity).
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// An execution option outside its range (`stop_loss`, `take_profit`).
    #[error("`{name}` {message}")]
    InvalidOption {
        /// The option's wire name.
        name: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A formula the language refuses (docs/language.md): which field, where, and why.
    #[error("{field}: {message} (at byte {offset})")]
    Formula {
        /// The body field the formula came from (`long`, `stop_loss`, `constraint`...).
        field: String,
        /// 0-based byte offset into the formula.
        offset: usize,
        /// What is wrong, as a user can act on it.
        message: String,
    },
    /// A strategy whose formulas are fine one by one but not together (none of `long` and
    /// `short`, a column the series lacks).
    #[error("{0}")]
    Strategy(String),
    /// The caller's cancellation check answered true before the sweep finished.
    #[error("sweep cancelled")]
    Cancelled,
}

/// `Result` with the kernel's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
