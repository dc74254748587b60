// The static file server the browser scripts share (tests, bench, breakdown): a root's files,
// a folder's `index.html`, 404 for anything else or outside the root.

import { readFileSync, existsSync, statSync } from 'node:fs';
import { extname, resolve } from 'node:path';

export const MIME = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.wasm': 'application/wasm',
  '.css': 'text/css', '.jsonl': 'application/x-ndjson', '.json': 'application/json',
  '.png': 'image/png', '.woff2': 'font/woff2', '.ico': 'image/x-icon', '.txt': 'text/plain',
};

/** The request's URL path, decoded. */
export function urlPath(req) {
  return decodeURIComponent(new URL(req.url, 'http://x').pathname);
}

/** Answer with `root`'s file at the URL path `path` (a folder's `index.html`), or 404. */
export function sendFile(res, root, path) {
  const file = resolve(root, '.' + (path.endsWith('/') ? path + 'index.html' : path));
  if (!file.startsWith(root) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end('not found');
    return;
  }
  res.writeHead(200, { 'content-type': MIME[extname(file)] ?? 'application/octet-stream' });
  res.end(readFileSync(file));
}
