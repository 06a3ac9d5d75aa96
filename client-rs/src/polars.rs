//! Polars interop (feature `polars`): a `DataFrame` becomes Arrow record batches through the
//! Arrow C Data Interface, so its column buffers are shared, not copied, on the way to the
//! upload encoder.
//!
//! Polars carries its own Arrow implementation (`polars-arrow`); both it and arrow-rs speak
//! the C Data Interface, whose structs have one fixed C layout. That handoff is the only
//! `unsafe` in the client.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, make_array};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{Field, Schema};
use polars::prelude::{CompatLevel, DataFrame};

use crate::{Client, Error, PutSummary, Result};

impl Client {
    /// Stores a Polars `DataFrame` (which must have a `close` column) as dataset `name`.
    ///
    /// # Errors
    /// As [`Client::put`], or [`Error::InvalidRequest`] for a frame whose columns Arrow
    /// cannot represent.
    pub async fn put_polars(&mut self, name: &str, frame: &DataFrame) -> Result<PutSummary> {
        self.put(name, to_record_batches(frame)?).await
    }
}

/// The frame's rows as arrow-rs record batches, one per aligned Polars chunk. Standard Arrow
/// types (`CompatLevel::oldest`: large strings rather than string views), so any Flight
/// client reading the dataset back understands them.
///
/// # Errors
/// [`Error::InvalidRequest`] if a column cannot cross the C Data Interface.
pub fn to_record_batches(frame: &DataFrame) -> Result<Vec<RecordBatch>> {
    // iter_chunks needs every column chunked the same way; cloning a frame clones Arcs.
    let mut frame = frame.clone();
    frame.align_chunks_par();
    let mut schema: Option<Arc<Schema>> = None;
    let mut batches = Vec::new();
    for chunk in frame.iter_chunks(CompatLevel::oldest(), false) {
        let (chunk_schema, arrays) = chunk.into_schema_and_arrays();
        let fields: Vec<_> = chunk_schema.iter_values().collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(arrays.len());
        let mut arrow_fields = Vec::with_capacity(arrays.len());
        for (field, array) in fields.into_iter().zip(arrays) {
            let (f, a) = export(field, array)?;
            arrow_fields.push(f);
            columns.push(a);
        }
        let schema = schema
            .get_or_insert_with(|| Arc::new(Schema::new(arrow_fields)))
            .clone();
        batches.push(RecordBatch::try_new(schema, columns)?);
    }
    Ok(batches)
}

fn export(
    field: &polars_arrow::datatypes::Field,
    array: Box<dyn polars_arrow::array::Array>,
) -> Result<(Field, ArrayRef)> {
    let c_schema = polars_arrow::ffi::export_field_to_c(field);
    let c_array = polars_arrow::ffi::export_array_to_c(array);
    // SAFETY: both pairs of types are `#[repr(C)]` definitions of the Arrow C Data Interface
    // structs (ArrowSchema, ArrowArray), field for field, so they have the same size and
    // layout. Ownership moves with the bytes: the release callbacks polars installed are
    // called exactly once, by arrow-rs, when the imported array is dropped.
    let (c_schema, c_array) = unsafe {
        (
            std::mem::transmute::<polars_arrow::ffi::ArrowSchema, FFI_ArrowSchema>(c_schema),
            std::mem::transmute::<polars_arrow::ffi::ArrowArray, FFI_ArrowArray>(c_array),
        )
    };
    let arrow_field = Field::try_from(&c_schema)
        .map_err(|e| Error::InvalidRequest(format!("column {}: {e}", field.name)))?;
    // SAFETY: `c_array` is a valid exported array described by `c_schema` (above).
    let data = unsafe { arrow_array::ffi::from_ffi(c_array, &c_schema) }
        .map_err(|e| Error::InvalidRequest(format!("column {}: {e}", field.name)))?;
    Ok((arrow_field, make_array(data)))
}
