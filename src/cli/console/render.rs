//! How the console shows things: a [`Screen`] that prints above the prompt while the line
//! editor is active (rustyline's external printer) and straight to the terminal otherwise,
//! and the styles of each kind of text: stderr in yellow, errors and tracebacks in red, the
//! `Out[n]:` marker in green, other clients' cells in magenta. Colours only on a terminal.
//! Images are never drawn: each is saved under the state directory and named in one line
//! with its type, size and path.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use anstyle::{AnsiColor, Style};
use rustyline::ExternalPrinter;
use serde_json::Value;

use crate::cli::client::Client;
use crate::cli::follow::human_bytes;

/// What kind of text a piece of output is (its style).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Stdout,
    Stderr,
    Error,
    Out,
    Theirs,
    Note,
}

impl Kind {
    fn style(self) -> Style {
        let fg = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
        match self {
            Kind::Stdout => Style::new(),
            Kind::Stderr => fg(AnsiColor::Yellow),
            Kind::Error => fg(AnsiColor::Red),
            Kind::Out => fg(AnsiColor::Green).bold(),
            Kind::Theirs => fg(AnsiColor::Magenta),
            Kind::Note => Style::new().dimmed(),
        }
    }
}

/// The terminal, shared by the prompt loop and the live view.
pub struct Screen {
    printer: Mutex<Option<Box<dyn ExternalPrinter + Send>>>,
    colour: bool,
}

impl Screen {
    /// A screen printing through `printer` when there is one (a terminal), else to stdout.
    pub fn new(printer: Option<Box<dyn ExternalPrinter + Send>>) -> Screen {
        Screen {
            printer: Mutex::new(printer),
            colour: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    /// `text` in the style of `kind` (unstyled off a terminal).
    pub fn paint(&self, kind: Kind, text: &str) -> String {
        let style = kind.style();
        if !self.colour || text.is_empty() || style == Style::new() {
            return text.to_string();
        }
        // Style each line on its own so a line editor redrawing between lines keeps colours.
        text.split_inclusive('\n')
            .map(|l| {
                let (body, nl) = l.strip_suffix('\n').map_or((l, ""), |b| (b, "\n"));
                format!("{style}{body}{style:#}{nl}")
            })
            .collect()
    }

    /// Print `text` (of `kind`) now: above the prompt when the editor is active.
    pub fn print(&self, kind: Kind, text: &str) {
        if text.is_empty() {
            return;
        }
        let painted = self.paint(kind, text);
        let mut printer = self.printer.lock().unwrap_or_else(|p| p.into_inner());
        match printer.as_mut() {
            // In raw mode the terminal does not turn \n into \r\n by itself.
            Some(p) => {
                let _ = p.print(painted.replace("\r\n", "\n").replace('\n', "\r\n"));
            }
            None => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(painted.as_bytes());
                let _ = out.flush();
            }
        }
    }
}

/// Show what follows a finished run's streams: displays (images saved and named), the
/// `Out[n]:` value, the error and traceback, notices.
pub async fn ending(screen: &Screen, client: &Client, result: &Value, theirs: bool) {
    let run_id = result["run_id"].as_str().unwrap_or("run");
    for (i, o) in result["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if o["kind"] == "execute_result" && o["image"].is_null() {
            continue; // shown as Out[n] below
        }
        if let Some(img) = o.get("image").filter(|i| !i.is_null()) {
            let line = image_line(client, run_id, i, img).await;
            screen.print(Kind::Note, &format!("{line}\n"));
        } else if let Some(t) = o["text"].as_str() {
            screen.print(Kind::Stdout, &with_newline(t));
        }
    }
    if let Some(r) = result["result"].as_str() {
        let n = result["execution_count"]
            .as_i64()
            .map(|n| n.to_string())
            .unwrap_or_default();
        let marker = if theirs {
            screen.paint(Kind::Theirs, &format!("Out[{n}]: "))
        } else {
            screen.paint(Kind::Out, &format!("Out[{n}]: "))
        };
        screen.print(Kind::Stdout, &format!("{marker}{}", with_newline(r)));
    }
    if let Some(e) = result.get("error").filter(|e| !e.is_null()) {
        screen.print(Kind::Error, &error_text(e));
    }
    for n in result["notices"].as_array().into_iter().flatten() {
        if let Some(n) = n.as_str() {
            screen.print(Kind::Note, &format!("note: {n}\n"));
        }
    }
}

/// The traceback of an `error` object (or `ename: evalue` when there is none).
pub fn error_text(e: &Value) -> String {
    let tb = crate::cli::follow::traceback(e);
    if tb.is_empty() {
        format!(
            "{}: {}\n",
            e["ename"].as_str().unwrap_or("Error"),
            e["evalue"].as_str().unwrap_or("")
        )
    } else {
        with_newline(&tb.join("\n"))
    }
}

/// Save the index-th output's image of `run_id` and describe it in one line.
async fn image_line(client: &Client, run_id: &str, index: usize, img: &Value) -> String {
    let mime = img["mime"].as_str().unwrap_or("image");
    let size = human_bytes(img["bytes"].as_u64().unwrap_or(0));
    let uri = kernel_mcp::mcp::resources::output_uri(run_id, index);
    let saved = match client.read_resource(&uri).await {
        Ok(bytes) => save_image(run_id, index, mime, &bytes),
        Err(e) => Err(e.to_string()),
    };
    match saved {
        Ok(path) => format!("[{mime}, {size}] saved to {}", path.display()),
        Err(e) => format!("[{mime}, {size}] not saved: {e}"),
    }
}

/// Write an image to `<state dir>/console/images/<run_id>-<index>.<ext>`.
fn save_image(run_id: &str, index: usize, mime: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let dir = kernel_mcp::service::paths::state_dir()
        .ok_or("neither XDG_STATE_HOME nor HOME is set")?
        .join("console")
        .join("images");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ext = match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/svg+xml" => "svg",
        "image/webp" => "webp",
        _ => "bin",
    };
    let safe: String = run_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let path = dir.join(format!("{safe}-{index}.{ext}"));
    std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// `t` ending in exactly one newline (none added to an empty text).
pub fn with_newline(t: &str) -> String {
    if t.is_empty() || t.ends_with('\n') {
        t.to_string()
    } else {
        format!("{t}\n")
    }
}

/// A cell's source as the console shows it: each line after a margin.
pub fn source_block(code: &str) -> String {
    code.lines().map(|l| format!("   ...: {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_a_terminal_nothing_is_painted() {
        let s = Screen {
            printer: Mutex::new(None),
            colour: false,
        };
        assert_eq!(s.paint(Kind::Error, "boom\n"), "boom\n");
    }

    #[test]
    fn on_a_terminal_each_line_is_painted_on_its_own() {
        let s = Screen {
            printer: Mutex::new(None),
            colour: true,
        };
        let p = s.paint(Kind::Error, "a\nb\n");
        assert_eq!(p.matches('\n').count(), 2);
        assert!(p.starts_with("\u{1b}[31ma\u{1b}[0m\n"), "{p:?}");
    }

    #[test]
    fn a_traceback_is_its_lines_and_a_bare_error_its_name() {
        let e = serde_json::json!({"ename": "E", "evalue": "v", "traceback": ["t1", "t2"]});
        assert_eq!(error_text(&e), "t1\nt2\n");
        let e = serde_json::json!({"ename": "E", "evalue": "v", "traceback": []});
        assert_eq!(error_text(&e), "E: v\n");
    }
}
