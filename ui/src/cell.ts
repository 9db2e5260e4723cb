// The run as a notebook cell: a header (status, execution count, elapsed time, session and
// kernel, the buttons), the code, the outputs in order, the notices, and for each stream
// the response shortened, a way to page through all of it.

import { isFinal, type Cell } from "./model";
import { renderOutput } from "./outputs";

/** What the buttons do (main.ts decides whether the host lets them). */
export interface CellActions {
  canCall: boolean;
  interrupt(): void;
  runAgain(): void;
  sendInput(value: string): void;
  page(stream: string, total: number): void;
  loadMore(): void;
  /** Why "Run again" is not offered, or null when it is. */
  runAgainBlocked: string | null;
}

/** Outputs placed in the page at most; more are fetched on request. */
const MAX_RENDERED_OUTPUTS = 300;
/** Code lines shown before the rest is folded. */
const CODE_LINES = 40;

const STATUS_TEXT: Record<string, string> = {
  queued: "queued",
  running: "running",
  awaiting_input: "waiting for input",
  ok: "ok",
  error: "error",
  aborted: "aborted",
  timeout: "timed out",
  interrupted: "interrupted",
  cancelled: "cancelled",
  kernel_died: "kernel died",
};

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A button; `key` names it across re-renders, so keyboard focus stays on it. */
function button(label: string, cls: string, onClick: () => void, title?: string): HTMLButtonElement {
  const b = el("button", cls, label);
  b.type = "button";
  b.dataset.key = label;
  if (title) b.title = title;
  b.addEventListener("click", onClick);
  return b;
}

/** "1.2 s", "3 min 4 s", "850 ms". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}

/** The header: status, count, timing, session and kernel, and the buttons. */
export function renderHeader(cell: Cell, kernel: string | null, a: CellActions): HTMLElement {
  const head = el("header", "cell-head");
  const badge = el("span", `status status-${cell.status}`, STATUS_TEXT[cell.status] ?? cell.status);
  badge.setAttribute("role", "status");
  badge.id = "run-status";
  const live = !isFinal(cell.status);
  if (live) badge.prepend(el("span", "spinner"));
  head.append(badge);
  const meta = el("span", "cell-meta");
  if (cell.executionCount != null) meta.append(el("span", "count", `[${cell.executionCount}]`));
  const time = el("span", "elapsed");
  time.id = "elapsed";
  if (cell.elapsedMs != null) time.textContent = formatDuration(cell.elapsedMs);
  meta.append(time);
  const where = el("span", "where");
  where.append(el("span", "session", cell.sessionId));
  if (kernel) where.append(" · ", el("span", "kernel", kernel));
  meta.append(where);
  head.append(meta);
  const tools = el("span", "cell-tools");
  if (live && a.canCall) {
    tools.append(button("Interrupt", "btn btn-danger", a.interrupt, "Interrupt the run (interrupt_session); the kernel keeps its state"));
  }
  if (!live && a.canCall && a.runAgainBlocked === null) {
    tools.append(button("Run again", "btn", a.runAgain, "Run the same code again in the same session"));
  }
  head.append(tools);
  return head;
}

/** The code, folded past [`CODE_LINES`] lines. */
export function renderCode(code: string | null, count: number | null): HTMLElement {
  const box = el("div", "cell-input");
  box.append(el("div", "prompt in-prompt", count != null ? `In [${count}]:` : "In [ ]:"));
  if (code === null) {
    box.append(el("div", "code-missing", "The code of this run is not in the tool result."));
    return box;
  }
  const lines = code.split("\n");
  const pre = el("pre", "code");
  pre.textContent = lines.slice(0, CODE_LINES).join("\n");
  if (lines.length > CODE_LINES) {
    const d = el("details", "code-more");
    d.append(el("summary", "", `${lines.length - CODE_LINES} more lines`));
    d.append(el("pre", "code", lines.slice(CODE_LINES).join("\n")));
    const wrap = el("div", "code-wrap");
    wrap.append(pre, d);
    box.append(wrap);
  } else {
    box.append(pre);
  }
  return box;
}

/** The outputs, the notices, the input prompt and the pagers' triggers. */
export function renderBody(cell: Cell, a: CellActions): HTMLElement {
  const body = el("div", "cell-outputs");
  body.id = "outputs";
  const shown = cell.outputs.slice(0, MAX_RENDERED_OUTPUTS);
  for (const o of shown) body.append(renderOutput(o));
  const hidden = cell.outputs.length - shown.length;
  if (hidden > 0 || cell.moreFrom !== null) {
    const more = el("div", "more-outputs");
    more.append(`${hidden > 0 ? hidden : "More"} outputs not shown. `);
    if (a.canCall && cell.moreFrom !== null) more.append(button("Load more", "btn", a.loadMore));
    body.append(more);
  }
  if (cell.status === "awaiting_input" && cell.prompt) body.append(renderPrompt(cell, a));
  for (const [stream, t] of Object.entries(cell.truncated)) {
    if (t.omitted_bytes <= 0) continue;
    const row = el("div", "truncated");
    row.append(`${stream}: ${t.total_bytes.toLocaleString()} bytes in all, ${t.omitted_bytes.toLocaleString()} not shown above. `);
    if (a.canCall) row.append(button(`Page through ${stream}`, "btn", () => a.page(stream, t.total_bytes)));
    body.append(row);
  }
  if (cell.notices.length > 0) {
    const ul = el("ul", "notices");
    for (const n of cell.notices) ul.append(el("li", "", n));
    body.append(ul);
  }
  if (cell.outputs.length === 0 && isFinal(cell.status) && cell.notices.length === 0) {
    body.append(el("div", "no-output", "No output."));
  }
  return body;
}

function renderPrompt(cell: Cell, a: CellActions): HTMLElement {
  const form = el("form", "stdin");
  const label = el("label", "stdin-label", cell.prompt?.text || "input:");
  const input = el("input", "stdin-input");
  input.type = cell.prompt?.password ? "password" : "text";
  input.id = "stdin-value";
  label.htmlFor = input.id;
  form.append(label, input);
  if (a.canCall) {
    const send = el("button", "btn", "Send");
    send.type = "submit";
    form.append(send);
  } else {
    input.disabled = true;
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    a.sendInput(input.value);
  });
  return form;
}
