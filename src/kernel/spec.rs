//! A kernelspec: `kernel.json` plus the directory it was found in. Owns parsing and validating
//! kernel.json (lenient: every field but `argv` optional, unknown keys ignored).
//!
//! Spec: <https://jupyter-client.readthedocs.io/en/latest/kernels.html#kernel-specs>

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How to interrupt a kernel (`interrupt_mode` in kernel.json, default `signal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InterruptMode {
    /// SIGINT to the kernel's process group.
    #[default]
    Signal,
    /// `interrupt_request` on the control channel.
    Message,
}

/// A parsed kernelspec. Every field but `argv` is optional in kernel.json; unknown keys are ignored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelSpec {
    /// Directory name, lower-cased.
    pub name: String,
    /// The directory holding kernel.json.
    pub resource_dir: PathBuf,
    /// The command template (non-empty), before `{connection_file}` etc. are substituted.
    pub argv: Vec<String>,
    /// Human-readable name; defaults to `name`.
    pub display_name: String,
    /// Language name as written in kernel.json; defaults to `""`.
    pub language: String,
    /// Defaults to [`InterruptMode::Signal`] (also for unknown values).
    pub interrupt_mode: InterruptMode,
    /// Extra environment for the kernel; values may contain `$VAR` / `${VAR}` (see `argv::expand_env`).
    pub env: BTreeMap<String, String>,
    /// The `metadata` object; defaults to `{}`.
    pub metadata: Value,
}

/// Why a kernel.json could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// kernel.json is missing or unreadable.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not JSON, not an object, `argv` missing/empty/not strings, or a field of the wrong type.
    #[error("invalid kernel.json at {path}: {detail}")]
    Invalid { path: PathBuf, detail: InvalidSpec },
}

/// What is wrong with a kernel.json's text.
#[derive(Debug, thiserror::Error)]
pub enum InvalidSpec {
    /// Not JSON, not an object, `argv` missing or not strings, a field of the wrong type.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("`argv` is empty")]
    EmptyArgv,
}

/// kernel.json as written on disk. No `deny_unknown_fields`: kernels write extra keys.
#[derive(Deserialize)]
struct RawSpec {
    argv: Vec<String>,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    interrupt_mode: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    metadata: Option<Value>,
}

impl KernelSpec {
    /// Read `<resource_dir>/kernel.json`. `name` is lower-cased.
    ///
    /// Errors: `SpecError::Io` when the file cannot be read, `SpecError::Invalid` when it is not a
    /// JSON object, `argv` is missing or empty, or a known field has the wrong type.
    pub fn load(name: &str, resource_dir: &Path) -> Result<KernelSpec, SpecError> {
        let path = resource_dir.join("kernel.json");
        let text = std::fs::read_to_string(&path).map_err(|source| SpecError::Io {
            path: path.clone(),
            source,
        })?;
        Self::parse(name, resource_dir, &text).map_err(|detail| SpecError::Invalid { path, detail })
    }

    /// Parse kernel.json text.
    fn parse(name: &str, resource_dir: &Path, text: &str) -> Result<KernelSpec, InvalidSpec> {
        let raw: RawSpec = serde_json::from_str(text)?;
        if raw.argv.is_empty() {
            return Err(InvalidSpec::EmptyArgv);
        }
        let name = name.to_lowercase();
        let interrupt_mode = match raw
            .interrupt_mode
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("signal") => InterruptMode::Signal,
            Some("message") => InterruptMode::Message,
            Some(other) => {
                tracing::warn!(kernel = %name, interrupt_mode = other, "unknown interrupt_mode in kernel.json; using signal");
                InterruptMode::Signal
            }
        };
        let metadata = match raw.metadata {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(v @ Value::Object(_)) => v,
            Some(other) => {
                tracing::warn!(kernel = %name, metadata = %other, "kernel.json metadata is not an object; ignoring it");
                Value::Object(Default::default())
            }
        };
        Ok(KernelSpec {
            display_name: raw.display_name.unwrap_or_else(|| name.clone()),
            name,
            resource_dir: resource_dir.to_path_buf(),
            argv: raw.argv,
            language: raw.language.unwrap_or_default(),
            interrupt_mode,
            env: raw.env.unwrap_or_default(),
            metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<KernelSpec, InvalidSpec> {
        KernelSpec::parse("Octave", Path::new("/k/octave"), text)
    }

    #[test]
    fn minimal_spec_gets_defaults_and_lowercased_name() {
        let s = parse(r#"{"argv": ["octave-kernel", "-f", "{connection_file}"]}"#).unwrap();
        assert_eq!(s.name, "octave");
        assert_eq!(s.display_name, "octave");
        assert_eq!(s.language, "");
        assert_eq!(s.interrupt_mode, InterruptMode::Signal);
        assert!(s.env.is_empty());
        assert_eq!(s.metadata, serde_json::json!({}));
        assert_eq!(s.resource_dir, Path::new("/k/octave"));
    }

    #[test]
    fn unknown_keys_are_accepted() {
        let s = parse(
            r#"{"argv": ["octave-kernel"], "display_name": "Octave", "language": "octave",
                "mimetype": "text/x-octave", "name": "octave", "kernel_protocol_version": "5.5"}"#,
        )
        .unwrap();
        assert_eq!(s.display_name, "Octave");
        assert_eq!(s.language, "octave");
    }

    #[test]
    fn interrupt_mode_is_case_insensitive_and_unknown_means_signal() {
        let s = parse(r#"{"argv": ["x"], "interrupt_mode": "Message"}"#).unwrap();
        assert_eq!(s.interrupt_mode, InterruptMode::Message);
        let s = parse(r#"{"argv": ["x"], "interrupt_mode": "SIGNAL"}"#).unwrap();
        assert_eq!(s.interrupt_mode, InterruptMode::Signal);
        let s = parse(r#"{"argv": ["x"], "interrupt_mode": "telepathy"}"#).unwrap();
        assert_eq!(s.interrupt_mode, InterruptMode::Signal);
    }

    #[test]
    fn env_and_metadata_are_kept() {
        let s = parse(r#"{"argv": ["x"], "env": {"PS1": "$"}, "metadata": {"debugger": true}}"#)
            .unwrap();
        assert_eq!(s.env.get("PS1").map(String::as_str), Some("$"));
        assert_eq!(s.metadata, serde_json::json!({"debugger": true}));
    }

    #[test]
    fn null_optional_fields_get_defaults() {
        let s = parse(r#"{"argv": ["x"], "display_name": null, "env": null, "metadata": null}"#)
            .unwrap();
        assert_eq!(s.display_name, "octave");
        assert!(s.env.is_empty());
        assert_eq!(s.metadata, serde_json::json!({}));
    }

    #[test]
    fn missing_or_empty_or_malformed_argv_is_rejected() {
        let missing = parse(r#"{"display_name": "x"}"#).unwrap_err();
        assert!(missing.to_string().contains("argv"), "{missing}");
        assert!(matches!(
            parse(r#"{"argv": []}"#),
            Err(InvalidSpec::EmptyArgv)
        ));
        assert!(parse(r#"{"argv": "python -m x"}"#).is_err());
        assert!(parse(r#"{"argv": ["x", 3]}"#).is_err());
        assert!(parse(r#"["x"]"#).is_err());
        assert!(parse("not json").is_err());
    }

    #[test]
    fn load_reports_io_and_invalid_errors_with_path() {
        let dir = tempfile::tempdir().unwrap();
        match KernelSpec::load("k", dir.path()) {
            Err(SpecError::Io { path, .. }) => assert_eq!(path, dir.path().join("kernel.json")),
            other => panic!("expected Io, got {other:?}"),
        }
        std::fs::write(dir.path().join("kernel.json"), "{}").unwrap();
        let err = KernelSpec::load("k", dir.path()).unwrap_err();
        assert!(matches!(err, SpecError::Invalid { .. }));
        assert!(err.to_string().contains("kernel.json"));
        std::fs::write(dir.path().join("kernel.json"), r#"{"argv": ["k"]}"#).unwrap();
        assert_eq!(KernelSpec::load("K", dir.path()).unwrap().name, "k");
    }
}
