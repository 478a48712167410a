// llama.cpp's side of bench/cpu_model_bench.cc: loads a GGUF with node-llama-cpp's prebuilt CPU
// libraries, warms up (a short prompt and two tokens, then a cleared history), then times one
// prefill of the prompt ids in a single batch and a greedy decode of N tokens, one per step.
//
// Usage: node llama_cpp_speed.mjs NODE_LLAMA_CPP_DIR MODEL.gguf PROMPT_IDS(comma-separated) N THREADS
// Prints one JSON object: {"prefill_ms", "prefill_tokens", "decode_ms", "decode_steps"}.
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [packageDir, modelPath, promptText, countText, threadsText] = process.argv.slice(2);
if (!threadsText) {
    console.error("usage: node llama_cpp_speed.mjs NODE_LLAMA_CPP_DIR MODEL.gguf IDS N THREADS");
    process.exit(2);
}
const prompt = promptText.split(",").map(Number);
const count = Number(countText);
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(join(packageDir, "dist", "index.js")).href);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
// An explicit thread count: node-llama-cpp's default makes every evaluation far slower.
const context = await model.createContext({
    contextSize: prompt.length + count + 64,
    batchSize: prompt.length,
    sequences: 1,
    threads: Number(threadsText),
});
const sequence = context.getSequence();

async function decode(first, steps) {
    let done = 0;
    if (steps <= 0) return 0;
    for await (const token of sequence.evaluate([first], {temperature: 0})) {
        void token;
        if (++done >= steps) break;
    }
    return done;
}

await sequence.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 8));
await decode(prompt[8], 2);
await sequence.clearHistory();

let start = performance.now();
await sequence.evaluateWithoutGeneratingNewTokens(prompt.slice(0, prompt.length - 1));
const prefillMs = performance.now() - start;
start = performance.now();
const steps = await decode(prompt[prompt.length - 1], count);
const decodeMs = performance.now() - start;

console.log(JSON.stringify({prefill_ms: prefillMs, prefill_tokens: prompt.length - 1,
                            decode_ms: decodeMs, decode_steps: steps}));
await context.dispose();
await model.dispose();
await llama.dispose();
