//! Durable datasets: one Arrow IPC file per dataset under `--data-dir`, written so that a crash
//! at any instant leaves the old or the new version on disk, never a mix or a torn file.
//!
//! ```text
//! DIR/LOCK                                   locked while a server uses DIR
//! DIR/datasets/NAME.vVERSION.CRC.arrow       committed datasets (CRC: crc32c of the file, hex)
//! DIR/tmp/                                   uploads being written; emptied at start
//! DIR/quarantine/                            files that failed their checksum or decoding
//! ```
//!
//! A put writes the upload's batches to `tmp/ID.arrow` as they arrive ([`StagedFile`]), with
//! its checksum computed on the way, fsyncs it, renames it into `datasets/` under its final
//! name and fsyncs that directory: the rename is the commit point, and it happens before the
//! PutResult is sent. Because the checksum is part of the name, one rename publishes file and
//! checksum together. The store then removes the version it replaced; a crash before that
//! leaves two versions, and the next start keeps the newest.
//!
//! At start every file is mapped into memory, checked against its checksum and validated like
//! an upload; one that fails is moved to `quarantine/` with a warning instead of stopping the
//! server. The loaded dataset's buffers point into the mapping, no copy, except the close
//! column of a file of several batches (an upload of several messages), which is copied into
//! one contiguous column for the kernel. Everything here is blocking I/O: callers run it off
//! the async runtime.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_ipc::reader::FileDecoder;
use arrow_ipc::writer::{DictionaryHandling, FileWriter, IpcWriteOptions};
use arrow_schema::DataType;
use rayon::prelude::*;

use crate::datasets::{KEY_METADATA, NewDataset, Universe};
use crate::{Error, Result};

const DATASETS: &str = "datasets";
const TMP: &str = "tmp";
const QUARANTINE: &str = "quarantine";
const EXT: &str = ".arrow";

/// How a file read back at start becomes a dataset: the same checks as an upload (the store
/// passes ingest's), so a file that fails them is quarantined.
pub(crate) type Validate =
    dyn Fn(&arrow_schema::SchemaRef, Vec<RecordBatch>, Option<&str>) -> Result<NewDataset> + Sync;

/// A dataset read back from disk at start.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// Its name.
    pub name: String,
    /// The version it had when it was written.
    pub version: u64,
    /// Its file under `datasets/`.
    pub file: PathBuf,
    /// The data, validated.
    pub dataset: NewDataset,
}

/// An upload's file being written to `tmp/`. Dropping it deletes the file.
pub(crate) struct StagedFile {
    writer: FileWriter<BufWriter<CrcWriter<WriteBehind>>>,
    dictionaries: GrowingDictionaries,
    staged: Staged,
}

impl std::fmt::Debug for StagedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedFile")
            .field("path", &self.staged.path)
            .finish()
    }
}

impl StagedFile {
    /// Appends a batch (with the file's schema).
    ///
    /// # Errors
    /// [`Error::Storage`] (disk full: RESOURCE_EXHAUSTED).
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let batch = self.dictionaries.conform(batch)?;
        self.writer
            .write(&batch)
            .map_err(|e| Error::storage_arrow(format!("write {}", self.staged.path.display()), e))
    }

    /// Ends the file and fsyncs it: the upload is staged, ready to commit.
    ///
    /// # Errors
    /// [`Error::Storage`]; the file is then deleted.
    pub(crate) fn finish(self) -> Result<Staged> {
        let Self {
            mut writer,
            mut staged,
            ..
        } = self;
        let write_err = |e| Error::storage_arrow(format!("write {}", staged.path.display()), e);
        writer.finish().map_err(write_err)?;
        let sink = writer
            .into_inner()
            .map_err(write_err)?
            .into_inner()
            .map_err(|e| Error::storage("flush dataset file", e.into_error()))?;
        sink.inner
            .finish()
            .map_err(|e| Error::storage(format!("fsync {}", staged.path.display()), e))?;
        staged.crc = sink.crc;
        Ok(staged)
    }
}

/// The write-behind sink of a durable put: its staged file written by a blocking thread from a
/// bounded queue of batches, so the network and the disk overlap.
pub(crate) struct FileSink {
    tx: tokio::sync::mpsc::Sender<RecordBatch>,
    /// Tells the writer to drop its file instead of finishing it.
    aborted: Arc<std::sync::atomic::AtomicBool>,
    /// The writer; taken when awaited.
    done: Option<tokio::task::JoinHandle<Result<Staged>>>,
}

