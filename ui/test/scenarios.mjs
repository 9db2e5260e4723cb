// What the browser test checks, scenario by scenario (drive.mjs runs them in order, each in
// a fresh view; one session, `analysis`, holds their state).

import { join } from "node:path";

const WAIT = 60_000;

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const show = (page, o) => page.evaluate((o) => window.kmcp.show(o), o);
const view = (page) => page.frameLocator("#view");
const cellWith = (page, status) => view(page).locator(`article.cell[data-status="${status}"]`);

async function shot(ctx, name) {
  await ctx.page.waitForTimeout(300);
  await ctx.page.locator("#view").screenshot({ path: join(ctx.shots, name) });
}

/** The text of the first `selector` inside the sandboxed output frame. */
async function inFrame(page, frameSelector, selector) {
  const h = await view(page).locator(frameSelector).first().elementHandle({ timeout: WAIT });
  const f = await h.contentFrame();
  await f.waitForSelector(selector, { timeout: WAIT, state: "attached" });
  return f;
}

const PLOT = `%matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
x = np.linspace(0, 4 * np.pi, 400)
fig, ax = plt.subplots(figsize=(6.4, 3.2))
ax.plot(x, np.sin(x), label="sin x")
ax.plot(x, np.exp(-x / 6) * np.cos(2 * x), label="damped cos 2x")
ax.set_title("Computed in the agent's session"); ax.legend(); ax.grid(alpha=0.3)
plt.show()`;

const TABLE = `from IPython.display import HTML, display
rows = [("Lisbon", 545_000, 17.6), ("Porto", 232_000, 15.2), ("Braga", 193_000, 14.4), ("Coimbra", 106_000, 15.9)]
body = "".join(f"<tr><th>{i}</th><td>{c}</td><td>{p:,}</td><td>{t}</td></tr>" for i, (c, p, t) in enumerate(rows))
display(HTML('<table class="dataframe"><thead><tr><th></th><th>city</th><th>population</th><th>mean °C</th></tr></thead>'
             f'<tbody>{body}</tbody></table>'))
cities = [r[0] for r in rows]
len(cities)`;

const RICH = `from IPython.display import Markdown, Latex, JSON, SVG, display
display(Markdown("## Findings\\n\\n- **4** cities, mean $\\\\bar t = 15.8$ °C\\n- see \`cities\`"))
display(Latex(r"$$\\sigma = \\sqrt{\\frac{1}{n}\\sum_{i=1}^{n} (t_i - \\bar t)^2}$$"))
display(JSON({"cities": ["Lisbon", "Porto"], "n": 2, "nested": {"ok": True, "none": None}}))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40"><rect width="120" height="40" rx="6" fill="#2da44e"/><text x="60" y="26" font-size="16" text-anchor="middle" fill="white">SVG</text></svg>'))`;

const ERROR = `def mean(xs):
    return sum(xs) / len(xs)

mean([])`;

const LIVE = `import time
for step in range(50):
    print(f"step {step}: loss {1 / (step + 1):.4f}", flush=True)
    time.sleep(0.1)
print("done")`;

const FOREVER = `import time
for i in range(600):
    print("tick", i, flush=True)
    time.sleep(0.5)`;

const HOSTILE = (port) => `from IPython.display import HTML, Markdown, display
display(HTML('''<p id="hostile">hostile output</p>
<script>top.pwned = 1; parent.pwned = 1; window.pwned = 1;
top.postMessage({jsonrpc: "2.0", id: 99, method: "tools/call", params: {name: "execute", arguments: {code: "pwned = 1"}}}, "*");</script>
<img src="x" onerror="top.pwned = 2">
<a id="js" href="javascript:top.pwned = 3">click me</a>
<iframe src="http://127.0.0.1:${port}/evil-frame"></iframe>
<img src="http://127.0.0.1:${port}/evil-image">
<form action="http://127.0.0.1:${port}/evil-form"><button id="send">send</button></form>'''))
display(Markdown("[markdown link](javascript:top.pwned=4) <img src=x onerror='top.pwned=5'>"))`;

const FLOOD = `import sys
line = "x" * 1023 + "\\n"
for _ in range(51200):
    sys.stdout.write(line)
print("end of flood")`;

