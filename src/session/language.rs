//! The language of a session's kernel, decided once from what the kernel reports, so that
//! language-specific operations (running a file, listing variables, installing packages) ask
//! one question instead of comparing strings everywhere.

/// What kind of kernel a session runs, as far as kernel-mcp's helpers care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Language {
    /// ipykernel, xeus-python and other Python kernels: the helpers in `python.rs` work.
    Python,
    /// Any other language, by its `language_info.name` (or the kernelspec's language).
    Other(String),
}

impl Language {
    /// From a language name (`"python"`, `"R"`, `"octave"`…), case-insensitively.
    pub fn from_name(name: &str) -> Language {
        if name.eq_ignore_ascii_case("python") {
            Language::Python
        } else {
            Language::Other(name.to_string())
        }
    }

    pub fn is_python(&self) -> bool {
        *self == Language::Python
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_is_recognised_whatever_its_case_and_others_keep_their_name() {
        assert!(Language::from_name("Python").is_python());
        assert_eq!(Language::from_name("R"), Language::Other("R".into()));
    }
}
