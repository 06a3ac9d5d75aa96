//! DoGet tickets: versioned JSON, opaque to clients.

use serde::{Deserialize, Serialize};

use crate::{Error, Result, validate_name};

/// A ticket this server issues in a FlightInfo endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Ticket {
    /// The rows of a stored dataset.
    Dataset {
        /// Ticket format version; 1.
        v: u32,
        /// Dataset name.
        name: String,
    },
}

impl Ticket {
    /// The ticket for a dataset's rows.
    pub fn dataset(name: &str) -> Self {
        Self::Dataset {
            v: 1,
            name: name.to_owned(),
        }
    }

    /// Serialised form carried in `arrow_flight::Ticket::ticket`.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a ticket serialises")
    }

    /// Parses a ticket this server issued.
    ///
    /// # Errors
    /// [`Error`] for anything else.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let t: Self = serde_json::from_slice(bytes)
            .map_err(|e| Error::new(format!("not a sweepflight ticket: {e}")))?;
        match &t {
            Self::Dataset { v: 1, name } => validate_name(name).map(|()| t),
            Self::Dataset { v, .. } => Err(Error::new(format!("unsupported ticket version {v}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let t = Ticket::dataset("paper");
        assert_eq!(Ticket::decode(&t.encode()).unwrap(), t);
        assert!(Ticket::decode(b"paper").is_err());
        assert!(Ticket::decode(br#"{"kind":"dataset","v":2,"name":"p"}"#).is_err());
        assert!(Ticket::decode(br#"{"kind":"dataset","v":1,"name":"../x"}"#).is_err());
    }
}