impl FileSink {
    pub(crate) fn start(mut file: StagedFile) -> Self {
        // A few batches in flight: enough to keep the disk busy while the network delivers.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<RecordBatch>(4);
        let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = Arc::clone(&aborted);
        let done = tokio::task::spawn_blocking(move || {
            while let Some(batch) = rx.blocking_recv() {
                file.write(&batch)?;
            }
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                // Dropping the file deletes it.
                return Err(Error::Internal("upload abandoned".into()));
            }
            file.finish()
        });
        Self {
            tx,
            aborted,
            done: Some(done),
        }
    }

    /// Stops the writer and waits until its file is deleted.
    pub(crate) async fn abort(mut self) {
        self.aborted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        drop(self.tx);
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
    }

    pub(crate) async fn send(&mut self, batch: RecordBatch) -> Result<()> {
        if self.tx.send(batch).await.is_ok() {
            return Ok(());
        }
        // The writer stops at its first error (a full disk, say) and drops the queue: that
        // error is the upload's.
        match self.join().await {
            Err(e) => Err(e),
            Ok(_) => Err(Error::Internal(
                "the dataset file writer stopped early".into(),
            )),
        }
    }

    pub(crate) async fn finish(mut self) -> Result<Staged> {
        let (tx, _) = tokio::sync::mpsc::channel(1);
        drop(std::mem::replace(&mut self.tx, tx));
        self.join().await
    }

    async fn join(&mut self) -> Result<Staged> {
        let done = self
            .done
            .take()
            .ok_or_else(|| Error::Internal("the dataset file writer was already joined".into()))?;
        done.await
            .map_err(|e| Error::internal("the dataset file writer", e))?
    }
}

/// An upload written to `tmp/` and fsynced, not yet committed. Dropping it deletes the file.
#[derive(Debug)]
pub struct Staged {
    path: PathBuf,
    crc: u32,
}

impl Drop for Staged {
    fn drop(&mut self) {
        // Already renamed away on commit; otherwise the upload failed and its file must go.
        let _ = fs::remove_file(&self.path);
    }
}

/// The data directory of a running server (held locked until dropped).
#[derive(Debug)]
pub(crate) struct DataDir {
    datasets: PathBuf,
    tmp: PathBuf,
    quarantine: PathBuf,
    next_tmp: AtomicU64,
    _lock: File,
}

