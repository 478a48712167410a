// The WebAssembly frontend's bench, in Node: (1) 30 s of 48 kHz stereo 16-bit WAV to 16 kHz mono
// with our decodeAudio (libsndfile/our WAV path + soxr HQ, compiled to wasm) against WebLLM
// 0.2.86's decodeAudioInput (its WAV parse, windowed-sinc low-pass and linear interpolation):
// median wall time and the ratio, then each one's passband and alias figures (pure tones through
// each resampler: the level kept in the passband, the level of what folds back from above the
// new Nyquist); (2) a 12 MP RGBA resize to 448 x 448 with resizeImage (Pillow's bicubic).
//   node bench/wasm_frontend.mjs PKG_DIR WEBLLM_DIR [REPS]
// WEBLLM_DIR is where scripts/deps wasm installed @mlc-ai/web-llm@0.2.86 (build/npm); the bench
// appends an export of the internal decodeAudioInput to a copy of its lib/index.js, as
// bench/audio_bench.cc does. (The canvas drawImage side of the image comparison needs a browser:
// bench/wasm_resize_chromium.mjs runs that comparison in headless Chromium.)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [pkgDir, webllmDir, repsArg] = process.argv.slice(2);
if (!webllmDir) {
  console.error('usage: wasm_frontend.mjs PKG_DIR WEBLLM_DIR [REPS]');
  process.exit(2);
}
const reps = Number(repsArg || 5);
const mlc = await import(pathToFileURL(path.resolve(pkgDir, 'index.js')).href);
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'mlc-wasm-bench-'));
const libCopy = path.join(work, 'web_llm.mjs');
fs.copyFileSync(path.join(webllmDir, 'node_modules/@mlc-ai/web-llm/lib/index.js'), libCopy);
fs.appendFileSync(libCopy, '\nexport { decodeAudioInput as __decodeAudioInput };\n');
const webllm = await import(pathToFileURL(libCopy).href);

// A 16-bit PCM WAV of interleaved int16 frames.
function wav(frames, channels, rate) {
  const data = Buffer.from(frames.buffer, frames.byteOffset, frames.byteLength);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0); h.writeUInt32LE(36 + data.length, 4); h.write('WAVE', 8);
  h.write('fmt ', 12); h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(rate, 24); h.writeUInt32LE(rate * channels * 2, 28); h.writeUInt16LE(channels * 2, 32);
  h.writeUInt16LE(16, 34); h.write('data', 36); h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

// Stereo tones: `tones` as [frequency Hz, amplitude] on both channels.
function toneWav(seconds, rate, tones) {
  const n = Math.round(seconds * rate);
  const frames = new Int16Array(2 * n);
  for (let i = 0; i < n; i++) {
    let v = 0;
    for (const [f, a] of tones) v += a * Math.sin((2 * Math.PI * f * i) / rate);
    frames[2 * i] = frames[2 * i + 1] = Math.round(v * 32767);
  }
  return wav(frames, 2, rate);
}

const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
function time(f) {
  f();
  const t = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    f();
    t.push(performance.now() - t0);
  }
  return median(t);
}

const processor = { kind: 'audio_decode', sample_rate_hz: 16000, channels: 1, min_samples: 1, max_samples: 1 << 30 };
const ours = (bytes) => mlc.decodeAudio(bytes, processor);
const theirs = (bytes) => webllm.__decodeAudioInput({ format: 'wav', data: bytes.toString('base64') }, processor);

