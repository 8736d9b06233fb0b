// Pre-JS for wasm test executables run under Node (see CMakeLists.txt).
// Debian's emscripten 3.1.6 loads the .wasm with fetch() whenever a global fetch exists; Node >= 18
// has one and it rejects plain file paths ("Failed to parse URL"). Read the binary from disk and
// hand it over as wasmBinary, which the loader then uses instead of fetching.
if (typeof process === 'object' && typeof require === 'function' && !Module['wasmBinary']) {
  Module['wasmBinary'] = require('fs').readFileSync(__filename.replace(/\.js$/, '.wasm'));
}
