// Terminal text as a person would see it: `\r` and `\b` applied per line, ANSI SGR colours
// (16, 256 and 24-bit; bold, italic, underline, inverse) as styled spans, every other escape
// sequence dropped. Built with DOM calls only: the text never becomes markup.

const BASIC = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"];

interface Style {
  fg: string | null;
  bg: string | null;
  bold: boolean;
  dim: boolean;
  italic: boolean;
  underline: boolean;
  inverse: boolean;
}

const PLAIN: Style = { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false };

// CSI ... final byte, OSC ... BEL/ST, and other two-byte escapes.
const ESCAPE = /\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

/** Apply carriage returns and backspaces the way a terminal shows them, line by line. */
export function applyCarriageReturns(text: string): string {
  if (!text.includes("\r") && !text.includes("\b")) return text;
  return text
    .replace(/\r\n/g, "\n")
    .split("\n")
    .map(overwriteLine)
    .join("\n");
}

function overwriteLine(line: string): string {
  let cells: string[] = [];
  let col = 0;
  // Escape sequences take no column; keep them glued to the next character.
  let pending = "";
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === "\x1b") {
      ESCAPE.lastIndex = i;
      const m = ESCAPE.exec(line);
      if (m && m.index === i) {
        pending += m[0];
        i += m[0].length - 1;
        continue;
      }
    }
    if (c === "\r") {
      col = 0;
    } else if (c === "\b") {
      col = Math.max(0, col - 1);
    } else {
      cells[col] = pending + c;
      pending = "";
      col++;
    }
  }
  cells = Array.from(cells, (c) => c ?? " ");
  return cells.join("") + pending;
}

/** `text` with its SGR colours, appended to `parent` as text nodes and spans. */
export function appendAnsi(parent: HTMLElement, text: string): void {
  const clean = applyCarriageReturns(text);
  if (!clean.includes("\x1b")) {
    parent.append(clean);
    return;
  }
  let style = { ...PLAIN };
  let last = 0;
  ESCAPE.lastIndex = 0;
  for (let m = ESCAPE.exec(clean); m; m = ESCAPE.exec(clean)) {
    emit(parent, clean.slice(last, m.index), style);
    last = m.index + m[0].length;
    if (m[2] === "m") style = applySgr(style, m[1]);
  }
  emit(parent, clean.slice(last), style);
}

function emit(parent: HTMLElement, text: string, s: Style): void {
  if (!text) return;
  if (!s.fg && !s.bg && !s.bold && !s.dim && !s.italic && !s.underline && !s.inverse) {
    parent.append(text);
    return;
  }
  const span = document.createElement("span");
  span.textContent = text;
  const [fg, bg] = s.inverse ? [s.bg ?? "var(--out-bg)", s.fg ?? "var(--text)"] : [s.fg, s.bg];
  if (fg) span.style.color = fg;
  if (bg) span.style.backgroundColor = bg;
  if (s.bold) span.style.fontWeight = "bold";
  if (s.dim) span.style.opacity = "0.7";
  if (s.italic) span.style.fontStyle = "italic";
  if (s.underline) span.style.textDecoration = "underline";
  parent.append(span);
}

/** The style after one SGR sequence (`params` as between `ESC[` and `m`). */
export function applySgr(prev: Style, params: string): Style {
  const s = { ...prev };
  const p = params === "" ? [0] : params.split(/[;:]/).map((x) => (x === "" ? 0 : Number(x)));
  for (let i = 0; i < p.length; i++) {
    const n = p[i];
    if (n === 0) Object.assign(s, PLAIN);
    else if (n === 1) s.bold = true;
    else if (n === 2) s.dim = true;
    else if (n === 3) s.italic = true;
    else if (n === 4) s.underline = true;
    else if (n === 7) s.inverse = true;
    else if (n === 22) s.bold = s.dim = false;
    else if (n === 23) s.italic = false;
    else if (n === 24) s.underline = false;
    else if (n === 27) s.inverse = false;
    else if (n >= 30 && n <= 37) s.fg = `var(--ansi-${BASIC[n - 30]})`;
    else if (n >= 90 && n <= 97) s.fg = `var(--ansi-bright-${BASIC[n - 90]})`;
    else if (n >= 40 && n <= 47) s.bg = `var(--ansi-${BASIC[n - 40]})`;
    else if (n >= 100 && n <= 107) s.bg = `var(--ansi-bright-${BASIC[n - 100]})`;
    else if (n === 39) s.fg = null;
    else if (n === 49) s.bg = null;
    else if ((n === 38 || n === 48) && p[i + 1] === 5) {
      const c = color256(p[i + 2] ?? 0);
      if (n === 38) s.fg = c;
      else s.bg = c;
      i += 2;
    } else if ((n === 38 || n === 48) && p[i + 1] === 2) {
      const c = `rgb(${clamp(p[i + 2])},${clamp(p[i + 3])},${clamp(p[i + 4])})`;
      if (n === 38) s.fg = c;
      else s.bg = c;
      i += 4;
    }
  }
  return s;
}

function clamp(n: number | undefined): number {
  return Math.max(0, Math.min(255, Math.floor(n ?? 0)));
}

function color256(n: number): string {
  if (n < 8) return `var(--ansi-${BASIC[n]})`;
  if (n < 16) return `var(--ansi-bright-${BASIC[n - 8]})`;
  if (n < 232) {
    const v = n - 16;
    const level = (x: number) => (x === 0 ? 0 : 55 + x * 40);
    return `rgb(${level(Math.floor(v / 36))},${level(Math.floor(v / 6) % 6)},${level(v % 6)})`;
  }
  const g = 8 + (Math.min(n, 255) - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

/** True when the text carries an escape sequence. */
export function hasAnsi(text: string): boolean {
  return text.includes("\x1b");
}
