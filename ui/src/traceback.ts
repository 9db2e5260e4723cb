// An error output: its traceback coloured as IPython colours it. kernel-mcp keeps
// tracebacks as plain text (docs/semantics.md), so the colours come from the shape of the
// lines (file and line references, the `---->` arrow, the exception line); a traceback that
// still carries ANSI escapes keeps its own colours.

import { appendAnsi, hasAnsi } from "./ansi";

const FILE_LINE = /^(\s*)(File "?)([^",]+)("?, line )(\d+)(.*)$/;
const CELL_LINE = /^(\s*)(Cell In\s*\[\d*\]|Input In\s*\[\d*\]|File [^,]+)(, line )(\d+)(.*)$/;
const ARROW = /^(\s*-*>\s*)(\d+)(.*)$/;
const NUMBERED = /^(\s+)(\d+)(\s.*)$/;
const SEPARATOR = /^-{20,}/;

function span(cls: string, text: string): HTMLSpanElement {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  return s;
}

/** Render one error output into a new element. */
export function renderError(ename: string, evalue: string, traceback: string[]): HTMLElement {
  const box = document.createElement("div");
  box.className = "out-error";
  const pre = document.createElement("pre");
  pre.className = "traceback";
  const lines = traceback.flatMap((t) => t.split("\n"));
  if (lines.some(hasAnsi)) {
    appendAnsi(pre, lines.join("\n"));
  } else if (lines.length > 0) {
    lines.forEach((line, i) => {
      if (i > 0) pre.append("\n");
      colourLine(pre, line, ename);
    });
  }
  const head = document.createElement("div");
  head.className = "error-head";
  head.append(span("ename", ename), document.createTextNode(evalue ? ": " : ""), span("evalue", evalue));
  // The last traceback line normally repeats the exception: show the head only when it does not.
  const lastLine = lines.filter((l) => l.trim()).pop() ?? "";
  if (!lastLine.startsWith(ename) || lines.length === 0) box.append(head);
  if (lines.length > 0) box.append(pre);
  return box;
}

function colourLine(pre: HTMLElement, line: string, ename: string): void {
  let m: RegExpExecArray | null;
  if (SEPARATOR.test(line)) {
    // IPython's rule, with the exception name and "Traceback" in it: never wrapped.
    pre.append(span("tb-dim tb-rule", line));
  } else if (line.startsWith("Traceback (most recent call last)")) {
    pre.append(span("tb-dim", line));
  } else if ((m = FILE_LINE.exec(line))) {
    pre.append(m[1], m[2], span("tb-file", m[3]), m[4], span("tb-lineno", m[5]), span("tb-func", m[6]));
  } else if ((m = CELL_LINE.exec(line))) {
    pre.append(m[1], span("tb-file", m[2]), m[3], span("tb-lineno", m[4]), span("tb-func", m[5]));
  } else if ((m = ARROW.exec(line))) {
    pre.append(span("tb-arrow", m[1]), span("tb-lineno", m[2]), m[3]);
  } else if ((m = NUMBERED.exec(line))) {
    pre.append(m[1], span("tb-lineno-dim", m[2]), m[3]);
  } else if (ename && line.startsWith(ename)) {
    const rest = line.slice(ename.length);
    pre.append(span("ename", ename), rest);
  } else {
    pre.append(line);
  }
}
