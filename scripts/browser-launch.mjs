// Launches the headless Chromium of saap's browser tests through playwright-core, both as
// scripts/browser-install leaves them: the binary at $SAAP_CHROMIUM and playwright-core in the
// node_modules directory $SAAP_BROWSER_MODULES (the two fields of that script's last line;
// scripts/test exports them). playwright-core is imported by absolute path, so NODE_PATH and
// the current directory do not matter.
//
//   import { launchBrowser } from './browser-launch.mjs';
//   const context = await launchBrowser();   // a playwright BrowserContext
//   const page = context.pages()[0] ?? await context.newPage();
//   ...
//   await context.close();                   // also deletes its temporary profile
//
// Each call gets a fresh, empty user-data-dir in the temporary directory (the context of
// `chromium.launchPersistentContext`), deleted again by `context.close()`.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// The switches of every launch: headless, no sandbox (the tests run as root in containers),
// and nothing that reaches the network on its own (updates, sync, QUIC, first-run pages).
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function setting(value, name) {
  const v = value ?? process.env[name];
  if (!v) {
    throw new Error(`${name} is not set; run scripts/browser-install and export the two paths of its last line as SAAP_CHROMIUM and SAAP_BROWSER_MODULES`);
  }
  return path.resolve(v);
}

// playwright-core's `chromium`, imported from the node_modules directory `modules`.
export async function loadChromium(modules) {
  const dir = path.join(setting(modules, 'SAAP_BROWSER_MODULES'), 'playwright-core');
  const entry = ['index.mjs', 'index.js'].map((f) => path.join(dir, f)).find((f) => existsSync(f));
  if (!entry) {
    throw new Error(`no playwright-core in ${dir}; run scripts/browser-install`);
  }
  const mod = await import(pathToFileURL(entry).href);
  const chromium = mod.chromium ?? mod.default?.chromium;
  if (!chromium) {
    throw new Error(`${entry} exports no chromium`);
  }
  return chromium;
}

// Launches Chromium and returns its BrowserContext. Options: `chromium` and `modules` override
// $SAAP_CHROMIUM and $SAAP_BROWSER_MODULES; `args` are added to CHROMIUM_ARGS; anything in
// `contextOptions` goes to launchPersistentContext (viewport, locale, ...).
export async function launchBrowser({ chromium: executable, modules, args = [], timeout = 60_000, contextOptions = {} } = {}) {
  const executablePath = setting(executable, 'SAAP_CHROMIUM');
  const chromium = await loadChromium(modules);
  const userDataDir = await mkdtemp(path.join(os.tmpdir(), 'saap-chromium-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath,
      headless: true,
      args: [...CHROMIUM_ARGS, ...args],
      timeout,
      ...contextOptions,
    });
  } catch (e) {
    await rm(userDataDir, { recursive: true, force: true });
    throw e;
  }
  const close = context.close.bind(context);
  context.close = async (...a) => {
    try {
      await close(...a);
    } finally {
      await rm(userDataDir, { recursive: true, force: true, maxRetries: 3 });
    }
  };
  return context;
}
