// Runs one page in headless Chromium, for the WebAssembly test and bench that need a browser
// (tests/wasm/chromium_test.mjs, bench/wasm_resize_chromium.mjs): starts CHROMIUM on URL with a
// throwaway profile, waits until the page's answer (the promise FINISHED), TIMEOUT_MS, or the
// browser's own exit, then stops the browser's whole process group (its helpers write to the profile
// after the main process has gone) and removes the profile. Gives {outcome, failure, log}: what
// FINISHED resolved to; null, or why no answer came; and the browser's stderr.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export async function runHeadless(chromium, url, finished, timeoutMs) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'mlc-wasm-chromium-'));
  const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run',
    '--disable-crash-reporter', '--disable-breakpad', `--user-data-dir=${profile}`, url],
  { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let log = '';
  browser.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((resolve) => {
    browser.once('exit', (code, signal) => resolve(code ?? signal));
    browser.once('error', (e) => resolve(e.message));  // could not start
  });
  let timer;
  const noAnswer = Promise.race([
    new Promise((resolve) => { timer = setTimeout(() => resolve(`no answer from Chromium in ${timeoutMs / 1000} s`), timeoutMs); }),
    exited.then((status) => `Chromium exited (${status}) before the page answered`),
  ]);
  const answer = finished.then((outcome) => ({ outcome }));
  const { outcome, failure = null } = await Promise.race([answer, noAnswer.then((why) => ({ failure: why }))]);
  clearTimeout(timer);
  stopGroup(browser.pid, 'SIGTERM');
  await exited;
  await groupGone(browser.pid, 5000);
  stopGroup(browser.pid, 'SIGKILL');
  removeProfile(profile);
  return { outcome, failure, log };
}

// Signals every process of the group PID leads; a group already gone is not an error.
function stopGroup(pid, signal) {
  if (!pid) return;
  try { process.kill(-pid, signal); } catch (e) { if (e.code !== 'ESRCH') throw e; }
}

// Waits up to LIMIT_MS for the last process of group PID to exit.
async function groupGone(pid, limitMs) {
  for (let waited = 0; pid && waited < limitMs; waited += 50) {
    try { process.kill(-pid, 0); } catch { return; }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Removes the throwaway profile; one left behind in the temporary folder is reported, not fatal.
function removeProfile(profile) {
  try {
    fs.rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  } catch (e) {
    console.error(`warning: could not remove Chromium's profile ${profile}: ${e.message}`);
  }
}
