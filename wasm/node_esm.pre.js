// Pre-JS for the ES module dist/fx.mjs (see CMakeLists.txt). Debian's emscripten 3.1.6 emits
// CommonJS-only code in the Node branch of an EXPORT_ES6 module and fetches the .wasm by path:
//  - `scriptDirectory = __dirname + "/"` throws ReferenceError in an ES module, so give the factory
//    a local __dirname (derived from import.meta.url);
//  - the .wasm is loaded with fetch() whenever fetch exists, and Node >= 18's fetch rejects file
//    paths, while the fallback needs `require`, which ES modules lack. Unless the caller already
//    passed wasmBinary or instantiateWasm, read the file with node:fs (dynamic import works
//    here) and instantiate it ourselves. locateFile, if given, is honoured.
// Browsers and workers are unaffected: everything below is guarded by the Node check.
// EMSCRIPTEN$IMPORT$META is emcc's spelling of import.meta in JS it optimises (its minifier cannot
// parse import.meta); emcc writes it back as import.meta in the final file.
var __dirname = typeof EMSCRIPTEN$IMPORT$META.url == 'string' && EMSCRIPTEN$IMPORT$META.url.startsWith('file:')
    ? decodeURIComponent(new URL('.', EMSCRIPTEN$IMPORT$META.url).pathname).replace(/\/$/, '')
    : '.';
if (typeof process == 'object' && typeof process.versions == 'object' &&
    typeof process.versions.node == 'string' && !Module['wasmBinary'] &&
    !Module['instantiateWasm']) {
  Module['instantiateWasm'] = function(imports, receiveInstance) {
    var url = Module['locateFile'] ? Module['locateFile']('fx.wasm', __dirname + '/')
                                   : new URL('fx.wasm', EMSCRIPTEN$IMPORT$META.url);
    // (A specifier bundlers do not follow: browser bundles carry no node: import.)
    import(/* webpackIgnore: true */ /* @vite-ignore */ ['node', 'fs/promises'].join(':'))
        .then(function(fs) { return fs.readFile(url); })
        .then(function(bytes) { return WebAssembly.instantiate(bytes, imports); })
        .then(function(result) { receiveInstance(result.instance, result.module); },
              function(e) { readyPromiseReject(e); });
    return {};  // exports arrive asynchronously through receiveInstance
  };
}
