// The session panel: what the session is (kernel, status, generation, memory, directory,
// notebook), its variables (`get_session(include_variables=true)`: names, types and short
// summaries, never a user `__repr__`) and its recent runs (`get_history`, the last
// [`RECENT_RUNS`]), each of which can be opened in the view.

import type { CallTool } from "./pager";
import { errorText } from "./pager";

/** Runs listed at most. */
export const RECENT_RUNS = 10;
/** Variables listed at most. */
const MAX_VARIABLES = 100;

interface Variable {
  name: string;
  type: string;
  summary: string;
}

interface HistoryRow {
  index: number;
  run_id: string;
  code: string;
  status: string;
  execution_count: number | null;
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A collapsed panel for `sessionId`; it loads when opened. `open(runId)` shows a run. */
export function sessionPanel(call: CallTool | null, sessionId: string, open: (runId: string) => void): HTMLElement {
  const d = el("details", "session-panel");
  d.id = "session-panel";
  const summary = el("summary", "", `Session ${sessionId}`);
  d.append(summary);
  const body = el("div", "session-body");
  d.append(body);
  if (!call) {
    body.append(el("p", "muted", "This host does not let the view call tools, so the session cannot be shown here."));
    return d;
  }
  let loaded = false;
  const refresh = el("button", "btn btn-small", "Refresh");
  refresh.type = "button";
  refresh.addEventListener("click", () => void load());
  d.addEventListener("toggle", () => {
    if (d.open && !loaded) void load();
  });

  async function load(): Promise<void> {
    loaded = true;
    body.replaceChildren(el("p", "muted", "Loading…"));
    const [info, hist] = await Promise.allSettled([
      call!("get_session", { session_id: sessionId, include_variables: true }),
      call!("get_history", { session_id: sessionId, start: -RECENT_RUNS }),
    ]);
    body.replaceChildren(refresh);
    if (info.status === "fulfilled" && !info.value.isError) {
      body.append(renderInfo(info.value.structuredContent as Record<string, unknown>));
    } else {
      body.append(el("p", "muted", `Session: ${failure(info)}`));
    }
    if (hist.status === "fulfilled" && !hist.value.isError) {
      body.append(renderRuns(hist.value.structuredContent as { entries?: HistoryRow[]; total?: number }, open));
    } else {
      body.append(el("p", "muted", `Recent runs: ${failure(hist)}`));
    }
  }
  return d;
}

function failure(r: PromiseSettledResult<{ structuredContent?: unknown }>): string {
  return r.status === "rejected" ? String((r.reason as Error)?.message ?? r.reason) : errorText(r.value.structuredContent);
}

function renderInfo(s: Record<string, unknown>): HTMLElement {
  const box = el("div", "session-info");
  const dl = el("dl", "facts");
  const fact = (k: string, v: unknown) => {
    if (v === null || v === undefined || v === "") return;
    dl.append(el("dt", "", k), el("dd", "", String(v)));
  };
  fact("kernel", s.display_name ?? s.kernel);
  fact("status", s.status);
  fact("generation", s.generation);
  fact("memory", typeof s.memory_mib === "number" ? `${s.memory_mib} MiB` : null);
  fact("directory", s.cwd);
  fact("notebook", s.notebook ?? s.notebook_path ?? null);
  fact("runs", s.history_count);
  fact("queued", s.queue_length || null);
  fact("forked from", s.forked_from ?? null);
  box.append(dl);
  const vars = (s.variables as Variable[] | undefined) ?? null;
  if (vars) {
    const t = el("table", "variables");
    t.append(el("caption", "", `Variables (${vars.length})`));
    const head = el("tr", "");
    for (const h of ["name", "type", "value"]) head.append(el("th", "", h));
    t.append(el("thead", ""), el("tbody", ""));
    t.tHead!.append(head);
    for (const v of vars.slice(0, MAX_VARIABLES)) {
      const tr = el("tr", "");
      tr.append(el("td", "var-name", v.name), el("td", "var-type", v.type), el("td", "var-summary", v.summary));
      t.tBodies[0].append(tr);
    }
    const wrap = el("div", "table-wrap");
    wrap.append(t);
    box.append(wrap);
    if (vars.length > MAX_VARIABLES) box.append(el("p", "muted", `… ${vars.length - MAX_VARIABLES} more variables`));
  } else if (typeof s.variables_note === "string") {
    box.append(el("p", "muted", s.variables_note));
  }
  return box;
}

function renderRuns(h: { entries?: HistoryRow[]; total?: number }, open: (runId: string) => void): HTMLElement {
  const box = el("div", "recent-runs");
  const entries = (h.entries ?? []).slice(-RECENT_RUNS).reverse();
  box.append(el("h3", "", `Recent runs (${entries.length} of ${h.total ?? entries.length})`));
  const ul = el("ul", "run-list");
  for (const e of entries) {
    const li = el("li", "");
    const b = el("button", `run-link run-${e.status}`);
    b.type = "button";
    const first = e.code.split("\n").find((l) => l.trim()) ?? "";
    b.append(el("span", "run-count", e.execution_count != null ? `[${e.execution_count}]` : "[ ]"), el("span", "run-code", first), el("span", "run-status", e.status));
    b.title = `Show ${e.run_id}`;
    b.addEventListener("click", () => open(e.run_id));
    li.append(b);
    ul.append(li);
  }
  box.append(ul);
  return box;
}
