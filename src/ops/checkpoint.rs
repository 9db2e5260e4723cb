//! Checkpoints of a Python kernel's namespace: the JSON-safe part of it written to a file,
//! and loaded back into a session (after a restart, or into another session).
//!
//! What is saved: variables whose names do not start with `_` holding `None`, `bool`, `int`,
//! `float`, `complex`, `str`, `bytes`, `bytearray`, and `list`, `tuple`, `set`, `frozenset`
//! and `dict` of those (nested up to [`MAX_DEPTH`] levels, [`MAX_NODES`] values, the whole
//! file at most [`MAX_CHECKPOINT_BYTES`]). Types are checked exactly (`type(v) is int`), so
//! subclasses, and so user code, are never involved: no user `__repr__`, `__eq__`, `__hash__`
//! or `__iter__` runs, nothing is pickled, no code is replayed. Everything else is listed in
//! `skipped` with the reason.
//!
//! The file (`"format": "kernel-mcp-checkpoint"`, version 1) holds each value as a tagged
//! pair, numbers as text so none loses precision: `["int", "42"]`, `["float", "0.1"]`,
//! `["bytes", "<base64>"]`, `["dict", [[key, value], …]]`, `["set", [...]]`… It is written
//! atomically. `restore` validates the whole file here before anything is sent to the kernel,
//! then the kernel decodes every value into a scratch dict and only then updates its
//! namespace: a bad file loads nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};

use super::{files, python};
use crate::session::cmd;
use crate::session::language::Language;
use crate::session::{SessionError, SessionHandle};

/// Largest checkpoint written or read (bytes of JSON).
pub const MAX_CHECKPOINT_BYTES: usize = 8 * 1024 * 1024;
/// Deepest nesting of containers. Each level is up to three levels of JSON (a dict's value
/// sits in a pair in a list in its tagged pair), and serde_json stops at 128.
pub const MAX_DEPTH: usize = 40;
/// Values (containers and scalars) in one variable at most.
pub const MAX_NODES: usize = 1_000_000;
/// Digits of an int at most (CPython's default limit for int ↔ str).
const MAX_INT_DIGITS: usize = 4300;
/// Time for the kernel to encode or decode a namespace.
const KERNEL_TIMEOUT: Duration = Duration::from_secs(60);
const FORMAT: &str = "kernel-mcp-checkpoint";
const VERSION: u64 = 1;

/// A variable left out, and why.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// What `checkpoint` wrote (`checkpoint_session`'s result).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Checkpoint {
    pub path: PathBuf,
    pub saved: Vec<String>,
    pub skipped: Vec<Skipped>,
    pub bytes: usize,
}

/// What `restore` loaded (`restore_session`'s result).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Restored {
    pub path: PathBuf,
    pub restored: Vec<String>,
}

/// Encodes the namespace (`run(ns, max_bytes, max_nodes, max_depth)`); reads `globals()` of
/// the user namespace.
const ENCODE_PY: &str = include_str!("checkpoint/encode.py");

/// Decodes a validated checkpoint into a scratch dict, then updates the namespace.
const DECODE_PY: &str = include_str!("checkpoint/decode.py");

