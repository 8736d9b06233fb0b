// Statistics shared by bench/'s scripts and tables.

/// The median of `xs`: the middle value, or the mean of the two middle ones for an even count (the
/// benches run odd numbers of rounds, so their tables show a measured value); NaN when empty.
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}
