//! A keyed upload's grouping into series: each row's key value, in runs of equal keys, to the
//! series it belongs to, series in order of first appearance.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::{Array, ArrayRef, UInt32Array, downcast_dictionary_array};
use arrow_buffer::ArrowNativeType;
use arrow_schema::{DataType, SchemaRef};

use crate::datasets::Universe;
use crate::{Error, Result};

/// A key value, as hashed for grouping.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyValue {
    Text(String),
    Int(i128),
}

/// Assigns each row of a keyed upload its series, in order of first appearance.
///
/// Rows are recorded as runs of equal keys: a key is hashed once per run, not once per row, and
/// an upload grouped by key (the usual output of a `group_by` or a sort) costs one comparison
/// per row and a handful of runs.
pub(super) struct KeyGrouper {
    column: String,
    /// The key column's index in the schema.
    pub(super) index: usize,
    groups: HashMap<KeyValue, u32>,
    names: Vec<String>,
    /// Runs of equal keys in arrival order: (series, rows). As many as the series iff the
    /// upload is grouped.
    runs: Vec<(u32, usize)>,
}

/// Runs of equal neighbours: (value, first index, length).
fn runs_of<T: PartialEq>(values: impl Iterator<Item = T>) -> Vec<(T, usize, usize)> {
    let mut runs: Vec<(T, usize, usize)> = Vec::new();
    for (i, v) in values.enumerate() {
        match runs.last_mut() {
            Some((last, _, len)) if *last == v => *len += 1,
            _ => runs.push((v, i, 1)),
        }
    }
    runs
}

/// [`runs_of`] for a slice of plain values: each run's end found by a tight scan, as key
/// columns hold long runs (a series is thousands of rows).
fn slice_runs<T: PartialEq + Copy>(values: &[T]) -> Vec<(T, usize, usize)> {
    let mut runs = Vec::new();
    let mut at = 0;
    while let Some(&v) = values.get(at) {
        let len = values[at..]
            .iter()
            .position(|&x| x != v)
            .unwrap_or(values.len() - at);
        runs.push((v, at, len));
        at += len;
    }
    runs
}

impl KeyGrouper {
    pub(super) fn new(schema: &SchemaRef, column: &str) -> Result<Self> {
        let index = schema.index_of(column).map_err(|_| {
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            Error::invalid(format!(
                "the key column `{column}` is not in the schema (columns: {names:?})"
            ))
        })?;
        let t = schema.field(index).data_type();
        let text =
            |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
        let ok = text(t) || t.is_integer() || matches!(t, DataType::Dictionary(_, v) if text(v));
        if !ok {
            return Err(Error::invalid(format!(
                "the key column `{column}` has type {t}; expected utf8, large_utf8, a dictionary of strings or an integer type"
            )));
        }
        Ok(Self {
            column: column.to_owned(),
            index,
            groups: HashMap::new(),
            names: Vec::new(),
            runs: Vec::new(),
        })
    }

    /// Assigns the rows of a batch's key column `col` (the upload's rows `first_row..`).
    pub(super) fn push(&mut self, col: &ArrayRef, first_row: usize) -> Result<()> {
        if let Some(nulls) = col.logical_nulls()
            && let Some(row) = (0..col.len()).find(|&i| nulls.is_null(i))
        {
            return Err(Error::invalid(format!(
                "key column `{}` row {}: is null",
                self.column,
                first_row + row
            )));
        }
        match col.data_type() {
            DataType::Utf8 => self.push_texts(runs_of(col.as_string::<i32>().iter()), first_row),
            DataType::LargeUtf8 => {
                self.push_texts(runs_of(col.as_string::<i64>().iter()), first_row)
            }
            DataType::Utf8View => self.push_texts(runs_of(col.as_string_view().iter()), first_row),
            DataType::Dictionary(..) => {
                let dict = col.as_any_dictionary();
                let values = arrow_cast::cast(dict.values(), &DataType::Utf8)
                    .map_err(|e| Error::internal("read the key dictionary", e))?;
                let values = values.as_string::<i32>();
                // Runs of equal dictionary indexes, read in their own integer type (widening
                // them first would allocate eight bytes a row), then each run's text. The
                // decoder has checked every index against the dictionary.
                let index_runs: Vec<(usize, usize, usize)> = downcast_dictionary_array!(
                    col => slice_runs(col.keys().values())
                        .into_iter()
                        .map(|(k, at, len)| (k.as_usize(), at, len))
                        .collect(),
                    t => unreachable!("matched a dictionary, not {t}")
                );
                let runs = index_runs
                    .into_iter()
                    .map(|(k, at, len)| (values.is_valid(k).then(|| values.value(k)), at, len))
                    .collect();
                self.push_texts(runs, first_row)
            }
            DataType::UInt64 => {
                let ints = col.as_primitive::<UInt64Type>().values().iter();
                self.push_ints(runs_of(ints.map(|&v| i128::from(v))));
                Ok(())
            }
            _ => {
                let ints = arrow_cast::cast(col, &DataType::Int64)
                    .map_err(|e| Error::internal("widen the key column", e))?;
                let ints = ints.as_primitive::<Int64Type>().values().iter();
                self.push_ints(runs_of(ints.map(|&v| i128::from(v))));
                Ok(())
            }
        }
    }

