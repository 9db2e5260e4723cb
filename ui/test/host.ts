// The browser test's host page: an MCP client (the official TypeScript SDK, Streamable HTTP
// to kernel-mcp through drive.mjs's same-origin proxy) that declares the MCP Apps extension,
// and the official ext-apps host bridge (`AppBridge`) for each view it shows. Each view runs
// in an iframe on another origin (localhost vs 127.0.0.1), sandboxed with scripts and its
// own origin, under the CSP built from the resource's `_meta.ui.csp` as the spec says.
// drive.mjs calls `window.kmcp.show(...)` and reads the view's DOM.

import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const EXTENSION = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";

interface ShowOptions {
  tool: string;
  args: Record<string, unknown>;
  /** false: a host that lets views call no tools. */
  callTools?: boolean;
  theme?: "light" | "dark";
  width?: number;
}

const client = new Client(
  { name: "kernel-mcp apps test host", version: "1" },
  { capabilities: { extensions: { [EXTENSION]: { mimeTypes: [MIME] } } } as Record<string, unknown> },
);
const log: string[] = [];
let viewHtml: { html: string; csp: Record<string, string[]> } | null = null;
let seq = 0;

async function connect(): Promise<void> {
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));
}

async function tools(): Promise<unknown[]> {
  return (await client.listTools()).tools;
}

/** The view's HTML and CSP, read once with resources/read. */
async function view(): Promise<{ html: string; csp: Record<string, string[]>; mimeType: string }> {
  const r = await client.readResource({ uri: "ui://kernel-mcp/run" });
  const c = r.contents[0] as { text?: string; mimeType?: string; _meta?: { ui?: { csp?: Record<string, string[]> } } };
  viewHtml = { html: c.text ?? "", csp: c._meta?.ui?.csp ?? {} };
  return { ...viewHtml, mimeType: c.mimeType ?? "" };
}

/** Show `tool(args)` in a new view: the tool input, then the call, then its result. */
async function show(o: ShowOptions): Promise<unknown> {
  if (!viewHtml) await view();
  const id = String(++seq);
  await fetch(`/stage/${id}`, { method: "POST", body: JSON.stringify(viewHtml) });
  const stage = document.getElementById("stage")!;
  stage.replaceChildren();
  const frame = document.createElement("iframe");
  frame.id = "view";
  frame.setAttribute("sandbox", "allow-scripts allow-same-origin");
  frame.style.width = `${o.width ?? 720}px`;
  frame.style.height = "200px";
  frame.style.border = "1px solid #ccc";
  const allowed = o.callTools !== false;
  const bridge = new AppBridge(
    allowed ? client : null,
    { name: "kernel-mcp test host", version: "1" },
    allowed ? { serverTools: {}, serverResources: {} } : {},
    {
      hostContext: {
        theme: o.theme ?? "light",
        platform: "web",
        containerDimensions: { width: o.width ?? 720, maxHeight: 4000 },
        styles: { variables: { "--font-sans": "DejaVu Sans, sans-serif" } as Record<string, string> },
      },
    },
  );
  bridge.onsizechange = ({ height }) => {
    if (height != null) frame.style.height = `${Math.ceil(height) + 2}px`;
  };
  bridge.onloggingmessage = (m) => log.push(`log ${JSON.stringify(m)}`);
  const initialized = new Promise<void>((resolve) => (bridge.oninitialized = () => resolve()));
  stage.append(frame);
  frame.src = `${location.protocol}//localhost:${location.port}/view/${id}`;
  await new Promise((r) => frame.addEventListener("load", r, { once: true }));
  await bridge.connect(new PostMessageTransport(frame.contentWindow!, frame.contentWindow!));
  await initialized;
  await bridge.sendToolInput({ arguments: o.args });
  const result = await client.callTool({ name: o.tool, arguments: o.args }, undefined, { timeout: 120_000 });
  await bridge.sendToolResult(result as Parameters<typeof bridge.sendToolResult>[0]);
  return result.structuredContent;
}

/** A tool call of the agent's own (not through a view). */
async function agentCall(name: string, args: Record<string, unknown>): Promise<unknown> {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
  return r.structuredContent;
}

// Anything hostile output could do to the host would land here.
window.addEventListener("message", (e) => {
  const src = e.source === (document.getElementById("view") as HTMLIFrameElement | null)?.contentWindow ? "view" : "other";
  if (src === "other") log.push(`message from another window: ${JSON.stringify(e.data).slice(0, 200)}`);
});

Object.assign(window, { kmcp: { connect, tools, view, show, agentCall, log } });
