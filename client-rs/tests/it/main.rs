//! The client's integration tests, one binary (each links the whole server it talks to):
//! the typed client, the CLI, concurrent load, Polars frames and TLS with a token, against
//! real servers in-process on port 0.

mod cli;
mod client;
mod load;
mod polars;
mod tls_auth;
