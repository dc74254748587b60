#!/usr/bin/env bash
# Build the page and the CLI, then run the browser tests. Needs trunk, wasm-bindgen 0.2.130 and
# wasm-opt 116 on PATH, node >= 20 and /usr/bin/chromium (or CHROMIUM). Arguments naming
# `*.test.mjs` files run only those files (default: all); other arguments go to `node --test`
# (e.g. --test-name-pattern=fixture).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
cargo fetch --quiet
(cd web && trunk build --release)
cargo build --quiet --release -p candle-trace-cli --bin candle-trace
target_dir="$(cargo metadata --format-version 1 --no-deps | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')"
export CANDLE_TRACE_BIN="$target_dir/release/candle-trace"
cd "$here"
[ -d node_modules ] || npm ci --no-audit --no-fund
files=()
opts=()
for arg in "$@"; do
  case "$arg" in
    *.test.mjs) files+=("$(basename "$arg")") ;;
    *) opts+=("$arg") ;;
  esac
done
[ ${#files[@]} -gt 0 ] || files=(*.test.mjs)
exec node --test "${opts[@]}" "${files[@]}"
