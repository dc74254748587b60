// Starts the viewer's wasm. Trunk is told not to inject its inline loader (so the
// Content-Security-Policy can forbid inline scripts); this file does the same job.
import init from './candle-trace-viewer.js';

// The viewer's wasm is compiled with WebAssembly SIMD (`+simd128`, .cargo/config.toml), which a
// browser without it refuses to compile. This module, `(func (result v128) (i8x16.popcnt
// (i8x16.splat (i32.const 0))))`, validates exactly where SIMD is supported (the probe of
// GoogleChromeLabs' wasm-feature-detect).
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15,
  253, 98, 11,
]);

// For a page that cannot start a parsing worker: the worker's wasm run on the page itself,
// behind an object the page talks to as to a worker (viewer/src/worker.rs, `worker_here`).
window.candleTraceWorkerHere = async () => {
  const worker = await import('./candle-trace-worker.js');
  await worker.default({ module_or_path: new URL('./candle-trace-worker_bg.wasm', import.meta.url) });
  const channel = new MessageChannel();
  worker.serve_port(channel.port2);
  const port = channel.port1;
  return {
    postMessage: (message, transfer) => port.postMessage(message, transfer ?? []),
    set onmessage(handler) {
      port.onmessage = handler;
    },
    set onerror(_handler) {},
    terminate: () => port.close(),
  };
};

// The page's first parsing worker, started before the page's own wasm so that it fetches and
// compiles its wasm (and starts warming the engine, viewer/src/warm.rs) meanwhile, rather than
// once the page has started. What it says before the page listens is kept for the page
// (viewer/src/worker.rs, `started_by_loader`). Its name is `WARM_WORKER` (viewer/src/warm.rs).
function startFirstWorker() {
  try {
    const worker = new Worker('./worker.js', { type: 'module', name: 'warm' });
    const heard = [];
    worker.onmessage = (event) => heard.push(event);
    worker.onerror = (event) => {
      event.preventDefault();
      heard.push(event);
    };
    window.candleTraceFirstWorker = { worker, heard };
  } catch {
    // No worker here: the page tries itself, then reads files on its own thread.
  }
}

function showLoadError(message) {
  const p = document.createElement('p');
  p.setAttribute('role', 'alert');
  p.className = 'load-error';
  p.dataset.testid = 'boot-error';
  p.textContent = message;
  document.getElementById('boot-message')?.remove();
  document.body.prepend(p);
}

if (typeof WebAssembly !== 'object' || !WebAssembly.validate(SIMD_PROBE)) {
  showLoadError(
    'The viewer needs WebAssembly with SIMD, which this browser does not offer (Chrome and Edge 91, Firefox 89 and Safari 16.4 onwards have it).',
  );
} else {
  startFirstWorker();
  init({ module_or_path: new URL('./candle-trace-viewer_bg.wasm', import.meta.url) })
    .then((wasm) => {
      // The wasm memory (every byte the viewer's Rust code holds), for the benchmarks' memory
      // figures and anyone curious: `candleTraceMemory.buffer.byteLength`.
      window.candleTraceMemory = wasm.memory;
      document.getElementById('boot-message')?.remove();
    })
    .catch((err) => {
      showLoadError(
        location.protocol === 'file:'
          ? 'This browser does not load WebAssembly from file:// pages. Serve the folder instead, e.g. `python3 -m http.server --bind 127.0.0.1` in web/dist, or run `trunk serve` in web/.'
          : 'The viewer could not start: ' + err,
      );
    });
}
