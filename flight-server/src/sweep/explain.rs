//! The `explain` action (protocol v1.3, expressions.md "Explain"): the plan of a sweep body as
//! JSON, nothing run. The strategy (a built-in name or an object of formulas) is parsed and
//! bound by the kernel's language layer; every combo of `params`, `grid` or `lengths` (after
//! the constraint) is bound into one plan, whose distinct series nodes are the reply's
//! `arrays`.
//!
//! The body is read here rather than by the protocol crate's `SweepRequest`, which carries
//! built-in names only until formula strategies reach the sweep verbs.

use serde_json::{Map, Value, json};
use sweepflight_kernel::builtins::Builtin;
use sweepflight_kernel::expr::bind::MAX_WINDOW;
use sweepflight_kernel::expr::{Column, Field, ParamKind, Program};
use sweepflight_kernel::plan::{Plan, constraint_holds};
use sweepflight_kernel::{Combo, Params, Strategy};

use crate::{Error, Result};

/// The strategy of a body and, for a built-in name, the kernel's strategy (its v1.2 checks).
fn program(body: &Map<String, Value>) -> Result<(Program, Option<Strategy>)> {
    let constraint = match body.get("constraint") {
        None => None,
        Some(Value::String(c)) => Some(c.as_str()),
        Some(_) => return Err(Error::invalid("`constraint` must be a string (a formula)")),
    };
    let mut fields: Vec<(Field, &str)> = Vec::new();
    let builtin = match body.get("strategy") {
        None | Some(Value::String(_)) => {
            let name = body
                .get("strategy")
                .and_then(Value::as_str)
                .unwrap_or("hma_sar");
            let b = Builtin::named(name).ok_or_else(|| {
                let known: Vec<&str> = sweepflight_kernel::builtins::BUILTINS
                    .iter()
                    .map(|b| b.name)
                    .collect();
                Error::invalid(format!(
                    "unknown strategy {name:?}; known: {} (or an object of formulas)",
                    known.join(", ")
                ))
            })?;
            fields.push((Field::Long, b.long));
            fields.push((Field::Short, b.short));
            Strategy::from_name(name)
        }
        Some(Value::Object(formulas)) => {
            for (key, text) in formulas {
                let field = Field::STRATEGY
                    .into_iter()
                    .find(|f| f.name() == key)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "strategy has unknown field {key:?}; it takes long, short, exit_long, exit_short"
                        ))
                    })?;
                let text = text.as_str().ok_or_else(|| {
                    Error::invalid(format!("strategy.{key} must be a string (a formula)"))
                })?;
                fields.push((field, text));
            }
            None
        }
        Some(_) => {
            return Err(Error::invalid(
                "`strategy` must be a built-in name or an object of formulas",
            ));
        }
    };
    if let Some(c) = constraint {
        fields.push((Field::Constraint, c));
    }
    Ok((Program::new(&fields)?, builtin))
}

/// Parameter `k`'s value from JSON, as its kind takes it.
fn value(program: &Program, builtin: bool, k: usize, v: &Value, at: &str) -> Result<f64> {
    let p = &program.params[k];
    match p.kind {
        ParamKind::Int => {
            let max = if builtin {
                2_147_483_647
            } else {
                u64::from(MAX_WINDOW)
            };
            match v.as_u64() {
                Some(n) if (1..=max).contains(&n) => Ok(n as f64),
                _ => Err(Error::invalid(format!(
                    "{at}: `{}` is a window, an integer in 1..={max}, got {v}",
                    p.name
                ))),
            }
        }
        ParamKind::Number => match v.as_f64() {
            Some(x) if x.is_finite() && v.is_number() => Ok(x),
            _ => Err(Error::invalid(format!(
                "{at}: `{}` must be a finite number, got {v}",
                p.name
            ))),
        },
    }
}

