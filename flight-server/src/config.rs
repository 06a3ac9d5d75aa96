//! The library's configuration type, filled by the binary from its flags (or by tests).

use std::path::PathBuf;

/// Everything the service needs to know at start.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    /// Largest gRPC message accepted or sent, in bytes.
    pub max_message_bytes: usize,
    /// Most combos one sweep call may ask for.
    pub max_combos: usize,
    /// Bytes the WMA cache may hold across calls (least recently used out first).
    pub cache_bytes: u64,
    /// Largest dataset a put may store, in bytes of decoded Arrow data.
    pub max_dataset_bytes: u64,
    /// Most bytes all stored datasets together may hold.
    pub max_total_bytes: u64,
    /// Where datasets persist; `None` keeps them in memory only.
    pub data_dir: Option<PathBuf>,
    /// When set, every call but Handshake must carry `authorization: Bearer <token>`.
    pub token: Option<String>,
    /// When set, serve grpc+tls with this certificate chain and key.
    pub tls: Option<TlsFiles>,
}

/// PEM contents of the server's certificate chain and private key.
#[derive(Clone, PartialEq)]
pub struct TlsFiles {
    /// Certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// Private key, PEM.
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFiles").finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// 64 MiB: a 150k-row batch in one message fits with room to spare.
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 20;
    /// One million combos per call.
    pub const DEFAULT_MAX_COMBOS: usize = 1_000_000;
    /// 1 GiB of cached WMA arrays.
    pub const DEFAULT_CACHE_BYTES: u64 = 1 << 30;
    /// 16 GiB per dataset.
    pub const DEFAULT_MAX_DATASET_BYTES: u64 = 16 << 30;
    /// No limit on all datasets together beyond the machine's memory.
    pub const DEFAULT_MAX_TOTAL_BYTES: u64 = u64::MAX;
    /// Where the binary keeps datasets unless told otherwise.
    pub const DEFAULT_DATA_DIR: &str = "sweepflight-data";
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
            max_combos: Self::DEFAULT_MAX_COMBOS,
            cache_bytes: Self::DEFAULT_CACHE_BYTES,
            max_dataset_bytes: Self::DEFAULT_MAX_DATASET_BYTES,
            max_total_bytes: Self::DEFAULT_MAX_TOTAL_BYTES,
            data_dir: None,
            token: None,
            tls: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never log the token.
        f.debug_struct("ServerConfig")
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_combos", &self.max_combos)
            .field("cache_bytes", &self.cache_bytes)
            .field("max_dataset_bytes", &self.max_dataset_bytes)
            .field("max_total_bytes", &self.max_total_bytes)
            .field("data_dir", &self.data_dir)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("tls", &self.tls.is_some())
            .finish()
    }
}
