//! The binder: a strategy's formulas checked as a whole. It reads the fields in the spec's
//! order, resolves every name (column or parameter), numbers the parameters in order of first
//! appearance, decides each parameter's kind (int where it is a window anywhere) and each
//! node's kind (series, condition or constant), and refuses what the language does not allow,
//! naming the field and the byte offset. The result, a [`Program`], is what the planner binds
//! per combo.

use super::parse::{self, ParseError};
use super::registry::{Arg, Returns, function};
use super::tree::{Column, Formula, Node};
use crate::timeframe::Timeframe;
use crate::{Error, Result};

/// The largest window a formula may use.
pub const MAX_WINDOW: u32 = 67_108_864;
/// At most this many nodes over all of a strategy's formulas.
pub const MAX_TOTAL_NODES: usize = 1024;
/// At most this many distinct parameters.
pub const MAX_PARAMS: usize = 32;

/// The names a parameter may not take: the columns of a sweep or walk_forward reply.
pub const RESERVED: [&str; 24] = [
    "series",
    "combo",
    "fold",
    "train_start",
    "train_end",
    "test_start",
    "test_end",
    "train_score",
    "pnl",
    "trades",
    "wins",
    "win_rate",
    "max_drawdown",
    "avg_trade",
    "best_trade",
    "worst_trade",
    "profit_factor",
    "exposure",
    "avg_bars",
    "sharpe",
    "sortino",
    "sqn",
    "total_return",
    "block_pnl",
];

/// The further names a portfolio's parameter may not take (protocol v1.4): the columns of its
/// sweep, trades and equity replies.
pub const PORTFOLIO_RESERVED: [&str; 15] = [
    "annual_return",
    "volatility",
    "turnover",
    "fees",
    "rebalances",
    "avg_holdings",
    "row",
    "time",
    "equity",
    "cash",
    "holdings",
    "shares",
    "price",
    "value",
    "fee",
];

/// A formula field of a strategy body, in the order parameters are numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// Enter (or reverse to) long.
    Long,
    /// Enter (or reverse to) short.
    Short,
    /// Close a long position.
    ExitLong,
    /// Close a short position.
    ExitShort,
    /// A portfolio's rank (protocol v1.4): a number per bar, higher is better.
    Rank,
    /// A portfolio's filter: a condition; a series is eligible only where it holds.
    Filter,
    /// A portfolio's weight: a number per bar; eligible only where finite and > 0.
    Weight,
    /// The stop-loss fraction of a trade, read at the bar whose close decided its entry.
    StopLoss,
    /// The take-profit fraction, likewise.
    TakeProfit,
    /// The trailing stop's fraction, likewise.
    TrailingStop,
    /// The parameter constraint.
    Constraint,
}

impl Field {
    /// The strategy object's fields, in numbering order (the constraint is a body field).
    pub const STRATEGY: [Self; 4] = [Self::Long, Self::Short, Self::ExitLong, Self::ExitShort];

    /// The execution formulas of the body (`stop_loss`, `take_profit`, `trailing_stop`): each a
    /// fraction per trade, not a condition.
    pub const STOPS: [Self; 3] = [Self::StopLoss, Self::TakeProfit, Self::TrailingStop];

    /// A portfolio's formula fields, in numbering order.
    pub const PORTFOLIO: [Self; 3] = [Self::Rank, Self::Filter, Self::Weight];

    /// True for a field whose formula is a condition (not a stop's fraction, a rank or a
    /// weight).
    pub fn is_condition(self) -> bool {
        !Self::STOPS.contains(&self) && !matches!(self, Self::Rank | Self::Weight)
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Long => "long",
            Self::Short => "short",
            Self::ExitLong => "exit_long",
            Self::ExitShort => "exit_short",
            Self::Rank => "rank",
            Self::Filter => "filter",
            Self::Weight => "weight",
            Self::StopLoss => "stop_loss",
            Self::TakeProfit => "take_profit",
            Self::TrailingStop => "trailing_stop",
            Self::Constraint => "constraint",
        }
    }
}

/// Whether a parameter takes integers (it is a window somewhere) or any finite number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A window: a JSON integer in `1..=67108864`.
    Int,
    /// Any finite number.
    Number,
}

impl ParamKind {
    /// The wire name (`explain`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Int => "int",
            Self::Number => "number",
        }
    }
}

/// A parameter of a program.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: ParamKind,
}