/// Every combo of the body, after the constraint.
fn combos(
    body: &Map<String, Value>,
    program: &Program,
    builtin: Option<Strategy>,
    max_grid: usize,
) -> Result<Vec<Vec<f64>>> {
    let width = program.params.len();
    let forms = ["lengths", "params", "grid", "sample"];
    let given: Vec<&str> = forms
        .into_iter()
        .filter(|f| body.contains_key(*f))
        .collect();
    if given.len() != 1 {
        return Err(Error::invalid(format!(
            "give exactly one of `params`, `grid`{}, got {}",
            if builtin == Some(Strategy::HmaSar) {
                ", `lengths`"
            } else {
                ""
            },
            if given.is_empty() {
                "none".to_owned()
            } else {
                given.join(", ")
            }
        )));
    }
    let check = |values: Vec<f64>, at: &str| -> Result<Vec<f64>> {
        if let Some(s) = builtin {
            Params::new(s, &values).map_err(|e| Error::invalid(format!("{at}: {e}")))?;
        }
        Ok(values)
    };
    let list = |v: &Value, what: &str| -> Result<Vec<Value>> {
        v.as_array()
            .cloned()
            .ok_or_else(|| Error::invalid(format!("`{what}` must be a list")))
    };
    match given[0] {
        "lengths" if builtin == Some(Strategy::HmaSar) => list(&body["lengths"], "lengths")?
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let l = l
                    .as_u64()
                    .and_then(|l| u32::try_from(l).ok())
                    .ok_or_else(|| {
                        Error::invalid(format!("lengths[{i}] must be an integer >= 1"))
                    })?;
                let c = Combo::from_length(l)
                    .map_err(|e| Error::invalid(format!("lengths[{i}]: {e}")))?;
                Ok(c.windows().iter().map(|&w| f64::from(w)).collect())
            })
            .collect(),
        "lengths" => Err(Error::invalid(
            "`lengths` derives hma_sar windows; give `params` or `grid`",
        )),
        "params" => {
            let tuples = list(&body["params"], "params")?;
            if tuples.len() > max_grid {
                return Err(Error::invalid(format!(
                    "{} combos is more than --max-grid-combos ({max_grid})",
                    tuples.len()
                )));
            }
            let names: Vec<&str> = program.params.iter().map(|p| p.name.as_str()).collect();
            tuples
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let at = format!("params[{i}]");
                    let t = t.as_array().filter(|t| t.len() == width).ok_or_else(|| {
                        Error::invalid(format!(
                            "{at} must be a list of {width} values [{}]",
                            names.join(", ")
                        ))
                    })?;
                    let values = t
                        .iter()
                        .enumerate()
                        .map(|(k, v)| value(program, builtin.is_some(), k, v, &at))
                        .collect::<Result<Vec<f64>>>()?;
                    if !constraint_holds(program, &values) {
                        return Err(Error::invalid(format!("{at} breaks the constraint")));
                    }
                    check(values, &at)
                })
                .collect()
        }
        "grid" => {
            let grid = body["grid"]
                .as_object()
                .ok_or_else(|| Error::invalid("`grid` must be an object of lists"))?;
            if let Some(unknown) = grid
                .keys()
                .find(|k| !program.params.iter().any(|p| p.name == **k))
            {
                return Err(Error::invalid(format!(
                    "`grid` has unknown parameter {unknown:?}; the strategy's parameters are {}",
                    program
                        .params
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            let mut axes: Vec<Vec<f64>> = Vec::with_capacity(width);
            for (k, p) in program.params.iter().enumerate() {
                let values = grid.get(&p.name).ok_or_else(|| {
                    Error::invalid(format!("`grid` has no values for parameter `{}`", p.name))
                })?;
                let values = list(values, &format!("grid.{}", p.name))?;
                if values.is_empty() {
                    return Err(Error::invalid(format!("grid.{} is empty", p.name)));
                }
                axes.push(
                    values
                        .iter()
                        .enumerate()
                        .map(|(j, v)| {
                            value(
                                program,
                                builtin.is_some(),
                                k,
                                v,
                                &format!("grid.{}[{j}]", p.name),
                            )
                        })
                        .collect::<Result<_>>()?,
                );
            }
            let total = axes.iter().try_fold(1usize, |n, a| n.checked_mul(a.len()));
            if total.is_none_or(|n| n > max_grid) {
                return Err(Error::invalid(format!(
                    "the grid's product is more than --max-grid-combos ({max_grid})"
                )));
            }
            let total = total.unwrap_or(0);
            let mut out = Vec::new();
            for i in 0..total {
                // The first parameter outermost.
                let mut rest = i;
                let mut values = vec![0.0; width];
                for k in (0..width).rev() {
                    values[k] = axes[k][rest % axes[k].len()];
                    rest /= axes[k].len();
                }
                if constraint_holds(program, &values)
                    && check(values.clone(), &format!("grid combo {i}")).is_ok()
                {
                    out.push(values);
                }
            }
            Ok(out)
        }
        _ => Err(Error::Unimplemented(
            "`explain` of a `sample` body is not served yet",
        )),
    }
}

/// The `explain` reply of a sweep body.
///
/// # Errors
/// INVALID_ARGUMENT for a body, strategy, formula or combo the contract refuses, naming it.
pub(crate) fn explain(body: &[u8], max_grid: usize) -> Result<Value> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| Error::invalid(format!("the explain body is not JSON: {e}")))?;
    let body = v
        .as_object()
        .ok_or_else(|| Error::invalid("the explain body must be a JSON object (a sweep body)"))?;
    let (program, builtin) = program(body)?;
    let combos = combos(body, &program, builtin, max_grid)?;
    let mut plan = Plan::new();
    let mut lookback = 0;
    for values in &combos {
        lookback = lookback.max(plan.bind(&program, values).lookback);
    }
    let mut columns = program.columns();
    if !columns.contains(&Column::Close) {
        columns.push(Column::Close);
        columns.sort();
    }
    let formulas: Map<String, Value> = program
        .canonical()
        .into_iter()
        .map(|(f, text)| (f.name().to_owned(), Value::String(text)))
        .collect();
    Ok(json!({
        "params": program.params.iter().map(|p| json!({"name": p.name, "kind": p.kind.name()})).collect::<Vec<_>>(),
        "formulas": formulas,
        "combos": combos.len(),
        "lookback": lookback,
        "arrays": plan.arrays(),
        "columns": columns.iter().map(|c| c.name()).collect::<Vec<_>>(),
    }))
}
