//! The values a sweep gives one path: a list (`50,100,150`), a range with a
//! step (`50..200:25`, `10ms..100ms:10ms`, `0.5..0.9:0.1`) or a geometric
//! range (`1000..100000:*10`, `1ms..1s:*2`). Every value is computed
//! exactly, in integers; a range includes its end when a step lands on it.

use toml_edit::Value;

use crate::decimal::Decimal;
use crate::error::{FieldError, field_error};
use crate::time::Nanos;

/// Most values on one axis.
pub const MAX_VALUES: usize = 10_000;

/// Parses the values after `PATH=` on the command line.
pub fn parse(spec: &str) -> Result<Vec<Value>, FieldError> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(
            "no values given; write a list like 50,100,150 or a range like 50..200:25".into(),
        );
    }
    let values = match spec.split_once("..") {
        Some((start, rest)) if !spec.contains(',') => {
            let (end, step) = rest.split_once(':').ok_or_else(|| {
                format!("the range {spec:?} has no step; write START..END:STEP (like 50..200:25) or START..END:*FACTOR (like 1000..100000:*10)")
            })?;
            range(spec, start.trim(), end.trim(), step.trim())?
        }
        _ => spec
            .split(',')
            .map(|item| literal(item.trim()))
            .collect::<Result<_, _>>()?,
    };
    check_count(spec, values)
}

/// The values of a `[[sweep]]` entry's `values = [...]` array.
pub fn from_array(array: &toml_edit::Array) -> Result<Vec<Value>, FieldError> {
    let values: Vec<Value> = array.iter().map(normalised).collect();
    if values.is_empty() {
        return Err(field_error!("values", "the list is empty"));
    }
    check_count("values", values)
}

fn check_count(spec: &str, values: Vec<Value>) -> Result<Vec<Value>, FieldError> {
    if values.len() > MAX_VALUES {
        return Err(format!(
            "{spec:?} gives {} values, more than {MAX_VALUES} on one axis; use a coarser step",
            values.len()
        )
        .into());
    }
    Ok(values)
}

/// A value as the file would hold it, without the spaces around it.
pub fn normalised(value: &Value) -> Value {
    let mut value = value.clone();
    value.decor_mut().clear();
    value
}

/// The value as printed in tables and CSV: strings without quotes.
pub fn label(value: &Value) -> String {
    match value.as_str() {
        Some(text) => text.to_owned(),
        None => normalised(value).to_string(),
    }
}

/// The value in `sweep.json`.
pub fn json(value: &Value) -> serde_json::Value {
    match value {
        Value::Integer(i) => serde_json::Value::from(*i.value()),
        Value::Float(f) => serde_json::Value::from(*f.value()),
        Value::Boolean(b) => serde_json::Value::from(*b.value()),
        Value::String(s) => serde_json::Value::from(s.value().as_str()),
        other => serde_json::Value::from(normalised(other).to_string()),
    }
}

/// One item of a list: a TOML value (`100`, `0.7`, `true`, `"epoch"`), or
/// else the text as a string (`10ms`, `epoch`).
fn literal(item: &str) -> Result<Value, FieldError> {
    if item.is_empty() {
        return Err("an empty value in the list".into());
    }
    Ok(item
        .parse::<Value>()
        .map_or_else(|_| Value::from(item), |value| normalised(&value)))
}

fn range(spec: &str, start: &str, end: &str, step: &str) -> Result<Vec<Value>, FieldError> {
    let (geometric, step) = match step.strip_prefix('*') {
        Some(factor) => (true, factor.trim()),
        None => (false, step),
    };
    let factor = || {
        Decimal::parse(step)
            .ok()
            .filter(|f| f.numerator() > f.denominator())
            .ok_or_else(|| format!("{spec:?}: the factor {step:?} must be a number above 1"))
    };
    // Integers, then durations, then decimals: the first reading of all
    // three bounds that works.
    if let (Ok(a), Ok(b)) = (start.parse::<i64>(), end.parse::<i64>()) {
        let numbers = if geometric {
            geometric_steps(spec, i128::from(a), i128::from(b), factor()?)?
        } else {
            let step = step.parse::<i64>().ok().filter(|&s| s > 0).ok_or_else(|| {
                format!(
                    "{spec:?}: the step {step:?} must be a whole number above 0, like the bounds"
                )
            })?;
            linear_steps(spec, i128::from(a), i128::from(b), i128::from(step))?
        };
        return Ok(numbers
            .into_iter()
            .map(|n| Value::from(i64::try_from(n).expect("between two i64 bounds")))
            .collect());
    }
    if let (Ok(a), Ok(b)) = (Nanos::parse(start), Nanos::parse(end)) {
        let numbers =
            if geometric {
                geometric_steps(spec, i128::from(a.get()), i128::from(b.get()), factor()?)?
            } else {
                let step = Nanos::parse(step).ok().filter(|s| s.get() > 0).ok_or_else(|| {
                format!("{spec:?}: the step {step:?} must be a duration above 0, like the bounds")
            })?;
                linear_steps(
                    spec,
                    i128::from(a.get()),
                    i128::from(b.get()),
                    i128::from(step.get()),
                )?
            };
        return Ok(numbers
            .into_iter()
            .map(|n| {
                Value::from(Nanos(u64::try_from(n).expect("between two u64 bounds")).exact_text())
            })
            .collect());
    }
    if let (Ok(a), Ok(b), Ok(s), false) = (
        Decimal::parse(start),
        Decimal::parse(end),
        Decimal::parse(step),
        geometric,
    ) {
        // All three at the finest scale among them, as integers.
        let scale = [a, b, s].iter().map(|d| d.denominator()).max().unwrap_or(1);
        let at = |d: Decimal| i128::from(d.numerator()) * i128::from(scale / d.denominator());
        if at(s) == 0 {
            return Err(format!("{spec:?}: the step must be above 0").into());
        }
        let digits = scale.ilog10() as usize;
        return Ok(linear_steps(spec, at(a), at(b), at(s))?
            .into_iter()
            .map(|units| {
                let text = format!(
                    "{}.{:0digits$}",
                    units / i128::from(scale),
                    units % i128::from(scale)
                );
                Value::from(text.parse::<f64>().expect("digits and a point"))
            })
            .collect());
    }
    Err(format!(
        "{spec:?}: the bounds and step must all be whole numbers (50..200:25), durations (10ms..1s:10ms) or decimals (0.5..0.9:0.1); a geometric range (*FACTOR) takes whole numbers or durations"
    ).into())
}

