// Runs @mlc-ai/web-tokenizers (the tokenizer library WebLLM uses) for the tokenizer tests and
// benchmark. LIB.cjs is the package's lib/index.js copied to a .cjs name (the package declares
// "type": "module" but ships a UMD bundle).
//   node web_tokenizers.cjs LIB.cjs
//     reads request lines on stdin and answers each with one line:
//       {"load": FILE, "sentencepiece": BOOL} -> {"vocab_size": N}   (later requests use it)
//       {"text": T}                           -> {"ids": encode(T), "decoded": decode(ids)}
//       {"decode": [ids]}                     -> {"decoded": decode(ids)}
//       {"id_to_token": [ids]}                -> {"tokens": [idToToken(id), ...]}
//   node web_tokenizers.cjs LIB.cjs --bench (--json|--sentencepiece) FILE TEXT_FILE ROUNDS
//     encodes each paragraph of TEXT_FILE (split on blank lines) ROUNDS times and prints
//     {"bytes": B, "seconds": S, "tokens": N} for the fastest round.
'use strict';
const fs = require('fs');
const readline = require('readline');

function arrayBufferOf(file) {
  const bytes = fs.readFileSync(file);
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
}

async function load(Tokenizer, file, sentencepiece) {
  const buffer = arrayBufferOf(file);
  return sentencepiece ? Tokenizer.fromSentencePiece(buffer) : Tokenizer.fromJSON(buffer);
}

async function answer(state, request) {
  if (typeof request.load === 'string') {
    if (state.tok) state.tok.dispose();
    state.tok = await load(state.Tokenizer, request.load, request.sentencepiece === true);
    return { vocab_size: state.tok.getVocabSize() };
  }
  const tok = state.tok;
  if (!tok) throw new Error('no tokenizer loaded');
  if (typeof request.text === 'string') {
    const ids = tok.encode(request.text);
    return { ids: Array.from(ids), decoded: tok.decode(ids) };
  }
  if (Array.isArray(request.decode)) return { decoded: tok.decode(Int32Array.from(request.decode)) };
  if (Array.isArray(request.id_to_token)) return { tokens: request.id_to_token.map((id) => tok.idToToken(id)) };
  throw new Error('unknown request: ' + JSON.stringify(request));
}

async function serve(Tokenizer) {
  const state = { Tokenizer, tok: null };
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  const out = [];
  for await (const line of lines) {
    if (line.trim() === '') continue;
    out.push(JSON.stringify(await answer(state, JSON.parse(line))));
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}

async function bench(Tokenizer, kind, file, textFile, rounds) {
  const tok = await load(Tokenizer, file, kind === '--sentencepiece');
  const text = fs.readFileSync(textFile, 'utf8');
  const paragraphs = text.split('\n\n');
  let best = Infinity;
  let tokens = 0;
  for (let r = 0; r < rounds; ++r) {
    const start = process.hrtime.bigint();
    let n = 0;
    for (const p of paragraphs) n += tok.encode(p).length;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    best = Math.min(best, seconds);
    tokens = n;
  }
  process.stdout.write(JSON.stringify({ bytes: Buffer.byteLength(text, 'utf8'), seconds: best, tokens }) + '\n');
}

async function main() {
  const [lib, mode, kind, file, textFile, rounds] = process.argv.slice(2);
  if (!lib) {
    process.stderr.write('usage: web_tokenizers.cjs LIB.cjs [--bench (--json|--sentencepiece) FILE TEXT ROUNDS]\n');
    process.exit(2);
  }
  const { Tokenizer } = require(lib);
  if (mode === '--bench') await bench(Tokenizer, kind, file, textFile, Number(rounds || 3));
  else await serve(Tokenizer);
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
