//! The server's error type and its single conversion into a gRPC status.
//!
//! Every handler returns [`Result`]; [`From<Error> for tonic::Status`] is the only place an
//! error becomes a status code. The variants say whose fault it is: what the client sent
//! (INVALID_ARGUMENT, NOT_FOUND), a limit (RESOURCE_EXHAUSTED: a configured limit, a busy server,
//! a full disk) or the server itself (INTERNAL, with the reason). Arrow errors have no blanket
//! conversion: the same `ArrowError` type means bad client data when decoding an upload and a
//! server fault when writing a file, so each call site says which.

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
    /// Undecodable Arrow data from the client.
    #[error("invalid Arrow data: {0}")]
    ClientData(ArrowError),
    /// No dataset by that name.
    #[error("dataset `{0}` not found")]
    DatasetNotFound(String),
    /// A keyed dataset has no series by that name.
    #[error("dataset `{dataset}` has no series {series:?}")]
    SeriesNotFound {
        /// The dataset.
        dataset: String,
        /// The series asked for.
        series: String,
    },
    /// No job by that ID (never submitted, or expired).
    #[error("job {0:?} not found (unknown, or forgotten --job-ttl after it ended)")]
    JobNotFound(String),
    /// A call that needs the server in another state: a job's result before it is done.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The error a background job ended with, as its code and message (its DoGet answers it).
    #[error("{1}")]
    Job(tonic::Code, String),
    /// An action type the server does not know.
    #[error("unknown action `{0}`; ListActions lists the known ones")]
    UnknownAction(String),
    /// Missing or wrong credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// A limit of the server's configuration was hit, or it is too busy to queue more work.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The kernel refused the request or was cancelled.
    #[error(transparent)]
    Kernel(#[from] sweepflight_kernel::Error),
    /// A status that arrived from the client's stream, or a transport failure.
    #[error(transparent)]
    Status(#[from] Box<tonic::Status>),
    /// A verb this server does not implement.
    #[error("{0} is not supported by sweepflight")]
    Unimplemented(&'static str),
    /// The data directory could not be read or written.
    #[error("{context}: {source}")]
    Storage {
        /// What the server was doing.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The server could not bind, accept or serve (start-up and transport failures).
    #[error("{0}")]
    Transport(String),
    /// A bug or an environment failure on the server side.
    #[error("internal error: {0}")]
    Internal(String),
}

/// `Result` with the server's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::Storage`].
    pub fn storage(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Storage {
            context: context.into(),
            source,
        }
    }

    /// An Arrow failure while reading or writing the data directory: its I/O error, if it has
    /// one, is a storage error (a full disk stays RESOURCE_EXHAUSTED); anything else is ours.
    pub fn storage_arrow(context: impl Into<String>, e: ArrowError) -> Self {
        match e {
            ArrowError::IoError(_, source) => Self::storage(context, source),
            other => Self::Internal(format!("{}: {other}", context.into())),
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::InvalidArgument(msg.into())
    }

    /// A server-side failure (encoding a reply, a worker that died) with its reason.
    pub fn internal(what: &str, e: impl std::fmt::Display) -> Self {
        Self::Internal(format!("{what}: {e}"))
    }

    /// True if the disk (or a quota, or a file-size limit) is full: the operator's limit, not
    /// a server fault.
    fn disk_full(source: &std::io::Error) -> bool {
        matches!(
            source.raw_os_error(),
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
        )
    }
}

impl From<sweepflight_protocol::Error> for Error {
    fn from(e: sweepflight_protocol::Error) -> Self {
        Self::InvalidArgument(e.0)
    }
}

/// Errors of an inbound Flight stream: what the client sent.
impl From<FlightError> for Error {
    fn from(e: FlightError) -> Self {
        match e {
            FlightError::Tonic(status) => Self::Status(status),
            FlightError::Arrow(e) => Self::ClientData(e),
            FlightError::ProtocolError(m) | FlightError::DecodeError(m) => {
                Self::InvalidArgument(format!("invalid Flight stream: {m}"))
            }
            other => Self::Internal(other.to_string()),
        }
    }
}

impl Error {
    /// The gRPC code this error answers with.
    pub fn code(&self) -> tonic::Code {
        use sweepflight_kernel::Error as K;
        use tonic::Code;
        match self {
            Self::InvalidArgument(_) | Self::BadValue { .. } | Self::ClientData(_) => {
                Code::InvalidArgument
            }
            Self::Kernel(
                K::InvalidWindow { .. }
                | K::InvalidFee(_)
                | K::InvalidParam { .. }
                | K::InvalidOption { .. }
                | K::Formula { .. }
                | K::Strategy(_),
            ) => Code::InvalidArgument,
            Self::Kernel(K::Cancelled) => Code::Cancelled,
            Self::DatasetNotFound(_) | Self::SeriesNotFound { .. } | Self::JobNotFound(_) => {
                Code::NotFound
            }
            Self::FailedPrecondition(_) => Code::FailedPrecondition,
            Self::Job(code, _) => *code,
            Self::UnknownAction(_) | Self::Unimplemented(_) => Code::Unimplemented,
            Self::ResourceExhausted(_) => Code::ResourceExhausted,
            Self::Unauthenticated(_) => Code::Unauthenticated,
            Self::Status(status) => status.code(),
            Self::Storage { source, .. } if Self::disk_full(source) => Code::ResourceExhausted,
            Self::Storage { .. } | Self::Transport(_) | Self::Internal(_) => Code::Internal,
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        match e {
            Error::Status(status) => *status,
            e => Self::new(e.code(), e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn codes_say_whose_fault_it_is() {
        let io = |errno| std::io::Error::from_raw_os_error(errno);
        let cases = [
            (Error::invalid("x"), Code::InvalidArgument),
            (Error::DatasetNotFound("p".into()), Code::NotFound),
            (
                Error::SeriesNotFound {
                    dataset: "u".into(),
                    series: "Z".into(),
                },
                Code::NotFound,
            ),
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
            (Error::JobNotFound("j".into()), Code::NotFound),
            (
                Error::FailedPrecondition("x".into()),
                Code::FailedPrecondition,
            ),
            (
                Error::Job(Code::ResourceExhausted, "x".into()),
                Code::ResourceExhausted,
            ),
            (
                FlightError::DecodeError("x".into()).into(),
                Code::InvalidArgument,
            ),
            (
                FlightError::Arrow(ArrowError::ParseError("x".into())).into(),
                Code::InvalidArgument,
            ),
            (
                Error::storage("write", io(libc::ENOSPC)),
                Code::ResourceExhausted,
            ),
            (
                Error::storage("write", io(libc::EDQUOT)),
                Code::ResourceExhausted,
            ),
            (
                Error::storage("write", io(libc::EFBIG)),
                Code::ResourceExhausted,
            ),
            (Error::storage("write", io(libc::EACCES)), Code::Internal),
            (
                Error::storage_arrow("write", ArrowError::IoError("x".into(), io(libc::ENOSPC))),
                Code::ResourceExhausted,
            ),
            (
                Error::storage_arrow("write", ArrowError::ComputeError("x".into())),
                Code::Internal,
            ),
            (Error::Internal("bug".into()), Code::Internal),
        ];
        for (e, code) in cases {
            let what = e.to_string();
            assert_eq!(tonic::Status::from(e).code(), code, "{what}");
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
