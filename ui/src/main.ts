// kernel-mcp's MCP Apps view (ui://kernel-mcp/run): connects to the host with the official
// ext-apps `App`, renders the tool's run as a notebook cell, follows a live run through the
// host's tool-call bridge (`get_execution` with a wait), and offers Interrupt and Run again
// where the host lets views call tools. When it does not, the view says so and shows the
// result it was given.

import {
  App,
  applyDocumentTheme,
  applyHostFonts,
  applyHostStyleVariables,
  type McpUiHostContext,
} from "@modelcontextprotocol/ext-apps";
import { renderBody, renderCode, renderHeader, formatDuration, type CellActions } from "./cell";
import {
  asExecution,
  cellFromExecution,
  cellFromView,
  contentImages,
  isFinal,
  type Cell,
  type RunView,
} from "./model";
import { errorText, openPager, type CallTool } from "./pager";
import { sessionPanel } from "./session";

/** Seconds each `get_execution` waits while following a run. */
const FOLLOW_WAIT_S = 2;

interface ToolResult {
  content?: unknown;
  structuredContent?: unknown;
  isError?: boolean;
}

const root = document.getElementById("app")!;
const app = new App({ name: "kernel-mcp run view", version: "1" }, {}, { autoResize: true });

const state = {
  canCall: false,
  denied: null as string | null,
  args: {} as Record<string, unknown>,
  cell: null as Cell | null,
  kernel: null as string | null,
  following: null as string | null,
  receivedAt: 0,
  panel: null as HTMLElement | null,
  panelSession: null as string | null,
  message: null as string | null,
  /** What a result that is not a run says (a fork's new session). */
  note: null as string | null,
};

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Call a server tool through the host; a refusal by the host turns tool calls off. */
const call: CallTool = async (name, args) => {
  try {
    return (await app.callServerTool({ name, arguments: args })) as ToolResult;
  } catch (e) {
    const msg = (e as Error).message ?? String(e);
    state.canCall = false;
    state.denied = `The host refused a tool call from this view (${name}: ${msg}).`;
    render();
    throw e;
  }
};

function actions(): CellActions {
  return {
    canCall: state.canCall,
    interrupt: () => void interrupt(),
    runAgain: () => void runAgain(),
    sendInput: (v) => void sendInput(v),
    page: (stream, total) => {
      if (!state.cell) return;
      document.getElementById("pagers")?.append(openPager(call, state.cell.runId, stream, total));
    },
    loadMore: () => void loadMore(),
    runAgainBlocked: rerunArgs() ? null : "the code is not known",
  };
}

function render(): void {
  // Re-rendering replaces the buttons: keep the keyboard focus where it was.
  const focused = (document.activeElement as HTMLElement | null)?.dataset?.key;
  const frag = document.createDocumentFragment();
  if (state.denied || !state.canCall) {
    const why =
      state.denied ??
      "This host does not let the view call tools: it shows the result as the tool returned it. Live updates, Interrupt and Run again are off; the agent can call get_execution for the rest.";
    frag.append(el("div", "banner", why));
  }
  if (state.message) frag.append(el("div", "banner banner-error", state.message));
  if (state.note) frag.append(el("div", "banner", state.note));
  const cell = state.cell;
  if (cell) {
    const a = actions();
    const article = el("article", "cell");
    article.setAttribute("aria-label", `Run ${cell.runId}`);
    article.dataset.runId = cell.runId;
    article.dataset.status = cell.status;
    article.append(renderHeader(cell, state.kernel, a), renderCode(cell.code, cell.executionCount), renderBody(cell, a));
    frag.append(article);
  } else if (!state.message && !state.note) {
    frag.append(el("div", "waiting", typeof state.args.code === "string" ? "Running…" : "Waiting for the result…"));
    if (typeof state.args.code === "string") frag.append(renderCode(state.args.code, null));
  }
  const pagers = document.getElementById("pagers") ?? el("div", "pagers");
  pagers.id = "pagers";
  frag.append(pagers);
  if (cell && (state.panelSession !== cell.sessionId || !state.panel)) {
    state.panel = sessionPanel(state.canCall ? call : null, cell.sessionId, (id) => void showRun(id));
    state.panelSession = cell.sessionId;
  }
  if (state.panel) frag.append(state.panel);
  root.replaceChildren(frag);
  if (focused) (root.querySelector(`[data-key="${CSS.escape(focused)}"]`) as HTMLElement | null)?.focus();
}

