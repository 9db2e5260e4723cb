// application/json as a tree a person can fold: objects and arrays are <details> (keyboard
// operable), the first level open; long containers show their first entries and a count.

const MAX_CHILDREN = 200;
const MAX_DEPTH = 40;

/** The tree of `value`, or a <pre> of the text when it is not JSON. */
export function renderJson(value: unknown): HTMLElement {
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      const pre = document.createElement("pre");
      pre.className = "json-text";
      pre.textContent = value as string;
      return pre;
    }
  }
  const root = document.createElement("div");
  root.className = "json-tree";
  root.append(node(value, null, 0));
  return root;
}

function node(value: unknown, key: string | null, depth: number): HTMLElement {
  const isArray = Array.isArray(value);
  if (value === null || typeof value !== "object" || depth >= MAX_DEPTH) {
    const row = document.createElement("div");
    row.className = "json-row";
    if (key !== null) row.append(keySpan(key));
    row.append(leaf(value, depth));
    return row;
  }
  const entries: [string, unknown][] = isArray
    ? (value as unknown[]).map((v, i) => [String(i), v])
    : Object.entries(value as Record<string, unknown>);
  const d = document.createElement("details");
  d.open = depth === 0;
  const s = document.createElement("summary");
  if (key !== null) s.append(keySpan(key));
  const brief = document.createElement("span");
  brief.className = "json-brief";
  brief.textContent = isArray ? `Array(${entries.length})` : `{${entries.length} keys}`;
  s.append(brief);
  d.append(s);
  const body = document.createElement("div");
  body.className = "json-children";
  for (const [k, v] of entries.slice(0, MAX_CHILDREN)) body.append(node(v, k, depth + 1));
  if (entries.length > MAX_CHILDREN) {
    const more = document.createElement("div");
    more.className = "json-more";
    more.textContent = `… ${entries.length - MAX_CHILDREN} more`;
    body.append(more);
  }
  d.append(body);
  return d;
}

function keySpan(key: string): HTMLElement {
  const k = document.createElement("span");
  k.className = "json-key";
  k.textContent = `${key}: `;
  return k;
}

function leaf(value: unknown, depth: number): HTMLElement {
  const v = document.createElement("span");
  if (depth >= MAX_DEPTH && value !== null && typeof value === "object") {
    v.className = "json-null";
    v.textContent = "…";
    return v;
  }
  v.className = `json-${value === null ? "null" : typeof value}`;
  v.textContent = typeof value === "string" ? JSON.stringify(value) : String(value);
  return v;
}
