// Drives `mlc-manifest serve` with the official `openai` npm client, as users do.
//   node serve_client.mjs OPENAI_DIR BASE_URL basic
//     text, audio (base64 WAV) and image (data: URL PNG) requests, streamed and not; prints one
//     JSON object with each reply, its streamed form and its usage.
//   node serve_client.mjs OPENAI_DIR BASE_URL text CLIENTS
//     for a text-only package: the text prompts streamed and not, then CLIENTS streaming clients
//     at once, each comparing its reply with the plain one; prints one JSON object.
//   node serve_client.mjs OPENAI_DIR BASE_URL load CLIENTS SECONDS [MODELS]
//     runs each prompt alone first (greedy), then CLIENTS concurrent streaming clients for
//     SECONDS, each comparing every stream with the alone reply; prints counts, requests/s and
//     time to first token p50/p99. MODELS (comma-separated names): requests go to each in turn,
//     each compared with that model's alone reply.
//   node serve_client.mjs OPENAI_DIR BASE_URL models
//     models.list(), then one greedy chat completion per listed model (and one naming a model
//     not served); prints one JSON object.
//   node serve_client.mjs OPENAI_DIR BASE_URL completions TOKEN_IDS
//     completions (a text prompt and the comma-separated TOKEN_IDS), plain and streamed, with
//     logprobs; chat with logprobs and top_logprobs, plain and streamed; echo refused. Prints one
//     JSON object.
//   node serve_client.mjs OPENAI_DIR BASE_URL apikey KEY
//     a server started with --api-key KEY: models.list and a chat completion with apiKey KEY, then
//     the same calls with a wrong key and with none; prints one JSON object (each refusal's
//     status, code, error class and the WWW-Authenticate header).
//   node serve_client.mjs OPENAI_DIR BASE_URL embeddings MODEL TEXTS_JSON TOKEN_IDS
//     embeddings.create for the texts as the client sends them by default (base64, decoded by the
//     client), with encoding_format float, and for the comma-separated TOKEN_IDS; `dimensions` of
//     another width refused. Prints one JSON object.
//   node serve_client.mjs OPENAI_DIR BASE_URL transcribe MODEL WAV_FILE
//     audio.transcriptions.create for the recording in each response_format (json, text, srt, vtt,
//     verbose_json), streamed (its transcript.text.delta / .done events), and one
//     audio.translations.create; prints one JSON object.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';

const [openaiDir, baseURL, mode, ...rest] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const OpenAI = require(openaiDir).default ?? require(openaiDir);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });

function wavBase64(seconds, freq) {
  const rate = 16000, n = Math.round(seconds * rate);
  const b = Buffer.alloc(44 + 2 * n);
  b.write('RIFF', 0); b.writeUInt32LE(36 + 2 * n, 4); b.write('WAVE', 8);
  b.write('fmt ', 12); b.writeUInt32LE(16, 16); b.writeUInt16LE(1, 20); b.writeUInt16LE(1, 22);
  b.writeUInt32LE(rate, 24); b.writeUInt32LE(2 * rate, 28); b.writeUInt16LE(2, 32); b.writeUInt16LE(16, 34);
  b.write('data', 36); b.writeUInt32LE(2 * n, 40);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(12000 * Math.sin(2 * Math.PI * freq * i / rate)), 44 + 2 * i);
  return b.toString('base64');
}

const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const x of buf) c = crcTable[(c ^ x) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function pngChunk(type, data) {
  const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type), data]);
  const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}
function pngDataUrl(w, h, salt) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4); ihdr[8] = 8; ihdr[9] = 2;
  const raw = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++) {
    raw[y * (1 + 3 * w)] = 0;
    for (let x = 0; x < 3 * w; x++) raw[y * (1 + 3 * w) + 1 + x] = (x * 7 + y * 13 + salt) & 255;
  }
  const png = Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(raw)), pngChunk('IEND', Buffer.alloc(0))]);
  return 'data:image/png;base64,' + png.toString('base64');
}

async function complete(messages, extra = {}) {
  const r = await client.chat.completions.create({ model: 'reference', messages, temperature: 0, max_tokens: 12, ...extra });
  return { content: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage };
}

async function stream(messages, extra = {}) {
  const start = performance.now();
  let ttft = null, content = '', finish = null, usage = null;
  const s = await client.chat.completions.create({
    model: 'reference', messages, temperature: 0, max_tokens: 12, stream: true,
    stream_options: { include_usage: true }, ...extra });
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta?.content) {
      if (ttft === null) ttft = performance.now() - start;
      content += c.delta.content;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { content, finish, usage, ttft };
}

