// Paging through a whole stream the response shortened, with the same pages the agent
// reads: `get_execution(run_id, stream, offset, limit)`. One page is in the page at a
// time, so a 50 MB output costs the view one 64 KiB page.

import { appendAnsi } from "./ansi";

/** Bytes per page. */
export const PAGE_BYTES = 64 * 1024;

/** `get_execution`'s page of a stream (docs/tools.md). */
interface StreamPage {
  text: string;
  offset: number;
  next_offset: number;
  total_bytes: number;
}

export type CallTool = (name: string, args: Record<string, unknown>) => Promise<{ content?: unknown; structuredContent?: unknown; isError?: boolean }>;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A pager for `stream` of `runId`, opened at offset 0. */
export function openPager(call: CallTool, runId: string, stream: string, total: number): HTMLElement {
  const box = el("section", "pager");
  box.setAttribute("aria-label", `${stream} pages`);
  box.dataset.stream = stream;
  const bar = el("div", "pager-bar");
  const where = el("span", "pager-where");
  const pre = el("pre", `stream ${stream}`);
  const history: number[] = [];
  let current = 0;
  let next = 0;
  const btn = (label: string, go: () => void) => {
    const b = el("button", "btn", label);
    b.type = "button";
    b.addEventListener("click", go);
    return b;
  };
  const first = btn("First", () => load(0, true));
  const prev = btn("Previous", () => load(history.pop() ?? 0, false));
  const nextB = btn("Next", () => load(next, true));
  const last = btn("Last", () => load(Math.max(0, total - PAGE_BYTES), true));
  const close = btn("Close", () => box.remove());
  bar.append(where, first, prev, nextB, last, close);
  box.append(bar, pre);

  async function load(offset: number, forward: boolean): Promise<void> {
    if (forward && offset !== current) history.push(current);
    if (offset === 0) history.length = 0;
    where.textContent = "loading…";
    try {
      const r = await call("get_execution", { run_id: runId, stream, offset, limit: PAGE_BYTES });
      const page = r.structuredContent as StreamPage | undefined;
      if (r.isError || !page || typeof page.text !== "string") throw new Error(errorText(r.structuredContent));
      current = offset;
      next = page.next_offset;
      total = page.total_bytes;
      pre.textContent = "";
      appendAnsi(pre, page.text);
      where.textContent = `${stream}: bytes ${offset.toLocaleString()}–${page.next_offset.toLocaleString()} of ${total.toLocaleString()}`;
      prev.disabled = first.disabled = offset === 0;
      nextB.disabled = last.disabled = page.next_offset >= total;
    } catch (e) {
      where.textContent = `Could not read ${stream}: ${(e as Error).message}`;
    }
  }
  void load(0, false);
  return box;
}

/** The message of a kernel-mcp tool error (`{error_code, message}`), or a generic one. */
export function errorText(structured: unknown): string {
  const s = structured as { error_code?: string; message?: string } | undefined;
  if (s && typeof s.message === "string") return s.error_code ? `${s.error_code}: ${s.message}` : s.message;
  return "the tool returned no page";
}
