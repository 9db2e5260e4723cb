// Headless Chromium for the JupyterLab drivers (screenshot.mjs, live.mjs): Debian's chromium
// (or $CHROMIUM) in a throwaway profile, one 1280×820 page. `launch()` answers
// { context, page, close }; `close()` ends the browser and removes the profile. When Chromium
// does not start, says so on stderr and exits 1.

import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), 'kernel-mcp-chromium-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      timeout: 120000,
      viewport: { width: 1280, height: 820 },
      args: [
        '--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--no-first-run',
        '--disable-dev-shm-usage',
      ],
    });
  } catch (e) {
    console.error(`chromium did not start: ${e}`);
    rmSync(profile, { recursive: true, force: true });
    process.exit(1);
  }
  const page = context.pages()[0] || (await context.newPage());
  const close = async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, page, close };
}
