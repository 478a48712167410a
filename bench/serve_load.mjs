// Serving under load, one `serve` build against another on the same package (issue 45's "the load
// test's figures unchanged"): each round starts server A and server B in turn (alternating which
// goes first), sends --requests short chat completions from --clients concurrent keep-alive
// clients to each, and records requests per second and the median / 95th-percentile latency.
// Prints each side's medians over the rounds, their spread, and the ratio B / A of requests per
// second per round (median and spread). Nothing is downloaded; the package is any folder `serve`
// takes (e.g. `mlc-manifest reference-model DIR`).
// Usage: node bench/serve_load.mjs --a BIN_A --b BIN_B --package DIR
//          [--rounds 5] [--clients 16] [--requests 96] [--max-tokens 8] [--serve-arg ARG]...
import { spawn } from 'node:child_process';

function parseArgs(argv) {
  const o = { rounds: 5, clients: 16, requests: 96, maxTokens: 8, serveArgs: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (v === undefined) throw new Error(`${k} needs a value`);
    if (k === '--a') o.a = v;
    else if (k === '--b') o.b = v;
    else if (k === '--package') o.pkg = v;
    else if (k === '--rounds') o.rounds = +v;
    else if (k === '--clients') o.clients = +v;
    else if (k === '--requests') o.requests = +v;
    else if (k === '--max-tokens') o.maxTokens = +v;
    else if (k === '--serve-arg') o.serveArgs.push(v);
    else throw new Error(`unknown option ${k}`);
  }
  if (!o.a || !o.b || !o.pkg) throw new Error('usage: --a BIN --b BIN --package DIR');
  return o;
}

// Starts `bin serve pkg --port 0` and resolves with { child, port } once it prints its address.
function startServer(bin, pkg, extra) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ['serve', pkg, '--port', '0', ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => reject(new Error(`${bin} did not start:\n${log}`)), 120000);
    child.stderr.on('data', (d) => {
      log += d;
      const m = /:(\d+)\n/.exec(log);
      if (m) {
        clearTimeout(timer);
        child.stderr.removeAllListeners('data');
        child.stderr.resume();
        resolve({ child, port: +m[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`${bin} exited ${code}:\n${log}`)));
  });
}

async function stopServer(child) {
  const done = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await done;
}

const median = (xs) => {
  const s = [...xs].sort((p, q) => p - q);
  const n = s.length;
  return n % 2 ? s[(n - 1) >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const quantile = (xs, q) => [...xs].sort((p, r) => p - r)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

// --requests chat completions from --clients clients (each waits for its reply before the next).
async function load(port, o) {
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  let next = 0;
  const latencies = [];
  const client = async (c) => {
    for (let i = next++; i < o.requests; i = next++) {
      const body = JSON.stringify({
        messages: [{ role: 'user', content: `request ${i} from client ${c}: tell me a story` }],
        max_tokens: o.maxTokens,
        temperature: 0,
      });
      const t0 = performance.now();
      const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      const text = await r.text();
      if (r.status !== 200) throw new Error(`status ${r.status}: ${text}`);
      latencies.push(performance.now() - t0);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: o.clients }, (_, c) => client(c)));
  const seconds = (performance.now() - t0) / 1000;
  return { rps: o.requests / seconds, p50: median(latencies), p95: quantile(latencies, 0.95) };
}

async function measure(bin, o) {
  const { child, port } = await startServer(bin, o.pkg, o.serveArgs);
  try {
    await load(port, { ...o, requests: Math.min(o.clients, o.requests) });  // warm-up
    return await load(port, o);
  } finally {
    await stopServer(child);
  }
}

const o = parseArgs(process.argv.slice(2));
const runs = { a: [], b: [] };
for (let round = 0; round < o.rounds; ++round) {
  const order = round % 2 ? ['b', 'a'] : ['a', 'b'];
  for (const side of order) runs[side].push(await measure(o[side], o));
  const [a, b] = [runs.a.at(-1), runs.b.at(-1)];
  console.log(`round ${round + 1}: A ${a.rps.toFixed(2)} req/s (p50 ${a.p50.toFixed(0)} ms), ` +
              `B ${b.rps.toFixed(2)} req/s (p50 ${b.p50.toFixed(0)} ms), B/A ${(b.rps / a.rps).toFixed(3)}`);
}
const summary = (xs, key) => `${median(xs.map((x) => x[key])).toFixed(2)} ` +
    `(${Math.min(...xs.map((x) => x[key])).toFixed(2)}-${Math.max(...xs.map((x) => x[key])).toFixed(2)})`;
for (const side of ['a', 'b']) {
  console.log(`${side.toUpperCase()} ${o[side]}: req/s ${summary(runs[side], 'rps')}, ` +
              `p50 ms ${summary(runs[side], 'p50')}, p95 ms ${summary(runs[side], 'p95')}`);
}
const ratios = runs.a.map((a, i) => runs.b[i].rps / a.rps);
console.log(`B/A requests per second: median ${median(ratios).toFixed(3)}, ` +
            `spread ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)} ` +
            `(${o.rounds} rounds, ${o.clients} clients, ${o.requests} requests, max_tokens ${o.maxTokens})`);
