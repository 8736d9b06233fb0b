// Jest runs the JS tests as native ES modules (package.json "test" passes
// --experimental-vm-modules), so there is no transform step: tests import the package exactly as
// published (wasm/index.mjs -> dist/fx.mjs + dist/fx.wasm, built by scripts/build.sh).
export default {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/tests/js/**/*.test.mjs'],
  moduleFileExtensions: ['mjs', 'js', 'json'],
  transform: {},
  // Never pick up copies of the package (npm pack smoke tests, build trees).
  modulePathIgnorePatterns: ['<rootDir>/build/', '<rootDir>/node_modules/'],
  testTimeout: 60000,
};
