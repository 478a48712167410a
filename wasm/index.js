// mlc-manifest's frontend for browsers and Node: the WebAssembly build of the library
// (mlc_manifest.mjs, cmake/wasm.cmake) behind a JavaScript API over its C API
// (include/mlc_manifest/mlc_manifest.h). Every function is synchronous once the module has loaded
// (this file awaits it at the top level). A failure throws an MlcError with the first error of
// the C API's list as code ("invalid", "usage", "io", ...), document, path (JSON Pointer or
// position) and message, and the whole list as errors.
import createMlcManifest from './mlc_manifest.mjs';

const M = await createMlcManifest();
const C = new Proxy({}, { get: (_, name) => M[`_mlc_${name}`] });

export class MlcError extends Error {
  constructor(errors, status) {
    // Calls that keep no error list (tokenize, detokenize) give their status alone.
    const name = M.UTF8ToString(C.status_name(status));
    const first = errors[0] ?? { code: name, document: '', path: '', message: `failed: ${name}` };
    super(first.message);
    this.name = 'MlcError';
    this.code = first.code;
    this.status = status;
    this.document = first.document;
    this.path = first.path;
    this.errors = errors;
  }
}

// ---- Memory helpers ----

const str = (ptr) => (ptr ? M.UTF8ToString(ptr) : null);

// Runs f with the arguments allocated in the module's heap (freed afterwards).
function withHeap(f) {
  const owned = [];
  const alloc = (n) => {
    const p = M._malloc(Math.max(1, n));
    if (!p) throw new MlcError([{ code: 'internal', document: '', path: '', message: 'out of memory' }], 10);
    owned.push(p);
    return p;
  };
  const bytes = (data) => {
    const u8 = typeof data === 'string' ? new TextEncoder().encode(data) : toU8(data);
    const p = alloc(u8.length + 1);
    M.HEAPU8.set(u8, p);
    M.HEAPU8[p + u8.length] = 0;
    return [p, u8.length];
  };
  const cstr = (s) => (s == null ? 0 : bytes(String(s))[0]);
  try {
    return f({ alloc, bytes, cstr });
  } finally {
    for (const p of owned) M._free(p);
  }
}

function toU8(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('expected an ArrayBuffer, a typed array or a string');
}

// 64-bit integers as two 32-bit words (the module is built without BigInt integration).
function setI64(p, v) {
  M.HEAP32[p >> 2] = v | 0;
  M.HEAP32[(p >> 2) + 1] = Math.floor(v / 4294967296) | 0;
}
const setI32 = (p, v) => { M.HEAP32[p >> 2] = v | 0; };
const setPtr = setI32;

// The handle's errors (mlc_error: int code, then code_name, document, path, message pointers).
function errorsOf(kind, handle) {
  const list = C[`${kind}_errors`](handle);
  const n = C.errors_count(list);
  const out = [];
  withHeap(({ alloc }) => {
    const e = alloc(20);
    for (let i = 0; i < n; i++) {
      C.errors_get(list, i, e);
      const w = e >> 2;
      out.push({ code: str(M.HEAPU32[w + 1]), document: str(M.HEAPU32[w + 2]) ?? '',
                 path: str(M.HEAPU32[w + 3]) ?? '', message: str(M.HEAPU32[w + 4]) ?? '' });
    }
  });
  return out;
}

function check(kind, handle, status) {
  if (status !== 0) throw new MlcError(errorsOf(kind, handle), status);
}

// Makes a handle of `kind`, runs f(handle), frees it unless f keeps it (returns keep: true).
function withHandle(kind, f) {
  const h = C[`${kind}_init`]();
  if (!h) throw new MlcError([], 10);
  try {
    return f(h);
  } finally {
    C[`${kind}_free`](h);
  }
}

// ---- MEMFS: a package or tokenizer folder handed over as { relative path: bytes or text } ----

let folderCount = 0;
function writeFolder(files) {
  const dir = `/mlc/${++folderCount}`;
  M.FS.mkdirTree(dir);
  for (const [name, data] of Object.entries(files)) {
    if (name.split('/').some((part) => part === '..' || part === '')) {
      throw new MlcError([{ code: 'usage', document: name, path: '', message: 'expected a relative path inside the folder' }], 2);
    }
    const path = `${dir}/${name}`;
    M.FS.mkdirTree(path.slice(0, path.lastIndexOf('/')));
    M.FS.writeFile(path, typeof data === 'string' ? data : toU8(data));
  }
  return dir;
}

function removeFolder(dir) {
  const walk = (p) => {
    for (const name of M.FS.readdir(p)) {
      if (name === '.' || name === '..') continue;
      const child = `${p}/${name}`;
      if (M.FS.isDir(M.FS.stat(child).mode)) walk(child); else M.FS.unlink(child);
    }
    M.FS.rmdir(p);
  };
  walk(dir);
}

