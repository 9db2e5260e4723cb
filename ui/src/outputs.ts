// One nbformat output as DOM, the way a notebook shows it: streams (stdout and stderr
// apart, terminal colours), the richest MIME type of a display (JSON tree, HTML and
// Markdown in a sandboxed frame, SVG and bitmaps as images, LaTeX as MathML, plain text),
// and errors with their traceback. What one output may put in the page is bounded: a longer
// stream shows its head and tail, and the pager reads the rest.

import { marked } from "marked";
import { appendAnsi } from "./ansi";
import { renderJson } from "./jsontree";
import type { NbOutput } from "./model";
import { htmlFrame } from "./sandbox";
import { appendLatex, extractMath } from "./tex";
import { renderError } from "./traceback";

/** Characters of one stream output placed in the page (head and tail of a longer one). */
export const MAX_STREAM_CHARS = 200_000;
/** Characters of one text/html, Markdown, LaTeX or plain display placed in the page. */
const MAX_TEXT_CHARS = 500_000;

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/** MIME types in the order a notebook prefers them. */
const PREFERENCE = [
  "application/json",
  "text/html",
  "image/svg+xml",
  ...IMAGE_TYPES,
  "text/markdown",
  "text/latex",
  "text/plain",
];

function joinValue(v: unknown): string {
  if (Array.isArray(v)) return v.join("");
  return typeof v === "string" ? v : JSON.stringify(v, null, 1);
}

/** `text` cut to its first and last `max / 2` characters, and how many were left out. */
export function headTail(text: string, max: number): [string, string | null, number] {
  if (text.length <= max) return [text, null, 0];
  const half = Math.floor(max / 2);
  return [text.slice(0, half), text.slice(text.length - half), text.length - 2 * half];
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A stream output (`stdout` / `stderr`). */
export function renderStream(name: string, text: string): HTMLElement {
  const pre = el("pre", `stream ${name === "stderr" ? "stderr" : "stdout"}`);
  pre.setAttribute("aria-label", name);
  const [head, tail, omitted] = headTail(text, MAX_STREAM_CHARS);
  appendAnsi(pre, head);
  if (tail !== null) {
    pre.append(el("span", "omitted", `\n… ${omitted.toLocaleString()} characters not shown here: page through the whole ${name} below …\n`));
    appendAnsi(pre, tail);
  }
  return pre;
}

/** One output of any kind. */
export function renderOutput(o: NbOutput): HTMLElement {
  const wrap = el("div", "output");
  wrap.dataset.outputType = o.output_type;
  if (o.output_type === "stream") {
    wrap.dataset.stream = o.name;
    wrap.append(renderStream(o.name, joinValue(o.text)));
    return wrap;
  }
  if (o.output_type === "error") {
    wrap.append(renderError(o.ename, o.evalue, o.traceback ?? []));
    return wrap;
  }
  if (o.output_type === "execute_result" && o.execution_count != null) {
    wrap.append(el("div", "prompt out-prompt", `Out[${o.execution_count}]:`));
  }
  const body = el("div", "output-body");
  body.append(renderBundle(o.data ?? {}));
  wrap.append(body);
  return wrap;
}

/** The richest MIME type of a bundle that the view can show. */
export function pickMime(data: Record<string, unknown>): string | null {
  for (const m of PREFERENCE) if (m in data) return m;
  const other = Object.keys(data).find((k) => k.startsWith("image/") || k.startsWith("text/"));
  return other ?? null;
}

function renderBundle(data: Record<string, unknown>): HTMLElement {
  const mime = pickMime(data);
  if (mime === null) {
    return el("div", "out-unsupported", `[no viewable form: ${Object.keys(data).join(", ") || "empty"}]`);
  }
  const value = data[mime];
  const e = renderMime(mime, value);
  e.dataset.mime = mime;
  return e;
}

function renderMime(mime: string, value: unknown): HTMLElement {
  if (mime === "application/json") return renderJson(typeof value === "string" ? value : value);
  const text = joinValue(value);
  if (mime === "text/html") return htmlFrame(bounded(text), "html");
  if (mime === "text/markdown") return markdownFrame(bounded(text));
  if (mime === "image/svg+xml") {
    // As an <img>, an SVG is a picture: its scripts and links never run.
    const src = text.trimStart().startsWith("<")
      ? `data:image/svg+xml;charset=utf-8,${encodeURIComponent(text)}`
      : `data:image/svg+xml;base64,${text.replace(/\s/g, "")}`;
    return image(src, "SVG output");
  }
  if (mime.startsWith("image/")) {
    const safe = IMAGE_TYPES.includes(mime) ? mime : "application/octet-stream";
    return image(`data:${safe};base64,${text.replace(/\s/g, "")}`, `${mime} output`);
  }
  if (mime === "text/latex") {
    const d = el("div", "out-latex");
    appendLatex(d, bounded(text));
    return d;
  }
  const pre = el("pre", "out-text");
  appendAnsi(pre, bounded(text));
  return pre;
}

function bounded(text: string): string {
  const [head, tail, omitted] = headTail(text, MAX_TEXT_CHARS);
  return tail === null ? head : `${head}\n… ${omitted} characters not shown …\n${tail}`;
}

function image(src: string, alt: string): HTMLElement {
  const img = el("img", "out-image");
  img.alt = alt;
  img.decoding = "async";
  img.src = src;
  return img;
}

function markdownFrame(md: string): HTMLElement {
  const { text, math } = extractMath(md);
  let html = marked.parse(text, { async: false, gfm: true }) as string;
  html = html.replace(/KMCPMATH(\d+)X/g, (_, i) => math[Number(i)] ?? "");
  return htmlFrame(html, "markdown");
}
