// Times the web UI's pages in Debian's chromium (playwright-core from
// tests/ui/node_modules): each page loaded --runs times, the median of
// navigation start -> load event. Used by bench/ui_load.sh.
//   node bench/ui_load.mjs --link LOGIN_URL --label NAME --runs 5 PATH...
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../tests/ui/package.json'));
const { chromium } = require('playwright-core');

const argv = process.argv.slice(2);
const opt = (k, d) => { const i = argv.indexOf(`--${k}`); return i >= 0 ? argv.splice(i, 2)[1] : d; };
const link = opt('link');
const label = opt('label', 'ui');
const runs = +opt('runs', '5');
const paths = argv;
const browser = await chromium.launch({ executablePath: process.env.HERD_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await (await browser.newContext({ ignoreHTTPSErrors: true })).newPage();
let errors = 0;
page.on('console', (m) => { if (m.type() === 'error') errors++; });
await page.goto(link);
await Promise.all([page.waitForNavigation(), page.click('#login')]);
const base = new URL(page.url()).origin;
for (const p of paths) {
  const times = [];
  let bytes = 0;
  for (let i = 0; i < runs; i++) {
    const r = await page.goto(base + p, { waitUntil: 'load' });
    if (r.status() !== 200) throw new Error(`${p}: ${r.status()}`);
    bytes = (await r.body()).length;
    const t = await page.evaluate(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; });
    times.push(t);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  const key = p === '/' ? 'front' : p.replace(/^\//, '').replace(/[^a-z0-9]+/gi, '_');
  console.log(`${label} ${p}: median ${median.toFixed(0)} ms, max ${times[times.length - 1].toFixed(0)} ms, ${(bytes / 1024).toFixed(0)} KiB`);
  console.log(`RESULT ui_${label}_${key}_ms=${median.toFixed(1)}`);
}
console.log(`RESULT ui_${label}_console_errors=${errors}`);
await browser.close();