const prompts = [
  [{ role: 'user', content: 'Hello there' }],
  [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me about the sea and the sky, at some length.' }],
  [{ role: 'user', content: [{ type: 'text', text: 'What is said here?' },
    { type: 'input_audio', input_audio: { data: wavBase64(0.5, 440), format: 'wav' } }] }],
  [{ role: 'user', content: [{ type: 'image_url', image_url: { url: pngDataUrl(40, 30, 5) } },
    { type: 'text', text: 'Describe the picture.' }] }],
  [{ role: 'user', content: 'abc' }],
  [{ role: 'user', content: [{ type: 'text', text: 'Both:' },
    { type: 'input_audio', input_audio: { data: wavBase64(0.3, 300), format: 'wav' } },
    { type: 'image_url', image_url: { url: pngDataUrl(32, 32, 77) } }] }],
];
const lengths = [4, 9, 16, 12, 7, 20];

async function basic() {
  const out = [];
  for (const [i, m] of prompts.entries()) {
    const plain = await complete(m, { max_tokens: lengths[i] });
    const streamed = await stream(m, { max_tokens: lengths[i] });
    out.push({ plain, streamed: { content: streamed.content, finish: streamed.finish, usage: streamed.usage } });
  }
  let error = null;
  try {
    await client.chat.completions.create({ model: 'reference', messages: [{ role: 'assistant', content: 'x' }] });
  } catch (e) {
    error = { status: e.status, message: e.message, type: e.error?.type ?? null };
  }
  const models = await client.models.list();
  console.log(JSON.stringify({ replies: out, error, models: models.data.map((m) => m.id) }));
}

// models.list() and one greedy chat per model; a model not served is the client's NotFoundError.
async function modelsMode() {
  const list = await client.models.list();
  const replies = {};
  for (const m of list.data) {
    const r = await client.chat.completions.create({
      model: m.id, temperature: 0, max_tokens: 12, messages: [{ role: 'user', content: 'Hello there' }] });
    replies[m.id] = { content: r.choices[0].message.content, model: r.model };
  }
  let missing = null;
  try {
    await client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] });
  } catch (e) {
    missing = { status: e.status, code: e.code, param: e.param, name: e.constructor.name, message: e.message };
  }
  console.log(JSON.stringify({ models: list.data, replies, missing }));
}

async function load(clients, seconds, models) {
  const names = models ? models.split(',') : ['reference'];
  const expected = [];  // [prompt * names.length + model]
  for (const [i, m] of prompts.entries()) {
    for (const model of names) expected.push((await complete(m, { max_tokens: lengths[i], model })).content);
  }
  const end = performance.now() + seconds * 1000;
  const ttfts = [];
  let ok = 0, failed = 0, mismatched = 0;
  const failures = [];
  const started = performance.now();
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    for (let k = c; performance.now() < end; k += clients) {
      const i = k % prompts.length, n = Math.floor(k / prompts.length) % names.length;
      const want = expected[i * names.length + n];
      try {
        const r = await stream(prompts[i], { max_tokens: lengths[i], model: names[n] });
        if (r.ttft !== null) ttfts.push(r.ttft);
        if (r.content === want) ok++;
        else { mismatched++; if (failures.length < 5) failures.push({ prompt: i, model: names[n], got: r.content, want }); }
      } catch (e) {
        failed++;
        if (failures.length < 5) failures.push({ prompt: i, error: String(e) });
      }
    }
  }));
  const elapsed = (performance.now() - started) / 1000;
  ttfts.sort((a, b) => a - b);
  const pct = (p) => ttfts.length ? ttfts[Math.min(ttfts.length - 1, Math.floor(p * ttfts.length))] : null;
  console.log(JSON.stringify({ ok, failed, mismatched, failures, seconds: elapsed,
    requests_per_s: (ok + failed + mismatched) / elapsed, ttft_p50_ms: pct(0.5), ttft_p99_ms: pct(0.99) }));
}

async function text(clients) {
  const textPrompts = [prompts[0], prompts[1], prompts[4]];
  const out = [];
  for (const m of textPrompts) {
    const plain = await complete(m, { max_tokens: 10 });
    const streamed = await stream(m, { max_tokens: 10 });
    out.push({ plain, streamed: { content: streamed.content, finish: streamed.finish, usage: streamed.usage } });
  }
  let ok = 0, failed = 0, mismatched = 0;
  const failures = [];
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const i = c % textPrompts.length;
    try {
      const r = await stream(textPrompts[i], { max_tokens: 10 });
      if (r.content === out[i].plain.content) ok++;
      else { mismatched++; failures.push({ prompt: i, got: r.content, want: out[i].plain.content }); }
    } catch (e) {
      failed++;
      failures.push({ prompt: i, error: String(e) });
    }
  }));
  const models = await client.models.list();
  console.log(JSON.stringify({ replies: out, concurrent: { ok, failed, mismatched, failures },
    models: models.data.map((m) => m.id) }));
}

// A streamed completion or chat reply gathered: its text, finish, usage and logprobs.
async function gather(s, chat) {
  let text = '', finish = null, usage = null;
  const lp = chat ? [] : { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    text += (chat ? c.delta?.content : c.text) ?? '';
    if (c.finish_reason) finish = c.finish_reason;
    if (chat && c.logprobs?.content) lp.push(...c.logprobs.content);
    if (!chat && c.logprobs) for (const k of Object.keys(lp)) lp[k].push(...c.logprobs[k]);
  }
  return { text, finish, usage, logprobs: lp };
}

