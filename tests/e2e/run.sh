#!/usr/bin/env bash
# Build the page (`cargo xtask page`, which installs its tools when missing) and the CLI, then run
# the browser tests. Needs node >= 20 and /usr/bin/chromium (or CHROMIUM). Arguments naming
# `*.test.mjs` files run only those files (default: all); other arguments go to `node --test`
# (e.g. --test-name-pattern=fixture).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
cargo fetch --quiet
cargo xtask page
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
