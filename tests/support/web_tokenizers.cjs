// Runs @mlc-ai/web-tokenizers (the reference tokenizer WebLLM uses) for the tokenizer tests and
// benchmark. Usage:
//   node web_tokenizers.cjs LIB.cjs (--json FILE | --sentencepiece FILE) [--bench TEXT_FILE ROUNDS]
// LIB.cjs is the package's lib/index.js copied to a .cjs name (the package says "type": "module"
// but ships a UMD bundle). Without --bench: prints {"vocab_size": N} first, then for each stdin line
//   {"text": T}          -> {"ids": encode(T), "decoded": decode(encode(T))}
//   {"decode": [ids]}    -> {"decoded": decode(ids)}
//   {"id_to_token": [ids]} -> {"tokens": [idToToken(id)...]}
// With --bench: encodes each paragraph of TEXT_FILE (split on blank lines) ROUNDS times and prints
//   {"bytes": B, "seconds": S, "tokens": N} for the fastest round.
'use strict';
const fs = require('fs');
const readline = require('readline');

async function load(lib, kind, file) {
  const { Tokenizer } = require(lib);
  const bytes = fs.readFileSync(file);
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  return kind === '--json' ? Tokenizer.fromJSON(buffer) : Tokenizer.fromSentencePiece(buffer);
}

function answer(tok, request) {
  if (typeof request.text === 'string') {
    const ids = tok.encode(request.text);
    return { ids: Array.from(ids), decoded: tok.decode(ids) };
  }
  if (Array.isArray(request.decode)) return { decoded: tok.decode(Int32Array.from(request.decode)) };
  if (Array.isArray(request.id_to_token)) return { tokens: request.id_to_token.map((id) => tok.idToToken(id)) };
  throw new Error('unknown request: ' + JSON.stringify(request));
}

async function serve(tok) {
  process.stdout.write(JSON.stringify({ vocab_size: tok.getVocabSize() }) + '\n');
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  const out = [];
  for await (const line of lines) {
    if (line.trim() === '') continue;
    out.push(JSON.stringify(answer(tok, JSON.parse(line))));
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}

function bench(tok, textFile, rounds) {
  const text = fs.readFileSync(textFile, 'utf8');
  const paragraphs = text.split(/\n\n/);
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
  const [lib, kind, file, mode, benchFile, rounds] = process.argv.slice(2);
  if (!lib || (kind !== '--json' && kind !== '--sentencepiece') || !file) {
    process.stderr.write('usage: web_tokenizers.cjs LIB.cjs (--json|--sentencepiece) FILE [--bench TEXT ROUNDS]\n');
    process.exit(2);
  }
  const tok = await load(lib, kind, file);
  if (mode === '--bench') bench(tok, benchFile, Number(rounds || 3));
  else await serve(tok);
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