impl DataDir {
    /// Opens (creating if needed) and locks `root`, empties its `tmp/`, and reads back every
    /// committed dataset, quarantining the ones that fail their checks.
    ///
    /// # Errors
    /// [`Error::Storage`] if the directory cannot be created, locked or listed; a single bad
    /// dataset file is not an error.
    pub(crate) fn open(root: &Path, validate: &Validate) -> Result<(Self, Vec<Recovered>)> {
        let dir = |name: &str| {
            let p = root.join(name);
            fs::create_dir_all(&p)
                .map_err(|e| Error::storage(format!("create {}", p.display()), e))?;
            Ok::<_, Error>(p)
        };
        let (datasets, tmp, quarantine) = (dir(DATASETS)?, dir(TMP)?, dir(QUARANTINE)?);
        let lock_path = root.join("LOCK");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::storage(format!("open {}", lock_path.display()), e))?;
        lock.try_lock().map_err(|e| match e {
            fs::TryLockError::WouldBlock => Error::storage(
                format!("{} is in use by another sweepflight-server", root.display()),
                io::Error::from(io::ErrorKind::WouldBlock),
            ),
            fs::TryLockError::Error(e) => {
                Error::storage(format!("lock {}", lock_path.display()), e)
            }
        })?;
        sync_dir(root)?;
        let me = Self {
            datasets,
            tmp,
            quarantine,
            next_tmp: AtomicU64::new(0),
            _lock: lock,
        };
        me.clear_tmp()?;
        let recovered = me.recover(validate)?;
        Ok((me, recovered))
    }

    /// Starts a new file in `tmp/` for an upload with this (file) schema; batches are written
    /// to it as they arrive ([`StagedFile::write`]) and [`StagedFile::finish`] fsyncs it.
    ///
    /// # Errors
    /// [`Error::Storage`] (disk full: RESOURCE_EXHAUSTED; permissions: INTERNAL). The partial
    /// file is deleted.
    pub(crate) fn create(&self, schema: &arrow_schema::Schema) -> Result<StagedFile> {
        let id = self.next_tmp.fetch_add(1, Ordering::Relaxed);
        // The guard exists before the file does: any error below deletes it.
        let staged = Staged {
            path: self.tmp.join(format!("{id}{EXT}")),
            crc: 0,
        };
        let file = File::create(&staged.path)
            .map_err(|e| Error::storage(format!("create {}", staged.path.display()), e))?;
        let sink = BufWriter::with_capacity(
            4 << 20,
            CrcWriter {
                inner: WriteBehind::new(file),
                crc: 0,
            },
        );
        // A dictionary that grows is written as deltas (a file cannot replace one).
        let options =
            IpcWriteOptions::default().with_dictionary_handling(DictionaryHandling::Delta);
        let writer = FileWriter::try_new_with_options(sink, schema, options)
            .map_err(|e| Error::storage_arrow(format!("write {}", staged.path.display()), e))?;
        Ok(StagedFile {
            writer,
            dictionaries: GrowingDictionaries::default(),
            staged,
        })
    }

    /// Writes a whole dataset to a new staged file: [`DataDir::create`], each batch, finish.
    ///
    /// # Errors
    /// As [`DataDir::create`].
    pub(crate) fn stage(&self, dataset: &NewDataset) -> Result<Staged> {
        let mut file = self.create(&file_schema(&dataset.schema, dataset.universe.as_ref()))?;
        for batch in &dataset.batches {
            file.write(batch)?;
        }
        file.finish()
    }

    /// Renames `staged` to its final name for (`name`, `version`) and fsyncs `datasets/`:
    /// from here on the dataset survives a crash. Returns the committed file's path.
    ///
    /// # Errors
    /// [`Error::Storage`]; the staged file is then deleted and nothing is committed.
    pub(crate) fn commit(&self, staged: Staged, name: &str, version: u64) -> Result<PathBuf> {
        let path = self.datasets.join(file_name(name, version, staged.crc));
        fs::rename(&staged.path, &path)
            .map_err(|e| Error::storage(format!("rename into {}", path.display()), e))?;
        sync_dir(&self.datasets)?;
        // Renamed away: the drop guard has nothing left to delete.
        drop(staged);
        Ok(path)
    }

    /// Deletes a committed file durably (a drop, or the version a put replaced).
    ///
    /// # Errors
    /// [`Error::Storage`].
    pub(crate) fn delete(&self, file: &Path) -> Result<()> {
        match fs::remove_file(file) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::storage(format!("delete {}", file.display()), e)),
        }
        sync_dir(&self.datasets)
    }

    fn clear_tmp(&self) -> Result<()> {
        for entry in read_dir(&self.tmp)? {
            let path = entry.path();
            tracing::info!(file = %path.display(), "removing an unfinished upload");
            fs::remove_file(&path)
                .map_err(|e| Error::storage(format!("remove {}", path.display()), e))?;
        }
        Ok(())
    }

    /// Reads every committed file back. For each name the newest readable version wins; older
    /// ones (left by a crash between commit and cleanup) are deleted, bad ones quarantined.
    fn recover(&self, validate: &Validate) -> Result<Vec<Recovered>> {
        let mut files: Vec<(String, u64, u32, PathBuf)> = Vec::new();
        for entry in read_dir(&self.datasets)? {
            let path = entry.path();
            match path
                .file_name()
                .and_then(|f| f.to_str())
                .and_then(parse_file_name)
            {
                Some((name, version, crc)) => files.push((name.to_owned(), version, crc, path)),
                None => self.quarantine(&path, "not a dataset file name"),
            }
        }
        // Newest version of each name first.
        files.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut by_name: Vec<Vec<(String, u64, u32, PathBuf)>> = Vec::new();
        for f in files {
            match by_name.last_mut() {
                Some(group) if group[0].0 == f.0 => group.push(f),
                _ => by_name.push(vec![f]),
            }
        }
        let recovered = by_name
            .into_par_iter()
            .filter_map(|group| self.recover_name(group, validate))
            .collect::<Vec<_>>();
        sync_dir(&self.datasets)?;
        Ok(recovered)
    }

    fn recover_name(
        &self,
        versions: Vec<(String, u64, u32, PathBuf)>,
        validate: &Validate,
    ) -> Option<Recovered> {
        let mut found = None;
        for (name, version, crc, path) in versions {
            if found.is_some() {
                tracing::info!(file = %path.display(), "removing a replaced version");
                if let Err(e) = fs::remove_file(&path) {
                    tracing::warn!(file = %path.display(), error = %e, "cannot remove");
                }
                continue;
            }
            match read_dataset(&path, crc, validate) {
                Ok(dataset) => {
                    found = Some(Recovered {
                        name,
                        version,
                        file: path,
                        dataset,
                    });
                }
                Err(e) => self.quarantine(&path, &e.to_string()),
            }
        }
        found
    }

    fn quarantine(&self, path: &Path, why: &str) {
        let Some(file) = path.file_name() else { return };
        let to = self.quarantine.join(file);
        tracing::warn!(file = %path.display(), to = %to.display(), reason = why, "quarantined");
        if let Err(e) = fs::rename(path, &to) {
            tracing::warn!(file = %path.display(), error = %e, "cannot quarantine; left in place");
        }
    }
}

