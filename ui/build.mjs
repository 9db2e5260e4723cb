// Builds dist/run.html, the one self-contained file the kernel-mcp binary embeds as
// ui://kernel-mcp/run: the bundled script (src/main.ts with the ext-apps SDK, marked, and
// what they import) and the stylesheet, inline; nothing is fetched.
//
// The script is stored deflate-compressed and base64-encoded in a non-executable
// <script type="application/octet-stream">, and a short inline loader unpacks it with the
// browser's DecompressionStream and runs it as an inline script: the SDK alone is over
// 250 kB minified, and the file must stay within MAX_BYTES (docs/limits.md).
//
//   node build.mjs          write dist/run.html and print its size
//   node build.mjs --check  build in memory and fail (exit 1) when dist/run.html differs
//                           (compares the unpacked script, so zlib versions do not matter)

import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const OUT = join(here, "dist", "run.html");
/** The bound on the built file (docs/limits.md). */
const MAX_BYTES = 150 * 1024;
const PAYLOAD = /<script type="application\/octet-stream" id="kmcp-js">([A-Za-z0-9+/=]*)<\/script>/;

/** zod's messages in other languages: never used by the view (it validates messages only). */
const noZodLocales = {
  name: "no-zod-locales",
  setup(b) {
    b.onResolve({ filter: /locales\/index\.js$/ }, (a) =>
      a.importer.includes(`${"node_modules"}/zod/`) ? { path: "zod-locales", namespace: "stub" } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "stub" }, () => ({ contents: "export {};", loader: "js" }));
  },
};

async function bundle() {
  const js = await esbuild.build({
    entryPoints: [join(here, "src", "main.ts")],
    bundle: true,
    minify: true,
    format: "iife",
    target: "es2022",
    platform: "browser",
    legalComments: "none",
    write: false,
    plugins: [noZodLocales],
    logLevel: "warning",
  });
  const css = await esbuild.transform(readFileSync(join(here, "src", "style.css"), "utf8"), {
    loader: "css",
    minify: true,
  });
  return { js: js.outputFiles[0].text, css: css.code.trim() };
}

const LOADER =
  `(async()=>{const d=document,p=d.getElementById("kmcp-js");try{` +
  `const b=Uint8Array.from(atob(p.textContent),c=>c.charCodeAt(0));` +
  `const t=await new Response(new Blob([b]).stream().pipeThrough(new DecompressionStream("deflate-raw"))).text();` +
  `const s=d.createElement("script");s.textContent=t;d.body.append(s)}catch(e){` +
  `d.getElementById("app").textContent="This view needs a browser with DecompressionStream: "+e}})()`;

function page(css, payload) {
  return (
    `<!doctype html>\n<html lang="en"><head><meta charset="utf-8">` +
    `<meta name="viewport" content="width=device-width,initial-scale=1">` +
    `<meta name="color-scheme" content="light dark">` +
    `<title>kernel-mcp run</title>\n` +
    `<!-- kernel-mcp's MCP Apps view (ui://kernel-mcp/run). Sources: ui/ in the kernel-mcp repository (MIT).\n` +
    `     Bundled: @modelcontextprotocol/ext-apps, @modelcontextprotocol/sdk, zod, marked (each MIT). -->\n` +
    `<style>${css}</style></head>\n<body><main id="app" aria-live="polite">Loading…</main>\n` +
    `<script type="application/octet-stream" id="kmcp-js">${payload}</script>\n` +
    `<script>${LOADER}</script>\n</body></html>\n`
  );
}

const { js, css } = await bundle();
const check = process.argv.includes("--check");
if (check) {
  const current = readFileSync(OUT, "utf8");
  const m = PAYLOAD.exec(current);
  const stale = !m || inflateRawSync(Buffer.from(m[1], "base64")).toString("utf8") !== js || current.replace(PAYLOAD, "") !== page(css, "").replace(PAYLOAD, "");
  if (stale) {
    console.error("ui/dist/run.html is stale: run `make ui` and commit it.");
    process.exit(1);
  }
  console.log(`ui/dist/run.html is up to date (${current.length} bytes).`);
} else {
  const payload = deflateRawSync(Buffer.from(js, "utf8"), { level: 9 }).toString("base64");
  const html = page(css, payload);
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, html);
  const size = Buffer.byteLength(html);
  console.log(`ui/dist/run.html: ${size} bytes (script ${js.length} bytes minified, ${payload.length} packed; style ${css.length})`);
  if (size > MAX_BYTES) {
    console.error(`ui/dist/run.html is over the ${MAX_BYTES} byte bound`);
    process.exit(1);
  }
}
