// Screenshots of studio pages for the docs: `node scripts/studio-shoot.mjs OUT_DIR
// name=URL ...` opens each URL in headless Chromium (scripts/browser-launch.mjs; a URL with
// `?token=` signs the browser in first, as a user opening the printed link) and writes
// OUT_DIR/name.png, the whole page at 1280 px wide. Used by scripts/studio-screenshots.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const { launchBrowser } = await import(path.join(here, 'browser-launch.mjs'));

const [outDir, ...shots] = process.argv.slice(2);
if (!outDir || shots.length === 0) {
  console.error('usage: node scripts/studio-shoot.mjs OUT_DIR name=URL ...');
  process.exit(2);
}
const context = await launchBrowser({ contextOptions: { viewport: { width: 1280, height: 800 } } });
try {
  const page = context.pages()[0] ?? (await context.newPage());
  for (const shot of shots) {
    const eq = shot.indexOf('=');
    const [name, url] = [shot.slice(0, eq), shot.slice(eq + 1)];
    await page.goto(url);
    if (url.includes('token=')) continue; // signing in: nothing to show
    // Open what a reader would open: the first payload and the first step's explanation.
    for (const sel of ['table.events tbody tr details', '.explain details']) {
      const d = page.locator(sel).first();
      if (await d.count()) await d.evaluate((el) => { el.open = true; });
    }
    const file = path.join(outDir, `${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    console.log(file);
  }
} finally {
  await context.close();
}
