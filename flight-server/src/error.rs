//! The server's error type and its single conversion into a gRPC status.
//!
//! Every handler returns [`Result`]; [`From<Error> for tonic::Status`] is the only place an
//! error becomes a status code, so codes stay consistent across verbs.

use arrow_flight::error::FlightError;
use arrow_schema::ArrowError;

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request the contract does not allow: bad descriptor, body, name, ticket, schema or value.
    #[error("{0}")]
    InvalidArgument(String),
    /// A column value that breaks the dataset rules (null, not finite, not > 0).
    #[error("column `{column}` row {row}: {problem}")]
    BadValue {
        /// The column checked (`close`).
        column: String,
        /// Zero-based row in the whole upload.
        row: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// No dataset by that name.
    #[error("dataset `{0}` not found")]
    DatasetNotFound(String),
    /// An action type the server does not know.
    #[error("unknown action `{0}`; ListActions lists the known ones")]
    UnknownAction(String),
    /// Missing or wrong credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// A limit of the server's configuration was hit.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The kernel refused the request or was cancelled.
    #[error(transparent)]
    Kernel(#[from] sweepflight_kernel::Error),
    /// Malformed Arrow IPC from the client.
    #[error("invalid Arrow data: {0}")]
    Arrow(#[from] ArrowError),
    /// A status that arrived from the client's stream, or a transport failure.
    #[error(transparent)]
    Status(#[from] Box<tonic::Status>),
    /// A verb this server does not implement.
    #[error("{0} is not supported by sweepflight")]
    Unimplemented(&'static str),
    /// The data directory could not be read or written.
    #[error("{context}: {source}")]
    Io {
        /// What the server was doing.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A bug or an environment failure on the server side.
    #[error("internal error: {0}")]
    Internal(String),
}

/// `Result` with the server's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::Io`].
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::InvalidArgument(msg.into())
    }
}

impl From<FlightError> for Error {
    fn from(e: FlightError) -> Self {
        match e {
            FlightError::Tonic(status) => Self::Status(status),
            FlightError::Arrow(e) => Self::Arrow(e),
            // Decoder complaints are about what the client sent.
            FlightError::ProtocolError(m) | FlightError::DecodeError(m) => {
                Self::InvalidArgument(format!("invalid Flight stream: {m}"))
            }
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        use sweepflight_kernel::Error as K;
        let msg = e.to_string();
        match e {
            Error::InvalidArgument(_) | Error::BadValue { .. } | Error::Arrow(_) => {
                Self::invalid_argument(msg)
            }
            Error::Kernel(K::InvalidWindow { .. } | K::InvalidFee(_)) => {
                Self::invalid_argument(msg)
            }
            Error::Kernel(K::Cancelled) => Self::cancelled(msg),
            Error::DatasetNotFound(_) => Self::not_found(msg),
            Error::UnknownAction(_) | Error::Unimplemented(_) => Self::unimplemented(msg),
            Error::ResourceExhausted(_) => Self::resource_exhausted(msg),
            Error::Unauthenticated(_) => Self::unauthenticated(msg),
            Error::Status(status) => *status,
            // A full disk is a limit the caller can act on (drop datasets); other I/O
            // failures are the server's.
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
                Self::resource_exhausted(msg)
            }
            Error::Internal(_) | Error::Io { .. } => Self::internal(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn codes() {
        let cases = [
            (Error::invalid("x"), Code::InvalidArgument),
            (Error::DatasetNotFound("p".into()), Code::NotFound),
            (
                Error::ResourceExhausted("x".into()),
                Code::ResourceExhausted,
            ),
            (
                Error::Kernel(sweepflight_kernel::Error::Cancelled),
                Code::Cancelled,
            ),
            (
                Error::Kernel(sweepflight_kernel::Error::InvalidFee(-1.0)),
                Code::InvalidArgument,
            ),
            (Error::UnknownAction("x".into()), Code::Unimplemented),
            (
                FlightError::DecodeError("x".into()).into(),
                Code::InvalidArgument,
            ),
        ];
        for (e, code) in cases {
            assert_eq!(tonic::Status::from(e).code(), code);
        }
    }

    #[test]
    fn bad_value_names_column_and_row() {
        let e = Error::BadValue {
            column: "close".into(),
            row: 17,
            problem: "is NaN",
        };
        assert_eq!(
            tonic::Status::from(e).message(),
            "column `close` row 17: is NaN"
        );
    }
}
