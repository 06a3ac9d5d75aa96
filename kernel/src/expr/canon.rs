//! Canonical text (docs/language.md, "Explain"): calls as `f(a, b)`, binary operators with one
//! space each side, `-x`, `not x`, numbers as Python's `repr(float)` with integers written
//! without `.0`, and parentheses only where the grammar needs them. Parsing the text gives the
//! same tree.

use super::registry::function;
use super::tree::{Formula, Node};

/// Binding strength: `or` 1, `and` 2, `not` 3, comparisons 4, `+ -` 5, `* /` 6, unary minus 7,
/// atoms 8.
fn strength(node: &Node) -> u8 {
    match node {
        Node::Or(..) => 1,
        Node::And(..) => 2,
        Node::Not(_) => 3,
        Node::Compare(..) => 4,
        Node::Arith(op, ..) => match op {
            super::tree::BinOp::Add | super::tree::BinOp::Sub => 5,
            super::tree::BinOp::Mul | super::tree::BinOp::Div => 6,
        },
        Node::Neg(_) => 7,
        Node::Number { .. } | Node::Column(_) | Node::Param(_) | Node::Call { .. } => 8,
    }
}

/// `v` as Python's `repr(float)`, without the `.0` of an integer (`v` finite, >= 0).
pub fn number(v: f64) -> String {
    // Rust's `{:e}` gives the shortest digits that round-trip, as Python's repr does; only the
    // layout differs.
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if v == 0.0 {
        return format!("{sign}0");
    }
    // Python: positional when -4 <= exp < 16, else d.ddde+XX.
    if (-4..16).contains(&exp) {
        let point = exp + 1;
        let text = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}", "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{text}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits
        };
        let e_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{e_sign}{:02}", exp.abs())
    }
}

/// The canonical text of `formula` (a formula of a program without inputs).
pub fn text(formula: &Formula) -> String {
    text_with(formula, &[])
}

/// The canonical text of `formula`, whose input columns are named by `inputs`.
pub fn text_with(formula: &Formula, inputs: &[String]) -> String {
    let mut out: Vec<String> = Vec::with_capacity(formula.nodes.len());
    let wrap = |out: &Vec<String>, id: u32, paren: bool| {
        let t = &out[id as usize];
        if paren { format!("({t})") } else { t.clone() }
    };
    for node in &formula.nodes {
        let s = |id: u32| strength(formula.node(id));
        let t = match node {
            Node::Number { value, .. } => number(*value),
            Node::Column(super::tree::Column::Input(k)) => inputs
                .get(usize::from(*k))
                .map_or_else(|| format!("input{k}"), Clone::clone),
            Node::Column(c) => c.name().to_owned(),
            Node::Param(p) => p.to_string(),
            Node::Call { func, args } => format!(
                "{}({})",
                function(*func).name,
                args.iter()
                    .map(|&a| out[a as usize].clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Node::Neg(a) => format!("-{}", wrap(&out, *a, s(*a) < 7)),
            Node::Not(a) => format!("not {}", wrap(&out, *a, s(*a) < 3)),
            Node::Arith(op, a, b) => {
                let own = strength(node);
                format!(
                    "{} {} {}",
                    wrap(&out, *a, s(*a) < own),
                    op.symbol(),
                    wrap(&out, *b, s(*b) <= own)
                )
            }
            Node::Compare(op, a, b) => format!(
                "{} {} {}",
                wrap(&out, *a, s(*a) <= 4),
                op.symbol(),
                wrap(&out, *b, s(*b) <= 4)
            ),
            Node::And(a, b) => format!(
                "{} and {}",
                wrap(&out, *a, s(*a) < 2),
                wrap(&out, *b, s(*b) <= 2)
            ),
            Node::Or(a, b) => format!(
                "{} or {}",
                wrap(&out, *a, s(*a) < 1),
                wrap(&out, *b, s(*b) <= 1)
            ),
        };
        out.push(t);
    }
    out.pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_python_repr() {
        for (v, want) in [
            (0.0, "0"),
            (1.0, "1"),
            (2.5, "2.5"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000"),
            (1e16, "1e+16"),
            (1.2345e20, "1.2345e+20"),
            (123456.789, "123456.789"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(number(v), want, "{v}");
        }
    }
}