/// The file's schema: the dataset's, plus the key column of a universe in the metadata.
pub(crate) fn file_schema(
    schema: &arrow_schema::Schema,
    universe: Option<&Universe>,
) -> arrow_schema::Schema {
    upload_file_schema(schema, universe.map(|u| u.key.as_str()))
}

/// The file's schema for an upload keyed by `key` (known before any row arrives).
pub(crate) fn upload_file_schema(
    schema: &arrow_schema::Schema,
    key: Option<&str>,
) -> arrow_schema::Schema {
    let mut schema = schema.clone();
    if let Some(key) = key {
        schema
            .metadata
            .insert(KEY_METADATA.to_owned(), key.to_owned());
    }
    schema
}

/// `NAME.vVERSION.CRC.arrow`. Names may contain dots, so the fields are taken from the right.
fn file_name(name: &str, version: u64, crc: u32) -> String {
    format!("{name}.v{version}.{crc:08x}{EXT}")
}

fn parse_file_name(file: &str) -> Option<(&str, u64, u32)> {
    let stem = file.strip_suffix(EXT)?;
    let (rest, crc) = stem.rsplit_once('.')?;
    let (name, version) = rest.rsplit_once(".v")?;
    if crc.len() != 8 || version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    sweepflight_protocol::validate_name(name).ok()?;
    Some((
        name,
        version.parse().ok()?,
        u32::from_str_radix(crc, 16).ok()?,
    ))
}

/// Maps a committed file, checks its checksum, decodes it without copying and validates it
/// (`validate`: as an upload).
fn read_dataset(path: &Path, crc: u32, validate: &Validate) -> Result<NewDataset> {
    let buffer = map(path)?;
    let actual = crc32c::crc32c(&buffer);
    if actual != crc {
        return Err(Error::Internal(format!(
            "checksum mismatch: file has crc32c {actual:08x}, its name says {crc:08x}"
        )));
    }
    let (schema, batches) = decode_ipc_file(buffer)?;
    let key = schema.metadata().get(KEY_METADATA).cloned();
    validate(&schema, batches, key.as_deref())
}

/// The whole file as an Arrow buffer backed by a read-only memory map.
fn map(path: &Path) -> Result<Buffer> {
    let file =
        File::open(path).map_err(|e| Error::storage(format!("open {}", path.display()), e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::storage(format!("stat {}", path.display()), e))?
        .len();
    if len == 0 {
        return Ok(Buffer::from_vec(Vec::<u8>::new()));
    }
    // SAFETY: files under datasets/ are written once, fsynced and renamed in; nothing writes
    // to them afterwards (a replace writes a new file, a drop unlinks, which leaves existing
    // mappings intact). operations.md tells operators not to edit them while the server runs.
    let mmap = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|e| Error::storage(format!("map {}", path.display()), e))?;
    let ptr = std::ptr::NonNull::new(mmap.as_ptr().cast_mut())
        .ok_or_else(|| Error::Internal("empty mapping".into()))?;
    let len = mmap.len();
    // SAFETY: `ptr` is valid for `len` bytes for as long as the mapping lives, and the buffer
    // owns the mapping (it is unmapped when the last slice of the buffer is dropped).
    Ok(unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(mmap)) })
}

