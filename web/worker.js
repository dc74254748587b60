// The parsing worker: runs the `candle-trace-worker` binary's wasm (viewer/src/bin/worker.rs),
// which reads, analyses and encodes files for the page (viewer/src/worker.rs). It says `ready`
// first, so the page never posts a request before the handler exists.
import init from './candle-trace-worker.js';

init({ module_or_path: new URL('./candle-trace-worker_bg.wasm', import.meta.url) }).catch((err) => {
  self.postMessage({ type: 'failed', message: 'the parsing worker could not start: ' + err });
});