// ---- Speed: 30 s, 48 kHz stereo (music-like: a chord plus noise) ----
{
  const rate = 48000, n = 30 * rate;
  const frames = new Int16Array(2 * n);
  let seed = 1;
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    const noise = (seed / 4294967296 - 0.5) * 0.05;
    const v = 0.3 * Math.sin(2 * Math.PI * 220 * i / rate) + 0.2 * Math.sin(2 * Math.PI * 3520 * i / rate) + noise;
    frames[2 * i] = Math.round(v * 32767);
    frames[2 * i + 1] = Math.round(0.8 * v * 32767);
  }
  const bytes = wav(frames, 2, rate);
  const a = time(() => ours(bytes));
  const b = time(() => theirs(bytes));
  console.log('30 s 48 kHz stereo WAV -> 16 kHz mono, median of', reps);
  console.log(`  mlc-manifest wasm decodeAudio (soxr HQ)  ${a.toFixed(1).padStart(8)} ms`);
  console.log(`  WebLLM 0.2.86 decodeAudioInput           ${b.toFixed(1).padStart(8)} ms`);
  console.log(`  ratio WebLLM / ours                      ${(b / a).toFixed(2).padStart(8)}x`);
}

// ---- Passband and aliasing: one tone at a time, its level after resampling ----
// The level at frequency f of the 16 kHz output, in dB relative to the input amplitude (a
// single-bin DFT over the middle second, away from the edges).
function levelDb(samples, f, rate, amplitude) {
  const start = rate >> 1, n = rate;
  let re = 0, im = 0;
  for (let i = 0; i < n; i++) {
    const w = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / (n - 1));  // Hann
    re += samples[start + i] * w * Math.cos((2 * Math.PI * f * i) / rate);
    im -= samples[start + i] * w * Math.sin((2 * Math.PI * f * i) / rate);
  }
  return 20 * Math.log10((2 * Math.hypot(re, im)) / (0.5 * n) / amplitude + 1e-20);
}
console.log('\n48 kHz -> 16 kHz, a -6 dBFS tone: level at the output (dB; 0 is kept whole)');
console.log('  tone        where it lands        ours (soxr HQ)   WebLLM 0.2.86');
let worstPassOurs = 0, worstPassTheirs = 0, worstAliasOurs = -1e9, worstAliasTheirs = -1e9;
for (const f of [1000, 4000, 6000, 7000, 7200, 9000, 10000, 12000, 15000, 20000]) {
  const bytes = toneWav(2, 48000, [[f, 0.5]]);
  const alias = f < 8000 ? f : Math.abs(((f + 8000) % 16000) - 8000);
  const o = levelDb(ours(bytes), alias, 16000, 0.5);
  const t = levelDb(theirs(bytes), alias, 16000, 0.5);
  if (f < 8000) {
    if (f <= 7000) {
      worstPassOurs = Math.min(worstPassOurs, o);
      worstPassTheirs = Math.min(worstPassTheirs, t);
    }
  } else {
    worstAliasOurs = Math.max(worstAliasOurs, o);
    worstAliasTheirs = Math.max(worstAliasTheirs, t);
  }
  const where = f < 8000 ? `passband ${f} Hz` : `alias at ${alias} Hz`;
  console.log(`  ${String(f).padStart(5)} Hz   ${where.padEnd(20)} ${o.toFixed(2).padStart(10)}   ${t.toFixed(2).padStart(12)}`);
}
console.log(`  worst passband loss to 7 kHz: ours ${worstPassOurs.toFixed(2)} dB, WebLLM ${worstPassTheirs.toFixed(2)} dB`);
console.log(`  worst alias (tones 9-20 kHz): ours ${worstAliasOurs.toFixed(1)} dB, WebLLM ${worstAliasTheirs.toFixed(1)} dB`);

// ---- 12 MP resize ----
{
  const width = 4000, height = 3000;
  const data = new Uint8Array(width * height * 4);
  for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761) >>> 24;
  const image = { width, height, data };
  const ms = time(() => mlc.resizeImage(image, { resize: { mode: 'center_crop', height: 448, width: 448 } }));
  console.log(`\n12 MP (4000 x 3000) RGBA -> 448 x 448 center_crop bicubic, resizeImage: ${ms.toFixed(1)} ms (median of ${reps})`);
}
fs.rmSync(work, { recursive: true, force: true });