fn decode_ipc_file(buf: Buffer) -> Result<(arrow_schema::SchemaRef, Vec<RecordBatch>)> {
    let corrupt = |what: &str| Error::Internal(format!("not a complete Arrow IPC file: {what}"));
    let trailer_start = buf
        .len()
        .checked_sub(10)
        .ok_or_else(|| corrupt("too short"))?;
    let trailer: [u8; 10] = buf[trailer_start..]
        .try_into()
        .map_err(|_| corrupt("trailer"))?;
    let footer_len =
        arrow_ipc::reader::read_footer_length(trailer).map_err(|e| corrupt(&e.to_string()))?;
    let footer_start = trailer_start
        .checked_sub(footer_len)
        .ok_or_else(|| corrupt("footer length"))?;
    let footer = arrow_ipc::root_as_footer(&buf[footer_start..trailer_start])
        .map_err(|e| corrupt(&format!("footer: {e}")))?;
    let schema = Arc::new(
        arrow_ipc::convert::try_fb_to_schema(footer.schema().ok_or_else(|| corrupt("no schema"))?)
            .map_err(|e| corrupt(&e.to_string()))?,
    );
    let mut decoder = FileDecoder::new(Arc::clone(&schema), footer.version());
    // The byte range of a block (a message and its body), inside the data before the footer.
    let range = |block: &arrow_ipc::Block| {
        let start = usize::try_from(block.offset()).map_err(|_| corrupt("block offset"))?;
        usize::try_from(block.bodyLength())
            .ok()
            .zip(usize::try_from(block.metaDataLength()).ok())
            .map(|(b, m)| b + m)
            .filter(|&len| {
                start
                    .checked_add(len)
                    .is_some_and(|end| end <= footer_start)
            })
            .map(|len| buf.slice_with_length(start, len))
            .ok_or_else(|| corrupt("block out of range"))
    };
    // Dictionaries (a dictionary-encoded key column), in file order: deltas extend them.
    for block in footer.dictionaries().iter().flatten() {
        decoder
            .read_dictionary(block, &range(block)?)
            .map_err(|e| corrupt(&e.to_string()))?;
    }
    let mut batches = Vec::new();
    for block in footer.recordBatches().iter().flatten() {
        let batch = decoder
            .read_record_batch(block, &range(block)?)
            .map_err(|e| corrupt(&e.to_string()))?;
        if let Some(batch) = batch {
            batches.push(batch);
        }
    }
    Ok((schema, batches))
}

fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    fs::read_dir(dir)
        .and_then(|it| it.collect::<io::Result<Vec<_>>>())
        .map_err(|e| Error::storage(format!("list {}", dir.display()), e))
}

/// Makes a directory's entries (renames, deletions) durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::storage(format!("fsync {}", dir.display()), e))
}

/// Rewrites dictionary columns so that each batch's dictionary extends the ones written before.
///
/// An upload stream may replace a column's dictionary from one batch to the next (pyarrow does
/// when a table's chunks were built apart, say one per symbol), but an IPC file may only
/// extend it. A batch whose dictionary is the last one written, or extends it, is written as
/// it is; any other gets a dictionary of everything written so far followed by its new values,
/// and its keys are mapped onto it. The data read back is the same; only the keys differ.
#[derive(Default)]
struct GrowingDictionaries {
    /// By column: the dictionary written so far, and where each of its values is (built on
    /// the first replacement).
    columns: HashMap<usize, (ArrayRef, Option<ValueIndex>)>,
}

/// Where each value of a dictionary is (a null value included).
type ValueIndex = HashMap<Option<String>, u64>;

impl GrowingDictionaries {
    fn conform(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mut columns = Cow::Borrowed(batch.columns());
        for (i, column) in batch.columns().iter().enumerate() {
            let Some(dict) = column.as_any_dictionary_opt() else {
                continue;
            };
            let values = dict.values();
            let Some((written, index)) = self.columns.get_mut(&i) else {
                self.columns.insert(i, (Arc::clone(values), None));
                continue;
            };
            if extends(values, written) {
                *written = Arc::clone(values);
                *index = None;
                continue;
            }
            let index = match index {
                Some(index) => index,
                None => index.insert(
                    texts(written)?
                        .iter()
                        .zip(0u64..)
                        .map(|(v, at)| (v.map(str::to_owned), at))
                        .collect(),
                ),
            };
            // Where each of this batch's values is in the grown dictionary, new ones (a null
            // value too) appended.
            let mut added = Vec::new();
            let mut next = written.len() as u64;
            let positions: UInt64Array = texts(values)?
                .iter()
                .enumerate()
                .map(|(at, v)| {
                    *index.entry(v.map(str::to_owned)).or_insert_with(|| {
                        added.push(at as u64);
                        next += 1;
                        next - 1
                    })
                })
                .collect();
            let grown = arrow_select::concat::concat(&[
                written.as_ref(),
                arrow_select::take::take(values, &UInt64Array::from(added), None)
                    .map_err(|e| Error::internal("grow a dictionary", e))?
                    .as_ref(),
            ])
            .map_err(|e| Error::internal("grow a dictionary", e))?;
            let keys = arrow_select::take::take(&positions, dict.keys(), None)
                .map_err(|e| Error::internal("map dictionary keys", e))?;
            // Overflowing the key type is an error, not a null.
            let strict = arrow_cast::CastOptions {
                safe: false,
                ..Default::default()
            };
            let keys = arrow_cast::cast_with_options(&keys, dict.keys().data_type(), &strict)
                .map_err(|e| {
                    Error::InvalidArgument(format!(
                        "column `{}`: its dictionaries have {} values in all, more than its key \
                         type can index in one file ({e}); send a wider key type",
                        batch.schema().field(i).name(),
                        grown.len()
                    ))
                })?
                .to_data();
            let data = keys
                .into_builder()
                .data_type(column.data_type().clone())
                .child_data(vec![grown.to_data()])
                .build()
                .map_err(|e| Error::internal("rebuild a dictionary column", e))?;
            columns.to_mut()[i] = arrow_array::make_array(data);
            *written = grown;
        }
        match columns {
            Cow::Borrowed(_) => Ok(batch.clone()),
            Cow::Owned(columns) => RecordBatch::try_new(batch.schema(), columns)
                .map_err(|e| Error::internal("rebuild a batch", e)),
        }
    }
}