/** The arguments that run the same code again, or null. */
function rerunArgs(): [string, Record<string, unknown>] | null {
  const cell = state.cell;
  if (!cell) return null;
  if (cell.code !== null) return ["execute", { session_id: cell.sessionId, code: cell.code, wait_s: 1 }];
  if (typeof state.args.path === "string") return ["execute_file", { ...state.args, wait_s: 1 }];
  return null;
}

/** Show an ExecutionResult, then follow it while it is live, then fetch its full cell. */
function showExecution(r: ToolResult, code: string | null): void {
  const exec = asExecution(r.structuredContent);
  if (!exec) return;
  const prev = state.cell?.runId === exec.run_id ? state.cell : null;
  state.cell = cellFromExecution(exec, contentImages(r.content), code ?? prev?.code ?? null);
  state.receivedAt = performance.now();
  render();
  if (!state.canCall) return;
  if (state.kernel === null) void kernelOf(exec.session_id);
  if (!isFinal(exec.status)) void follow(exec.run_id);
  else void enrich(exec.run_id);
}

/** The session's kernel name for the header (a run result does not carry it). */
async function kernelOf(sessionId: string): Promise<void> {
  try {
    const r = await call("get_session", { session_id: sessionId });
    const s = r.structuredContent as { display_name?: string; kernel?: string } | undefined;
    if (!r.isError && s && state.kernel === null) {
      state.kernel = s.display_name ?? s.kernel ?? null;
      render();
    }
  } catch {
    // Said by `call`.
  }
}

async function follow(runId: string): Promise<void> {
  if (state.following === runId) return;
  state.following = runId;
  try {
    while (state.canCall && state.cell?.runId === runId && !isFinal(state.cell.status)) {
      const r = await call("get_execution", { run_id: runId, wait_s: FOLLOW_WAIT_S });
      if (r.isError && !asExecution(r.structuredContent)) {
        state.message = `Following the run stopped: ${errorText(r.structuredContent)}`;
        render();
        return;
      }
      if (state.cell?.runId !== runId) return;
      const exec = asExecution(r.structuredContent);
      if (!exec) return;
      state.cell = cellFromExecution(exec, contentImages(r.content), state.cell.code);
      state.receivedAt = performance.now();
      render();
    }
    if (state.cell?.runId === runId) await enrich(runId);
  } catch {
    // The host refused: `call` has said so.
  } finally {
    if (state.following === runId) state.following = null;
  }
}

/** Replace the agent's bounded view of a finished run by its whole cell (`view_run`). */
async function enrich(runId: string, start = 0): Promise<void> {
  try {
    const r = await call("view_run", { run_id: runId, start });
    const v = r.structuredContent as RunView | undefined;
    if (r.isError || !v || !Array.isArray(v.outputs) || state.cell?.runId !== runId) return;
    const next = cellFromView(v, state.cell);
    if (start > 0 && state.cell) next.outputs = [...state.cell.outputs, ...v.outputs];
    state.cell = next;
    state.kernel = v.display_name ?? v.kernel ?? state.kernel;
    render();
  } catch {
    // Older servers have no view_run: the bounded view stays.
  }
}

async function loadMore(): Promise<void> {
  if (state.cell?.moreFrom != null) await enrich(state.cell.runId, state.cell.moreFrom);
}

async function interrupt(): Promise<void> {
  const cell = state.cell;
  if (!cell) return;
  try {
    const r = await call("interrupt_session", { session_id: cell.sessionId });
    const notes = (r.structuredContent as { notices?: string[] } | undefined)?.notices ?? [];
    if (r.isError) state.message = `Interrupt failed: ${errorText(r.structuredContent)}`;
    else if (state.cell === cell) cell.notices = [...cell.notices, ...notes];
    render();
    if (!state.following) void follow(cell.runId);
  } catch {
    // Said by `call`.
  }
}

