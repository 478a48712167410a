// The WebAssembly package in a real headless Chromium: a local server hands the browser
// chromium_page.html, the package, a WAV and a JPEG; the page decodes the WAV with decodeAudio,
// the JPEG with the browser's own decoder and our resizeImage, and posts the results back. They
// must equal what the native `mlc-manifest` CLI wrote beforehand for the same files (the JPEG
// decoded at full size: --no-shrink-on-load; both byte for byte, the audio resampled by soxr), and
// a failure must arrive as the C API's error.
//   node tests/wasm/chromium_test.mjs PKG_DIR CLI [CHROMIUM]
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { runHeadless } from './headless.mjs';

const [pkgDir, cli, chromium = 'chromium'] = process.argv.slice(2);
if (!cli) {
  console.error('usage: chromium_test.mjs PKG_DIR CLI [CHROMIUM]');
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'mlc-wasm-chromium-'));
const wav = path.join(work, 'test.wav');
const jpg = path.join(work, 'test.jpg');
const params = { audio: { sample_rate_hz: 16000, max_samples: 480000 },
                 image: { resize: { mode: 'center_crop', height: 96, width: 128 } } };

// The inputs and the native outputs, written before the browser starts.
execFileSync('sox', ['-n', '-r', '44100', '-c', '2', '-b', '16', wav, 'synth', '2', 'sine', '300-5000', 'sine', '1000']);
execFileSync('/usr/bin/python3', ['-c', `
from PIL import Image
w, h = 333, 251
im = Image.new("RGB", (w, h))
px = im.load()
for y in range(h):
    for x in range(w):
        px[x, y] = ((x * 255) // w, (y * 255) // h, ((x * y) // 7) % 256)
im.save("${jpg}", quality=95, subsampling=0)
`]);
execFileSync(cli, ['audio', wav, '--rate', '16000', '--max', '480000', '-o', `${wav}.f32`]);
execFileSync(cli, ['image', jpg, '--mode', 'center_crop', '--height', '96', '--width', '128',
  '--no-shrink-on-load', '-o', `${jpg}.npy`]);

const types = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html', '.json': 'application/json' };
const files = {
  '/': path.join(here, 'chromium_page.html'),
  '/test.wav': wav,
  '/test.jpg': jpg,
};
const results = {};
let finish;
const finished = new Promise((resolve) => { finish = resolve; });
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (req.method === 'POST' && url.pathname.startsWith('/result/')) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const name = url.pathname.slice('/result/'.length);
      results[name] = Buffer.concat(chunks);
      res.end();
      if (name === 'done') finish();
    });
    return;
  }
  if (url.pathname === '/params.json') {
    res.setHeader('content-type', types['.json']);
    res.end(JSON.stringify(params));
    return;
  }
  let file = files[url.pathname];
  if (!file && url.pathname.startsWith('/pkg/')) {
    const name = path.basename(url.pathname);
    if (['index.js', 'mlc_manifest.mjs', 'package.json'].includes(name)) file = path.join(pkgDir, name);
  }
  if (!file) {
    res.statusCode = 404;
    res.end();
    return;
  }
  res.setHeader('content-type', types[path.extname(file)] ?? 'application/octet-stream');
  fs.createReadStream(file).pipe(res);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${server.address().port}/`;

const { failure: browserFailure, log: browserLog } = await runHeadless(chromium, url, finished, 120000);
server.close();

let failed = 0;
const check = (name, f) => {
  try {
    f();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n  ${e.message}`);
  }
};
check('the page ran', () => {
  assert.equal(browserFailure, null, `${browserFailure}\n${browserLog.slice(-2000)}`);
  assert.equal(results.failure, undefined, String(results.failure));
});
// Resampled by soxr: the native samples bit for bit (tests/wasm/node_test.mjs says how).
check('audio: decodeAudio in Chromium equals the native samples bit for bit', () => {
  assert.ok(results.audio, 'no audio result');
  const expected = fs.readFileSync(`${wav}.f32`);
  assert.equal(results.audio.length, expected.length, 'byte count');
  let i = 0;
  while (i < expected.length && results.audio[i] === expected[i]) i++;
  assert.equal(i, expected.length, `first difference at byte ${i}`);
});
check('image: the browser\'s JPEG decode + resizeImage equals the native pixels', () => {
  assert.ok(results.image, 'no image result');
  const npy = fs.readFileSync(`${jpg}.npy`);
  const data = npy.subarray(npy.readUInt16LE(8) + 10);
  let worst = 0;
  for (let i = 0; i < data.length; i++) worst = Math.max(worst, Math.abs(data[i] - results.image[i]));
  assert.ok(results.image.equals(data), `${results.image.length} bytes, largest difference ${worst}`);
});
check('errors: a thrown MlcError with the C API\'s fields', () => {
  const e = JSON.parse(String(results.error));
  assert.equal(e.name, 'MlcError');
  assert.ok(['unsupported', 'invalid'].includes(e.code), e.code);
  assert.equal(typeof e.path, 'string');
  assert.equal(typeof e.document, 'string');
});
fs.rmSync(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
process.exit(failed ? 1 : 0);
