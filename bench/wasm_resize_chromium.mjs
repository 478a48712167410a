// A 12 MP resize in headless Chromium: our resizeImage (Pillow's bicubic, WebAssembly) against the
// canvas drawImage resize (imageSmoothingQuality "high") on the same 4000 x 3000 pixels, to
// 448 x 448; the medians of REPS runs after one warm-up, and their ratio.
//   node bench/wasm_resize_chromium.mjs PKG_DIR [REPS] [CHROMIUM]
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { runHeadless } from '../tests/wasm/headless.mjs';

const [pkgDir, repsArg, chromium = 'chromium'] = process.argv.slice(2);
if (!pkgDir) {
  console.error('usage: wasm_resize_chromium.mjs PKG_DIR [REPS] [CHROMIUM]');
  process.exit(2);
}
const reps = Number(repsArg || 5);
const page = `<!doctype html><meta charset="utf-8"><script type="module">
const mlc = await import('/pkg/index.js');
const width = 4000, height = 3000, out = 448, reps = ${reps};
const source = new OffscreenCanvas(width, height);
const g = source.getContext('2d');
const pixels = g.createImageData(width, height);
for (let i = 0; i < pixels.data.length; i++) pixels.data[i] = (i * 2654435761) >>> 24;
g.putImageData(pixels, 0, 0);
const median = (v) => v.sort((a, b) => a - b)[v.length >> 1];
function time(f) {
  f();
  const t = [];
  for (let i = 0; i < reps; i++) { const t0 = performance.now(); f(); t.push(performance.now() - t0); }
  return median(t);
}
const ours = time(() => mlc.resizeImage(g.getImageData(0, 0, width, height), { resize: { mode: 'stretch', height: out, width: out } }));
const canvas = time(() => {
  const target = new OffscreenCanvas(out, out);
  const c = target.getContext('2d');
  c.imageSmoothingEnabled = true;
  c.imageSmoothingQuality = 'high';
  c.drawImage(source, 0, 0, out, out);
  c.getImageData(0, 0, out, out);
});
await fetch('/result', { method: 'POST', body: JSON.stringify({ ours, canvas }) });
</script>`;
let finish;
const done = new Promise((resolve) => { finish = resolve; });
const server = http.createServer((req, res) => {
  if (req.method === 'POST') {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => { res.end(); finish(JSON.parse(body)); });
    return;
  }
  const name = path.basename(req.url);
  if (req.url === '/') {
    res.setHeader('content-type', 'text/html');
    res.end(page);
  } else if (req.url.startsWith('/pkg/') && ['index.js', 'mlc_manifest.mjs'].includes(name)) {
    res.setHeader('content-type', 'text/javascript');
    fs.createReadStream(path.join(pkgDir, name)).pipe(res);
  } else {
    res.statusCode = 404;
    res.end();
  }
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { outcome: result, failure } = await runHeadless(chromium, `http://127.0.0.1:${server.address().port}/`, done, 300000);
server.close();
if (failure) {
  console.error(failure);
  process.exit(1);
}
console.log(`12 MP (4000 x 3000) -> 448 x 448 in Chromium, median of ${reps}`);
console.log(`  resizeImage (wasm, Pillow bicubic)        ${result.ours.toFixed(1).padStart(8)} ms`);
console.log(`  canvas drawImage (smoothing "high")       ${result.canvas.toFixed(1).padStart(8)} ms`);
console.log(`  ratio ours / canvas                       ${(result.ours / result.canvas).toFixed(2).padStart(8)}x`);
