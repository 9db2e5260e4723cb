// HTML from a kernel (text/html, and Markdown once rendered) shown inside an iframe of its
// own, three walls deep:
// 1. the markup is parsed inert (DOMParser) and stripped of scripts, frames, objects,
//    forms, meta/base/link, event-handler attributes and javascript:/vbscript:/data: URLs;
// 2. the iframe is sandboxed without `allow-scripts` (nothing in it runs, not even what
//    the first wall missed), without popups, forms or top navigation;
// 3. its document carries a CSP allowing only inline styles and data: images and fonts.
// `allow-same-origin` is kept so the view can measure the document's height; with scripts
// off it gives the frame's content no way to act. Colours and fonts are copied in from the
// view, since CSS variables do not cross documents.

const FRAME_CSP =
  "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; media-src data:";

const DROP =
  "script,iframe,frame,frameset,object,embed,applet,link,meta,base,form,portal,noscript,animate,set,animateMotion,animateTransform,foreignObject";

const URL_ATTRS = new Set(["href", "src", "xlink:href", "action", "formaction", "poster", "background", "data", "srcset", "ping"]);

/** The markup with everything that could act removed. */
export function sanitize(html: string): string {
  const doc = new DOMParser().parseFromString(html, "text/html");
  const styles = Array.from(doc.head.querySelectorAll("style"));
  doc.querySelectorAll(DROP).forEach((e) => e.remove());
  for (const el of Array.from(doc.body.querySelectorAll("*"))) {
    for (const a of Array.from(el.attributes)) {
      const name = a.name.toLowerCase();
      if (name.startsWith("on") || name === "srcdoc" || name === "target" || name === "http-equiv") {
        el.removeAttribute(a.name);
      } else if (URL_ATTRS.has(name) && !safeUrl(name, a.value)) {
        el.removeAttribute(a.name);
      }
    }
  }
  return styles.map((s) => s.outerHTML).join("") + doc.body.innerHTML;
}

function safeUrl(attr: string, value: string): boolean {
  // eslint-disable-next-line no-control-regex
  const v = value.replace(/[\x00-\x20]/g, "").toLowerCase();
  if (v.startsWith("javascript:") || v.startsWith("vbscript:")) return false;
  if (v.startsWith("data:")) return /^data:image\/(png|jpeg|gif|webp|svg\+xml)[;,]/.test(v) && attr !== "href";
  // In-page anchors only: the frame may not navigate anywhere (its CSP and the host's
  // frame-src refuse it too).
  if (attr === "href" || attr === "xlink:href") return v.startsWith("#");
  return false;
}

/** CSS for the frame's document, from the view's current theme. */
function frameCss(): string {
  const cs = getComputedStyle(document.documentElement);
  const v = (name: string, fallback: string) => cs.getPropertyValue(name).trim() || fallback;
  return `
html,body{margin:0;padding:0;background:transparent;color:${v("--text", "#1f2328")};
font-family:${v("--font-sans", "system-ui,sans-serif")};font-size:13px;line-height:1.45;overflow-wrap:anywhere}
body{padding:2px 0}
a{color:${v("--link", "#0969da")}}
pre,code{font-family:${v("--font-mono", "ui-monospace,monospace")};font-size:12px}
pre{background:${v("--code-bg", "#f6f8fa")};padding:8px;border-radius:4px;overflow:auto}
table{border-collapse:collapse;border-spacing:0;margin:2px 0;font-size:12px}
th,td{padding:4px 8px;border:none;text-align:right;vertical-align:middle;white-space:nowrap}
thead th,thead td{border-bottom:1px solid ${v("--border", "#d0d7de")};font-weight:600}
tbody tr:nth-child(odd){background:${v("--row-alt", "rgba(127,127,127,.08)")}}
tbody tr:hover{background:${v("--row-hover", "rgba(127,127,127,.16)")}}
th{font-weight:600}
img,svg{max-width:100%;height:auto}
h1,h2,h3{margin:.6em 0 .3em}
blockquote{margin:0;padding-left:1em;border-left:3px solid ${v("--border", "#d0d7de")};color:${v("--text-2", "#59636e")}}
math[display=block]{margin:.4em 0}
`;
}

const MAX_FRAME_HEIGHT = 1600;

/** An iframe showing `html` (already sanitized or not: it is sanitized here). */
export function htmlFrame(html: string, kind: string): HTMLIFrameElement {
  const f = document.createElement("iframe");
  f.className = `out-frame out-${kind}`;
  f.setAttribute("sandbox", "allow-same-origin");
  f.setAttribute("referrerpolicy", "no-referrer");
  f.setAttribute("title", kind === "markdown" ? "Markdown output" : "HTML output");
  f.setAttribute("loading", "eager");
  f.srcdoc =
    `<!doctype html><html><head><meta charset="utf-8">` +
    `<meta http-equiv="Content-Security-Policy" content="${FRAME_CSP}">` +
    `<style>${frameCss()}</style></head><body>${sanitize(html)}</body></html>`;
  f.style.height = "24px";
  f.addEventListener("load", () => fitFrame(f));
  return f;
}

/** Size the frame to its document (up to a bound; taller documents scroll inside). */
function fitFrame(f: HTMLIFrameElement): void {
  const doc = f.contentDocument;
  if (!doc) return;
  const fit = () => {
    const h = Math.min(doc.documentElement.scrollHeight, MAX_FRAME_HEIGHT);
    f.style.height = `${h}px`;
  };
  fit();
  // Images decode after `load` in some cases; tables reflow when the width changes.
  doc.addEventListener("load", fit, true);
  new ResizeObserver(fit).observe(doc.documentElement);
}