/// The kind of a sub-formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One float64 per bar.
    Series,
    /// One boolean per bar.
    Cond,
    /// One float64 per combo.
    Const,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Self::Series => "a series",
            Self::Cond => "a condition",
            Self::Const => "a number",
        }
    }
}

/// One checked formula: its tree, each node's kind, and each parameter node's index.
#[derive(Debug, Clone)]
pub struct Bound {
    /// Which field it is.
    pub field: Field,
    /// The tree.
    pub formula: Formula,
    /// Each node's kind.
    pub kinds: Vec<Kind>,
    /// For each node that is a parameter, its index in [`Program::params`].
    pub params: Vec<Option<u16>>,
    /// For each node, the higher timeframe it is computed on: that of the `daily` / `weekly` /
    /// `monthly` call it is inside (`None` outside any; such calls do not nest).
    pub frames: Vec<Option<Timeframe>>,
}

/// A strategy's formulas, checked together.
#[derive(Debug, Clone)]
pub struct Program {
    /// The formulas present, in field order.
    pub formulas: Vec<Bound>,
    /// The parameters in order of first appearance.
    pub params: Vec<Param>,
    /// The strategy's own columns (`inputs`, protocol v1.4), in its order: a formula reads
    /// `inputs[k]` as [`Column::Input`]`(k)`.
    pub inputs: Vec<String>,
}

/// Most columns a strategy's `inputs` may list.
pub const MAX_INPUTS: usize = 64;

fn located(field: Field, e: ParseError) -> Error {
    Error::Formula {
        field: field.name().to_owned(),
        offset: e.offset,
        message: e.message,
    }
}

impl Program {
    /// Parses and checks `formulas` (field, text), in any order.
    ///
    /// # Errors
    /// [`Error::Formula`] naming the field, the byte offset and what is wrong; a strategy with
    /// neither `long` nor `short`, past the node or parameter limits, or with a parameter
    /// named like a reply column is refused too.
    pub fn new(formulas: &[(Field, &str)]) -> Result<Self> {
        Self::with_leading(&[], formulas)
    }

    /// [`Program::new`] with parameters that come first whatever the formulas say (a built-in
    /// strategy's, in its own order, before those of the execution formulas).
    ///
    /// # Errors
    /// As [`Program::new`].
    pub fn with_leading(leading: &[Param], formulas: &[(Field, &str)]) -> Result<Self> {
        Self::with_inputs(leading, formulas, &[])
    }

    /// A portfolio's formulas (protocol v1.4): `rank` (required), `filter`, `weight` and a
    /// `constraint`; `counts` are the parameter names of `longs`, `shorts`, `keep` and
    /// `rebalance` (those given as names, in that order), int parameters numbered after the
    /// weight's and before the constraint's; `inputs` as [`Program::with_inputs`].
    ///
    /// # Errors
    /// As [`Program::new`]; [`Error::Strategy`] without `rank`, with a field a portfolio
    /// does not take, or with a count named like a column, an input or a reply column.
    pub fn portfolio(
        formulas: &[(Field, &str)],
        counts: &[&str],
        inputs: &[String],
    ) -> Result<Self> {
        if let Some((f, _)) = formulas
            .iter()
            .find(|(f, _)| !Field::PORTFOLIO.contains(f) && *f != Field::Constraint)
        {
            return Err(Error::Strategy(format!(
                "`{}` is not a field of a portfolio strategy (rank, filter, weight)",
                f.name()
            )));
        }
        if !formulas.iter().any(|(f, _)| *f == Field::Rank) {
            return Err(Error::Strategy("a portfolio strategy needs `rank`".into()));
        }
        Self::build(&[], formulas, inputs, Some(counts))
    }

    /// [`Program::with_leading`] whose formulas may also read the dataset columns `inputs`
    /// (protocol v1.4): a name listed there is a column, never a parameter.
    ///
    /// # Errors
    /// As [`Program::new`]; [`Error::Strategy`] for an input that is not a NAME of the
    /// grammar, is a bar column or a function name, or is listed twice.
    pub fn with_inputs(
        leading: &[Param],
        formulas: &[(Field, &str)],
        inputs: &[String],
    ) -> Result<Self> {
        if !formulas
            .iter()
            .any(|(f, _)| matches!(f, Field::Long | Field::Short))
        {
            return Err(Error::Strategy(
                "a strategy needs `long` or `short` (or both)".into(),
            ));
        }
        Self::build(leading, formulas, inputs, None)
    }

