// The Vercel AI SDK (npm ai 5 + @ai-sdk/openai-compatible 1, zod 4 schemas) against
// `mlc-manifest serve`, for serve_tools_test: generateObject with a zod schema (structured
// output, supportsStructuredOutputs) and generateText with a zod-described tool, required on the
// first step and the answer on the second (the SDK runs the tool and sends its result back).
//   node ai_sdk_client.mjs AI_PACKAGE_DIR PROVIDER_PACKAGE_DIR BASE_URL
// Prints {"object": {value, schema}, "text": {calls: [{name, input, schema}], results, text,
// finish, steps}}; the schemas as the SDK sent them (zod's JSON Schema), for validation.
import { createRequire } from "node:module";
import path from "node:path";

const [aiDir, providerDir, baseURL] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { generateObject, generateText, tool, stepCountIs } = require(aiDir);
const { createOpenAICompatible } = require(providerDir);
const { z } = require(path.join(aiDir, "..", "zod"));

// What went over the wire: the schemas the SDK derived from zod.
const sent = [];
const recordingFetch = async (url, init) => {
  sent.push(JSON.parse(init.body));
  return fetch(url, init);
};
const provider = createOpenAICompatible({
  name: "mlc", baseURL: baseURL + "/v1", supportsStructuredOutputs: true, fetch: recordingFetch,
});
const model = provider.chatModel("m");

const City = z.object({ city: z.string().max(12), pop: z.number().int(), founded: z.string().date().optional() });
const object = await generateObject({ model, schema: City, temperature: 1, seed: 3, maxOutputTokens: 200,
  prompt: "A city and its population, as JSON." });
const objectSchema = sent.at(-1).response_format.json_schema.schema;

const weather = tool({
  description: "The weather in a city on a day",
  inputSchema: z.object({ city: z.string().max(10), day: z.enum(["today", "tomorrow"]), hours: z.number().int().min(0).max(23) }),
  execute: async ({ city, day }) => ({ city, day, temperature: 21 }),
});
const text = await generateText({
  model, tools: { weather }, toolChoice: "required", temperature: 1, seed: 4, maxOutputTokens: 120,
  prompt: "What is the weather in Paris tomorrow?",
  providerOptions: { mlc: { parallel_tool_calls: false } },  // random weights would go on calling
  stopWhen: stepCountIs(2),
  prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: "none" } : {}),
});
const toolSchema = sent.find((b) => b.tools)?.tools[0].function.parameters;
const calls = text.steps.flatMap((s) => s.toolCalls.map((c) => ({ name: c.toolName, input: c.input, schema: toolSchema })));
console.log(JSON.stringify({
  object: { value: object.object, schema: objectSchema, finish: object.finishReason },
  text: { calls, results: text.steps.flatMap((s) => s.toolResults.map((r) => r.output)), text: text.text,
          finish: text.finishReason, steps: text.steps.length,
          second_request_has_result: sent.at(-1).messages.some((m) => m.role === "tool") },
}));
