//! JSON values in and out of the shared document.
//!
//! Plain values (metadata entries, outputs' `data`, counts) are Yjs "any" values; shared
//! types (a cell's `source` text, its `metadata` map, the `outputs` array, a stream output's
//! `text`) read as the JSON they stand for. Numbers read the way `jupyter_ydoc` reads them:
//! Yjs writes every number as a float unless it fits a 32-bit integer, so a float with no
//! fraction within 2^53 is an integer again (an execution count stays `3`, not `3.0`).
//! Nesting deeper than [`MAX_DEPTH`] reads as `null` (nothing a notebook holds is that deep).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map as JsonMap, Number as JsonNumber, Value};
use yrs::any::Number;
use yrs::{Any, Array, GetString, Map, Out, ReadTxn};

/// Nesting read or written at most; deeper values are `null`.
pub const MAX_DEPTH: usize = 128;

/// The largest integer a float stands for exactly (2^53).
const SAFE_INT: f64 = 9_007_199_254_740_992.0;

/// A JSON value as a Yjs value. Integers outside what JavaScript holds exactly become floats
/// (as JupyterLab would write them); nesting past [`MAX_DEPTH`] becomes `null`.
pub fn to_any(v: &Value) -> Any {
    to_any_at(v, 0)
}

fn to_any_at(v: &Value, depth: usize) -> Any {
    if depth > MAX_DEPTH {
        return Any::Null;
    }
    match v {
        Value::Null => Any::Null,
        Value::Bool(b) => Any::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) if (i as f64).abs() < SAFE_INT => Any::Number(Number::Int(i)),
            _ => Any::Number(Number::Float(n.as_f64().unwrap_or(0.0))),
        },
        Value::String(s) => Any::String(Arc::from(s.as_str())),
        Value::Array(items) => Any::Array(items.iter().map(|x| to_any_at(x, depth + 1)).collect()),
        Value::Object(m) => {
            let map: HashMap<String, Any> = m
                .iter()
                .map(|(k, x)| (k.clone(), to_any_at(x, depth + 1)))
                .collect();
            Any::Map(Arc::new(map))
        }
    }
}

/// A Yjs value as JSON (`undefined` and binary buffers, which JSON lacks, as `null`).
pub fn from_any(a: &Any) -> Value {
    from_any_at(a, 0)
}

fn from_any_at(a: &Any, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    match a {
        Any::Null | Any::Undefined | Any::Buffer(_) => Value::Null,
        Any::Bool(b) => Value::Bool(*b),
        Any::Number(Number::Int(i)) => Value::from(*i),
        Any::Number(Number::Float(f)) => float(*f),
        Any::String(s) => Value::String(s.to_string()),
        Any::Array(items) => {
            Value::Array(items.iter().map(|x| from_any_at(x, depth + 1)).collect())
        }
        Any::Map(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), from_any_at(x, depth + 1)))
                .collect(),
        ),
    }
}

/// A float as JSON: an integer when it has no fraction and is exact, `null` when not finite.
fn float(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < SAFE_INT {
        return Value::from(f as i64);
    }
    JsonNumber::from_f64(f).map_or(Value::Null, Value::Number)
}

/// A document value as JSON: texts as strings, maps as objects, arrays as lists.
pub fn from_out<T: ReadTxn>(txn: &T, out: &Out) -> Value {
    from_out_at(txn, out, 0)
}

fn from_out_at<T: ReadTxn>(txn: &T, out: &Out, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    match out {
        Out::Any(a) => from_any_at(a, depth),
        Out::YText(t) => Value::String(t.get_string(txn)),
        Out::YMap(m) => {
            let mut obj = JsonMap::new();
            for (k, v) in m.iter(txn) {
                obj.insert(k.to_string(), from_out_at(txn, &v, depth + 1));
            }
            Value::Object(obj)
        }
        Out::YArray(a) => Value::Array(
            a.iter(txn)
                .map(|v| from_out_at(txn, &v, depth + 1))
                .collect(),
        ),
        // XML types, sub-documents: not part of a notebook.
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_survives_a_round_trip_through_any() {
        let v = json!({"a": [1, 2.5, "x", null, true], "b": {"c": -7}, "big": 1e300});
        assert_eq!(from_any(&to_any(&v)), v);
    }

    #[test]
    fn whole_floats_read_as_integers_as_jupyter_ydoc_reads_them() {
        assert_eq!(from_any(&Any::Number(Number::Float(3.0))), json!(3));
        assert_eq!(from_any(&Any::Number(Number::Float(0.5))), json!(0.5));
        assert_eq!(from_any(&Any::Number(Number::Float(f64::NAN))), Value::Null);
        assert_eq!(from_any(&Any::Undefined), Value::Null);
    }

    #[test]
    fn nesting_past_the_bound_is_null_not_a_stack_overflow() {
        let mut v = json!(1);
        for _ in 0..(MAX_DEPTH + 10) {
            v = json!([v]);
        }
        let mut back = from_any(&to_any(&v));
        let mut depth = 0;
        while let Value::Array(mut items) = back {
            back = items.pop().unwrap_or(Value::Null);
            depth += 1;
        }
        assert_eq!(back, Value::Null);
        assert!(depth <= MAX_DEPTH + 1, "{depth}");
    }
}
