// A static file server for the inspector (development and tests): `node serve.mjs [port]`.
// It serves www/ at /, the npm package's files (bindings/js, bindings/pkg) at /ccwire/ and the
// transcript corpus at /corpus/. Nothing is computed on the server.

import { createReadStream, statSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..");
const mounts = [
  ["/ccwire/js/", join(root, "bindings/js")],
  ["/ccwire/pkg/", join(root, "bindings/pkg")],
  ["/corpus/", join(root, "tests/corpus")],
  // The console and the files it shares with the inspector, as `ccwire serve --console`
  // serves them.
  ["/console/", join(root, "core/src/gateway/console")],
  ["/", here],
];
const types = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".wasm": "application/wasm",
  ".jsonl": "application/x-ndjson; charset=utf-8",
  ".json": "application/json; charset=utf-8",
};

function locate(urlPath) {
  for (const [prefix, dir] of mounts) {
    if (!urlPath.startsWith(prefix)) continue;
    const rel = normalize(decodeURIComponent(urlPath.slice(prefix.length)) || "index.html");
    const file = resolve(dir, rel);
    if (file !== dir && !file.startsWith(dir + sep)) return null;
    return file;
  }
  return null;
}

/** Starts the server; resolves to `{url, close}`. Port 0 picks a free port. */
export function serve(port = 0) {
  const server = createServer((req, res) => {
    const file = locate(new URL(req.url, "http://x").pathname);
    let stat;
    try {
      stat = file && statSync(file);
    } catch {
      stat = null;
    }
    if (!stat || !stat.isFile()) {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found\n");
      return;
    }
    res.writeHead(200, {
      "content-type": types[extname(file)] ?? "application/octet-stream",
      "content-length": stat.size,
      "cache-control": "no-store",
    });
    createReadStream(file).pipe(res);
  });
  return new Promise((ok) => {
    server.listen(port, "127.0.0.1", () => {
      ok({
        url: `http://127.0.0.1:${server.address().port}/`,
        close: () => new Promise((done) => server.close(done)),
      });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { url } = await serve(Number(process.argv[2] ?? 8080));
  console.log(`ccwire inspector: ${url}`);
}