    fn push_texts(
        &mut self,
        runs: Vec<(Option<&str>, usize, usize)>,
        first_row: usize,
    ) -> Result<()> {
        for (text, at, len) in runs {
            let text = match text {
                Some("") | None => {
                    return Err(Error::invalid(format!(
                        "key column `{}` row {}: is {}",
                        self.column,
                        first_row + at,
                        if text.is_none() { "null" } else { "empty" }
                    )));
                }
                Some(t) => t,
            };
            let id = self.id_of(KeyValue::Text(text.to_owned()), || text.to_owned());
            self.record(id, len);
        }
        Ok(())
    }

    fn push_ints(&mut self, runs: Vec<(i128, usize, usize)>) {
        for (v, _, len) in runs {
            let id = self.id_of(KeyValue::Int(v), || v.to_string());
            self.record(id, len);
        }
    }

    fn id_of(&mut self, key: KeyValue, name: impl FnOnce() -> String) -> u32 {
        let next = self.names.len() as u32;
        *self.groups.entry(key).or_insert_with(|| {
            self.names.push(name());
            next
        })
    }

    fn record(&mut self, id: u32, rows: usize) {
        match self.runs.last_mut() {
            Some((last, len)) if *last == id => *len += rows,
            _ => self.runs.push((id, rows)),
        }
    }

    /// The series of upload row `row`, and the row's index within it.
    pub(super) fn locate(&self, row: usize) -> (&str, usize) {
        let mut start = 0;
        let mut before: HashMap<u32, usize> = HashMap::new();
        for &(id, len) in &self.runs {
            if row < start + len {
                let within = before.get(&id).copied().unwrap_or(0) + (row - start);
                return (&self.names[id as usize], within);
            }
            *before.entry(id).or_default() += len;
            start += len;
        }
        unreachable!("row {row} was recorded")
    }

    /// The series, and the order of rows that groups them if they did not arrive grouped (a
    /// stable counting sort: each series' rows in arrival order; `None` when they did).
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] for an interleaved upload past `u32` rows.
    pub(super) fn grouping(self) -> Result<(Universe, Option<UInt32Array>)> {
        let mut counts = vec![0usize; self.names.len()];
        for &(id, len) in &self.runs {
            counts[id as usize] += len;
        }
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        offsets.push(0);
        for c in &counts {
            offsets.push(offsets.last().copied().unwrap_or(0) + c);
        }
        let universe = Universe::new(self.column, self.names, offsets.clone());
        if self.runs.len() == counts.len() {
            return Ok((universe, None));
        }
        let total = offsets.last().copied().unwrap_or(0);
        if u32::try_from(total).is_err() {
            return Err(Error::ResourceExhausted(
                "an interleaved keyed upload is limited to 4,294,967,295 rows; send it grouped by key".into(),
            ));
        }
        let mut next = offsets;
        let mut order = vec![0u32; total];
        let mut row = 0u32;
        for &(id, len) in &self.runs {
            let slot = next[id as usize];
            for (k, o) in order[slot..slot + len].iter_mut().enumerate() {
                *o = row + k as u32;
            }
            next[id as usize] += len;
            row += len as u32;
        }
        Ok((universe, Some(UInt32Array::from(order))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_equal_neighbours() {
        assert_eq!(
            slice_runs(&[4u8, 4, 4, 1, 4, 4]),
            [(4, 0, 3), (1, 3, 1), (4, 4, 2)]
        );
        assert!(slice_runs::<i16>(&[]).is_empty());
    }
}
