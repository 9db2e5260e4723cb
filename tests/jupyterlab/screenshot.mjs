// A person in JupyterLab, in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): open a notebook, add a cell, run it, wait for its output, take a
// screenshot. Used by tests/it/jupyterlab_browser.rs and `make jupyterlab-shot`.
//
//   node screenshot.mjs LAB_URL TOKEN NOTEBOOK CODE EXPECTED OUT.png
//
// Prints one JSON line: {"output": <the new cell's output text>, "kernel": <the kernel name
// the toolbar shows>}. Exits 1 (with the reason on stderr) when the output never shows.

import { launch } from './browser.mjs';

const [url, token, notebook, code, expected, out] = process.argv.slice(2);
const { page, close } = await launch();
try {
  await page.goto(`${url}/lab/tree/${notebook}?token=${token}`, { timeout: 90000 });
  await page.waitForSelector('.jp-Notebook .jp-Cell', { timeout: 90000 });
  // The kernel is connected and idle before typing (the toolbar's status says so).
  await page.waitForSelector('.jp-Notebook-ExecutionIndicator[data-status="idle"]', { timeout: 90000 })
    .catch(() => {});
  // Add a cell below the last and type the code; on a busy machine a keystroke can reach the
  // page before the notebook takes focus, so the code is checked to be in an editor, and
  // typed again (in a new cell) when it is not.
  const typed = page.locator('.jp-Notebook .jp-Cell .cm-content', { hasText: code });
  for (let attempt = 1; ; attempt++) {
    await page.locator('.jp-Notebook .jp-Cell').last().click();
    await page.keyboard.press('Escape');
    await page.keyboard.press('b');
    await page.keyboard.press('Enter');
    await page.keyboard.type(code);
    const ok = await typed.first().waitFor({ timeout: 10000 }).then(() => true, () => false);
    if (ok) break;
    if (attempt === 3) throw new Error('the typed code never reached a cell');
  }
  await typed.first().click();
  await page.keyboard.press('Shift+Enter');
  // The person's output, wherever the new cell landed (no agent cell prints it). A run sent
  // before the kernel's channels were up is run once more.
  const output = page.locator('.jp-Notebook .jp-OutputArea-output', { hasText: expected });
  const shown = await output.first().waitFor({ timeout: 60000 }).then(() => true, () => false);
  if (!shown) {
    await typed.first().click();
    await page.keyboard.press('Shift+Enter');
    await output.first().waitFor({ timeout: 60000 });
  }
  // Let the prompt number settle; decline JupyterLab's news offer, which covers a corner.
  await page.waitForTimeout(500);
  await page.locator('.jp-toast-button', { hasText: 'No' }).first().click({ timeout: 2000 })
    .catch(() => {});
  await page.waitForTimeout(1500);
  await page.mouse.click(5, 5);
  await page.screenshot({ path: out });
  const kernel = await page.locator('.jp-KernelName').first().textContent().catch(() => null);
  console.log(JSON.stringify({ output: await output.first().textContent(), kernel }));
} catch (e) {
  await page.screenshot({ path: out }).catch(() => {});
  // What a person would have seen: the cells, the kernel's status, any dialog.
  const seen = await page.evaluate(() => ({
    cells: [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map((c) => c.innerText.slice(0, 300)),
    status: document.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status'),
    kernel: document.querySelector('.jp-KernelName')?.textContent,
    dialogs: [...document.querySelectorAll('.jp-Dialog')].map((d) => d.innerText.slice(0, 300)),
  })).catch((err) => `the page could not be read: ${err}`);
  console.error(`the notebook did not show the output: ${e}\n${JSON.stringify(seen, null, 1)}`);
  process.exitCode = 1;
} finally {
  await close();
}
