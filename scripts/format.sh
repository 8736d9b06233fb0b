#!/usr/bin/env bash
# clang-format over the C++ sources with the repository's .clang-format (generated src/*.inc
# files are left as the generator writes them).
# Usage: scripts/format.sh          rewrite files in place
#        scripts/format.sh --check  list files that differ and exit 1 (changes nothing)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard \
  'include/*.h' 'src/*.cpp' 'src/*.h' 'tests/cpp/*.cpp' 'tests/cpp/*.h' 'tests/torch/*.cpp' 'tests/torch/*.h' 'tests/stress/*.cpp' \
  'src/cli/*.cpp' 'wasm/*.cpp' 'bench/*.cpp')
[ "${#files[@]}" -gt 0 ] || { echo "no C++ files"; exit 0; }
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then echo "needs formatting: $f"; bad=1; fi
  done
  [ "$bad" -eq 0 ] && echo "clang-format: ${#files[@]} files clean"
  exit "$bad"
fi
clang-format -i "${files[@]}"
echo "clang-format: formatted ${#files[@]} files"
