// wasm/errors.mjs — FxError, the one error type of the package.

/**
 * Every failure of fxwasm: `kind` is fx::error_kind_name ("GraphError", "LintError",
 * "StaleHandleError", "TypeError", "ValueError", ...), `node` the node involved, if any.
 */
export class FxError extends Error {
  constructor(kind, message, node) {
    super(message);
    this.name = 'FxError';
    this.kind = kind;
    this.node = node ?? undefined;
  }
}

/** An FxError of kind TypeError (a wrong argument type, caught before calling C++). */
export function typeError(message) {
  return new FxError('TypeError', message);
}
