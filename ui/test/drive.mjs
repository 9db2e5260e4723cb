// The browser test of the view (tests/it/apps_view.rs runs it): headless Chromium (Debian's,
// driven by playwright-core) loads test/host.ts — the official AppBridge and the MCP
// TypeScript SDK client — against a real kernel-mcp, and checks what the view shows for
// runs that print, raise, plot, show a table and rich outputs, run for seconds (followed
// live, then interrupted), emit hostile HTML, and print 50 MiB; with a host that refuses
// tool calls; dark and 400 px wide. Screenshots go to --shots.
//
//   node test/drive.mjs --url http://127.0.0.1:PORT/mcp --token TOKEN --shots DIR
//
// Prints one JSON line (checks passed, seconds taken); exits 1 with the failed check on
// stderr.

import { createServer, request } from "node:http";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { chromium } from "playwright-core";
import { scenarios } from "./scenarios.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const target = new URL(arg("url", "http://127.0.0.1:8000/mcp"));
const token = arg("token", "");
const shots = arg("shots", join(here, "..", "..", "target", "apps"));
mkdirSync(shots, { recursive: true });

/** The page's script: host.ts bundled with the SDKs. */
async function hostScript() {
  const r = await esbuild.build({
    entryPoints: [join(here, "host.ts")],
    bundle: true,
    format: "iife",
    target: "es2022",
    write: false,
    logLevel: "warning",
  });
  return r.outputFiles[0].text;
}

/** CSP for a view from its `_meta.ui.csp` (MCP Apps, "Content Security Policy Enforcement"). */
function cspHeader(csp) {
  const list = (k, none) => (csp?.[k]?.length ? csp[k].join(" ") : none);
  const res = list("resourceDomains", "");
  return [
    "default-src 'none'",
    `script-src 'self' 'unsafe-inline' ${res}`,
    `style-src 'self' 'unsafe-inline' ${res}`,
    `connect-src ${list("connectDomains", "'none'")}`,
    `img-src 'self' data: ${res}`,
    `font-src 'self' ${res}`,
    `media-src 'self' data: ${res}`,
    `frame-src ${list("frameDomains", "'none'")}`,
    "object-src 'none'",
    `base-uri ${list("baseUriDomains", "'self'")}`,
  ].join("; ");
}

/** The host's server: the page, the staged views, and /mcp proxied to kernel-mcp. */
function serve(script) {
  const staged = new Map();
  const hits = [];
  const server = createServer((req, res) => {
    const path = new URL(req.url, "http://x").pathname;
    if (path === "/host.html") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(`<!doctype html><meta charset=utf-8><title>test host</title><body style="margin:0;background:#f0f0f0"><div id=stage></div><script>${script}</script>`);
    } else if (path.startsWith("/stage/") && req.method === "POST") {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        staged.set(path.slice(7), JSON.parse(body));
        res.end("ok");
      });
    } else if (path.startsWith("/view/")) {
      const v = staged.get(path.slice(6));
      if (!v) return void res.writeHead(404).end();
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-security-policy": cspHeader(v.csp) });
      res.end(v.html);
    } else if (path === "/mcp") {
      proxy(req, res);
    } else {
      hits.push(req.url);
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, hits, port: server.address().port })));
}

function proxy(req, res) {
  const headers = { ...req.headers, host: target.host };
  if (token) headers.authorization = `Bearer ${token}`;
  delete headers.origin;
  delete headers.referer;
  const up = request({ host: target.hostname, port: target.port, path: target.pathname, method: req.method, headers }, (r) => {
    res.writeHead(r.statusCode ?? 502, r.headers);
    r.pipe(res);
  });
  up.on("error", (e) => {
    res.writeHead(502).end(String(e));
  });
  req.pipe(up);
}

const started = Date.now();
const { server, hits, port } = await serve(await hostScript());
const profile = mkdtempSync(join(tmpdir(), "kernel-mcp-view-chromium-"));
let context;
let failed = null;
const passed = [];
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    timeout: 120000,
    viewport: { width: 900, height: 900 },
    deviceScaleFactor: 1,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
    ],
  });
  const page = context.pages()[0] || (await context.newPage());
  const consoleLines = [];
  page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  await page.goto(`http://127.0.0.1:${port}/host.html`);
  await page.evaluate(() => window.kmcp.connect());
  const ctx = { page, hits, shots, port };
  for (const [name, run] of scenarios) {
    try {
      await run(ctx);
      passed.push(name);
    } catch (e) {
      failed = `${name}: ${e?.stack ?? e}\n--- browser console (last 30) ---\n${consoleLines.slice(-30).join("\n")}`;
      await page.screenshot({ path: join(shots, `failed-${name.replace(/\W+/g, "-")}.png`) }).catch(() => {});
      break;
    }
  }
} catch (e) {
  failed = `setup: ${e?.stack ?? e}`;
} finally {
  await context?.close().catch(() => {});
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify({ passed, failed: failed ? failed.split("\n")[0] : null, seconds: (Date.now() - started) / 1000 }));
if (failed) {
  console.error(failed);
  process.exit(1);
}
process.exit(0);
