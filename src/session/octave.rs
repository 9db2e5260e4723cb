//! Whether Octave code leaves a block open, read the way Octave's parser reads it: block
//! keywords anywhere on a line (`for i=1:3 disp(i); end` is one complete block, as
//! `octave-cli` runs it), never inside strings, comments or brackets (`x(end)` indexes), and
//! a transpose quote (`a'`) is not a string.
//!
//! Used to confirm octave_kernel's `is_complete_reply` before refusing code as incomplete
//! (see `Quirks::check_complete`): octave_kernel 1.1 counts a block's opener only at the start
//! of a line and its `end` only at the start of a line, so it calls every one-line block
//! incomplete. Octave itself (through metakernel) reports input that really is incomplete as
//! an error, so this only has to be right about what is complete.

/// Keywords that open a block (closed by `end…`, or `until` for `do`).
const OPENERS: &[&str] = &[
    "if",
    "for",
    "parfor",
    "while",
    "do",
    "switch",
    "try",
    "unwind_protect",
    "function",
    "classdef",
];
/// Keywords that open a block only inside a `classdef` (elsewhere `methods(obj)` and
/// `properties(obj)` are functions).
const CLASSDEF_OPENERS: &[&str] = &["methods", "properties", "events", "enumeration"];
/// Keywords that close the innermost block.
const CLOSERS: &[&str] = &[
    "end",
    "endif",
    "endfor",
    "endparfor",
    "endwhile",
    "endswitch",
    "end_try_catch",
    "end_unwind_protect",
    "endfunction",
    "endclassdef",
    "endmethods",
    "endproperties",
    "endevents",
    "endenumeration",
    "until",
];

/// True when `code` leaves a block (`if`, `for`, `while`, `do`, `function`…) open.
pub fn open_block(code: &str) -> bool {
    let mut blocks: Vec<&str> = Vec::new();
    let mut block_comment = 0usize;
    for line in code.lines() {
        let trimmed = line.trim();
        if matches!(trimmed, "%{" | "#{") {
            block_comment += 1;
            continue;
        }
        if block_comment > 0 {
            if matches!(trimmed, "%}" | "#}") {
                block_comment -= 1;
            }
            continue;
        }
        for word in keywords(line) {
            let in_classdef = blocks.contains(&"classdef");
            if OPENERS.contains(&word) || (in_classdef && CLASSDEF_OPENERS.contains(&word)) {
                blocks.push(word);
            } else if CLOSERS.contains(&word) {
                blocks.pop();
            }
        }
    }
    !blocks.is_empty()
}

/// The words of `line` outside strings, comments and brackets, in order. Brackets do not
/// carry over lines here: a bracket left open makes Octave report the input itself.
fn keywords(line: &str) -> Vec<&str> {
    let bytes = line.as_bytes();
    let mut words = Vec::new();
    let mut depth = 0usize;
    // The last significant byte, to tell a transpose quote from a string's.
    let mut prev: Option<u8> = None;
    let mut space_before = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'%' | b'#' => break,
            b'.' if line[i..].starts_with("...") => break,
            b' ' | b'\t' => {
                space_before = true;
                i += 1;
                continue;
            }
            b'"' => i = skip_string(bytes, i, b'"'),
            b'\'' if !is_transpose(prev, space_before, depth) => i = skip_string(bytes, i, b'\''),
            b'(' | b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                // A field (`s.end`) or anything in brackets (`x(end)`) is no keyword.
                if depth == 0 && prev != Some(b'.') {
                    words.push(&line[start..i]);
                }
            }
            _ => i += 1,
        }
        prev = Some(c).filter(|_| i > 0).map(|_| bytes[i - 1]);
        space_before = false;
    }
    words
}

/// A quote after a value (`a'`, `x(1)'`, `b.'`) transposes; inside brackets, a quote after a
/// space starts a string (`['a' 'b']`).
fn is_transpose(prev: Option<u8>, space_before: bool, depth: usize) -> bool {
    let Some(p) = prev else {
        return false;
    };
    let after_value =
        p.is_ascii_alphanumeric() || matches!(p, b'_' | b')' | b']' | b'}' | b'.' | b'\'');
    after_value && !(space_before && depth > 0)
}

/// The index after the string that opens at `start` with `quote` (a doubled quote is one
/// quote; in a double-quoted string a backslash escapes the next byte).
fn skip_string(bytes: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        if quote == b'"' && bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_blocks_are_complete() {
        for code in [
            "for i=1:3 disp(i); end",
            "for i=1:3, disp(i), end",
            "if true disp(7); end",
            "while false, end",
            "k = 0; do k++; until k == 2",
            "switch 1 case 1 disp(1); endswitch",
            "try error('x'); catch disp(2); end_try_catch",
            "function y = f(x) y = x; end",
        ] {
            assert!(!open_block(code), "{code:?} is complete");
        }
    }

    #[test]
    fn open_blocks_are_found_wherever_the_opener_is() {
        for code in [
            "for i=1:3 disp(i);",
            "x = 1; for i=1:2",
            "if x\n  disp(1)\nelse",
            "function y = f(x)\n  y = x;",
            "do\n  k++;",
        ] {
            assert!(open_block(code), "{code:?} is open");
        }
    }

    #[test]
    fn strings_comments_brackets_and_fields_hold_no_keywords() {
        for code in [
            "x = [1 2 3]; disp(x(end))",
            "s = 'for if while'; disp(s)",
            "s = \"if \\\" for\"; disp(s)",
            "a = [1 2]'; b = a'; c = {'if', 'for'}",
            "disp(1) % for i=1:3",
            "disp(1) # if true",
            "s.if_field = 1; t.end = 2;",
            "x = [1 2 ...\n 3]; for k = 1:2, end",
            "%{\nfor i = 1:3\n%}\ndisp(1)",
            "methods(obj)",
            "c = {x(end), 'end'}; if 1, end",
        ] {
            assert!(!open_block(code), "{code:?} is complete");
        }
    }

    #[test]
    fn a_classdef_opens_its_sections() {
        let code = "classdef C\n  properties\n    a = 1;\n  end\n  methods\n    function f(o)\n    end\n  end\nend";
        assert!(!open_block(code));
        assert!(open_block(&code[..code.len() - 3]));
    }
}