function inFolder(files, f) {
  const dir = writeFolder(files);
  try {
    return f(dir);
  } finally {
    removeFolder(dir);
  }
}

const text = (doc) => (typeof doc === 'string' ? doc : JSON.stringify(doc));

// ---- Documents ----

export const version = str(C.version());

function parseDocument(kind, doc) {
  return withHandle(kind, (h) => withHeap(({ bytes }) => {
    const [p, n] = bytes(text(doc));
    check(kind, h, C[`${kind}_parse`](h, p, n));
    return { interfaceId: str(C[`${kind}_interface_id`](h)),
             parameterSchemaId: str(C[`${kind}_parameter_schema_id`](h)),
             json: JSON.parse(str(C[`${kind}_json`](h))) };
  }));
}

// Parses and validates a model package document (SPEC 1): its ids and normalized JSON.
export function validatePackage(doc) { return parseDocument('package', doc); }

// Parses and validates a compiled-program document (SPEC 2).
export function validateProgram(doc) { return parseDocument('program', doc); }

// Binds a package to a compiled program (SPEC 5): the resolved contract, executor, pair and the
// functions the runtime must export. options: { task, weightsParameterSchemaId, device }.
export function bind(packageDoc, programDoc, options = {}) {
  return withHandle('package', (pkg) => withHandle('program', (prog) => withHandle('binding', (b) =>
    withHeap(({ bytes, cstr, alloc }) => {
      const [pp, pn] = bytes(text(packageDoc));
      check('package', pkg, C.package_parse(pkg, pp, pn));
      const [qp, qn] = bytes(text(programDoc));
      check('program', prog, C.program_parse(prog, qp, qn));
      const params = alloc(12);
      setPtr(params, cstr(options.task ?? 'chat.completions'));
      setPtr(params + 4, cstr(options.weightsParameterSchemaId));
      setPtr(params + 8, cstr(options.device));
      check('binding', b, C.bind(b, pkg, prog, params));
      const functions = [];
      for (let i = 0; i < C.binding_function_count(b); i++) functions.push(str(C.binding_function(b, i)));
      return { contract: JSON.parse(str(C.binding_json(b))), executor: str(C.binding_executor(b)),
               pair: str(C.binding_pair(b)), functions };
    }))));
}

// ---- Audio (SPEC 6.1) ----

// Decodes a recording (WAV of any sample format, extensible included; AIFF, ... as libsndfile
// reads them without external codecs) to the processor's mono float32 samples.
// processor: an audio_decode processor ({ sample_rate_hz, min_samples?, max_samples }), plus
// very_high_quality for soxr's VHQ.
export function decodeAudio(data, processor = {}) {
  return withHandle('audio', (h) => withHeap(({ bytes, alloc }) => {
    const [p, n] = bytes(data);
    const params = alloc(32);
    setI64(params, processor.sample_rate_hz ?? 16000);
    setI64(params + 8, processor.min_samples ?? 1);
    setI64(params + 16, processor.max_samples ?? 480000);
    setI32(params + 24, processor.very_high_quality ? 1 : 0);
    check('audio', h, C.audio_decode_memory(h, p, n, params));
    const count = alloc(4);
    const samples = C.audio_samples(h, count);
    const size = M.HEAPU32[count >> 2];
    return new Float32Array(M.HEAPF32.buffer, samples, size).slice();
  }));
}

// ---- Images (SPEC 6.2) ----

const kModes = { stretch: 0, center_crop: 1 };
const kFilters = { bicubic: 0, bilinear: 1, lanczos: 2 };

function imageParams(alloc, processor, options) {
  const resize = processor.resize ?? processor;
  const mode = kModes[resize.mode ?? 'stretch'];
  const filter = kFilters[options.filter ?? 'bicubic'];
  const dtype = options.dtype === 'uint32' ? 1 : 0;
  const p = alloc(48);
  setI64(p, resize.height ?? 0);
  setI64(p + 8, resize.width ?? 0);
  setI32(p + 16, mode ?? -1);
  setI32(p + 20, dtype);
  setI32(p + 24, filter ?? -1);
  setI64(p + 32, options.maxPixels ?? 100000000);
  setI32(p + 40, 0);
  return [p, dtype];
}

function imageResult(h, dtype) {
  return withHeap(({ alloc }) => {
    const nbytes = alloc(4);
    C.image_copy(h, 0, 0, nbytes);
    const size = M.HEAPU32[nbytes >> 2];
    const out = alloc(size);
    check('image', h, C.image_copy(h, out, size, nbytes));
    const copy = M.HEAPU8.slice(out, out + size);
    return dtype === 1 ? new Uint32Array(copy.buffer) : copy;
  });
}

