//! The client's error type.

/// What a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with a gRPC error status; `code` says which kind.
    #[error("{code:?}: {message}")]
    Status {
        /// The gRPC code (NotFound, InvalidArgument, Unauthenticated, ResourceExhausted, ...).
        code: tonic::Code,
        /// The server's message.
        message: String,
    },
    /// The address is not one the client understands.
    #[error("bad server address {uri:?}: {reason}")]
    BadUri {
        /// The address given.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The connection could not be made.
    #[error("cannot connect to {uri}: {source}")]
    Connect {
        /// The address.
        uri: String,
        /// The transport error.
        #[source]
        source: tonic::transport::Error,
    },
    /// The request was refused before sending (for example both or neither of lengths/params).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The server had ended the `session` (at shutdown, or after an error it reported).
    #[error("the sweep session has ended; open a new one")]
    SessionEnded,
    /// The server's reply did not follow the contract.
    #[error("unexpected reply from the server: {0}")]
    Protocol(String),
    /// Reading or writing Arrow data failed.
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),
    /// Reading a local file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// `Result` with the client's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The gRPC code, if the server answered with one.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            Self::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<arrow_flight::error::FlightError> for Error {
    fn from(e: arrow_flight::error::FlightError) -> Self {
        use arrow_flight::error::FlightError as F;
        match e {
            F::Tonic(status) => Self::Status {
                code: status.code(),
                message: status.message().to_owned(),
            },
            F::Arrow(e) => Self::Arrow(e),
            other => Self::Protocol(other.to_string()),
        }
    }
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        Self::Status {
            code: status.code(),
            message: status.message().to_owned(),
        }
    }
}