export const scenarios = [
  ["tools/list names the view for a client with the extension", async ({ page }) => {
    const tools = await page.evaluate(() => window.kmcp.tools());
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const name of ["execute", "execute_file", "get_execution"]) {
      check(byName[name]?._meta?.ui?.resourceUri === "ui://kernel-mcp/run", `${name} names the view`);
    }
    const v = await page.evaluate(() => window.kmcp.view());
    check(v.mimeType === "text/html;profile=mcp-app", `view MIME ${v.mimeType}`);
    check(v.html.length <= 150 * 1024, `view size ${v.html.length}`);
  }],

  ["prints to stdout and stderr", async (ctx) => {
    const { page } = ctx;
    const info = await page.evaluate(() => window.kmcp.agentCall("create_session", { session_id: "analysis" }));
    check(info?.session_id === "analysis", `create_session: ${JSON.stringify(info)}`);
    await show(page, { tool: "execute", args: { session_id: "analysis", code: "answer = 42\nprint('hello from the kernel')\nimport sys\nprint('a warning', file=sys.stderr)" } });
    await cellWith(page, "ok").waitFor({ timeout: WAIT });
    await view(page).locator(".stream.stdout", { hasText: "hello from the kernel" }).waitFor({ timeout: WAIT });
    await view(page).locator(".stream.stderr", { hasText: "a warning" }).waitFor({ timeout: WAIT });
    await view(page).locator("pre.code", { hasText: "answer = 42" }).waitFor({ timeout: WAIT });
    // Run again: a new run of the same code in the same session.
    const first = await view(page).locator("article.cell").getAttribute("data-run-id");
    await view(page).getByRole("button", { name: "Run again" }).click();
    await view(page).locator(`article.cell[data-status="ok"]:not([data-run-id="${first}"])`).waitFor({ timeout: WAIT });
    // The session panel: variables and recent runs.
    await view(page).locator("#session-panel > summary").click();
    await view(page).locator(".variables .var-name", { hasText: "answer" }).waitFor({ timeout: WAIT });
    const runs = await view(page).locator(".run-list li").count();
    check(runs >= 2, `recent runs listed: ${runs}`);
    await shot(ctx, "view-session.png");
  }],

  ["raises, with its traceback", async (ctx) => {
    const { page } = ctx;
    await show(page, { tool: "execute", args: { session_id: "analysis", code: ERROR } });
    await cellWith(page, "error").waitFor({ timeout: WAIT });
    await view(page).locator(".out-error .ename", { hasText: "ZeroDivisionError" }).first().waitFor({ timeout: WAIT });
    await view(page).locator(".out-error .tb-lineno").first().waitFor({ timeout: WAIT });
    await shot(ctx, "view-error.png");
  }],

  ["plots with matplotlib", async (ctx) => {
    const { page } = ctx;
    await show(page, { tool: "execute", args: { session_id: "analysis", code: PLOT } });
    await cellWith(page, "ok").waitFor({ timeout: WAIT });
    const img = view(page).locator("img.out-image").first();
    await img.waitFor({ timeout: WAIT });
    await img.evaluate((i) => (i.complete ? null : new Promise((r) => i.addEventListener("load", r, { once: true }))));
    const w = await img.evaluate((i) => i.naturalWidth);
    check(w > 100, `plot image width ${w}`);
    await shot(ctx, "view-plot.png");
  }],

  ["shows an HTML table in its sandbox", async (ctx) => {
    const { page } = ctx;
    await show(page, { tool: "execute", args: { session_id: "analysis", code: TABLE } });
    await cellWith(page, "ok").waitFor({ timeout: WAIT });
    const f = await inFrame(page, "iframe.out-html", "table td");
    const text = await f.locator("table").innerText();
    check(text.includes("Coimbra") && text.includes("545,000"), `table text ${text}`);
    await view(page).locator(".out-prompt", { hasText: "Out[" }).waitFor({ timeout: WAIT });
    await shot(ctx, "view-table.png");
  }],

  ["renders Markdown, LaTeX, JSON and SVG", async (ctx) => {
    const { page } = ctx;
    await show(page, { tool: "execute", args: { session_id: "analysis", code: RICH } });
    await cellWith(page, "ok").waitFor({ timeout: WAIT });
    const md = await inFrame(page, "iframe.out-markdown", "h2");
    check((await md.locator("h2").innerText()).includes("Findings"), "markdown heading");
    await md.waitForSelector("math", { timeout: WAIT, state: "attached" });
    await view(page).locator(".out-latex math msqrt").waitFor({ timeout: WAIT, state: "attached" });
    await view(page).locator(".json-tree .json-key", { hasText: "cities" }).first().waitFor({ timeout: WAIT });
    await view(page).locator('img.out-image[alt="SVG output"]').waitFor({ timeout: WAIT });
    await shot(ctx, "view-rich.png");
  }],

  ["follows a 5 s run live", async (ctx) => {
    const { page } = ctx;
    await show(page, { tool: "execute", args: { session_id: "analysis", code: LIVE, wait_s: 1 } });
    await view(page).locator("article.cell[data-status=running]").waitFor({ timeout: WAIT });
    await view(page).getByRole("button", { name: "Interrupt" }).waitFor({ timeout: WAIT });
    await view(page).locator(".stream.stdout", { hasText: "step 1" }).waitFor({ timeout: WAIT });
    await shot(ctx, "view-live.png");
    await cellWith(page, "ok").waitFor({ timeout: WAIT });
    await view(page).locator(".stream.stdout", { hasText: "done" }).waitFor({ timeout: WAIT });
  }],

  ["Interrupt stops a sleep loop", async ({ page }) => {
    await show(page, { tool: "execute", args: { session_id: "analysis", code: FOREVER, wait_s: 1 } });
    const stop = view(page).getByRole("button", { name: "Interrupt" });
    await stop.waitFor({ timeout: WAIT });
    await view(page).locator(".stream.stdout", { hasText: "tick 2" }).waitFor({ timeout: WAIT });
    await stop.click();
    await cellWith(page, "interrupted").waitFor({ timeout: WAIT });
    await view(page).locator(".status", { hasText: "interrupted" }).waitFor({ timeout: WAIT });
  }],

  ["hostile HTML does not run or reach the host", async ({ page, hits, port }) => {
    await show(page, { tool: "execute", args: { session_id: "analysis", code: HOSTILE(port) } });
    await cellWith(page, "ok").waitFor({ timeout: WAIT });
    const f = await inFrame(page, "iframe.out-html", "#hostile");
    check((await f.locator("script, iframe, form").count()) === 0, "scripts, frames and forms are stripped");
    await f.locator("#js").click({ timeout: 5000 }).catch(() => {});
    const md = await inFrame(page, "iframe.out-markdown", "a");
    await md.locator("a").first().click({ timeout: 5000 }).catch(() => {});
    await page.waitForTimeout(500);
    const hostPwned = await page.evaluate(() => window.pwned);
    check(hostPwned === undefined, `host global set: ${hostPwned}`);
    const viewPwned = await view(page).locator("body").evaluate(() => window.pwned);
    check(viewPwned === undefined, `view global set: ${viewPwned}`);
    check(!hits.some((h) => h.includes("evil")), `hostile requests reached the network: ${hits}`);
    const log = await page.evaluate(() => window.kmcp.log.filter((l) => l.startsWith("message from another")));
    check(log.length === 0, `messages reached the host from an output: ${log}`);
  }],

  ["a 50 MiB output stays responsive and pages", async ({ page }) => {
    await show(page, { tool: "execute", args: { session_id: "analysis", code: FLOOD, wait_s: 120 } });
    await cellWith(page, "ok").waitFor({ timeout: 180_000 });
    const size = await view(page).locator("body").evaluate((b) => b.innerText.length);
    check(size < 2_000_000, `the view holds ${size} characters`);
    await view(page).getByRole("button", { name: "Page through stdout" }).click();
    await view(page).locator(".pager-where", { hasText: "bytes 0–65,536 of 52,428,8" }).waitFor({ timeout: WAIT });
    await view(page).locator(".pager").getByRole("button", { name: "Next" }).click();
    await view(page).locator(".pager-where", { hasText: "bytes 65,536–131,072" }).waitFor({ timeout: WAIT });
    await view(page).locator(".pager").getByRole("button", { name: "Last" }).click();
    await view(page).locator(".pager pre", { hasText: "end of flood" }).waitFor({ timeout: WAIT });
  }],

  ["a fork shows its new session with the variables it copied", async ({ page }) => {
    await show(page, { tool: "fork_session", args: { session_id: "analysis", new_session_id: "what-if" } });
    await view(page).locator(".banner", { hasText: "forked from analysis" }).waitFor({ timeout: WAIT });
    await view(page).locator(".variables .var-name", { hasText: "answer" }).waitFor({ timeout: WAIT });
    await page.evaluate(() => window.kmcp.agentCall("destroy_session", { session_id: "what-if" }));
  }],

  ["a host that refuses tool calls gets the result as given", async ({ page }) => {
    await show(page, { tool: "execute", args: { session_id: "analysis", code: "import time; time.sleep(3); print('slept')", wait_s: 1 }, callTools: false });
    await view(page).locator(".banner", { hasText: "does not let the view call tools" }).waitFor({ timeout: WAIT });
    await view(page).locator("article.cell[data-status=running]").waitFor({ timeout: WAIT });
    check((await view(page).getByRole("button", { name: "Interrupt" }).count()) === 0, "no Interrupt without tool calls");
  }],

  ["dark and 400 px wide", async (ctx) => {
    const { page } = ctx;
    await show(page, { tool: "execute", args: { session_id: "analysis", code: ERROR }, theme: "dark", width: 400 });
    await cellWith(page, "error").waitFor({ timeout: WAIT });
    const over = await view(page).locator("body").evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    check(over <= 1, `the view scrolls sideways at 400 px by ${over}`);
    await shot(ctx, "view-dark-400.png");
  }],
];