    /// The formulas checked together, whatever strategy they make; a portfolio's `counts`
    /// join the parameters before the constraint's (and the portfolio's reply columns are
    /// reserved).
    fn build(
        leading: &[Param],
        formulas: &[(Field, &str)],
        inputs: &[String],
        counts: Option<&[&str]>,
    ) -> Result<Self> {
        check_inputs(inputs)?;
        let mut sorted: Vec<(Field, &str)> = formulas.to_vec();
        sorted.sort_by_key(|(f, _)| *f);
        let mut params: Vec<Param> = leading.to_vec();
        let mut out = Vec::new();
        let mut total = 0;
        let reserved: &[&str] = if counts.is_some() {
            &PORTFOLIO_RESERVED
        } else {
            &[]
        };
        let mut counted = false;
        for (field, text) in sorted {
            if field == Field::Constraint && !counted {
                add_counts(&mut params, counts.unwrap_or(&[]), inputs)?;
                counted = true;
            }
            let formula = parse::parse(text).map_err(|e| located(field, e))?;
            total += formula.nodes.len();
            if total > MAX_TOTAL_NODES {
                return Err(Error::Formula {
                    field: field.name().to_owned(),
                    offset: 0,
                    message: format!(
                        "the strategy's formulas have more than {MAX_TOTAL_NODES} nodes in all (limit)"
                    ),
                });
            }
            out.push(check(field, formula, &mut params, inputs, reserved)?);
        }
        if !counted {
            add_counts(&mut params, counts.unwrap_or(&[]), inputs)?;
        }
        Ok(Self {
            formulas: out,
            params,
            inputs: inputs.to_vec(),
        })
    }

    /// The formula of `field`, if present.
    pub fn formula(&self, field: Field) -> Option<&Bound> {
        self.formulas.iter().find(|b| b.field == field)
    }

    /// The bar columns the formulas read, in the order open, high, low, close, volume (the
    /// inputs they read: [`Program::inputs_read`]).
    pub fn columns(&self) -> Vec<Column> {
        let mut read = [false; 5];
        let mut mark = |c: Column| {
            if let Some(k) = c.bar_index() {
                read[k] = true;
            }
        };
        for b in &self.formulas {
            for node in &b.formula.nodes {
                match node {
                    Node::Column(c) => mark(*c),
                    Node::Call { func, .. } => function(*func).reads.iter().for_each(|c| mark(*c)),
                    _ => {}
                }
            }
        }
        Column::ALL
            .into_iter()
            .filter(|c| c.bar_index().is_some_and(|k| read[k]))
            .collect()
    }

    /// The higher timeframes the formulas call (`daily`, `weekly`, `monthly`), each once, in
    /// that order. A program with any has no lookback in bars (expressions.md: `warmup:
    /// "auto"` is refused and explain's `lookback` is null).
    pub fn timeframes(&self) -> Vec<Timeframe> {
        Timeframe::ALL
            .into_iter()
            .filter(|tf| {
                self.formulas.iter().any(|b| {
                    b.formula.nodes.iter().any(|n| match n {
                        Node::Call { func, .. } => function(*func).timeframe() == Some(*tf),
                        _ => false,
                    })
                })
            })
            .collect()
    }

    /// The names of the inputs the formulas read, in `inputs` order.
    pub fn inputs_read(&self) -> Vec<&str> {
        let read = |k: usize| {
            self.formulas.iter().any(|b| {
                b.formula
                    .nodes
                    .contains(&Node::Column(Column::Input(k as u8)))
            })
        };
        (0..self.inputs.len())
            .filter(|&k| read(k))
            .map(|k| self.inputs[k].as_str())
            .collect()
    }

    /// The canonical text of each formula, in field order.
    pub fn canonical(&self) -> Vec<(Field, String)> {
        self.formulas
            .iter()
            .map(|b| (b.field, super::canon::text_with(&b.formula, &self.inputs)))
            .collect()
    }
}

/// Checks a strategy's `inputs` (docs/language.md, "Your own columns"): each a NAME of the
/// grammar, not a bar column nor a function name, listed once.
fn check_inputs(inputs: &[String]) -> Result<()> {
    if inputs.len() > MAX_INPUTS {
        return Err(Error::Strategy(format!(
            "`inputs` lists {} columns; at most {MAX_INPUTS} (limit)",
            inputs.len()
        )));
    }
    for (k, name) in inputs.iter().enumerate() {
        let bad = |why: &str| Err(Error::Strategy(format!("`inputs[{k}]` {name:?} {why}")));
        if !parse::is_name(name) {
            return bad(
                "is not a name a formula can use (lower case letters, digits and `_`, not \
                 starting with a digit, not a Python keyword, at most 64 bytes)",
            );
        }
        if Column::from_name(name).is_some() {
            return bad("is a bar column already; formulas read it without `inputs`");
        }
        if super::registry::is_function(name) {
            return bad("is a function's name; a column cannot take it");
        }
        if inputs[..k].contains(name) {
            return bad("is listed twice");
        }
    }
    Ok(())
}

