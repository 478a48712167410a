// Runs WebLLM 0.2.86's own conversation code, what its manifest path feeds a model, for the
// conversation tests. LIB.mjs is the package's lib/index.js with one line appended by the test
// that exports two internals: getConversationFromChatCompletionRequest as __fromRequest and
// Role as __Role.
//   node web_llm_prompt.mjs LIB.mjs
//     reads lines {"conv_template": {...}, "messages": [...]} on stdin and answers each with
//     {"segments": [text, "<image>", "<audio>", ...]} (the first round: every message, then the
//     reply header, as forwardPrefill builds it) or {"error": message}.
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const lib = await import(pathToFileURL(process.argv[2]).href);

function segmentsOf(request) {
  const config = { conv_template: request.conv_template, conv_config: {} };
  const conversation = lib.__fromRequest({ messages: request.messages }, config, true);
  conversation.appendReplyHeader(lib.__Role.assistant);
  return conversation.getArtifactPromptSegments().map((s) => {
    if (typeof s === 'string') return s;
    return s.type === 'image_url' ? '<image>' : '<audio>';
  });
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === '') continue;
  let answer;
  try {
    answer = { segments: segmentsOf(JSON.parse(line)) };
  } catch (e) {
    answer = { error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}
