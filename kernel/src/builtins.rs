//! The built-in strategies as formulas (expressions.md, "From conditions to trades"): each
//! built-in name with its `long` and `short` formula text. Their parameters, in the order of
//! first appearance, are the built-in's own parameter order; the `strategies` action
//! publishes these forms, and the tests hold each built-in equal to its formula form on every
//! trade.

use crate::expr::{Field, Program};

/// A built-in strategy's expression form.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The wire name.
    pub name: &'static str,
    /// The `long` formula.
    pub long: &'static str,
    /// The `short` formula.
    pub short: &'static str,
}

/// Every built-in, in the order the `strategies` action lists them.
pub static BUILTINS: [Builtin; 5] = [
    Builtin {
        name: "hma_sar",
        long: "cross_below(hma(close, half, full, sqrt), hma3(close, p3, p2, p))",
        short: "cross_above(hma(close, half, full, sqrt), hma3(close, p3, p2, p))",
    },
    Builtin {
        name: "sma_cross",
        long: "cross_above(sma(close, fast), sma(close, slow))",
        short: "cross_below(sma(close, fast), sma(close, slow))",
    },
    Builtin {
        name: "ema_cross",
        long: "cross_above(ema(close, fast), ema(close, slow))",
        short: "cross_below(ema(close, fast), ema(close, slow))",
    },
    Builtin {
        name: "donchian",
        long: "close > lag(highest(close, n), 1)",
        short: "close < lag(lowest(close, n), 1)",
    },
    Builtin {
        name: "rsi_revert",
        long: "cross_above(rsi(close, n), lower)",
        short: "cross_below(rsi(close, n), upper)",
    },
];

impl Builtin {
    /// The built-in called `name`.
    pub fn named(name: &str) -> Option<&'static Self> {
        BUILTINS.iter().find(|b| b.name == name)
    }

    /// Its formula form as a program.
    pub fn program(&self) -> Program {
        Program::new(&[(Field::Long, self.long), (Field::Short, self.short)])
            .expect("the built-in formulas are valid")
    }
}