async function runAgain(): Promise<void> {
  const rerun = rerunArgs();
  if (!rerun) return;
  const code = state.cell?.code ?? null;
  try {
    const r = await call(rerun[0], rerun[1]);
    if (r.isError && !asExecution(r.structuredContent)) {
      state.message = `Run again failed: ${errorText(r.structuredContent)}`;
      render();
      return;
    }
    state.message = null;
    showExecution(r, code);
  } catch {
    // Said by `call`.
  }
}

async function sendInput(value: string): Promise<void> {
  const cell = state.cell;
  if (!cell) return;
  try {
    const r = await call("send_input", { run_id: cell.runId, value });
    showExecution(r, cell.code);
  } catch {
    // Said by `call`.
  }
}

/** Open another run of the session (from the panel). */
async function showRun(runId: string): Promise<void> {
  try {
    const r = await call("get_execution", { run_id: runId });
    state.message = null;
    if (r.isError && !asExecution(r.structuredContent)) {
      state.message = `Could not open ${runId}: ${errorText(r.structuredContent)}`;
      render();
      return;
    }
    showExecution(r, null);
  } catch {
    // Said by `call`.
  }
}

function applyContext(ctx: McpUiHostContext | undefined): void {
  if (!ctx) return;
  if (ctx.theme) applyDocumentTheme(ctx.theme);
  if (ctx.styles?.variables) applyHostStyleVariables(ctx.styles.variables);
  if (ctx.styles?.css?.fonts) applyHostFonts(ctx.styles.css.fonts);
}

/** A result that is not a run: a tool error, a fork's new session, a page. */
function showOther(r: ToolResult): void {
  const s = r.structuredContent as Record<string, unknown> | undefined;
  if (r.isError) {
    state.message = errorText(s);
  } else if (s && typeof s.session_id === "string" && !("run_id" in s)) {
    state.message = null;
    const from = typeof s.forked_from === "string" ? `, forked from ${s.forked_from}` : "";
    state.note = `Session ${s.session_id} (${String(s.display_name ?? s.kernel ?? "")}${from}).`;
    state.panel = sessionPanel(state.canCall ? call : null, s.session_id, (id) => void showRun(id));
    state.panelSession = s.session_id;
    (state.panel as HTMLDetailsElement).open = state.canCall;
  } else if (s && typeof s.text === "string") {
    const pre = el("pre", "stream stdout", s.text);
    state.message = null;
    render();
    root.prepend(pre);
    return;
  }
  render();
}

app.ontoolinput = (p) => {
  state.args = (p.arguments ?? {}) as Record<string, unknown>;
  if (!state.cell) render();
};

app.ontoolresult = (r) => {
  const result = r as ToolResult;
  if (asExecution(result.structuredContent)) {
    state.message = null;
    state.note = null;
    const code = typeof state.args.code === "string" ? state.args.code : null;
    showExecution(result, code);
  } else {
    showOther(result);
  }
};

app.ontoolcancelled = (p) => {
  state.message = `The tool call was cancelled${p.reason ? `: ${p.reason}` : "."}`;
  render();
};

app.onhostcontextchanged = (ctx) => applyContext(ctx);

app.onteardown = async () => {
  state.canCall = false;
  return {};
};

// While a run is live, the elapsed time counts up between answers.
setInterval(() => {
  const cell = state.cell;
  const e = document.getElementById("elapsed");
  if (!cell || !e || isFinal(cell.status) || cell.elapsedMs === null) return;
  e.textContent = formatDuration(cell.elapsedMs + (performance.now() - state.receivedAt));
}, 500);

render();
app
  .connect()
  .then(() => {
    state.canCall = app.getHostCapabilities()?.serverTools !== undefined;
    applyContext(app.getHostContext());
    render();
    // A result that came during the handshake is followed now that the host is known.
    const cell = state.cell;
    if (cell && state.canCall) {
      if (state.kernel === null) void kernelOf(cell.sessionId);
      if (!isFinal(cell.status)) void follow(cell.runId);
      else if (cell.partial) void enrich(cell.runId);
    }
  })
  .catch((e: Error) => {
    state.message = `Could not connect to the host: ${e.message}`;
    render();
  });
