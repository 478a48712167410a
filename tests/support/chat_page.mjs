// Drives the server's chat page (GET /) in a real headless Chromium over the DevTools protocol
// (node --experimental-websocket): attaches an image file, sends a message, waits for the
// streamed reply, and takes a screenshot. With KEY (a server started with --api-key), the page
// must first ask for the key: it is typed into the field the page shows.
//   node --experimental-websocket chat_page.mjs CHROMIUM BASE_URL IMAGE SCREENSHOT_PNG PROFILE_DIR [KEY]
// Prints one JSON object: status, reply, note (the attachment line), the reply's box in screenshot
// pixels, chunks (how many times the reply text grew: it streamed), asked (the key field was shown)
// and model (the model name the page shows).
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';

const [chromium, baseURL, image, screenshot, profile, key] = process.argv.slice(2);
const browser = spawn(chromium, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
  '--remote-debugging-port=0', '--user-data-dir=' + profile, '--window-size=1000,800', 'about:blank'],
  { stdio: ['ignore', 'ignore', 'pipe'] });
const fail = (message) => { console.error(message); browser.kill('SIGKILL'); process.exit(1); };
setTimeout(() => fail('timed out'), 120000).unref();

const endpoint = await new Promise((resolve) => {
  let text = '';
  browser.stderr.on('data', (d) => {
    text += d;
    const m = text.match(/DevTools listening on (ws:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  browser.on('exit', (code) => fail('chromium exited with ' + code + ': ' + text));
});

const ws = new WebSocket(endpoint);
await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
let nextId = 1;
const pending = new Map();
ws.onmessage = (event) => {
  const msg = JSON.parse(event.data);
  if (msg.id && pending.has(msg.id)) {
    const { resolve, reject } = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error) reject(new Error(JSON.stringify(msg.error)));
    else resolve(msg.result);
  }
};
function send(method, params = {}, sessionId = undefined) {
  const id = nextId++;
  ws.send(JSON.stringify({ id, method, params, sessionId }));
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const { targetId } = await send('Target.createTarget', { url: baseURL + '/' });
const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
const page = (method, params) => send(method, params, sessionId);
const evaluate = async (expression) =>
  (await page('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true })).result.value;

for (let i = 0; !(await evaluate("document.readyState === 'complete' && !!document.getElementById('send')")); i++) {
  if (i > 200) fail('the page did not load');
  await sleep(50);
}
let asked = false;
if (key) {
  for (let i = 0; !(asked = await evaluate("!document.getElementById('keyrow').hidden")); i++) {
    if (i > 200) fail('the page did not ask for the API key');
    await sleep(50);
  }
  await evaluate(`(() => { const k = document.getElementById('key'); k.value = ${JSON.stringify(key)};
                  k.dispatchEvent(new Event('change')); return true; })()`);
  for (let i = 0; !(await evaluate("document.getElementById('model').textContent !== ''")); i++) {
    if (i > 200) fail('the models list was not read with the key');
    await sleep(50);
  }
}
const { root } = await page('DOM.getDocument', {});
const { nodeId } = await page('DOM.querySelector', { nodeId: root.nodeId, selector: '#file' });
await page('DOM.setFileInputFiles', { nodeId, files: [image] });
await evaluate(`document.getElementById('prompt').value = 'What is in this picture?';
                document.getElementById('form').requestSubmit(); true`);
let status = '', last = '', chunks = 0;
for (let i = 0; i < 1200; i++) {
  const s = await evaluate(`({ status: document.getElementById('status').textContent,
    reply: (document.querySelector('.assistant') || {}).textContent || '' })`);
  if (s.reply !== last) { chunks++; last = s.reply; }
  status = s.status;
  if (status === 'done' || status === 'error') break;
  await sleep(25);
}
const info = await evaluate(`(() => {
  const r = document.querySelector('.assistant').getBoundingClientRect();
  const k = window.devicePixelRatio;
  return { reply: document.querySelector('.assistant').textContent,
           model: document.getElementById('model').textContent,
           note: (document.querySelector('.user .attachment') || {}).textContent || '',
           box: [Math.floor(r.left * k), Math.floor(r.top * k), Math.ceil(r.right * k), Math.ceil(r.bottom * k)] };
})()`);
const shot = await page('Page.captureScreenshot', { format: 'png' });
writeFileSync(screenshot, Buffer.from(shot.data, 'base64'));
console.log(JSON.stringify({ status, chunks, asked, ...info }));
browser.removeAllListeners('exit');
browser.kill('SIGKILL');
process.exit(0);
