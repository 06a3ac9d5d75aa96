//! Jobs (protocol v1.2, "Jobs"): the `submit` body (a sweep, trades or equity body with the
//! action it runs), the `{"job": ID}` body of `status` and `cancel` (and of PollFlightInfo's
//! next descriptor and the job's DoGet ticket), and the status a job answers with.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Error, Result, SweepRequest, WalkForwardRequest};

/// What a job runs: the action of the same name on its body.
#[derive(Debug, Clone, PartialEq)]
pub enum JobBody {
    /// The `sweep` action.
    Sweep(SweepRequest),
    /// The `trades` action.
    Trades(SweepRequest),
    /// The `equity` action.
    Equity(SweepRequest),
    /// The `walk_forward` action.
    WalkForward(WalkForwardRequest),
}

impl JobBody {
    /// The action's name.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Sweep(_) => "sweep",
            Self::Trades(_) => "trades",
            Self::Equity(_) => "equity",
            Self::WalkForward(_) => "walk_forward",
        }
    }

    /// The dataset the job reads.
    pub fn dataset(&self) -> &str {
        match self {
            Self::Sweep(r) | Self::Trades(r) | Self::Equity(r) => &r.dataset,
            Self::WalkForward(w) => &w.sweep.dataset,
        }
    }

    /// The reply compression the body asks for.
    pub fn compression(&self) -> Option<crate::Compression> {
        match self {
            Self::Sweep(r) | Self::Trades(r) | Self::Equity(r) => r.compression,
            Self::WalkForward(w) => w.sweep.compression,
        }
    }

    /// A `submit` body: the action's body with `"action"` added (left out for `sweep`).
    pub fn encode(&self) -> Vec<u8> {
        let body = match self {
            Self::Sweep(r) | Self::Trades(r) | Self::Equity(r) => r.encode(),
            Self::WalkForward(w) => w.encode(),
        };
        if matches!(self, Self::Sweep(_)) {
            return body;
        }
        let mut map: Map<String, Value> =
            serde_json::from_slice(&body).expect("a body encodes as a JSON object");
        map.insert("action".into(), self.action().into());
        serde_json::to_vec(&map).expect("a submit body serialises")
    }

    /// Decodes a `submit` body (or a PollFlightInfo command that starts a job): a body of
    /// `sweep`, `walk_forward`, `trades` or `equity` plus `"action"` (default `sweep`).
    ///
    /// # Errors
    /// [`Error`] for a body that is not a JSON object, an unknown `action`, or anything the
    /// action's own decoder refuses.
    pub fn decode(body: &[u8]) -> Result<Self> {
        let text = std::str::from_utf8(body)
            .map_err(|e| Error::new(format!("submit body is not UTF-8: {e}")))?;
        let mut map: Map<String, Value> = match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(Error::new("submit body must be a JSON object")),
            Err(e) => return Err(Error::new(format!("submit body is not valid JSON: {e}"))),
        };
        if map.contains_key("job") {
            return Err(Error::new(
                "a submit body is the body of the action to run; `{\"job\": ID}` is the body of status and cancel",
            ));
        }
        let action = match map.remove("action") {
            None => "sweep".to_owned(),
            Some(Value::String(a)) => a,
            Some(other) => {
                return Err(Error::new(format!(
                    "`action` must be a string (\"sweep\", \"walk_forward\", \"trades\" or \"equity\"), got {other}"
                )));
            }
        };
        let rest = serde_json::to_vec(&map).expect("a JSON object serialises");
        match action.as_str() {
            "sweep" => SweepRequest::decode(&rest).map(Self::Sweep),
            "trades" => SweepRequest::decode(&rest).map(Self::Trades),
            "equity" => SweepRequest::decode(&rest).map(Self::Equity),
            "walk_forward" => WalkForwardRequest::decode(&rest).map(Self::WalkForward),
            other => Err(Error::new(format!(
                "a job runs \"sweep\", \"walk_forward\", \"trades\" or \"equity\", got `action` {other:?}"
            ))),
        }
    }
}

/// The longest job ID accepted in a body or ticket (the server's are 24 characters).
pub const MAX_JOB_ID_LEN: usize = 64;

