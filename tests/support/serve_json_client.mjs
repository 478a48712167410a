// Structured output through the official `openai` npm client, as users send it.
//   node serve_json_client.mjs OPENAI_DIR BASE_URL
// sends one response_format json_schema request plain and one streamed (temperature 1, seeded)
// and prints one JSON object with each reply's content and finish_reason.
import { createRequire } from 'node:module';

const [openaiDir, baseURL] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const OpenAI = require(openaiDir).default ?? require(openaiDir);
const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });

const response_format = {
  type: 'json_schema',
  json_schema: {
    name: 'person',
    strict: true,
    schema: {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 10 },
        age: { type: 'integer' },
        role: { type: 'string', enum: ['admin', 'user'] },
      },
      required: ['name', 'age', 'role'],
      additionalProperties: false,
    },
  },
};
const request = {
  model: 'reference', temperature: 1, seed: 5, max_tokens: 300, response_format,
  messages: [{ role: 'user', content: 'Describe a person as JSON.' }],
};
const plain = await client.chat.completions.create(request);
let content = '', finish = null;
for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
  const c = chunk.choices[0];
  if (c?.delta?.content) content += c.delta.content;
  if (c?.finish_reason) finish = c.finish_reason;
}
console.log(JSON.stringify({
  plain: { content: plain.choices[0].message.content, finish: plain.choices[0].finish_reason },
  streamed: { content, finish },
}));
