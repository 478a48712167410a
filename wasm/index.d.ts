// Types of mlc-manifest's WebAssembly frontend (index.js).

/** One error of the C API: code is its status name. */
export interface MlcErrorItem {
  code: 'invalid' | 'usage' | 'io' | 'unsupported' | 'limit' | 'exists' | 'argument' | 'buffer' | 'state' | 'internal' | string;
  /** The file or document the path points into ("" when unknown). */
  document: string;
  /** A JSON Pointer ("" is the whole document) or a file position. */
  path: string;
  message: string;
}

/** Thrown by every function on failure: the first error's fields (message included), the C
 * API's status number, and the whole list. */
export class MlcError extends Error {
  code: MlcErrorItem['code'];
  status: number;
  document: string;
  path: string;
  errors: MlcErrorItem[];
}

export const version: string;

export type JsonDocument = string | object;
export type Bytes = ArrayBuffer | ArrayBufferView;
/** A folder's files by relative path: bytes or text. */
export type Files = Record<string, Bytes | string>;

export interface ValidatedDocument {
  interfaceId: string | null;
  parameterSchemaId: string | null;
  json: any;
}
export function validatePackage(doc: JsonDocument): ValidatedDocument;
export function validateProgram(doc: JsonDocument): ValidatedDocument;

export interface BindOptions {
  task?: string;
  weightsParameterSchemaId?: string;
  device?: string;
}
export interface Binding {
  contract: any;
  executor: string;
  pair: 'tokens' | 'embeds' | string;
  functions: string[];
}
export function bind(packageDoc: JsonDocument, programDoc: JsonDocument, options?: BindOptions): Binding;

export interface AudioProcessor {
  sample_rate_hz?: number;
  min_samples?: number;
  max_samples?: number;
  /** soxr VHQ instead of HQ. */
  very_high_quality?: boolean;
}
export function decodeAudio(data: Bytes, processor?: AudioProcessor): Float32Array;

export interface ResizeSpec {
  mode?: 'stretch' | 'center_crop';
  height: number;
  width: number;
}
/** An image_decode processor ({ resize: {...} }) or its resize alone. */
export type ImageProcessor = { resize: ResizeSpec } | ResizeSpec;
export interface ImageOptions {
  dtype?: 'uint8' | 'uint32';
  filter?: 'bicubic' | 'bilinear' | 'lanczos';
  maxPixels?: number;
}
export interface RgbaPixels {
  width: number;
  height: number;
  data: Uint8ClampedArray | Uint8Array;
}
export function resizeImage(image: RgbaPixels, processor: ImageProcessor, options?: ImageOptions): Uint8Array | Uint32Array;
export function decodeImage(data: Bytes, processor: ImageProcessor, options?: ImageOptions): Uint8Array | Uint32Array;

export class Tokenizer {
  constructor(files: Files);
  readonly vocabSize: number;
  encode(text: string | Bytes): Int32Array;
  decode(ids: ArrayLike<number>): string;
  free(): void;
}

export function buildPrompt(files: Files, messages: JsonDocument): any;

export interface PlanOptions {
  program?: JsonDocument;
  task?: string;
  kvLength?: number;
}
export function planPrefill(files: Files, request: JsonDocument, options?: PlanOptions): any;
