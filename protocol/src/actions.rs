//! Action types and their one-line descriptions, as ListActions reports them.

/// Run a parameter sweep on a stored dataset.
pub const SWEEP: &str = "sweep";
/// Reply with the request body.
pub const ECHO: &str = "echo";
/// Remove a dataset.
pub const DROP: &str = "drop";
/// Server state as JSON (extension).
pub const STATS: &str = "stats";
/// The strategies and their parameters as JSON (v1.2).
pub const STRATEGIES: &str = "strategies";

/// Every action type with its description, in ListActions order.
pub const ACTIONS: [(&str, &str); 5] = [
    (
        SWEEP,
        "Run a parameter sweep on a stored dataset. Body: JSON {\"dataset\", \"strategy\"?, \"lengths\" | \"params\" | \"grid\" | \"sample\", \"fee\"?, \"side\"?, \"stop_loss\"?, \"take_profit\"?, \"warmup\"?, \"series\"?, \"rows\"?}; reply: one Arrow IPC stream split over the Result bodies.",
    ),
    (
        ECHO,
        "Reply with one Result whose body is the request body, unchanged.",
    ),
    (DROP, "Remove a dataset. Body: the dataset name."),
    (
        STATS,
        "Server state as JSON: datasets, bytes, cache, sweeps running / queued / completed / cancelled / refused, reserved sweep memory.",
    ),
    (
        STRATEGIES,
        "The strategies this server runs, as JSON: [{\"name\", \"params\": [{\"name\", \"type\": \"int\" | \"number\"}], \"summary\"}].",
    ),
];