async function completions(ids) {
  const base = { model: 'm', temperature: 0, max_tokens: 8 };
  const r = await client.completions.create({ ...base, prompt: 'Once upon a time' });
  const text = { plain: { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage },
    streamed: await gather(await client.completions.create({ ...base, prompt: 'Once upon a time', stream: true,
      stream_options: { include_usage: true } }), false) };
  const p = await client.completions.create({ ...base, prompt: ids, logprobs: 5 });
  const tokens = { plain: { text: p.choices[0].text, usage: p.usage, logprobs: p.choices[0].logprobs },
    streamed: await gather(await client.completions.create({ ...base, prompt: ids, logprobs: 5, stream: true,
      stream_options: { include_usage: true } }), false) };
  const messages = [{ role: 'user', content: 'Hello there' }];
  const c = await client.chat.completions.create({ ...base, messages, logprobs: true, top_logprobs: 3 });
  const chat = { plain: { text: c.choices[0].message.content, usage: c.usage, logprobs: c.choices[0].logprobs.content },
    streamed: await gather(await client.chat.completions.create({ ...base, messages, logprobs: true, top_logprobs: 3,
      stream: true, stream_options: { include_usage: true } }), true) };
  let error = null;
  try {
    await client.completions.create({ ...base, prompt: 'x', echo: true });
  } catch (e) {
    error = { status: e.status, param: e.param ?? e.error?.param ?? null, message: e.message };
  }
  console.log(JSON.stringify({ text, tokens, chat, error }));
}

async function apikey(key) {
  const keyed = new OpenAI({ baseURL: baseURL + '/v1', apiKey: key, maxRetries: 0, timeout: 120000 });
  const models = await keyed.models.list();
  const reply = await keyed.chat.completions.create({ model: 'reference', temperature: 0, max_tokens: 4,
    messages: [{ role: 'user', content: 'Hello' }] });
  const refusal = async (apiKey) => {
    try {
      const other = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 120000 });
      await other.models.list();
      return { status: 200 };
    } catch (e) {
      return { status: e.status, code: e.code ?? null, type: e.type ?? null,
               authentication_error: e instanceof OpenAI.AuthenticationError,
               www_authenticate: e.headers?.['www-authenticate'] ?? null, message: e.message };
    }
  };
  // The client sends "Authorization: Bearer <apiKey>"; an empty key sends "Bearer " alone.
  console.log(JSON.stringify({ models: models.data.map((m) => m.id), content: reply.choices[0].message.content,
    usage: reply.usage, wrong: await refusal(key + 'x'), empty: await refusal('') }));
}

async function embeddings(model, texts, ids) {
  const byDefault = await client.embeddings.create({ model, input: texts });
  const floats = await client.embeddings.create({ model, input: texts, encoding_format: 'float' });
  const tokens = await client.embeddings.create({ model, input: ids });
  let refused = null;
  try {
    await client.embeddings.create({ model, input: texts[0], dimensions: 3 });
  } catch (e) {
    refused = { status: e.status, param: e.param ?? null, bad_request: e instanceof OpenAI.BadRequestError };
  }
  const vectors = (r) => r.data.map((d) => ({ index: d.index, object: d.object, embedding: Array.from(d.embedding) }));
  console.log(JSON.stringify({ default: vectors(byDefault), float: vectors(floats), tokens: vectors(tokens),
    usage: floats.usage, model: floats.model, object: floats.object, refused }));
}

// Every form of a transcript of the recording, and a translation.
async function transcribe(model, wavFile) {
  const bytes = readFileSync(wavFile);
  const toFile = require(openaiDir).toFile ?? OpenAI.toFile;
  const file = () => toFile(bytes, 'recording.wav', { type: 'audio/wav' });
  const out = {};
  for (const format of ['json', 'text', 'srt', 'vtt', 'verbose_json']) {
    out[format] = await client.audio.transcriptions.create({ model, file: await file(), response_format: format });
  }
  const stream = await client.audio.transcriptions.create({ model, file: await file(), stream: true });
  out.deltas = [];
  for await (const event of stream) {
    if (event.type === 'transcript.text.delta') out.deltas.push(event.delta);
    else if (event.type === 'transcript.text.done') out.done = event;
  }
  out.translation = await client.audio.translations.create({ model, file: await file() });
  console.log(JSON.stringify(out));
}

if (mode === 'basic') await basic();
else if (mode === 'transcribe') await transcribe(rest[0], rest[1]);
else if (mode === 'embeddings') await embeddings(rest[0], JSON.parse(rest[1]), rest[2].split(',').map(Number));
else if (mode === 'apikey') await apikey(rest[0]);
else if (mode === 'completions') await completions(rest[0].split(',').map(Number));
else if (mode === 'text') await text(Number(rest[0]));
else if (mode === 'load') await load(Number(rest[0]), Number(rest[1]), rest[2]);
else if (mode === 'models') await modelsMode();
else { console.error('unknown mode ' + mode); process.exit(2); }