fn linear_steps(spec: &str, start: i128, end: i128, step: i128) -> Result<Vec<i128>, FieldError> {
    if start > end {
        return Err(format!("{spec:?}: the range ends before it starts").into());
    }
    let count = (end - start) / step + 1;
    if count > MAX_VALUES as i128 {
        return Err(format!(
            "{spec:?} gives {count} values, more than {MAX_VALUES} on one axis; use a coarser step"
        )
        .into());
    }
    Ok((0..count).map(|k| start + k * step).collect())
}

/// `start`, then each value × `factor` rounded half up, while within `end`.
fn geometric_steps(
    spec: &str,
    start: i128,
    end: i128,
    factor: Decimal,
) -> Result<Vec<i128>, FieldError> {
    if start <= 0 {
        return Err(format!("{spec:?}: a geometric range must start above 0").into());
    }
    if start > end {
        return Err(format!("{spec:?}: the range ends before it starts").into());
    }
    let (num, den) = (
        i128::from(factor.numerator()),
        i128::from(factor.denominator()),
    );
    let mut values = vec![start];
    let mut current = start;
    loop {
        // Rounding may not move a small value: then it moves by one.
        let next = ((current * num * 2 + den) / (den * 2)).max(current + 1);
        if next > end {
            break;
        }
        values.push(next);
        current = next;
        if values.len() > MAX_VALUES {
            return Err(format!(
                "{spec:?} gives more than {MAX_VALUES} values on one axis; use a larger factor"
            )
            .into());
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(spec: &str) -> Vec<String> {
        parse(spec).unwrap().iter().map(label).collect()
    }

    #[test]
    fn lists_take_toml_values_and_bare_words() {
        assert_eq!(labels("50, 100,150"), ["50", "100", "150"]);
        assert_eq!(labels("10ms,epoch,\"first\""), ["10ms", "epoch", "first"]);
        assert_eq!(labels("0.7,true"), ["0.7", "true"]);
        assert!(parse("1,,2").is_err());
    }

    #[test]
    fn linear_ranges_include_the_end_when_a_step_lands_on_it() {
        assert_eq!(labels("50..200:50"), ["50", "100", "150", "200"]);
        assert_eq!(labels("50..190:50"), ["50", "100", "150"]);
        assert_eq!(labels("-2..2:2"), ["-2", "0", "2"]);
        assert_eq!(labels("500ms..2s:500ms"), ["500ms", "1s", "1500ms", "2s"]);
        assert_eq!(labels("0.5..0.9:0.1"), ["0.5", "0.6", "0.7", "0.8", "0.9"]);
    }

    #[test]
    fn geometric_ranges_multiply_exactly() {
        assert_eq!(labels("1000..100000:*10"), ["1000", "10000", "100000"]);
        assert_eq!(labels("1..10:*1.5"), ["1", "2", "3", "5", "8"]);
        assert_eq!(labels("1ms..1s:*10"), ["1ms", "10ms", "100ms", "1s"]);
    }

    #[test]
    fn bad_ranges_say_why() {
        for (spec, expect) in [
            ("200..50:10", "ends before it starts"),
            ("1..10", "has no step"),
            ("1..10:0", "above 0"),
            ("0..10:*2", "start above 0"),
            ("1..10:*1", "above 1"),
            ("0..1000000:1", "more than 10000"),
            ("a..b:c", "whole numbers"),
        ] {
            let err = parse(spec).unwrap_err();
            assert!(err.to_string().contains(expect), "{spec}: {err}");
        }
    }

    #[test]
    fn exact_durations_read_back_the_same() {
        for ns in [1, 999, 1_000, 1_500_000_000, 60_000_000_000, 7_000_001] {
            assert_eq!(Nanos::parse(&Nanos(ns).exact_text()), Ok(Nanos(ns)));
        }
    }
}
