// The openai client's zod helpers against `mlc-manifest serve`, for serve_tools_test:
// chat.completions.parse with zodResponseFormat (zod 3; the helper writes OpenAPI's "nullable"
// and string formats) and with a zodFunction tool, whose parsed_arguments the client fills.
//   NODE_PATH=ZOD_PREFIX/node_modules node openai_zod_client.mjs OPENAI_PACKAGE_DIR BASE_URL
// Prints {parsed, finish, schema, tool_args, tool_schema, tool_finish}.
import { createRequire } from "node:module";
import path from "node:path";

const [openaiDir, baseURL] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const OpenAI = require(openaiDir).default ?? require(openaiDir);
const { zodResponseFormat, zodFunction } = require(path.join(openaiDir, "helpers", "zod"));
const { z } = require("zod");
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "none" });

const City = z.object({
  city: z.string().max(12), pop: z.number().int(), tags: z.array(z.enum(["big", "old"])).max(2),
  mayor: z.string().max(8).nullable(), seen: z.string().datetime(),
});
const format = zodResponseFormat(City, "city");
const parsed = await client.beta.chat.completions.parse({
  model: "m", messages: [{ role: "user", content: "A city." }], response_format: format,
  temperature: 1, seed: 2, max_tokens: 300 });
const Weather = z.object({ city: z.string().max(10), unit: z.enum(["c", "f"]), days: z.number().int().nullable() });
const weather = zodFunction({ name: "weather", parameters: Weather });
const withTool = await client.beta.chat.completions.parse({
  model: "m", messages: [{ role: "user", content: "Weather?" }], tools: [weather], tool_choice: "required",
  parallel_tool_calls: false, temperature: 1, seed: 3, max_tokens: 120 });
console.log(JSON.stringify({
  parsed: parsed.choices[0].message.parsed, finish: parsed.choices[0].finish_reason, schema: format.json_schema.schema,
  tool_args: withTool.choices[0].message.tool_calls[0].function.parsed_arguments,
  tool_schema: weather.function.parameters, tool_finish: withTool.choices[0].finish_reason,
}));
