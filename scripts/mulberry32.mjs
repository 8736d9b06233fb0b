// The seeded PRNG of the reference runs (scripts/ort_run.mjs) and the benchmarks: its own module so
// bench/ can use it without loading onnxruntime-node.

/** A deterministic PRNG in [0, 1) (mulberry32). */
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
