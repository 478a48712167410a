// The WebAssembly package under Node against the native build: every output must equal what the
// native `mlc-manifest` CLI writes for the same input (audio: the same float32 values; images:
// the same bytes; tokenizers: the same ids and decoded text; documents, bindings and prefill
// plans: the same JSON), and failures must throw the C API's errors.
//   node tests/wasm/node_test.mjs PKG_DIR CLI SOURCE_DIR SHARED_DIR
// The inputs are made here with sox and Pillow (audio, images) or read from the repository's
// fixtures (tests/data, examples/) and the shared test data (tokenizers).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [pkgDir, cli, sourceDir, sharedDir] = process.argv.slice(2);
if (!sharedDir) {
  console.error('usage: node_test.mjs PKG_DIR CLI SOURCE_DIR SHARED_DIR');
  process.exit(2);
}
const mlc = await import(path.resolve(pkgDir, 'index.js'));
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'mlc-wasm-test-'));
const native = (args, input) => execFileSync(cli, args, { input, maxBuffer: 1 << 28 }).toString();
const nativeJson = (args) => JSON.parse(native([...args, '--json']));

let failed = 0;
let passed = 0;
async function test(name, f) {
  try {
    await f();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n  ${String(e.stack || e).split('\n').slice(0, 6).join('\n  ')}`);
  }
}

// The data of a .npy file (the header skipped).
function npyData(file) {
  const b = fs.readFileSync(file);
  const headerLength = b[6] === 1 ? b.readUInt16LE(8) + 10 : b.readUInt32LE(8) + 12;
  return b.subarray(headerLength);
}

function sameBytes(actual, expected, what) {
  const a = Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength);
  if (a.equals(expected)) return;
  let i = 0;
  while (i < a.length && a[i] === expected[i]) i++;
  assert.fail(`${what}: ${a.length} bytes vs native ${expected.length}, first difference at byte ${i}`);
}

// ---- Audio: the native CLI's raw float32 output against decodeAudio ----
// Every output must be the native samples bit for bit: WAV parsing, sample conversion, the channel
// average, and soxr's resampling at both qualities. The native library takes soxr's SSE (high)
// and AVX (very high quality) engines, with glibc's libm in the filter design; the wasm build
// compiles those engines to wasm SIMD and links glibc's functions (scripts/wasm/build-c-deps).
// Sample rates up and down, integer and non-integer ratios.
const sox = (args) => execFileSync('sox', args);
const audioFormats = [
  // [name, sox options making the file]
  ['16-bit stereo 44.1 kHz (our WAV path)', ['-r', '44100', '-c', '2', '-b', '16', '-e', 'signed-integer']],
  ['16-bit mono 16 kHz (our WAV path)', ['-r', '16000', '-c', '1', '-b', '16', '-e', 'signed-integer']],
  ['float32 stereo 48 kHz (libsndfile)', ['-r', '48000', '-c', '2', '-b', '32', '-e', 'floating-point']],
  ['24-bit 3 channels 22.05 kHz, WAVE_FORMAT_EXTENSIBLE (libsndfile)', ['-r', '22050', '-c', '3', '-b', '24', '-e', 'signed-integer']],
];
for (const [name, format] of audioFormats) {
  const file = path.join(work, `audio-${passed + failed}.wav`);
  sox(['-n', ...format, file, 'synth', '1.3', 'sine', '440', 'sine', '3000', 'sine', '7100', 'gain', '-3']);
  const ownRate = Number(format[1]);
  const targets = [[ownRate, false], [16000, false], [8000, false], [24000, true], [44100, true]];
  for (const [rate, vhq] of targets) {
    if (rate === ownRate && (vhq || rate === 16000)) continue;
    await test(`audio: ${name} -> ${rate} Hz${vhq ? ' VHQ' : ''}${rate === ownRate ? ' (not resampled)' : ''}`, () => {
      const out = `${file}.${rate}.f32`;
      native(['audio', file, '--rate', String(rate), '--max', '480000', '--quality', vhq ? 'very-high' : 'high', '-o', out, '--force']);
      const samples = mlc.decodeAudio(fs.readFileSync(file), { sample_rate_hz: rate, max_samples: 480000, very_high_quality: vhq });
      sameBytes(samples, fs.readFileSync(out), 'samples');
    });
  }
}

await test('audio: errors are the C API\'s', () => {
  assert.throws(() => mlc.decodeAudio(new TextEncoder().encode('not audio at all'), { sample_rate_hz: 16000 }),
    (e) => e instanceof mlc.MlcError && e.code === 'unsupported' || e.code === 'invalid');
  const file = path.join(work, 'long.wav');
  sox(['-n', '-r', '16000', '-c', '1', '-b', '16', file, 'synth', '1', 'sine', '440']);
  assert.throws(() => mlc.decodeAudio(fs.readFileSync(file), { sample_rate_hz: 16000, max_samples: 100 }),
    (e) => e.code === 'invalid' && /too long/.test(e.message) && typeof e.path === 'string' && typeof e.document === 'string');
});

// ---- Images: Pillow writes the pixels; the native CLI decodes the file ----

const python = (code) => execFileSync('/usr/bin/python3', ['-c', code]);
const imageCases = [
  ['stretch bicubic', { resize: { mode: 'stretch', height: 48, width: 64 } }, {}],
  ['center_crop lanczos uint32', { resize: { mode: 'center_crop', height: 40, width: 40 } }, { filter: 'lanczos', dtype: 'uint32' }],
  ['upscale bilinear', { resize: { mode: 'stretch', height: 300, width: 260 } }, { filter: 'bilinear' }],
];
const photo = path.join(work, 'photo');
// A 211 x 157 picture with alpha: gradients and edges (PNG and raw RGBA), and the same as JPEG.
python(`
from PIL import Image, ImageDraw
w, h = 211, 157
im = Image.new("RGBA", (w, h))
px = im.load()
for y in range(h):
    for x in range(w):
        px[x, y] = ((x * 255) // w, (y * 255) // h, ((x ^ y) * 7) % 256, 255 - (x + y) % 200)
d = ImageDraw.Draw(im)
d.ellipse((40, 30, 150, 120), fill=(250, 240, 10, 255))
d.line((0, 0, w, h), fill=(0, 0, 0, 255), width=3)
im.save("${photo}.png")
open("${photo}.rgba", "wb").write(im.tobytes())
im.convert("RGB").save("${photo}.jpg", quality=92, subsampling=0)
im.convert("RGB").save("${photo}-420.jpg", quality=85, subsampling=2)
`);
const rgba = { width: 211, height: 157, data: new Uint8Array(fs.readFileSync(`${photo}.rgba`)) };
for (const [name, processor, options] of imageCases) {
  const args = ['--mode', processor.resize.mode, '--height', String(processor.resize.height),
    '--width', String(processor.resize.width), '--filter', options.filter ?? 'bicubic', '--dtype', options.dtype ?? 'uint8'];
  await test(`image: resizeImage over RGBA, ${name}`, () => {
    const out = path.join(work, `png-${passed + failed}.npy`);
    native(['image', `${photo}.png`, ...args, '-o', out]);
    sameBytes(mlc.resizeImage(rgba, processor, options), npyData(out), 'pixels');
  });
  for (const jpeg of ['.jpg', '-420.jpg']) {
    await test(`image: decodeImage JPEG${jpeg === '.jpg' ? ' 4:4:4' : ' 4:2:0'}, ${name}`, () => {
      const out = path.join(work, `jpg-${passed + failed}.npy`);
      native(['image', `${photo}${jpeg}`, ...args, '-o', out]);
      sameBytes(mlc.decodeImage(fs.readFileSync(`${photo}${jpeg}`), processor, options), npyData(out), 'pixels');
    });
  }
}
await test('image: errors are the C API\'s', () => {
  assert.throws(() => mlc.resizeImage(rgba, { resize: { height: 70000, width: 8 } }), (e) => e.code === 'limit');
  assert.throws(() => mlc.resizeImage({ width: 3, height: 3, data: new Uint8Array(5) }, { height: 2, width: 2 }), (e) => e.code === 'usage');
});

// ---- Tokenizers: `mlc-manifest tokenize --jsonl` against Tokenizer ----

const corpus = fs.readFileSync(path.join(sourceDir, 'tests/data/tokenizer_corpus.jsonl'), 'utf8');
const corpusTexts = corpus.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l).text);
function compareTokenizer(tokenizer, nativeArgs) {
  const expected = native(['tokenize', ...nativeArgs, '--jsonl'], corpus).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(expected.length, corpusTexts.length);
  corpusTexts.forEach((t, i) => {
    const ids = Array.from(tokenizer.encode(t));
    assert.deepEqual(ids, expected[i].ids, `ids of corpus line ${i + 1}`);
    assert.equal(tokenizer.decode(ids), expected[i].decoded, `decoded corpus line ${i + 1}`);
  });
}
const docsDir = path.join(sourceDir, 'tests/data/tokenizer_docs');
for (const name of fs.readdirSync(docsDir).filter((n) => n.endsWith('.json')).sort()) {
  await test(`tokenizer: ${name}`, () => {
    const file = path.join(docsDir, name);
    const tokenizer = new mlc.Tokenizer({ 'tokenizer.json': fs.readFileSync(file) });
    try {
      compareTokenizer(tokenizer, ['--tokenizer', file]);
    } finally {
      tokenizer.free();
    }
  });
}
const folderFiles = (dir, keep = () => true) => Object.fromEntries(fs.readdirSync(dir)
  .filter((n) => fs.statSync(path.join(dir, n)).isFile() && keep(n)).map((n) => [n, fs.readFileSync(path.join(dir, n))]));
// The shared folders: phi-3-mini as a folder; qwen2-readerlm's reconstructed tokenizer.json.
const sharedTokenizers = path.join(sharedDir, 'testdata/tokenizers');
await test('tokenizer: shared phi-3-mini folder', () => {
  const dir = path.join(sharedTokenizers, 'phi-3-mini');
  const tokenizer = new mlc.Tokenizer(folderFiles(dir));
  try {
    compareTokenizer(tokenizer, [dir]);
  } finally {
    tokenizer.free();
  }
});
await test('tokenizer: shared qwen2-readerlm (reconstructed tokenizer.json)', () => {
  const file = path.join(sharedTokenizers, 'qwen2-readerlm/tokenizer.reconstructed.json');
  const tokenizer = new mlc.Tokenizer({ 'tokenizer.json': fs.readFileSync(file) });
  try {
    compareTokenizer(tokenizer, ['--tokenizer', file]);
  } finally {
    tokenizer.free();
  }
});

// ---- Documents, binding and prefill plans: the example package ----

const example = path.join(sourceDir, 'examples/gemma-4-E2B-it-q4f16_1');
const manifest = fs.readFileSync(path.join(example, 'mlc-model-manifest.json'), 'utf8');
const program = fs.readFileSync(path.join(example, 'compiled-program.json'), 'utf8');
const nativeBinding = nativeJson(['bind', path.join(example, 'mlc-model-manifest.json'), path.join(example, 'compiled-program.json')]);
await test('documents: validatePackage and validateProgram give the native ids (SHA-256)', () => {
  const pkg = mlc.validatePackage(manifest);
  const prog = mlc.validateProgram(program);
  assert.equal(pkg.interfaceId, nativeBinding.interface_id);
  assert.equal(pkg.parameterSchemaId, nativeBinding.parameter_schema_id);
  assert.equal(prog.interfaceId, nativeBinding.interface_id);
});
await test('documents: bind gives the native contract', () => {
  const binding = mlc.bind(manifest, program);
  assert.deepEqual(binding.contract, nativeBinding.contract);
  assert.equal(binding.pair, nativeBinding.contract.pair);
  assert.equal(binding.executor, nativeBinding.contract.executor);
});
await test('documents: errors carry document, path and message', () => {
  const broken = JSON.parse(manifest);
  broken.tasks = 7;
  assert.throws(() => mlc.validatePackage(broken), (e) => e instanceof mlc.MlcError && e.code === 'invalid' && e.path.startsWith('/tasks'));
  assert.throws(() => mlc.validatePackage('{'), (e) => e.code === 'invalid');
});
await test('plan: planPrefill gives the native plan', () => {
  const request = [{ tokens: [2, 105, 2364, 107] }, { audio_rows: 37 }, { tokens: [106, 107, 105, 4368, 107] }];
  const requestFile = path.join(work, 'request.json');
  fs.writeFileSync(requestFile, JSON.stringify(request));
  const files = folderFiles(example, (n) => !n.endsWith('.bin'));
  const expected = nativeJson(['plan', example, '--program', path.join(example, 'compiled-program.json'), '--request', requestFile]);
  const plan = mlc.planPrefill(files, request, { program });
  for (const key of Object.keys(plan)) assert.deepEqual(plan[key], expected[key], `plan field ${key}`);
});

fs.rmSync(work, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