/// Write the JSON-safe part of the Python namespace of `handle`'s session to `path`
/// (relative: the session's cwd), atomically and readable by its owner only (0600: the values
/// may be secrets). Errors: `UNSUPPORTED` (not Python), `SESSION_BUSY`, `IO_ERROR`.
pub async fn save(handle: &SessionHandle, path: &Path) -> Result<Checkpoint, SessionError> {
    let info = handle.call(cmd::Info).await?;
    require_python(&info.language, &info.session_id)?;
    let path = PathBuf::from(&info.cwd).join(path);
    let reach = files::Reach::of_session(&info);
    reach.check_write(&path)?;
    let expr = python::helper_call(
        ENCODE_PY,
        &format!("globals(), {MAX_CHECKPOINT_BYTES}, {MAX_NODES}, {MAX_DEPTH}"),
    );
    let got = python::eval_json_within(handle, &expr, KERNEL_TIMEOUT).await?;
    let saved: Vec<String> = serde_json::from_value(got["saved"].clone()).unwrap_or_default();
    let skipped = got["skipped"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| Skipped {
                    name: s["name"].as_str().unwrap_or_default().to_string(),
                    reason: s["reason"].as_str().unwrap_or_default().to_string(),
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let file = json!({
        "format": FORMAT,
        "version": VERSION,
        "created_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "session_id": info.session_id,
        "kernel": info.kernel,
        "python_version": info.kernel_info["language_info"]["version"],
        "variables": got["variables"],
        "skipped": skipped,
    });
    let mut bytes = serde_json::to_vec(&file)
        .map_err(|e| SessionError::Internal(format!("checkpoint: {e}")))?;
    bytes.push(b'\n');
    let len = bytes.len();
    files::write_file_in(&reach, &path, bytes, files::FileMode::Private).await?;
    Ok(Checkpoint {
        path,
        saved,
        skipped,
        bytes: len,
    })
}

/// Load the checkpoint at `path` (relative: the session's cwd) into the Python namespace of
/// `handle`'s session, after validating all of it. Errors: `UNSUPPORTED` (not Python),
/// `INVALID_ARGUMENT` (not a valid checkpoint: nothing loaded), `IO_ERROR`, `LIMIT_EXCEEDED`,
/// `SESSION_BUSY`.
pub async fn restore(handle: &SessionHandle, path: &Path) -> Result<Restored, SessionError> {
    let info = handle.call(cmd::Info).await?;
    require_python(&info.language, &info.session_id)?;
    let path = PathBuf::from(&info.cwd).join(path);
    let reach = files::Reach::of_session(&info);
    let bytes = files::read_capped_in(&reach, &path, MAX_CHECKPOINT_BYTES + 64 * 1024).await?;
    let variables = parse(&bytes).map_err(|why| {
        SessionError::InvalidArgument(format!(
            "{} is not a valid checkpoint: {why}. Nothing was loaded.",
            path.display()
        ))
    })?;
    let text = serde_json::to_string(&variables)
        .map_err(|e| SessionError::Internal(format!("checkpoint: {e}")))?;
    let literal = serde_json::to_string(&text).unwrap_or_default();
    let expr = python::helper_call(DECODE_PY, &format!("globals(), {literal}"));
    let got = python::eval_json_within(handle, &expr, KERNEL_TIMEOUT)
        .await
        .map_err(|e| match e {
            SessionError::Internal(m) => SessionError::Internal(format!(
                "{m}. Nothing was loaded into session '{}'.",
                info.session_id
            )),
            other => other,
        })?;
    Ok(Restored {
        path,
        restored: serde_json::from_value(got).unwrap_or_default(),
    })
}

fn require_python(language: &str, session: &str) -> Result<(), SessionError> {
    if Language::from_name(language).is_python() {
        return Ok(());
    }
    Err(SessionError::Unsupported(format!(
        "Checkpoints hold Python namespaces only; session '{session}' runs {language}. To rebuild its state after a restart, replay its code with rerun_history."
    )))
}

/// Why a file is not a checkpoint this server loads.
#[derive(Debug, thiserror::Error)]
enum Invalid {
    #[error("not JSON ({0})")]
    NotJson(serde_json::Error),
    #[error("its \"format\" is not \"{FORMAT}\"")]
    Format,
    #[error("version {0} is not one this server reads ({VERSION})")]
    Version(Value),
    #[error("\"variables\" is not an object")]
    NoVariables,
    #[error("{0:?} is not a Python variable name")]
    Name(String),
    #[error("variable {name}: {problem}")]
    Variable { name: String, problem: BadValue },
}

/// What is wrong with one tagged value; values are shown cut short.
#[derive(Debug, thiserror::Error)]
enum BadValue {
    #[error("more than {MAX_NODES} values")]
    TooMany,
    #[error("nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("{0} is not a [tag, value] pair")]
    NotTagged(String),
    #[error("{payload} is not a valid {tag}")]
    Payload { tag: String, payload: String },
    #[error("a {tag} holds an unhashable {item}")]
    UnhashableItem { tag: String, item: String },
    #[error("{0} is not a [key, value] pair")]
    NotKeyValue(String),
    #[error("a dict key {0} is unhashable")]
    UnhashableKey(String),
    #[error("unknown tag {0:?}")]
    UnknownTag(String),
}

/// The `variables` object of a checkpoint file, every value checked.
fn parse(bytes: &[u8]) -> Result<serde_json::Map<String, Value>, Invalid> {
    let file: Value = serde_json::from_slice(bytes).map_err(Invalid::NotJson)?;
    if file["format"] != FORMAT {
        return Err(Invalid::Format);
    }
    if file["version"].as_u64() != Some(VERSION) {
        return Err(Invalid::Version(file["version"].clone()));
    }
    let Some(vars) = file["variables"].as_object() else {
        return Err(Invalid::NoVariables);
    };
    for (name, v) in vars {
        if !is_identifier(name) {
            return Err(Invalid::Name(name.clone()));
        }
        let mut nodes = 0;
        check(v, 0, &mut nodes).map_err(|problem| Invalid::Variable {
            name: name.clone(),
            problem,
        })?;
    }
    Ok(vars.clone())
}

/// A plausible Python identifier (the kernel checks `str.isidentifier` and keywords too).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// One tagged value: its tag and payload agree, nesting and size are bounded.
fn check(v: &Value, depth: usize, nodes: &mut usize) -> Result<(), BadValue> {
    *nodes += 1;
    if *nodes > MAX_NODES {
        return Err(BadValue::TooMany);
    }
    if depth > MAX_DEPTH {
        return Err(BadValue::TooDeep);
    }
    let (tag, payload) = match v.as_array().map(Vec::as_slice) {
        Some([Value::String(t), p]) => (t.as_str(), p),
        _ => return Err(BadValue::NotTagged(short(v))),
    };
    let bad = || BadValue::Payload {
        tag: tag.to_string(),
        payload: short(payload),
    };
    match tag {
        "none" if payload.is_null() => Ok(()),
        "bool" if payload.is_boolean() => Ok(()),
        "int" => payload
            .as_str()
            .filter(|s| is_int_text(s))
            .map(|_| ())
            .ok_or_else(bad),
        "float" => payload
            .as_str()
            .filter(|s| s.parse::<f64>().is_ok())
            .map(|_| ())
            .ok_or_else(bad),
        "complex" => match payload.as_array().map(Vec::as_slice) {
            Some([Value::String(a), Value::String(b)])
                if a.parse::<f64>().is_ok() && b.parse::<f64>().is_ok() =>
            {
                Ok(())
            }
            _ => Err(bad()),
        },
        "str" if payload.is_string() => Ok(()),
        "bytes" | "bytearray" => payload
            .as_str()
            .filter(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok())
            .map(|_| ())
            .ok_or_else(bad),
        "list" | "tuple" | "set" | "frozenset" => {
            let items = payload.as_array().ok_or_else(bad)?;
            for item in items {
                check(item, depth + 1, nodes)?;
                if matches!(tag, "set" | "frozenset") && !hashable(item) {
                    return Err(BadValue::UnhashableItem {
                        tag: tag.to_string(),
                        item: short(item),
                    });
                }
            }
            Ok(())
        }
        "dict" => {
            let items = payload.as_array().ok_or_else(bad)?;
            for pair in items {
                let Some([k, val]) = pair.as_array().map(Vec::as_slice) else {
                    return Err(BadValue::NotKeyValue(short(pair)));
                };
                check(k, depth + 1, nodes)?;
                if !hashable(k) {
                    return Err(BadValue::UnhashableKey(short(k)));
                }
                check(val, depth + 1, nodes)?;
            }
            Ok(())
        }
        "none" | "bool" | "str" => Err(bad()),
        other => Err(BadValue::UnknownTag(other.to_string())),
    }
}

/// Python would accept it as a set element or dict key (the value is already checked).
fn hashable(v: &Value) -> bool {
    match v.as_array().map(Vec::as_slice) {
        Some([Value::String(t), p]) => match t.as_str() {
            "list" | "set" | "dict" | "bytearray" => false,
            "tuple" | "frozenset" => p.as_array().is_some_and(|items| items.iter().all(hashable)),
            _ => true,
        },
        _ => false,
    }
}

fn is_int_text(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty()
        && digits.len() <= MAX_INT_DIGITS
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A value for an error message, cut short.
fn short(v: &Value) -> String {
    let mut s = v.to_string();
    if s.len() > 60 {
        let mut end = 60;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(vars: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"format": FORMAT, "version": 1, "variables": vars})).unwrap()
    }

    #[test]
    fn a_well_formed_checkpoint_passes() {
        let vars = json!({
            "n": ["int", "-12345678901234567890"],
            "d": ["dict", [[["str", "a"], ["list", [["int", "1"], ["float", "nan"]]]]]],
            "s": ["set", [["tuple", [["int", "1"], ["bytes", "AAE="]]]]],
            "b": ["bytes", "aGk="],
            "c": ["complex", ["1.0", "-inf"]],
        });
        assert_eq!(parse(&file(vars)).unwrap().len(), 5);
    }

    #[test]
    fn any_bad_part_rejects_the_whole_file() {
        let cases = [
            json!({"x": ["int", "12a"]}),
            json!({"x": ["float", "one"]}),
            json!({"x": ["bytes", "not base64!"]}),
            json!({"x": ["pickle", "gASV"]}),
            json!({"x": ["set", [["list", []]]]}),
            json!({"x": ["dict", [[["dict", []], ["int", "1"]]]]}),
            json!({"x": ["list", [["int"]]]}),
            json!({"1x": ["int", "1"]}),
            json!({"ok": ["int", "1"], "bad": ["str", 5]}),
        ];
        for vars in cases {
            assert!(parse(&file(vars.clone())).is_err(), "{vars}");
        }
        assert!(parse(b"{\"format\": \"kernel-mcp-checkpoint\", \"version\": 1, \"variables\": {\"x\": [\"int\"").is_err());
        assert!(
            parse(
                &serde_json::to_vec(&json!({"format": "other", "version": 1, "variables": {}}))
                    .unwrap()
            )
            .is_err()
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let mut v = json!(["none", null]);
        for _ in 0..=MAX_DEPTH {
            v = json!(["list", [v]]);
        }
        let err = parse(&file(json!({"deep": v}))).unwrap_err();
        assert!(
            matches!(
                err,
                Invalid::Variable {
                    problem: BadValue::TooDeep,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("deeper"), "{err}");
        // The deepest allowed nesting of dicts still parses (serde_json's own limit is 128).
        let mut v = json!(["none", null]);
        for _ in 0..MAX_DEPTH {
            v = json!(["dict", [[["str", "k"], v]]]);
        }
        assert!(parse(&file(json!({"deep": v}))).is_ok());
    }

    /// The kernel side of a checkpoint, run by a real interpreter: what the encoder writes
    /// passes [`parse`], and the decoder gives the same values back; what is not data is
    /// skipped with its reason.
    #[test]
    fn the_python_encoder_and_decoder_round_trip_a_namespace() {
        use crate::ops::python::{helper_call, testing};
        let values = "n = -12345678901234567890\nf = 0.1\nc = 1-2j\ns = 'é'\nb = b'\\x00\\xff'\nba = bytearray(b'x')\nxs = [1, (2, frozenset({3})), {4: None}]\nt = True\nimport os\ndef fn(): pass\nloop = []\nloop.append(loop)\n";
        let encode = helper_call(
            ENCODE_PY,
            &format!("globals(), {MAX_CHECKPOINT_BYTES}, {MAX_NODES}, {MAX_DEPTH}"),
        );
        let got = testing::decode(&testing::run(&format!("{values}print({encode})"), &[]));
        let skipped: Vec<&str> = got["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(skipped, ["fn", "loop", "os"], "{got}");
        let vars = parse(&file(got["variables"].clone())).expect("the encoder's output parses");
        assert_eq!(vars.len(), 8, "{got}");
        let text = serde_json::to_string(&vars).unwrap();
        let decode = helper_call(
            DECODE_PY,
            &format!("ns, {}", serde_json::to_string(&text).unwrap()),
        );
        let script = format!(
            "{values}want = {{k: v for k, v in globals().items() if k in {names}}}\nns = {{}}\n{decode}\nprint(ns == want, sorted(ns) == sorted(want))",
            names = serde_json::to_string(&vars.keys().collect::<Vec<_>>()).unwrap()
        );
        assert_eq!(testing::run(&script, &[]).trim(), "True True");
    }
}
