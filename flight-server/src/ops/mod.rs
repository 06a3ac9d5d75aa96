//! What runs around the service: [`auth`] (a tower layer checking the token before any body
//! is read), [`metrics`] (a tower layer counting calls, and the Prometheus endpoint), and
//! [`config`] (the library's configuration type the binary fills from its flags).

pub(crate) mod auth;
pub(crate) mod config;
pub(crate) mod metrics;
