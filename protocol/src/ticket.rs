//! DoGet tickets: versioned JSON, opaque to clients.

use serde::{Deserialize, Serialize};

use crate::{Error, JobRef, Result, validate_name};

/// A ticket this server issues in a FlightInfo endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ticket {
    /// The rows of a stored dataset: `{"kind": "dataset", "v": 1, "name": NAME}`.
    Dataset {
        /// Ticket format version; 1.
        v: u32,
        /// Dataset name.
        name: String,
    },
    /// A job's result (v1.2): `{"job": ID}`, the job reference itself.
    Job(JobRef),
}

/// The tagged tickets, as they travel.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Tagged {
    Dataset { v: u32, name: String },
}

impl Ticket {
    /// The ticket for a dataset's rows.
    pub fn dataset(name: &str) -> Self {
        Self::Dataset {
            v: 1,
            name: name.to_owned(),
        }
    }

    /// The ticket for job `id`'s result.
    pub fn job(id: &str) -> Self {
        Self::Job(JobRef::new(id))
    }

    /// Serialised form carried in `arrow_flight::Ticket::ticket`.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Self::Dataset { v, name } => serde_json::to_vec(&Tagged::Dataset {
                v: *v,
                name: name.clone(),
            })
            .expect("a ticket serialises"),
            Self::Job(job) => job.encode(),
        }
    }

    /// Parses a ticket this server issued.
    ///
    /// # Errors
    /// [`Error`] for anything else.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| Error::new(format!("not a sweepflight ticket: {e}")))?;
        if value.get("job").is_some() {
            return JobRef::decode(bytes).map(Self::Job);
        }
        let Tagged::Dataset { v, name } = serde_json::from_value(value)
            .map_err(|e| Error::new(format!("not a sweepflight ticket: {e}")))?;
        match v {
            1 => validate_name(&name).map(|()| Self::Dataset { v, name }),
            v => Err(Error::new(format!("unsupported ticket version {v}"))),
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
        assert_eq!(
            t.encode(),
            br#"{"kind":"dataset","v":1,"name":"paper"}"#.to_vec()
        );
        let j = Ticket::job("j-1");
        assert_eq!(j.encode(), br#"{"job":"j-1"}"#.to_vec());
        assert_eq!(Ticket::decode(br#"{"job": "j-1"}"#).unwrap(), j);
        assert!(Ticket::decode(b"paper").is_err());
        assert!(Ticket::decode(br#"{"kind":"dataset","v":2,"name":"p"}"#).is_err());
        assert!(Ticket::decode(br#"{"kind":"dataset","v":1,"name":"../x"}"#).is_err());
        assert!(Ticket::decode(br#"{"job": ""}"#).is_err());
        assert!(Ticket::decode(br#"{"job": "a", "v": 1}"#).is_err());
    }
}
