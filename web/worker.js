// The parsing worker: runs the viewer's own wasm, which notices it is in a worker and serves
// parse requests (viewer/src/worker.rs) instead of mounting the page. It says `ready` first,
// so the page never posts a request before the handler exists.
import init from './candle-trace-viewer.js';

init({ module_or_path: new URL('./candle-trace-viewer_bg.wasm', import.meta.url) }).catch((err) => {
  self.postMessage({ type: 'failed', message: 'the parsing worker could not start: ' + err });
});
