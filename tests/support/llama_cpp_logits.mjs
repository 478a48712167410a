// Runs llama.cpp (node-llama-cpp's prebuilt libraries) on a GGUF file for the comparison tests:
// evaluates the prompt token ids one batch, keeping the raw logits at every position, then
// continues greedily (argmax of the raw logits) for N tokens, keeping the logits of every step.
//
// Usage: node llama_cpp_logits.mjs NODE_LLAMA_CPP_DIR MODEL.gguf PROMPT_IDS(comma-separated) N THREADS
//        OUT_PREFIX
// Writes OUT_PREFIX.bin (float32 [prompt + N, vocab]: row i is the logits after token i) and
// OUT_PREFIX.json ({"vocab": V, "generated": [ids]}).
import {writeFileSync} from "node:fs";
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [packageDir, modelPath, promptText, countText, threadsText, outPrefix] = process.argv.slice(2);
if (!outPrefix) {
    console.error("usage: node llama_cpp_logits.mjs NODE_LLAMA_CPP_DIR MODEL.gguf IDS N THREADS OUT_PREFIX");
    process.exit(2);
}
const prompt = promptText.split(",").map(Number);
const count = Number(countText);
const threads = Number(threadsText);
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(join(packageDir, "dist", "index.js")).href);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({
    contextSize: Math.max(256, prompt.length + count + 16),
    batchSize: Math.max(64, prompt.length),
    sequences: 1,
    threads,
});
const sequence = context.getSequence();
const nVocab = model.fileInfo.metadata[model.fileInfo.metadata.general.architecture].vocab_size;

// Dense float32 row from node-llama-cpp's Map<token, logit>; every token must be present.
function denseRow(map) {
    const row = new Float32Array(nVocab);
    row.fill(NaN);
    for (const [token, logit] of map) row[token] = logit;
    if (map.size !== nVocab) throw new Error(`llama.cpp returned ${map.size} logits, expected ${nVocab}`);
    return row;
}

function argmax(row) {
    let best = 0;
    for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
    return best;
}

const rows = [];
const evaluated = await sequence.controlledEvaluate(
    prompt.map((token) => [token, {generateNext: {logits: true}}]));
for (let i = 0; i < prompt.length; i++) rows.push(denseRow(evaluated[i].next.logits));

const generated = [];
for (let step = 0; step < count; step++) {
    const token = argmax(rows[rows.length - 1]);
    generated.push(token);
    const [out] = await sequence.controlledEvaluate([[token, {generateNext: {logits: true}}]]);
    rows.push(denseRow(out.next.logits));
}

const all = new Float32Array(rows.length * nVocab);
rows.forEach((row, i) => all.set(row, i * nVocab));
writeFileSync(`${outPrefix}.bin`, Buffer.from(all.buffer));
writeFileSync(`${outPrefix}.json`, JSON.stringify({vocab: nVocab, generated}));
await context.dispose();
await model.dispose();
await llama.dispose();
