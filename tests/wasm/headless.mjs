// Runs one page in headless Chromium, for the WebAssembly test and bench that need a browser
// (tests/wasm/chromium_test.mjs, bench/wasm_resize_chromium.mjs): starts CHROMIUM on URL with a
// throwaway profile, waits until the page's answer (the promise FINISHED), TIMEOUT_MS, or the
// browser's own exit, then stops the browser and removes the profile. Gives {outcome, failure, log}:
// what FINISHED resolved to; null, or why no answer came; and the browser's stderr.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export async function runHeadless(chromium, url, finished, timeoutMs) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'mlc-wasm-chromium-'));
  const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run',
    `--user-data-dir=${profile}`, url], { stdio: ['ignore', 'ignore', 'pipe'] });
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
  if (browser.exitCode === null && browser.signalCode === null && browser.pid) browser.kill();
  await exited;
  fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  return { outcome, failure, log };
}