/// `{"job": ID}`: the body of `status` and `cancel`, the command of the descriptor
/// PollFlightInfo returns, and the ticket of a job's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRef {
    /// The job's opaque ID.
    pub job: String,
}

impl JobRef {
    /// A reference to job `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Self { job: id.into() }
    }

    /// The JSON bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a job reference serialises")
    }

    /// Decodes `{"job": ID}`.
    ///
    /// # Errors
    /// [`Error`] for anything else, or an ID that is empty, too long or not printable ASCII.
    pub fn decode(body: &[u8]) -> Result<Self> {
        let r: Self = serde_json::from_slice(body).map_err(|e| {
            Error::new(format!(
                "expected {{\"job\": ID}} (the ID `submit` answered): {e}"
            ))
        })?;
        let ok = !r.job.is_empty()
            && r.job.len() <= MAX_JOB_ID_LEN
            && r.job.bytes().all(|b| b.is_ascii_graphic());
        if !ok {
            return Err(Error::new(format!("{:?} is not a job ID", r.job)));
        }
        Ok(r)
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for sweep memory.
    Queued,
    /// Running.
    Running,
    /// Finished; its result waits to be fetched.
    Done,
    /// Ended with an error (`error` says which).
    Failed,
    /// Cancelled; nothing is kept.
    Cancelled,
}

impl JobState {
    /// True once the job can change no more.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Cancelled)
    }
}

/// The reply of `status`, `cancel` (and `submit`'s, with only `job`): JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobStatus {
    /// The job's ID.
    pub job: String,
    /// The action it runs (extension).
    pub action: String,
    /// Where it is.
    pub state: JobState,
    /// The share of its work done, 0 to 1; never falls; 1 when done.
    pub progress: f64,
    /// Combos run so far (series x combos; folds too for walk-forward).
    pub combos_done: u64,
    /// Combos it runs in all.
    pub combos_total: u64,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The gRPC code the failure would have had as a direct call (extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl JobStatus {
    /// The JSON bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a status serialises")
    }

    /// Decodes a status reply.
    ///
    /// # Errors
    /// [`Error`] if `body` is not one.
    pub fn decode(body: &[u8]) -> Result<Self> {
        serde_json::from_slice(body).map_err(|e| Error::new(format!("not a job status: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submit_bodies_name_their_action() {
        let b = JobBody::decode(br#"{"dataset": "p", "lengths": [6]}"#).unwrap();
        assert_eq!(b, JobBody::Sweep(SweepRequest::lengths("p", [6])));
        let b =
            JobBody::decode(br#"{"dataset": "p", "lengths": [6], "action": "trades"}"#).unwrap();
        assert_eq!(b, JobBody::Trades(SweepRequest::lengths("p", [6])));
        assert_eq!(JobBody::decode(&b.encode()).unwrap(), b);
        for (body, says) in [
            (
                r#"{"dataset": "p", "lengths": [6], "action": "drop"}"#,
                "\"drop\"",
            ),
            (
                r#"{"dataset": "p", "lengths": [6], "action": 1}"#,
                "must be a string",
            ),
            (r#"{"job": "x"}"#, "status and cancel"),
            (r#"[1]"#, "JSON object"),
            (r#"{"dataset": "p"}"#, "exactly one"),
        ] {
            let e = JobBody::decode(body.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(says), "{body}: {e}");
        }
    }

    #[test]
    fn job_refs_and_statuses_round_trip() {
        let r = JobRef::new("abc123");
        assert_eq!(JobRef::decode(&r.encode()).unwrap(), r);
        for bad in [
            &br#"{"job": ""}"#[..],
            br#"{"job": "a b"}"#,
            br#"{"job": 5}"#,
            br#"{"job": "a", "x": 1}"#,
            b"abc",
        ] {
            assert!(JobRef::decode(bad).is_err());
        }
        let s = JobStatus {
            job: "j".into(),
            action: "sweep".into(),
            state: JobState::Running,
            progress: 0.5,
            combos_done: 40,
            combos_total: 80,
            error: None,
            code: None,
        };
        let text = String::from_utf8(s.encode()).unwrap();
        assert!(text.contains(r#""state":"running""#), "{text}");
        assert!(!text.contains("error"), "{text}");
        assert_eq!(JobStatus::decode(text.as_bytes()).unwrap(), s);
    }
}