// Resizes decoded pixels (an ImageData, or { width, height, data: RGBA bytes }) as the
// processor says ({ resize: { mode, height, width } } or { mode, height, width }), with Pillow's
// conventions: the [height, width, 3] pixels, uint8 or (options.dtype "uint32") widened.
export function resizeImage(image, processor, options = {}) {
  return withHandle('image', (h) => withHeap(({ bytes, alloc }) => {
    const [rgba, n] = bytes(image.data);
    if (n !== image.width * image.height * 4) {
      throw new MlcError([{ code: 'usage', document: '', path: '', message: 'expected width x height x 4 bytes of RGBA' }], 2);
    }
    const [params, dtype] = imageParams(alloc, processor, options);
    check('image', h, C.image_resize_rgba(h, rgba, image.width, 0, image.height, 0, params));
    return imageResult(h, dtype);
  }));
}

// Decodes an image file (JPEG; other formats need the libvips module, not in this build) and
// resizes it as resizeImage does.
export function decodeImage(data, processor, options = {}) {
  return withHandle('image', (h) => withHeap(({ bytes, alloc }) => {
    const [p, n] = bytes(data);
    const [params, dtype] = imageParams(alloc, processor, options);
    check('image', h, C.image_decode_memory(h, p, n, params));
    return imageResult(h, dtype);
  }));
}

// ---- Tokenizers (SPEC 8) ----

export class Tokenizer {
  // files: the tokenizer folder's files ({ "tokenizer.json": text, ... }).
  constructor(files) {
    this.handle = C.tokenizer_init();
    const dir = writeFolder(files);
    try {
      withHeap(({ cstr }) => check('tokenizer', this.handle, C.tokenizer_load(this.handle, cstr(dir))));
    } catch (e) {
      C.tokenizer_free(this.handle);
      this.handle = 0;
      throw e;
    } finally {
      removeFolder(dir);
    }
  }

  get vocabSize() { return C.tokenizer_vocab_size(this.handle); }

  encode(input) {
    return withHeap(({ bytes, alloc }) => {
      const [p, n] = bytes(input);
      const count = alloc(4);
      let status = C.tokenize(this.handle, p, n, 0, 0, count);
      if (status !== 0 && status !== 8) check('tokenizer', this.handle, status);
      const size = M.HEAPU32[count >> 2];
      const ids = alloc(size * 4);
      check('tokenizer', this.handle, C.tokenize(this.handle, p, n, ids, size, count));
      return new Int32Array(M.HEAP32.buffer, ids, size).slice();
    });
  }

  decode(ids) {
    return withHeap(({ alloc }) => {
      const p = alloc(ids.length * 4);
      M.HEAP32.set(Int32Array.from(ids), p >> 2);
      const length = alloc(4);
      let status = C.detokenize(this.handle, p, ids.length, 0, 0, length);
      if (status !== 0 && status !== 8) check('tokenizer', this.handle, status);
      const size = M.HEAPU32[length >> 2] + 1;
      const out = alloc(size);
      check('tokenizer', this.handle, C.detokenize(this.handle, p, ids.length, out, size, length));
      return M.UTF8ToString(out);
    });
  }

  free() {
    C.tokenizer_free(this.handle);
    this.handle = 0;
  }
}

// ---- Prompts and prefill plans (SPEC 6, 7) ----

// The prompt of chat messages under the package's conversation template and tokenizer.
// files: the package folder's small files (mlc-chat-config.json, the tokenizer, the manifest).
export function buildPrompt(files, messages) {
  return inFolder(files, (dir) => withHandle('prompt', (h) => withHeap(({ bytes, cstr }) => {
    const [p, n] = bytes(text(messages));
    check('prompt', h, C.prompt_build(h, cstr(dir), p, n));
    return JSON.parse(str(C.prompt_json(h)));
  })));
}

// The prefill plan of an OpenAI-style request for the package (the chunks prefill is fed with).
// options: { program: compiled-program document, task, kvLength }.
export function planPrefill(files, request, options = {}) {
  const all = options.program ? { ...files, '.mlc-wasm-program.json': text(options.program) } : files;
  return inFolder(all, (dir) => withHandle('plan', (h) => withHeap(({ bytes, cstr, alloc }) => {
    const [p, n] = bytes(text(request));
    const params = alloc(24);
    setPtr(params, options.program ? cstr(`${dir}/.mlc-wasm-program.json`) : 0);
    setPtr(params + 4, cstr(options.task ?? 'chat.completions'));
    setPtr(params + 8, 0);
    setI64(params + 16, options.kvLength ?? 0);
    check('plan', h, C.plan_compute(h, cstr(dir), p, n, params));
    return JSON.parse(str(C.plan_json(h)));
  })));
}
