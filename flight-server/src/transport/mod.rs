//! The connections under the Flight service: [`net`] admits them within `--max-connections`
//! and closes silent ones, [`conn`] is opt-in socket tuning (`--read-wake`), [`uds`] lets
//! gRPC-core clients in over Unix sockets.

pub(crate) mod conn;
pub(crate) mod net;
pub(crate) mod uds;
