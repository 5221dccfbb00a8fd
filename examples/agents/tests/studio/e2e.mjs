// The studio in a real browser (headless Chromium through playwright-core), driven by
// examples/agents/tests/studio.rs against `approval-agent studio` on a store with real runs:
// the run list renders, a run's page shows its timeline and graph, the graph page renders,
// the printed link signs the browser in, answering a waiting run from its page ends it, a
// page left open on a waiting run follows it live when another tab answers it, a run is
// started from the list, and replay says the run reproduced. A screenshot per page goes to $OUT_DIR.
//
// Env: STUDIO_URL, STUDIO_LOGIN_URL, STOPPED_RUN, WAITING_RUN, WAITING_RUN_2, ANSWER (the
// event JSON), OUT_DIR; SAAP_CHROMIUM and SAAP_BROWSER_MODULES (scripts/browser-install).
// Exits 0 with one JSON line {"ok": true, "screenshots": [...]}, or 1 with what failed.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const { launchBrowser } = await import(path.join(here, '../../../../scripts/browser-launch.mjs'));

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const base = env('STUDIO_URL').replace(/\/$/, '');
const stopped = env('STOPPED_RUN');
const waiting = env('WAITING_RUN');
const waiting2 = env('WAITING_RUN_2');
const answer = env('ANSWER');
const outDir = env('OUT_DIR');
const shots = [];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function shot(page, name) {
  const file = path.join(outDir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  shots.push(file);
}

const status = (page, scope) => page.locator(`${scope} .badge`).first().getAttribute('data-status');

const context = await launchBrowser({ contextOptions: { viewport: { width: 1280, height: 900 } } });
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(15_000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));

  // The run list.
  await page.goto(`${base}/`);
  for (const id of [stopped, waiting, waiting2]) {
    check((await page.locator(`table.runs tr[data-run="${id}"]`).count()) === 1, `the list shows run ${id}`);
  }
  check((await status(page, `tr[data-run="${stopped}"]`)) === 'stopped', 'the answered run is listed as stopped');
  check((await status(page, `tr[data-run="${waiting}"]`)) ?.startsWith('waiting'), 'the waiting run is listed as waiting');
  check((await page.locator('header .who').innerText()).includes('read-only'), 'a browser without the token is read-only');
  await shot(page, 'list');

  // Filtering by status.
  await page.selectOption('form.filters select[name=status]', 'waiting');
  await Promise.all([page.waitForURL(/status=waiting/), page.click('form.filters button')]);
  check((await page.locator(`table.runs tr[data-run="${stopped}"]`).count()) === 0, 'the waiting filter leaves the stopped run out');
  check((await page.locator(`table.runs tr[data-run="${waiting}"]`).count()) === 1, 'the waiting filter keeps the waiting run');

  // A stopped run's page: timeline, graph with its path, result; actions off without the token.
  await page.goto(`${base}/runs/${stopped}`);
  check((await page.locator('h1').innerText()).includes(stopped), 'the run page names the run');
  check((await status(page, '#run h1')) === 'stopped', 'the run page says stopped');
  check((await page.locator('svg.graph .node.step.ran').count()) >= 2, 'the graph draws the steps that ran');
  check((await page.locator('svg.graph .edge.hot').count()) >= 2, 'the graph draws the path taken');
  check((await page.locator('table.waterfall tbody tr').count()) >= 2, 'the waterfall lists the executions');
  check((await page.locator('table.waterfall .bar').count()) >= 2, 'each execution has a bar');
  check((await page.locator('table.events tr[data-event="ApprovalGiven"]').count()) === 1, 'the events list the answer');
  check((await page.locator('.result h2').innerText()).includes('Executed'), 'the result is shown');
  check(await page.locator('form.replay button').isDisabled(), 'replay is disabled without the token');
  await page.locator('table.events tr[data-event="ApprovalGiven"] details summary').first().click();
  check((await page.locator('table.events tr[data-event="ApprovalGiven"] pre.json').first().innerText()).includes('"approved"'), 'an event opens to its payload');
  await page.locator('.explain details[data-step="decide"] summary').click();
  check((await page.locator('.explain details[data-step="decide"]').innerText()).includes('x1'), 'explain says why decide ran');
  await shot(page, 'run');

  // The graph page.
  await page.goto(`${base}/graph`);
  check((await page.locator('svg.graph .node.step').count()) >= 2, 'the graph page draws the steps');
  await shot(page, 'graph');

  // The printed link signs this browser in.
  await page.goto(env('STUDIO_LOGIN_URL'));
  check(!page.url().includes('token='), 'the token leaves the address bar');
  check((await page.locator('header .who').innerText()).includes('actions enabled'), 'the link signs the browser in');

  // Starting a run from the list.
  await page.goto(`${base}/`);
  await page.locator('details.start summary').click();
  await page.fill('details.start input[name=message]', 'restart the cache');
  await Promise.all([page.waitForURL(/note=started/), page.click('details.start button')]);
  check((await status(page, '#run h1'))?.startsWith('waiting'), 'the started run waits for its approval');
  check((await page.locator('table.events tr[data-event="UserMessageEvent"] pre.json').first().textContent()).includes('restart the cache'), 'the run started with the message');
  await shot(page, 'started');

  // Answering a waiting run from its page ends it.
  await page.goto(`${base}/runs/${waiting}`);
  check((await status(page, '#run h1'))?.startsWith('waiting'), 'the waiting run waits');
  check((await page.locator('.waits pre').innerText()).length > 0, 'the page says what it waits for');
  await shot(page, 'waiting');
  await page.fill('form.send textarea[name=event]', answer);
  await Promise.all([page.waitForURL(/note=sent/), page.click('form.send button')]);
  await page.waitForSelector('#run h1 .badge[data-status="stopped"]', { timeout: 20_000 });
  check((await page.locator('p.notice').innerText()).includes('sent'), 'the page says the event was sent');
  await shot(page, 'answered');

  // A page left open on a waiting run follows it live when another tab answers it.
  const watcher = await context.newPage();
  await watcher.goto(`${base}/runs/${waiting2}`);
  check((await status(watcher, '#run h1'))?.startsWith('waiting'), 'the second waiting run waits');
  const other = await context.newPage();
  await other.goto(`${base}/runs/${waiting2}`);
  await other.fill('form.send textarea[name=event]', answer);
  await Promise.all([other.waitForURL(/note=sent/), other.click('form.send button')]);
  await watcher.waitForSelector('#run h1 .badge[data-status="stopped"]', { timeout: 20_000 });
  check(!watcher.url().includes('note='), 'the watching page was not reloaded by hand');
  await shot(watcher, 'followed-live');
  await other.close();
  await watcher.close();

  // Replay says the stopped run reproduces.
  await page.goto(`${base}/runs/${stopped}`);
  await Promise.all([page.waitForURL(/replay/), page.click('form.replay button')]);
  check((await page.locator('[data-replay]').getAttribute('data-replay')) === 'reproduced', 'replay reproduced the run');
  await shot(page, 'replay');

  check(errors.length === 0, `no script errors on the pages: ${errors.join('; ')}`);
  console.log(JSON.stringify({ ok: true, screenshots: shots }));
} catch (e) {
  console.error(String(e && e.stack ? e.stack : e));
  // What each open page showed when it failed.
  for (const p of context.pages()) {
    const text = await p.locator('body').innerText().catch(() => '(no body)');
    console.error(`--- ${p.url()}\n${text.slice(0, 800)}`);
  }
  process.exitCode = 1;
} finally {
  await context.close();
}
