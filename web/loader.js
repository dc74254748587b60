// Starts the viewer's wasm. Trunk is told not to inject its inline loader (so the
// Content-Security-Policy can forbid inline scripts); this file does the same job.
import init from './candle-trace-viewer.js';

init({ module_or_path: new URL('./candle-trace-viewer_bg.wasm', import.meta.url) })
  .then((wasm) => {
    // The wasm memory (every byte the viewer's Rust code holds), for the benchmarks' memory
    // figures and anyone curious: `candleTraceMemory.buffer.byteLength`.
    window.candleTraceMemory = wasm.memory;
    document.getElementById('boot-message')?.remove();
  })
  .catch((err) => {
  const p = document.createElement('p');
  p.setAttribute('role', 'alert');
  p.className = 'load-error';
  p.textContent =
    location.protocol === 'file:'
      ? 'This browser does not load WebAssembly from file:// pages. Serve the folder instead, e.g. `python3 -m http.server --bind 127.0.0.1` in web/dist, or run `trunk serve` in web/.'
      : 'The viewer could not start: ' + err;
  document.body.prepend(p);
});
