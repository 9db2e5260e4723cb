// What the view shows, and how it is made from what kernel-mcp's tools return.
//
// The view renders one *cell*: code, then nbformat outputs in order. A cell comes from one
// of two places:
// - `view_run` (an app-only tool): the run as the notebook export writes it, every output
//   in the kernel's order with its whole MIME bundle (HTML, SVG, Markdown, LaTeX, JSON…);
// - an ExecutionResult (`execute`, `execute_file`, `get_execution`), the agent's bounded
//   view: stdout, stderr, displays by their text and images, the result and the error. This
//   is what the view shows while a run is live, and when the host lets it call no tools.

/** docs/tools.md: ExecutionResult (the fields the view reads). */
export interface ExecutionResult {
  run_id: string;
  session_id: string;
  generation?: number;
  state_reset?: boolean;
  status: string;
  execution_count?: number | null;
  stdout?: string;
  stderr?: string;
  result?: string | null;
  outputs?: OutputItem[];
  error?: { ename: string; evalue: string; traceback: string[] } | null;
  prompt?: { text: string; password: boolean } | null;
  truncated?: Record<string, { total_bytes: number; omitted_bytes: number }> | null;
  queued_ms?: number;
  elapsed_ms?: number;
  notices?: string[];
}

/** One display of ExecutionResult.outputs. */
export interface OutputItem {
  kind: string;
  mime_types: string[];
  text?: string | null;
  image?: { mime: string; bytes: number } | null;
  display_id?: string | null;
  index: number;
}

/** An nbformat 4 output (https://nbformat.readthedocs.io/en/latest/format_description.html). */
export type NbOutput =
  | { output_type: "stream"; name: string; text: string }
  | {
      output_type: "display_data" | "execute_result";
      data: Record<string, unknown>;
      metadata?: Record<string, unknown>;
      execution_count?: number | null;
    }
  | { output_type: "error"; ename: string; evalue: string; traceback: string[] };

/** What `view_run` returns (structuredContent). */
export interface RunView {
  run_id: string;
  session_id: string;
  status: string;
  code: string;
  execution_count?: number | null;
  outputs: NbOutput[];
  /** Index of the next output when more remain (call again with `start`). */
  next_start?: number | null;
  total_outputs: number;
  kernel?: string;
  display_name?: string;
  language?: string;
}

/** The cell the view renders. */
export interface Cell {
  runId: string;
  sessionId: string;
  status: string;
  code: string | null;
  executionCount: number | null;
  outputs: NbOutput[];
  /** Outputs not yet fetched (`view_run` pages). */
  moreFrom: number | null;
  /** Streams the response shortened: name → total bytes, omitted bytes. */
  truncated: Record<string, { total_bytes: number; omitted_bytes: number }>;
  elapsedMs: number | null;
  queuedMs: number | null;
  notices: string[];
  prompt: { text: string; password: boolean } | null;
  /** The outputs are the agent's bounded view, not the whole bundles. */
  partial: boolean;
}

const FINAL = new Set(["ok", "error", "aborted", "timeout", "interrupted", "cancelled", "kernel_died"]);

/** True once the status can no longer change. */
export function isFinal(status: string): boolean {
  return FINAL.has(status);
}

/** Images of a tool result's content, in order (one per output that has an image). */
export interface ContentImage {
  data: string;
  mimeType: string;
}

/** A structuredContent that is an ExecutionResult (not a page, not a SessionInfo). */
export function asExecution(v: unknown): ExecutionResult | null {
  const r = v as Partial<ExecutionResult> | null;
  if (!r || typeof r !== "object" || typeof r.run_id !== "string" || typeof r.status !== "string") {
    return null;
  }
  if ("stream" in r) return null;
  return r as ExecutionResult;
}

/** The cell of an ExecutionResult: streams first, then displays, the result and the error,
 *  since the agent's view does not keep their order. */
export function cellFromExecution(r: ExecutionResult, images: ContentImage[], code: string | null): Cell {
  const outputs: NbOutput[] = [];
  if (r.stdout) outputs.push({ output_type: "stream", name: "stdout", text: r.stdout });
  if (r.stderr) outputs.push({ output_type: "stream", name: "stderr", text: r.stderr });
  let img = 0;
  for (const o of r.outputs ?? []) {
    const data: Record<string, unknown> = {};
    if (o.image && img < images.length) {
      const i = images[img++];
      data[i.mimeType] = i.data;
    }
    if (o.text != null) data[textMime(o)] = o.text;
    if (Object.keys(data).length === 0) {
      data["text/plain"] = `[${o.mime_types.join(", ")}]`;
    }
    const kind = o.kind === "execute_result" ? "execute_result" : "display_data";
    outputs.push({ output_type: kind, data, execution_count: r.execution_count ?? null });
  }
  const hasResult = (r.outputs ?? []).some((o) => o.kind === "execute_result");
  if (r.result != null && !hasResult) {
    outputs.push({
      output_type: "execute_result",
      data: { "text/plain": r.result },
      execution_count: r.execution_count ?? null,
    });
  }
  if (r.error) outputs.push({ output_type: "error", ...r.error });
  return {
    runId: r.run_id,
    sessionId: r.session_id,
    status: r.status,
    code,
    executionCount: r.execution_count ?? null,
    outputs,
    moreFrom: null,
    truncated: r.truncated ?? {},
    elapsedMs: r.elapsed_ms ?? null,
    queuedMs: r.queued_ms ?? null,
    notices: r.notices ?? [],
    prompt: r.prompt ?? null,
    partial: true,
  };
}

/** The MIME type an output's `text` is in: the richest readable one the bundle had
 *  (docs/semantics.md: markdown, JSON, LaTeX, else plain text). */
function textMime(o: OutputItem): string {
  for (const m of ["text/markdown", "application/json", "text/latex"]) {
    if (o.mime_types.includes(m)) return m;
  }
  return "text/plain";
}

/** The cell of a `view_run` answer, keeping what only the ExecutionResult says. */
export function cellFromView(v: RunView, last: Cell | null): Cell {
  return {
    runId: v.run_id,
    sessionId: v.session_id,
    status: v.status,
    code: v.code,
    executionCount: v.execution_count ?? null,
    outputs: v.outputs,
    moreFrom: v.next_start ?? null,
    truncated: last?.runId === v.run_id ? last.truncated : {},
    elapsedMs: last?.runId === v.run_id ? last.elapsedMs : null,
    queuedMs: last?.runId === v.run_id ? last.queuedMs : null,
    notices: last?.runId === v.run_id ? last.notices : [],
    prompt: null,
    partial: false,
  };
}

/** Images of a CallToolResult's content blocks, in order. */
export function contentImages(content: unknown): ContentImage[] {
  if (!Array.isArray(content)) return [];
  return content
    .filter((b) => b && b.type === "image" && typeof b.data === "string")
    .map((b) => ({ data: b.data as string, mimeType: String(b.mimeType ?? "image/png") }));
}
