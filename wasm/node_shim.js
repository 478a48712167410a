// Prepended to mlc_manifest.mjs (--extern-pre-js): emscripten 3.1.6's ES module output still uses
// CommonJS's `require` and `__dirname` when it runs under Node; an ES module has neither, so they
// are made here from import.meta.url. In a browser both stay undefined, as the output expects.
const mlcUnderNode = typeof process === 'object' && typeof process.versions === 'object' &&
  typeof process.versions.node === 'string';
var require = mlcUnderNode ? (await import('node:module')).createRequire(import.meta.url) : undefined;
var __dirname = mlcUnderNode ? require('node:path').dirname(require('node:url').fileURLToPath(import.meta.url)) : undefined;