/// Whether `values` starts with `written` (the same dictionary, or one grown from it).
fn extends(values: &ArrayRef, written: &ArrayRef) -> bool {
    let (new, old) = (values.to_data(), written.to_data());
    ArrayData::ptr_eq(&new, &old) || (new.len() >= old.len() && new.slice(0, old.len()) == old)
}

/// A dictionary's values as text, to compare values across dictionaries.
fn texts(values: &ArrayRef) -> Result<StringArray> {
    arrow_cast::cast(values, &DataType::Utf8)
        .map(|a| a.as_string::<i32>().clone())
        .map_err(|e| Error::internal("read a dictionary", e))
}

/// A file written front to back whose pages go to disk as they are written, not at the fsync.
///
/// Left to the kernel, an 800 MB upload would sit in the page cache until the final fsync
/// wrote it all (a third of a second of waiting at the end of the put), and it would take 800
/// MB of page cache next to the dataset's own memory: pages the kernel must find, and on a
/// virtual machine often fault in from the host, which made the copy into the page cache
/// the slowest part of a durable put (perf-notes.md, "Durable puts"). So every
/// [`WRITE_BEHIND_CHUNK`] written is handed to the disk at once (`sync_file_range`), and a
/// chunk [`WRITE_BEHIND_LAG`] chunks back is waited for and dropped from the page cache: the
/// cache holds a few chunks, whose pages the next chunks reuse, the disk works while the
/// upload arrives, and the fsync finds little left to do. The data is in the dataset's
/// memory already; the file is read again only at a restart.
struct WriteBehind {
    file: File,
    /// Bytes written so far.
    written: u64,
    /// Bytes handed to the disk so far (a multiple of the chunk).
    started: u64,
    /// Off where the file system does not take `sync_file_range`: the fsync does it all.
    off: bool,
}

/// Bytes handed to the disk at a time.
const WRITE_BEHIND_CHUNK: u64 = 8 << 20;
/// Chunks in flight before the oldest is waited for and dropped from the page cache.
const WRITE_BEHIND_LAG: u64 = 2;

impl WriteBehind {
    fn new(file: File) -> Self {
        Self {
            file,
            written: 0,
            started: 0,
            off: false,
        }
    }

