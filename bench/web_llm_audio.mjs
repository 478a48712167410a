// Times WebLLM 0.2.86's own audio frontend (decodeAudioInput: WAV parse, channel mix, its
// windowed-sinc low-pass and linear resampler) for audio_bench, in Node. LIB.mjs is the package's
// lib/index.js with one line appended by the bench that exports decodeAudioInput as
// __decodeAudioInput.
//   node web_llm_audio.mjs LIB.mjs IN.wav RATE REPS
//     prints {"median_ms": ..., "median_cpu_ms": ..., "samples": ...}: medians over REPS calls
//     (after one warm-up) of the call on the WAV as base64, as an OpenAI-style input_audio
//     carries it; wall time and this process's CPU time.
import fs from 'node:fs';
import { pathToFileURL } from 'node:url';

const lib = await import(pathToFileURL(process.argv[2]).href);
const data = fs.readFileSync(process.argv[3]).toString('base64');
const rate = Number(process.argv[4]);
const reps = Number(process.argv[5] || 5);
const processor = { kind: 'audio_decode', sample_rate_hz: rate, channels: 1, min_samples: 1,
                    max_samples: 1 << 30 };
let samples = lib.__decodeAudioInput({ format: 'wav', data }, processor).length;
const times = [], cpu = [];
for (let i = 0; i < reps; ++i) {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  samples = lib.__decodeAudioInput({ format: 'wav', data }, processor).length;
  const c = process.cpuUsage(c0);
  times.push(performance.now() - t0);
  cpu.push((c.user + c.system) / 1000);
}
const median = (v) => v.sort((a, b) => a - b)[v.length >> 1];
process.stdout.write(JSON.stringify({ median_ms: median(times), median_cpu_ms: median(cpu), samples }) + '\n');