/// A portfolio's count parameters (`longs`, `shorts`, `keep`, `rebalance` given as names): int,
/// numbered where they come (after the weight's parameters, before the constraint's).
fn add_counts(params: &mut Vec<Param>, counts: &[&str], inputs: &[String]) -> Result<()> {
    for &name in counts {
        let bad = |why: &str| Err(Error::Strategy(format!("`{name}` {why}")));
        if Column::from_name(name).is_some() || inputs.iter().any(|i| i == name) {
            return bad(
                "is a column, not a parameter: a count or `rebalance` is an integer or a parameter name",
            );
        }
        if RESERVED.contains(&name) || PORTFOLIO_RESERVED.contains(&name) {
            return bad("names a column of the reply; call the parameter something else");
        }
        let full = params.len() == MAX_PARAMS;
        match params.iter_mut().find(|p| p.name == name) {
            Some(p) => p.kind = ParamKind::Int,
            None if full => {
                return Err(Error::Strategy(format!(
                    "a strategy has at most {MAX_PARAMS} parameters (limit)"
                )));
            }
            None => params.push(Param {
                name: name.to_owned(),
                kind: ParamKind::Int,
            }),
        }
    }
    Ok(())
}

fn check(
    field: Field,
    mut formula: Formula,
    params: &mut Vec<Param>,
    inputs: &[String],
    reserved: &[&str],
) -> Result<Bound> {
    // An input's name is a column wherever it appears (never a parameter).
    for node in &mut formula.nodes {
        if let Node::Param(name) = node
            && let Some(k) = inputs.iter().position(|i| **i == **name)
        {
            *node = Node::Column(Column::Input(k as u8));
        }
    }
    let here = |id: u32, message: String| Error::Formula {
        field: field.name().to_owned(),
        offset: formula.offset(id),
        message,
    };
    let n = formula.nodes.len();
    let mut kinds: Vec<Kind> = Vec::with_capacity(n);
    let mut indices: Vec<Option<u16>> = vec![None; n];
    // Windows are found where they are used, after the parameter node itself: note them, and
    // mark the parameters int once every node is seen.
    let mut windows: Vec<u16> = Vec::new();
    // For each node, a higher-timeframe call in its subtree (itself included), if any.
    let mut framed: Vec<Option<u32>> = Vec::with_capacity(n);
    for (i, node) in formula.nodes.iter().enumerate() {
        let inner = node.operands().iter().find_map(|&o| framed[o as usize]);
        if let Node::Call { func, .. } = node
            && let Some(tf) = function(*func).timeframe()
        {
            if let Some(inner) = inner {
                let Node::Call { func: g, .. } = formula.node(inner) else {
                    unreachable!("a framed node is a call")
                };
                return Err(here(
                    inner,
                    format!(
                        "{}(...) inside {}(...): higher-timeframe calls do not nest; compute the \
                         inner formula on one timeframe (e.g. `{}(sma(close, 10))`)",
                        function(*g).name,
                        tf.name(),
                        tf.name()
                    ),
                ));
            }
            framed.push(Some(i as u32));
        } else {
            framed.push(inner);
        }
        let id = i as u32;
        let number = |a: u32, what: &str| -> Result<()> {
            match kinds[a as usize] {
                Kind::Cond => Err(here(
                    a,
                    format!("{what} takes a number or a series here, got a condition"),
                )),
                _ => Ok(()),
            }
        };
        let cond = |a: u32, what: &str| -> Result<()> {
            match kinds[a as usize] {
                Kind::Cond => Ok(()),
                k => Err(here(
                    a,
                    format!("{what} takes a condition here, got {}", k.noun()),
                )),
            }
        };
        let kind = match node {
            Node::Number { .. } => Kind::Const,
            Node::Column(_) => Kind::Series,
            Node::Param(name) => {
                if RESERVED.contains(&&**name) || reserved.contains(&&**name) {
                    return Err(here(
                        id,
                        format!(
                            "`{name}` names a column of the reply; call the parameter something else"
                        ),
                    ));
                }
                let k = match params.iter().position(|p| *p.name == **name) {
                    Some(k) => k,
                    None => {
                        if params.len() == MAX_PARAMS {
                            return Err(here(
                                id,
                                format!("a strategy has at most {MAX_PARAMS} parameters (limit)"),
                            ));
                        }
                        params.push(Param {
                            name: name.to_string(),
                            kind: ParamKind::Number,
                        });
                        params.len() - 1
                    }
                };
                indices[i] = Some(k as u16);
                Kind::Const
            }
            Node::Call { func, args } => {
                let f = function(*func);
                for (&a, arg) in args.iter().zip(f.args) {
                    let what = f.signature.to_owned();
                    match arg {
                        Arg::Series => number(a, &what)?,
                        Arg::Cond => cond(a, &what)?,
                        Arg::Window => match formula.node(a) {
                            Node::Number {
                                value,
                                integer: true,
                            } if (1.0..=f64::from(MAX_WINDOW)).contains(value) => {}
                            Node::Number { value, .. } => {
                                return Err(here(
                                    a,
                                    format!(
                                        "a window of {} is an integer in 1..={MAX_WINDOW} or a parameter, got {}",
                                        f.signature,
                                        super::canon::number(*value)
                                    ),
                                ));
                            }
                            Node::Param(_) => {
                                windows.push(indices[a as usize].expect("a parameter node"))
                            }
                            _ => {
                                return Err(here(
                                    a,
                                    format!(
                                        "a window of {} is an integer or a parameter, not a formula (no arithmetic in a window)",
                                        f.signature
                                    ),
                                ));
                            }
                        },
                    }
                }
                match f.returns {
                    Returns::Series => Kind::Series,
                    Returns::Cond => Kind::Cond,
                }
            }
            Node::Neg(a) => {
                number(*a, "unary `-`")?;
                kinds[*a as usize]
            }
            Node::Arith(op, a, b) => {
                let what = format!("`{}`", op.symbol());
                number(*a, &what)?;
                number(*b, &what)?;
                if kinds[*a as usize] == Kind::Series || kinds[*b as usize] == Kind::Series {
                    Kind::Series
                } else {
                    Kind::Const
                }
            }
            Node::Compare(op, a, b) => {
                let what = format!("`{}` (comparisons of conditions are refused)", op.symbol());
                number(*a, &what)?;
                number(*b, &what)?;
                Kind::Cond
            }
            Node::Not(a) => {
                cond(*a, "`not`")?;
                Kind::Cond
            }
            Node::And(a, b) | Node::Or(a, b) => {
                let what = if matches!(node, Node::And(..)) {
                    "`and`"
                } else {
                    "`or`"
                };
                cond(*a, what)?;
                cond(*b, what)?;
                Kind::Cond
            }
        };
        kinds.push(kind);
    }
    for k in windows {
        params[k as usize].kind = ParamKind::Int;
    }
    let root = formula.root();
    if !field.is_condition() && kinds[root as usize] == Kind::Cond {
        return Err(here(
            root,
            format!(
                "`{}` must be a number or a series ({}), got a condition",
                field.name(),
                match field {
                    Field::Rank => "higher ranks first, e.g. `roc(close, n)`",
                    Field::Weight => "a weight per series, e.g. `1 / std(roc(close, 1), 20)`",
                    _ => "the fraction of the entry for each trade, e.g. `2 * atr(14) / close`",
                }
            ),
        ));
    }
    if field.is_condition() && kinds[root as usize] != Kind::Cond {
        return Err(here(
            root,
            format!(
                "`{}` must be a condition (a comparison, a cross, and/or/not), got {}",
                field.name(),
                kinds[root as usize].noun()
            ),
        ));
    }
    if field == Field::Constraint
        && let Some(i) = formula
            .nodes
            .iter()
            .position(|n| matches!(n, Node::Column(_) | Node::Call { .. }))
    {
        return Err(here(
            i as u32,
            "a constraint reads only parameters and numbers (no columns, no functions)".into(),
        ));
    }
    // Each node's timeframe, from the root down (a parent comes after its operands).
    let mut frames: Vec<Option<Timeframe>> = vec![None; n];
    for (i, node) in formula.nodes.iter().enumerate().rev() {
        let inside = match node {
            Node::Call { func, .. } => function(*func).timeframe().or(frames[i]),
            _ => frames[i],
        };
        for o in node.operands() {
            frames[o as usize] = inside;
        }
    }
    Ok(Bound {
        field,
        formula,
        kinds,
        params: indices,
        frames,
    })
}
