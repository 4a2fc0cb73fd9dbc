// The master's web UI in a real browser (Debian's chromium, driven by
// playwright-core): a fresh `herd up` cell, a job whose tasks print a line
// every 200 ms and a job that cannot fit; every page loads without console
// errors or failed requests, its numbers agree with the CLI's --json, the
// log tail follows without a reload, the usage charts fill from the history,
// and a browser that is not logged in gets 401 and is told how to log in.
// Screenshots of each page go to --out.
//
//   node tests/ui/ui_test.mjs --herd build/bin/herd --out build/Testing/ui [--chromium /usr/bin/chromium]
import { chromium } from 'playwright-core';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const herd = path.resolve(args.herd || 'build/bin/herd');
const out = path.resolve(args.out || 'build/Testing/ui');
const chromiumPath = args.chromium || process.env.HERD_CHROMIUM || '/usr/bin/chromium';
fs.mkdirSync(out, { recursive: true });

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'herd-ui-'));
let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
}

function run(argv, opts = {}) {
  return execFileSync(herd, argv, { encoding: 'utf8', env: { ...process.env, HOME: dir }, ...opts });
}
let master = '';
const cli = (...a) => run(['--master', master, '--credentials', path.join(dir, 'credentials.pem'), ...a]);
const json = (...a) => JSON.parse(cli(...a, '--json'));

// Waits for `fn` to return a truthy value (polling; bounded).
async function until(fn, what, timeoutMs = 60000, explain = null) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const why = explain ? `; ${await explain()}` : '';
  throw new Error(`timed out waiting for ${what} (last: ${last}${why})`);
}

