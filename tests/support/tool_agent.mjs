// An agent loop through the official openai client against `mlc-manifest serve`, for
// serve_tools_test: the model must call a tool (tool_choice "required"), the client runs each
// call and sends its result back with the assistant's calls, and the model answers
// (tool_choice "none"); once with whole replies and once streamed, the stream's calls assembled
// by the client's own stream helper (finalChatCompletion).
//   node tool_agent.mjs OPENAI_PACKAGE_DIR BASE_URL
// Prints {"plain": RUN, "streamed": RUN}, RUN = {finish, calls: [{id, name, arguments}],
// answer, answer_finish}.
import { createRequire } from "node:module";

const [openaiDir, baseURL] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const OpenAI = require(openaiDir).default ?? require(openaiDir);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "none" });

export const tools = [
  { type: "function", function: { name: "get_weather", description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 },
      unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "add", description: "Adds two integers",
    parameters: { type: "object", properties: { a: { type: "integer", minimum: -100, maximum: 100 },
      b: { type: "integer", minimum: -100, maximum: 100 } }, required: ["a", "b"], additionalProperties: false } } },
];

function run(call) {
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === "add") return String(args.a + args.b);
  return JSON.stringify({ city: args.city, temperature: 21, unit: args.unit });
}

async function loop(streamed) {
  const messages = [{ role: "user", content: "What is the weather in Paris, and 2 + 3?" }];
  const first = { model: "m", messages, tools, tool_choice: "required", parallel_tool_calls: false,
    temperature: 1, seed: 5, max_tokens: 160 };
  const reply = streamed
    ? await client.beta.chat.completions.stream({ ...first, stream: true }).finalChatCompletion()
    : await client.chat.completions.create(first);
  const choice = reply.choices[0];
  const calls = choice.message.tool_calls ?? [];
  messages.push({ role: "assistant", content: choice.message.content ?? null, tool_calls: calls });
  for (const call of calls) messages.push({ role: "tool", tool_call_id: call.id, content: run(call) });
  const second = { model: "m", messages, tools, tool_choice: "none", temperature: 1, seed: 6, max_tokens: 8 };
  const answer = streamed
    ? await client.beta.chat.completions.stream({ ...second, stream: true }).finalChatCompletion()
    : await client.chat.completions.create(second);
  return {
    finish: choice.finish_reason,
    calls: calls.map((c) => ({ id: c.id, type: c.type, name: c.function.name, arguments: c.function.arguments })),
    answer: answer.choices[0].message.content,
    answer_finish: answer.choices[0].finish_reason,
    answer_calls: answer.choices[0].message.tool_calls ?? [],
  };
}

const out = { plain: await loop(false), streamed: await loop(true) };
console.log(JSON.stringify(out));
