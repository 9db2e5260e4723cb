// One agent turn's trace in Arize Phoenix's UI, in headless Chromium (Debian's
// /usr/bin/chromium, driven by the playwright-core of tests/jupyterlab): used by
// tests/it/telemetry.rs when KERNEL_MCP_PHOENIX_SHOT is set (`make phoenix-shot`).
//
//   node screenshot.mjs PHOENIX_URL PROJECT TRACE_ID OUT.png
//
// The run's span is selected and its attributes shown (best effort). Exits 1 (with the
// reason on stderr) when the trace's spans never show.

import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(new URL('../jupyterlab/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const [url, projectName, trace, out] = process.argv.slice(2);
const projects = await (await fetch(`${url}/v1/projects`)).json();
const project = projects.data.find((p) => p.name === projectName).id;
const profile = mkdtempSync(join(tmpdir(), 'kernel-mcp-chromium-'));
let context;
let code = 0;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    timeout: 120000,
    viewport: { width: 1440, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
  const page = context.pages()[0] || (await context.newPage());
  await page.goto(`${url}/projects/${project}/traces/${trace}`, { timeout: 90000 });
  await page.getByText('kernel_mcp.run').first().waitFor({ timeout: 90000 });
  await page.getByText('tools/call echo').first().waitFor({ timeout: 30000 });
  // Best effort: the run's span selected, its attributes shown (session, run id, status…).
  try {
    await page.getByText('kernel_mcp.run', { exact: true }).first().click({ timeout: 10000 });
    await page.getByRole('tab', { name: 'Attributes' }).first().click({ timeout: 10000 });
  } catch (e) {
    console.error(`the run's attributes are not shown: ${e}`);
  }
  await page.waitForTimeout(1500);
  await page.screenshot({ path: out });
  console.log(JSON.stringify({ screenshot: out }));
} catch (e) {
  console.error(`the trace did not show: ${e}`);
  code = 1;
} finally {
  if (context) await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