let browser;
try {
  const up = run(['up', '--detach', '--data', dir, '--listen', '127.0.0.1:0', '--agents', '2', '--history-sample', '1s']);
  master = fs.readFileSync(path.join(dir, 'master', 'master.addr'), 'utf8').trim();
  const uiLine = up.split('\n').find((l) => l.trim().startsWith('ui '));
  check(!!uiLine && /https:\/\/127\.0\.0\.1:\d+\//.test(uiLine), `herd up prints the UI's URL: ${uiLine && uiLine.trim()}`);
  const base = uiLine.match(/https:\/\/[^ ]+?\//)[0].replace(/\/$/, '');
  const cell = json('cell');
  check(cell.http && base === `https://${cell.http}`, `herd cell --json has http ${cell.http}`);

  const spec = (name, tasks, cmd, res) =>
    `name: ${name}\nuser: alice\npriority: production\ntasks: ${tasks}\ncommand: ${JSON.stringify(cmd)}\nresources: ${res}\n`;
  fs.writeFileSync(path.join(dir, 'ticker.yaml'),
    spec('ticker', 2, ['/bin/sh', '-c', 'i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.2; done'], '{cpu: 100m, memory: 64Mi}'));
  fs.writeFileSync(path.join(dir, 'huge.yaml'), spec('huge', 1, ['sleep', '3600'], '{cpu: 500, memory: 64Mi}'));
  cli('submit', path.join(dir, 'ticker.yaml'));
  cli('submit', path.join(dir, 'huge.yaml'));
  await until(() => {
    const jobs = json('jobs').jobs || [];
    const t = jobs.find((j) => j.id === 'alice/ticker');
    return t && t.running === 2;
  }, 'ticker running');

  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox', '--disable-gpu'] });
  // The cell's certificate is signed by its own CA, which this browser
  // does not know: accept it (a user trusts the CA, or accepts it once).
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`); });
  const visit = async (p, shot) => {
    const before = problems.length;
    const t0 = Date.now();
    const resp = await page.goto(base + p, { waitUntil: 'load' });
    const ms = Date.now() - t0;
    await page.screenshot({ path: path.join(out, `${shot}.png`), fullPage: true });
    check(resp.status() === 200 && problems.length === before,
      `${p} loads (${resp.status()}, ${ms} ms) without console errors or failed requests ${problems.slice(before).join('; ')}`);
  };

  // Not logged in: 401 and how to log in.
  {
    const anon = await context.newPage();
    const r = await anon.goto(base + '/');
    const text = await anon.textContent('body');
    check(r.status() === 401 && text.includes('herd ui'), `without a session / answers 401 and says to run herd ui`);
    await anon.close();
  }

  // Log in with herd ui's link.
  const link = cli('ui').trim();
  check(link.startsWith(base + '/login?token='), `herd ui prints a login link on the UI's address`);
  await page.goto(link);
  check((await page.textContent('main')).includes('as root'), 'the link asks to confirm the login, naming who');
  await Promise.all([page.waitForURL(base + '/'), page.click('#login')]);
  check(new URL(page.url()).pathname === '/', `the link logs in and lands on the front page (${page.url()})`);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'herd_session');
  check(session && session.httpOnly && session.secure && session.sameSite === 'Strict',
    'the session cookie is HttpOnly, Secure, SameSite=Strict');
  {
    const again = await context.newPage();
    await again.goto(link);
    const [r] = await Promise.all([again.waitForNavigation(), again.click('#login')]);
    check(r.status() === 401, 'a login link works only once');
    await again.close();
  }
  {
    // Another site cannot log a browser in: the POST must come from this origin.
    const other = cli('ui').trim();
    const token = new URL(other).searchParams.get('token');
    const forged = await context.request.post(base + '/login', {
      form: { token }, headers: { Origin: 'https://evil.example' }, maxRedirects: 0 });
    check(forged.status() === 403, `a login POSTed from another origin is refused (${forged.status()})`);
  }

  // Front page: the cell and its jobs, as the CLI sees them.
  await visit('/', 'front');
  const jobsCli = json('jobs').jobs;
  const rows = await page.$$eval('#jobs tbody tr[data-job]', (trs) => trs.map((tr) => ({
    id: tr.dataset.job, running: +tr.querySelector('.running').textContent, pending: +tr.querySelector('.pending').textContent })));
  check(rows.length === jobsCli.length && jobsCli.every((j) => rows.some((r) => r.id === j.id)),
    `front page lists the cell's jobs: ${rows.map((r) => r.id).join(', ')}`);
  for (const j of jobsCli) {
    const r = rows.find((x) => x.id === j.id);
    check(r && r.running === (j.running || 0) && r.pending === (j.pending || 0),
      `job ${j.id}: running ${r && r.running}/${j.running || 0}, pending ${r && r.pending}/${j.pending || 0} as herd jobs --json`);
  }
  const cellNow = json('cell');
  const card = async (k) => (await page.textContent(`[data-k="${k}"]`)).trim();
  check(await card('machines-up') === `${cellNow.machinesUp} / ${cellNow.machines}`, `machines up ${await card('machines-up')} as herd cell --json`);
  check(+(await card('tasks-running')) === cellNow.tasksRunning, `tasks running ${await card('tasks-running')} as herd cell --json`);

  // Machines: one row each, task counts as herd machines --json.
  await visit('/machines', 'machines');
  const machinesCli = json('machines').machines;
  const mrows = await page.$$eval('#machines tbody tr[data-machine]', (trs) => trs.map((tr) => ({
    name: tr.dataset.machine, tasks: +tr.querySelector('.tasks').textContent })));
  check(mrows.length === machinesCli.length, `machines page has ${mrows.length} rows, herd machines ${machinesCli.length}`);
  for (const m of machinesCli) {
    const r = mrows.find((x) => x.name === m.name);
    check(r && r.tasks === (m.taskCount || 0), `machine ${m.name}: ${r && r.tasks} tasks as herd machines --json`);
  }
  check(await page.$$eval('#machines svg.bar', (s) => s.length) >= 2 * machinesCli.length, 'machines have allocation bars');

  await visit('/users', 'users');
  check(await page.$$eval('#quotas tbody tr', (t) => t.length) >= 1, 'users page lists quota usage');

  // Pending queue: the job that cannot fit, with the scheduler's reason.
  await until(async () => {
    await page.goto(base + '/pending');
    return (await page.textContent('#pending')).includes('machines fit');
  }, 'the scheduler to diagnose alice/huge', 30000);
  await visit('/pending', 'pending');
  const pendingText = await page.textContent('#pending');
  check(pendingText.includes('alice/huge') && pendingText.includes('insufficient cpu'),
    `pending queue shows alice/huge and why: ${pendingText.replace(/\s+/g, ' ').slice(0, 160)}`);

  // A job page: tasks, versions, events, why pending with suggestions.
  await visit('/job/alice/ticker', 'job');
  const taskStates = await page.$$eval('#tasks tbody tr[data-task] .st', (s) => s.map((x) => x.textContent));
  const tasksCli = json('tasks', 'ticker').tasks;
  check(taskStates.length === tasksCli.length && taskStates.every((s) => s.startsWith('RUNNING')),
    `job page lists ${taskStates.length} tasks, all running (CLI: ${tasksCli.length})`);
  check(await page.$$eval('#versions tbody tr', (t) => t.length) === 1, 'job page shows version 1');
  check(await page.$$eval('#events tbody tr', (t) => t.length) >= 2, 'job page shows the events timeline');
  check((await page.textContent('pre.spec')).includes('tick'), 'job page shows the spec');
  await visit('/job/alice/huge', 'job-pending');
  const why = await page.textContent('.why');
  check(why.includes('insufficient cpu'), `why pending on the job page: ${why.replace(/\s+/g, ' ').slice(0, 120)}`);

  // A task page: the log follows, the charts fill.
  await visit('/job/alice/ticker/0', 'task');
  const lastTick = async () => {
    const m = [...(await page.textContent('#log')).matchAll(/tick (\d+)/g)];
    return m.length ? +m[m.length - 1][1] : -1;
  };
  const first = await until(async () => { const n = await lastTick(); return n >= 0 ? n + 1 : 0; },
                            'the log tail', 60000, async () => page.evaluate(async () => { const src = document.getElementById('log').dataset.src; const r = await fetch(src, { credentials: 'same-origin', cache: 'no-store' }); return src + ' -> ' + r.status + ' ' + JSON.stringify([...r.headers]) + ' ' + (await r.text()).slice(0, 200); })) - 1;
  const later = await until(async () => { const n = await lastTick(); return n >= first + 5 ? n : 0; }, 'the log to follow', 30000);
  check(later >= first + 5, `the log tail follows without a reload: tick ${first} then tick ${later}`);
  check(problems.length === 0, `no errors while following ${problems.join('; ')}`);
  const samples = await until(async () => {
    await page.goto(base + '/job/alice/ticker/0');
    const n = +(await page.getAttribute('#usage', 'data-samples'));
    return n >= 2 ? n : 0;
  }, 'two usage samples in the history', 60000);
  check(samples >= 2 && (await page.$$('#usage polyline')).length === 2, `task page charts CPU and memory (${samples} samples)`);
  await page.screenshot({ path: path.join(out, 'task.png'), fullPage: true });

  // A page the caller cannot read: another user's logs need read-all; an
  // unknown job is 404 without breaking anything.
  const missing = await page.goto(base + '/job/alice/nope');
  check(missing.status() === 404, 'an unknown job is a 404 page');
  problems.length = 0;

  // Logging out ends the session: the same cookie gets 401 afterwards.
  const cookie = (await context.cookies()).find((c) => c.name === 'herd_session').value;
  await page.goto(base + '/');
  await Promise.all([page.waitForNavigation(), page.click('form.logout button')]);
  check((await context.cookies()).every((c) => c.name !== 'herd_session'), 'logging out clears the cookie');
  const replay = await context.request.get(base + '/', { headers: { Cookie: `herd_session=${cookie}` } });
  check(replay.status() === 401, `the logged-out session is refused (${replay.status()})`);
} catch (e) {
  console.log(`FAIL ${e.stack || e}`);
  failures++;
} finally {
  if (browser) await browser.close();
  spawnSync(herd, ['down', '--data', dir], { encoding: 'utf8' });
  if (failures === 0 || !process.env.HERD_KEEP) fs.rmSync(dir, { recursive: true, force: true });
  else console.log(`kept ${dir}`);
}
console.log(failures === 0 ? 'PASS' : `${failures} FAILED`);
process.exit(failures === 0 ? 0 : 1);
