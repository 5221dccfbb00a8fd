// Smoke test of the headless browser of scripts/browser-install:
//   node scripts/browser-smoke.mjs SCREENSHOT.png [NODE_MODULES_DIR]
// with $SAAP_CHROMIUM set (and $SAAP_BROWSER_MODULES, unless the node_modules directory is
// given). It opens a data: page whose button changes a text when clicked, clicks it, checks
// that the text changed and writes a PNG screenshot to SCREENSHOT.png. Exits 0 when all of
// that worked, 1 with the reason when not.
import { writeFile } from 'node:fs/promises';
import { launchBrowser } from './browser-launch.mjs';

const [shot, modules] = process.argv.slice(2);
if (!shot) {
  console.error('usage: node scripts/browser-smoke.mjs SCREENSHOT.png [NODE_MODULES_DIR]');
  process.exit(2);
}

const html = `<!doctype html><html><head><meta charset="utf-8"><title>saap smoke</title></head>
<body><p id="out">before</p>
<button id="go" onclick="document.getElementById('out').textContent = 'clicked'">Click</button>
</body></html>`;

let context;
try {
  const started = Date.now();
  context = await launchBrowser({ modules });
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto('data:text/html,' + encodeURIComponent(html));
  const before = await page.textContent('#out');
  if (before !== 'before') {
    throw new Error(`the page says ${JSON.stringify(before)} before the click, not "before"`);
  }
  await page.click('#go');
  await page.waitForFunction(() => document.getElementById('out').textContent === 'clicked', null, { timeout: 10_000 });
  const png = await page.screenshot({ fullPage: true });
  if (png.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a') {
    throw new Error('the screenshot is not a PNG');
  }
  await writeFile(shot, png);
  const version = context.browser()?.version() ?? '?';
  console.log(`ok: Chromium ${version} clicked the button and the text changed; screenshot (${png.length} bytes) in ${shot}; ${Date.now() - started} ms`);
  await context.close();
  process.exit(0);
} catch (e) {
  console.error(`browser smoke test failed: ${e?.stack ?? e}`);
  await context?.close().catch(() => {});
  process.exit(1);
}
