// wasm/inputs.mjs — what the CLI (wasm/cli.mjs), the playground (web/worker.mjs), the reference
// runs (scripts/ort_run.mjs) and the benchmarks share to feed a model: one seeded PRNG, random
// inputs from the placeholders' ONNX types, and the names of the outputs. Reads meta through
// onnxMetaKeys, so it works once init() has resolved.
import { FxError } from './errors.mjs';
import { onnxMetaKeys } from './onnx.mjs';

/** A deterministic PRNG in [0, 1) (mulberry32): the same stream in every consumer. */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The typed array of each dtype these helpers (and scripts/ort_run.mjs) fill. */
export const ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  int64: BigInt64Array,
  int32: Int32Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};

/**
 * Seeded random inputs, one per placeholder, from its ONNX type (symbolic dimensions become 1):
 * floats uniform in [-1, 1), integers in [0, 10), bools 0/1, filled in order from one
 * mulberry32(seed) stream. A dtype it cannot fill throws FxError(UnsupportedError) naming the input.
 */
export function randomInputs(gm, seed) {
  const rand = mulberry32(seed);
  return gm.graph.nodes
    .filter((n) => n.op === 'placeholder')
    .map((n) => {
      const type = n.meta[onnxMetaKeys.type] ?? {};
      const dtype = type.dtype ? String(type.dtype.name ?? type.dtype).replace(/^torch\./, '') : 'float32';
      const shape = Array.from(type.shape ?? [], (d) => (typeof d === 'number' ? d : typeof d === 'bigint' ? Number(d) : 1));
      const C = ARRAYS[dtype];
      if (!C) throw new FxError('UnsupportedError', `input '${n.name}' has dtype ${dtype}, which cannot be filled with random data`, n.name);
      const data = new C(shape.reduce((a, b) => a * b, 1));
      for (let i = 0; i < data.length; i++) {
        const u = rand();
        if (dtype === 'float32' || dtype === 'float64') data[i] = 2 * u - 1;
        else if (dtype === 'bool') data[i] = u < 0.5 ? 1 : 0;
        else if (dtype === 'int64') data[i] = BigInt(Math.floor(10 * u));
        else data[i] = Math.floor(10 * u);
      }
      return { data, shape, dtype };
    });
}

/** The ONNX names of the outputs of an imported model, in order ([] for a graph built by hand). */
export function outputNames(gm) {
  const names = gm.graph.outputNode?.meta[onnxMetaKeys.outputs];
  return Array.isArray(names) ? names : [];
}
