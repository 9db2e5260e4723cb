// A person's JupyterLab (headless Chromium, playwright-core) with a notebook open while an
// agent works in it through the collaboration room: open the notebook and the collaborators
// panel, say so, then wait for the agent's output to appear in the tab and its run to end,
// and take a screenshot. Used by tests/it/jupyterlab_browser.rs and `make jupyterlab-shot`.
//
//   node live.mjs LAB_URL TOKEN NOTEBOOK EXPECTED AGENT OUT.png
//
// Prints two JSON lines: {"ready": true} once the notebook is open (the agent may start), then
// {"output": <the output text that has EXPECTED>, "agent_in_panel": <whether the collaborators
// panel names AGENT>, "panel": <its text>, "cells": <the cells' text>}. Exits 1 (with what the
// page showed on stderr) when the output never shows.

import { launch } from './browser.mjs';

const [url, token, notebook, expected, agent, out] = process.argv.slice(2);
const { page, close } = await launch();
const seen = () => page.evaluate(() => ({
  cells: [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map((c) => c.innerText.slice(0, 300)),
  panel: document.querySelector('#jp-collaboration-panel')?.innerText ?? null,
  status: document.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status'),
}));
try {
  await page.goto(`${url}/lab/tree/${notebook}?token=${token}`, { timeout: 90000 });
  await page.waitForSelector('.jp-Notebook .jp-Cell', { timeout: 90000 });
  await page.waitForSelector('.jp-Notebook-ExecutionIndicator[data-status="idle"]', { timeout: 90000 })
    .catch(() => {});
  // The collaborators panel, in place of the file browser.
  await page.locator('.jp-SideBar .lm-TabBar-tab[data-id="jp-collaboration-panel"]').click()
    .catch(() => {});
  console.log(JSON.stringify({ ready: true }));
  // The agent's output, as the agent's run writes it into the shared notebook.
  const output = page.locator('.jp-Notebook .jp-OutputArea-output', { hasText: expected });
  await output.first().waitFor({ timeout: 180000 });
  // Its run has ended when no prompt shows [*].
  await page.waitForFunction(
    () => ![...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')]
      .some((p) => p.textContent.includes('*')),
    null,
    { timeout: 60000 },
  );
  const inPanel = page.locator('#jp-collaboration-panel', { hasText: agent });
  const agentInPanel = await inPanel.first().waitFor({ timeout: 20000 }).then(() => true, () => false);
  // Decline JupyterLab's news offer, which covers a corner; let the page settle.
  await page.locator('.jp-toast-button', { hasText: 'No' }).first().click({ timeout: 2000 })
    .catch(() => {});
  await page.waitForTimeout(1500);
  await page.screenshot({ path: out });
  const s = await seen();
  console.log(JSON.stringify({
    output: await output.first().textContent(), agent_in_panel: agentInPanel,
    panel: s.panel, cells: s.cells,
  }));
} catch (e) {
  await page.screenshot({ path: out }).catch(() => {});
  const s = await seen().catch((err) => `the page could not be read: ${err}`);
  console.error(`the notebook did not show the agent's output: ${e}\n${JSON.stringify(s, null, 1)}`);
  process.exitCode = 1;
} finally {
  await close();
}