    /// Hands every whole chunk written since the last call to the disk, and retires the one
    /// [`WRITE_BEHIND_LAG`] chunks behind each.
    fn start_chunks(&mut self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let fd = self.file.as_raw_fd();
        while !self.off && self.written - self.started >= WRITE_BEHIND_CHUNK {
            match sync_range(fd, self.started, libc::SYNC_FILE_RANGE_WRITE) {
                Ok(()) => {}
                // Not this file system's: no write-behind, not a failed put.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINVAL | libc::ESPIPE | libc::ENOSYS | libc::EOPNOTSUPP)
                    ) =>
                {
                    self.off = true;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
            if let Some(old) = self
                .started
                .checked_sub(WRITE_BEHIND_LAG * WRITE_BEHIND_CHUNK)
            {
                sync_range(
                    fd,
                    old,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                )?;
                drop_cached(fd, old, WRITE_BEHIND_CHUNK);
            }
            self.started += WRITE_BEHIND_CHUNK;
        }
        Ok(())
    }

    /// Fsyncs the file and drops what is left of it from the page cache.
    fn finish(self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        self.file.sync_all()?;
        drop_cached(self.file.as_raw_fd(), 0, 0);
        Ok(())
    }
}

impl Write for WriteBehind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        self.start_chunks()?;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// `sync_file_range` over one chunk from `offset`.
fn sync_range(fd: std::os::fd::RawFd, offset: u64, flags: libc::c_uint) -> io::Result<()> {
    let offset = libc::off64_t::try_from(offset).map_err(io::Error::other)?;
    let len = libc::off64_t::try_from(WRITE_BEHIND_CHUNK).map_err(io::Error::other)?;
    // SAFETY: a plain system call on an open descriptor; no memory is passed.
    if unsafe { libc::sync_file_range(fd, offset, len, flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Drops written-back pages from the page cache (`len` 0: to the end). Advice only: a failure
/// leaves pages cached, nothing worse.
fn drop_cached(fd: std::os::fd::RawFd, offset: u64, len: u64) {
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return;
    };
    // SAFETY: as above.
    let _ = unsafe { libc::posix_fadvise(fd, offset, len, libc::POSIX_FADV_DONTNEED) };
}

/// Passes writes through, keeping the crc32c of everything written.
struct CrcWriter<W> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::ingest::assemble;
    use arrow_array::{ArrayRef, Float64Array, Int64Array};

    fn series(closes: &[f64]) -> NewDataset {
        let batch = RecordBatch::try_from_iter([
            (
                "t",
                Arc::new(Int64Array::from_iter_values(0..closes.len() as i64)) as ArrayRef,
            ),
            (
                "close",
                Arc::new(Float64Array::from(closes.to_vec())) as ArrayRef,
            ),
        ])
        .unwrap();
        assemble(
            &batch.schema(),
            vec![batch.slice(0, 1), batch.slice(1, closes.len() - 1)],
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_file_longer_than_the_write_behind_window_reads_back() {
        // Five chunks and a part: some retired from the page cache mid-file, some at the end.
        let n = (5 * WRITE_BEHIND_CHUNK as usize + 12_345) / 8;
        let closes: Vec<f64> = (0..n).map(|i| 1.0 + (i % 977) as f64).collect();
        let root = tempfile::tempdir().unwrap();
        let (dir, _) = DataDir::open(root.path(), &assemble).unwrap();
        let staged = dir.stage(&series(&closes)).unwrap();
        dir.commit(staged, "big", 1).unwrap();
        drop(dir);
        let (_dir, found) = DataDir::open(root.path(), &assemble).unwrap();
        assert_eq!(found[0].dataset.close.values().as_ref(), closes.as_slice());
    }

    fn dictionary_batch(names: &[&str], keys: Vec<i8>) -> RecordBatch {
        let symbol = arrow_array::DictionaryArray::<arrow_array::types::Int8Type>::try_new(
            keys.into(),
            Arc::new(StringArray::from(names.to_vec())),
        )
        .unwrap();
        RecordBatch::try_from_iter([("symbol", Arc::new(symbol) as ArrayRef)]).unwrap()
    }

    fn symbols(batch: &RecordBatch) -> Vec<String> {
        let column = arrow_cast::cast(batch.column(0), &DataType::Utf8).unwrap();
        column
            .as_string::<i32>()
            .iter()
            .map(|v| v.unwrap().to_owned())
            .collect()
    }

    #[test]
    fn replaced_dictionaries_grow_and_the_values_stay() {
        let mut dicts = GrowingDictionaries::default();
        let first = dictionary_batch(&["A", "B"], vec![0, 1]);
        let out = dicts.conform(&first).unwrap();
        assert!(
            out.column(0).to_data().ptr_eq(&first.column(0).to_data()),
            "kept as is"
        );
        // A grown dictionary is written as it is.
        let grown = dictionary_batch(&["A", "B", "C"], vec![2, 0]);
        let out = dicts.conform(&grown).unwrap();
        assert!(out.column(0).to_data().ptr_eq(&grown.column(0).to_data()));
        // A replacement: its keys move onto everything written so far, plus its new values.
        let replaced = dictionary_batch(&["D", "C", "A"], vec![0, 1, 2, 0]);
        let out = dicts.conform(&replaced).unwrap();
        assert_eq!(symbols(&out), ["D", "C", "A", "D"]);
        let values = out.column(0).as_any_dictionary().values().clone();
        assert_eq!(
            texts(&values).unwrap().iter().flatten().collect::<Vec<_>>(),
            ["A", "B", "C", "D"]
        );
    }

    #[test]
    fn a_null_value_stays_null_when_its_dictionary_is_replaced() {
        let batch = |values: Vec<Option<&str>>, keys: Vec<i8>| {
            let column = arrow_array::DictionaryArray::<arrow_array::types::Int8Type>::try_new(
                keys.into(),
                Arc::new(StringArray::from(values)),
            )
            .unwrap();
            RecordBatch::try_from_iter([("venue", Arc::new(column) as ArrayRef)]).unwrap()
        };
        let mut dicts = GrowingDictionaries::default();
        dicts.conform(&batch(vec![Some("X")], vec![0])).unwrap();
        let out = dicts
            .conform(&batch(vec![None, Some("Y")], vec![1, 0]))
            .unwrap();
        let column = arrow_cast::cast(out.column(0), &DataType::Utf8).unwrap();
        let got: Vec<_> = column.as_string::<i32>().iter().collect();
        assert_eq!(got, [Some("Y"), None]);
    }

    #[test]
    fn more_values_than_the_key_type_indexes_is_refused() {
        let mut dicts = GrowingDictionaries::default();
        let names: Vec<String> = (0..200).map(|i| format!("S{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        dicts
            .conform(&dictionary_batch(&names[..100], vec![0]))
            .unwrap();
        let e = dicts
            .conform(&dictionary_batch(&names[100..], vec![99]))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("200 values"), "{e}");
    }

    #[test]
    fn file_names_round_trip() {
        for (name, v, crc) in [("paper", 1, 0xdead_beef), ("a.v3", 12, 0), ("..", 7, 1)] {
            let f = file_name(name, v, crc);
            assert_eq!(parse_file_name(&f), Some((name, v, crc)), "{f}");
        }
        for bad in [
            "x.arrow",
            "x.v1.arrow",
            "x.vA.00000000.arrow",
            "x.v1.0000.arrow",
            "a b.v1.00000000.arrow",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn write_commit_read_back() {
        let root = tempfile::tempdir().unwrap();
        let (dir, found) = DataDir::open(root.path(), &assemble).unwrap();
        assert!(found.is_empty());
        let staged = dir.stage(&series(&[1.0, 2.0, 3.0])).unwrap();
        let tmp = staged.path.clone();
        let committed = dir.commit(staged, "p", 4).unwrap();
        assert!(!tmp.exists());
        // A newer version committed without the older one being cleaned up (a crash between).
        let newer = dir.stage(&series(&[5.0, 6.0])).unwrap();
        dir.commit(newer, "p", 5).unwrap();
        // An upload that never committed.
        let unfinished = dir.stage(&series(&[9.0, 9.0])).unwrap();
        std::mem::forget(unfinished);
        drop(dir);
        let (_dir, found) = DataDir::open(root.path(), &assemble).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].name.as_str(), found[0].version), ("p", 5));
        assert_eq!(found[0].dataset.close.values().as_ref(), &[5.0, 6.0]);
        assert!(!committed.exists(), "the replaced version is removed");
        assert_eq!(read_dir(&root.path().join(TMP)).unwrap().len(), 0);
    }

    #[test]
    fn corrupt_and_foreign_files_are_quarantined() {
        let root = tempfile::tempdir().unwrap();
        let (dir, _) = DataDir::open(root.path(), &assemble).unwrap();
        let good = dir
            .commit(dir.stage(&series(&[1.0, 2.0])).unwrap(), "good", 1)
            .unwrap();
        let bad = dir
            .commit(dir.stage(&series(&[1.0, 2.0])).unwrap(), "bad", 1)
            .unwrap();
        let older = dir
            .commit(dir.stage(&series(&[3.0, 4.0])).unwrap(), "bad", 0)
            .unwrap();
        let mut bytes = fs::read(&bad).unwrap();
        bytes.truncate(bytes.len() / 2);
        fs::write(&bad, bytes).unwrap();
        fs::write(root.path().join(DATASETS).join("notes.txt"), "hi").unwrap();
        drop(dir);
        let (_dir, mut found) = DataDir::open(root.path(), &assemble).unwrap();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<_> = found.iter().map(|r| (r.name.as_str(), r.version)).collect();
        // The torn newest version is quarantined; the older intact one is served.
        assert_eq!(names, [("bad", 0), ("good", 1)]);
        assert!(good.exists() && older.exists() && !bad.exists());
        let q: Vec<_> = read_dir(&root.path().join(QUARANTINE))
            .unwrap()
            .into_iter()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        assert_eq!(q.len(), 2, "{q:?}");
    }

    #[test]
    fn one_server_per_directory() {
        let root = tempfile::tempdir().unwrap();
        let (_held, _) = DataDir::open(root.path(), &assemble).unwrap();
        let e = DataDir::open(root.path(), &assemble).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
    }
}
