//! DoPut descriptors and what the server answers about datasets: PutResult and FlightInfo
//! metadata.

use arrow_flight::FlightDescriptor;
use arrow_flight::flight_descriptor::DescriptorType;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Error, Result, validate_name};

/// Where a DoPut goes: a dataset, and for a universe the column that keys its series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutTarget {
    /// The dataset name.
    pub dataset: String,
    /// The key column (v1.1): rows with the same value form one series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl PutTarget {
    /// A v1 put of one series.
    pub fn dataset(name: impl Into<String>) -> Self {
        Self {
            dataset: name.into(),
            key: None,
        }
    }

    /// A keyed put: series grouped by `key`.
    pub fn keyed(name: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            dataset: name.into(),
            key: Some(key.into()),
        }
    }

    /// Decodes a DoPut descriptor: PATH `[name]`, or CMD JSON `{"dataset": NAME, "key": COLUMN}`
    /// (without `"key"`, a v1 put).
    ///
    /// # Errors
    /// [`Error`] for any other descriptor, a bad name or an empty key.
    pub fn from_descriptor(d: &FlightDescriptor) -> Result<Self> {
        if d.r#type() == DescriptorType::Path {
            return dataset_path(d).map(Self::dataset);
        }
        let target: Self = serde_json::from_slice(&d.cmd).map_err(|e| {
            Error::new(format!(
                "a DoPut descriptor is PATH [name], or CMD JSON {{\"dataset\": NAME, \"key\": COLUMN}}; this CMD is not: {e}"
            ))
        })?;
        validate_name(&target.dataset)?;
        if target.key.as_deref() == Some("") {
            return Err(Error::new("`key` must name a column"));
        }
        Ok(target)
    }

    /// The descriptor: PATH `[name]` for a v1 put (every Flight server's convention), CMD for
    /// a keyed one.
    pub fn to_descriptor(&self) -> FlightDescriptor {
        match &self.key {
            None => FlightDescriptor::new_path(vec![self.dataset.clone()]),
            Some(_) => {
                FlightDescriptor::new_cmd(serde_json::to_vec(self).expect("a target serialises"))
            }
        }
    }
}

/// The dataset name of a PATH descriptor `[name]` (GetFlightInfo, GetSchema, v1 DoPut).
///
/// # Errors
/// [`Error`] for any other descriptor or a bad name.
pub fn dataset_path(d: &FlightDescriptor) -> Result<String> {
    if d.r#type() != DescriptorType::Path {
        return Err(Error::new(
            "expected a PATH descriptor [name], got a CMD one",
        ));
    }
    match d.path.as_slice() {
        [name] => {
            validate_name(name)?;
            Ok(name.clone())
        }
        p => Err(Error::new(format!(
            "expected a PATH descriptor with exactly one element [name], got {} elements",
            p.len()
        ))),
    }
}

/// The JSON app_metadata of a put's PutResult.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutSummary {
    /// Dataset name.
    pub dataset: String,
    /// Rows stored.
    pub rows: u64,
    /// In-memory size in bytes.
    pub bytes: u64,
    /// 1 for a new name, +1 per replacement.
    pub version: u64,
    /// Number of series of a keyed put (v1.1); absent for a v1 put.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<u64>,
    /// The usable recognised columns (v1.3), in the order open, high, low, close, volume,
    /// time.
    #[serde(default)]
    pub columns: Vec<String>,
    /// Each recognised column that breaks its rules, and why (v1.3): its first bad row.
    #[serde(default)]
    pub unusable: BTreeMap<String, String>,
}

/// The JSON app_metadata of a dataset's FlightInfo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetMeta {
    /// The dataset's version (extension).
    pub version: u64,
    /// The key column of a keyed dataset (v1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its number of series (v1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<u64>,
    /// The usable recognised columns (v1.3), as [`PutSummary::columns`].
    #[serde(default)]
    pub columns: Vec<String>,
    /// The unusable recognised columns and why (v1.3), as [`PutSummary::unusable`].
    #[serde(default)]
    pub unusable: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors() {
        let path =
            |p: &[&str]| FlightDescriptor::new_path(p.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            PutTarget::from_descriptor(&path(&["paper"])).unwrap(),
            PutTarget::dataset("paper")
        );
        for bad in [path(&["a", "b"]), path(&[]), path(&["a b"])] {
            assert!(PutTarget::from_descriptor(&bad).is_err());
        }
        let cmd = |s: &str| FlightDescriptor::new_cmd(s.as_bytes().to_vec());
        assert_eq!(
            PutTarget::from_descriptor(&cmd(r#"{"dataset": "u", "key": "symbol"}"#)).unwrap(),
            PutTarget::keyed("u", "symbol")
        );
        assert_eq!(
            PutTarget::from_descriptor(&cmd(r#"{"dataset": "u"}"#)).unwrap(),
            PutTarget::dataset("u")
        );
        for bad in [
            "paper",
            r#"{"key": "s"}"#,
            r#"{"dataset": "u", "key": ""}"#,
            r#"{"dataset": "u", "key": 3}"#,
            r#"{"dataset": "u", "extra": 1}"#,
            r#"{"dataset": "a/b"}"#,
        ] {
            assert!(PutTarget::from_descriptor(&cmd(bad)).is_err(), "{bad}");
        }
        for t in [PutTarget::dataset("p"), PutTarget::keyed("u", "sym")] {
            assert_eq!(PutTarget::from_descriptor(&t.to_descriptor()).unwrap(), t);
        }
        assert!(dataset_path(&cmd("paper")).is_err());
    }

    #[test]
    fn metadata_leaves_v1_fields_alone() {
        let v1 = PutSummary {
            dataset: "p".into(),
            rows: 3,
            bytes: 24,
            version: 1,
            series: None,
            columns: vec!["close".into()],
            unusable: BTreeMap::new(),
        };
        // v1's fields keep their names and places; v1.3's follow.
        assert_eq!(
            serde_json::to_string(&v1).unwrap(),
            r#"{"dataset":"p","rows":3,"bytes":24,"version":1,"columns":["close"],"unusable":{}}"#
        );
        let meta = DatasetMeta {
            version: 2,
            key: None,
            series: None,
            columns: vec!["close".into()],
            unusable: BTreeMap::from([("high".into(), "row 1: null".into())]),
        };
        assert_eq!(
            serde_json::to_string(&meta).unwrap(),
            r#"{"version":2,"columns":["close"],"unusable":{"high":"row 1: null"}}"#
        );
        // A v1 server's JSON still reads.
        let old: PutSummary =
            serde_json::from_str(r#"{"dataset":"p","rows":3,"bytes":24,"version":1}"#).unwrap();
        assert!(old.columns.is_empty());
    }
}
