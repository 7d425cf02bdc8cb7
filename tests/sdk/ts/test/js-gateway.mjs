// A gateway host in plain Node over the npm package's `Gateway` (`ccwire/conversation`): an
// HTTP server, CLI processes and a timer, nothing else — what `ccwire serve` does in Rust, so
// that both can be run side by side on the same requests.

import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import http from 'node:http';

import { Gateway } from '../../../../bindings/js/conversation-node.js';

/**
 * Starts the host on a free loopback port.
 * @param {{claude: string, cwd: string, env: Record<string, string>, options: object,
 *   http: object, maxBody?: number}} settings `options` and `http` are the `Gateway`'s.
 * @returns {Promise<{url: string, stop: () => Promise<void>}>}
 */
export async function startJsGateway({ claude, cwd, env, options, http: httpOptions, maxBody = 32 << 20 }) {
  const started = performance.now();
  const now = () => Math.floor(performance.now() - started);
  const gateway = new Gateway({ ...options, unixEpochMs: Date.now(), http: httpOptions });
  /** request id → {res, cors}; session → child process. */
  const responses = new Map();
  const processes = new Map();
  let timer = null;
  let nextRequest = 1;

  function carryOut(outputs) {
    for (const o of outputs) {
      const response = responses.get(o.request);
      switch (o.type) {
        case 'spawn':
          startCli(o.session, o.spec);
          break;
        case 'write':
          processes.get(o.session)?.stdin.write(o.data);
          break;
        case 'close': {
          const child = processes.get(o.session);
          child?.stdin.end();
          setTimeout(() => child?.kill('SIGTERM'), 5_000).unref();
          break;
        }
        case 'respond':
          response?.res.writeHead(o.status, [...o.headers, ...response.cors].flat());
          break;
        case 'body':
          response?.res.write(o.data);
          break;
        case 'end':
          responses.delete(o.request);
          response?.res.end();
          break;
        case 'fetch':
          fetch(o.url, { method: 'POST', headers: o.headers, body: o.body })
            .then(async (answer) => (answer.ok ? answer.text() : null))
            .catch(() => null)
            .then((answer) => carryOut(gateway.handleFetched(o.request, answer, now())));
          break;
        case 'drain_requested':
          // The test stops this host itself.
          break;
        default:
          throw new Error(`an output this host does not know: ${JSON.stringify(o)}`);
      }
    }
    clearTimeout(timer);
    const deadline = gateway.nextDeadline();
    if (deadline) {
      timer = setTimeout(() => carryOut(gateway.handleTimeout(now())), Math.max(0, deadline.atMs - now()));
      timer.unref(); // the server keeps the process alive, not an idle session's deadline
    }
  }

  function startCli(session, spec) {
    const childEnv = { ...env, ...Object.fromEntries(spec.env) };
    for (const name of spec.env_remove) delete childEnv[name];
    // A tenant's own directories, when the engine gives each tenant its own (`tenantRoot`).
    for (const dir of spec.tenant ? [spec.tenant.home, spec.tenant.work, spec.tenant.tmp] : []) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    }
    // A history the gateway wrote from a client's request, which the CLI resumes.
    const transcript = Gateway.writtenTranscript(spec);
    if (transcript !== null) {
      mkdirSync(path.dirname(spec.resume.path), { recursive: true, mode: 0o700 });
      writeFileSync(spec.resume.path, transcript, { mode: 0o600 });
    }
    const child = spawn(claude, spec.args, {
      cwd: spec.cwd ?? cwd, env: childEnv, stdio: ['pipe', 'pipe', 'pipe'],
    });
    processes.set(session, child);
    let stderr = '';
    child.stdin.on('error', () => {}); // a CLI gone mid-write: its exit says so
    child.stdout.on('data', (bytes) => carryOut(gateway.handleStdout(session, bytes, now())));
    child.stderr.on('data', (bytes) => {
      stderr = (stderr + bytes).slice(-8192);
    });
    child.once('error', (err) => {
      processes.delete(session);
      carryOut(gateway.handleSpawnFailed(session, err.message, now()));
    });
    // `close`: the process ended and its stdout was read to the end.
    child.once('close', (code, signal) => {
      if (processes.get(session) !== child) return;
      processes.delete(session);
      carryOut(gateway.handleExit(session, { code, signal, stderr }, now()));
    });
  }

  const server = http.createServer(async (req, res) => {
    const head = { method: req.method, path: new URL(req.url, 'http://host').pathname, headers: req.headers };
    const decision = gateway.admit(head);
    if (decision.respond) {
      const { status, headers, body } = decision.respond;
      res.writeHead(status, headers.flat()).end(body);
      return;
    }
    const id = nextRequest++;
    const parts = [];
    let size = 0;
    for await (const part of req) {
      size += part.length;
      if (size <= maxBody) parts.push(part);
    }
    responses.set(id, { res, cors: decision.admit.cors });
    res.once('close', () => {
      if (responses.delete(id)) carryOut(gateway.handleClientGone(id, now()));
    });
    const body = size > maxBody ? { error: 'too_large' } : Buffer.concat(parts);
    carryOut(gateway.handleHttp(id, head, decision.admit.tenant, body, now()));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    async stop() {
      clearTimeout(timer);
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      const exits = [...processes.values()].map((child) => new Promise((resolve) => child.once('close', resolve)));
      for (const child of processes.values()) child.stdin.end();
      const forced = setTimeout(() => {
        for (const child of processes.values()) child.kill('SIGKILL');
      }, 5_000);
      await Promise.all(exits);
      clearTimeout(forced);
      clearTimeout(timer); // set again by the exits
      gateway.free();
    },
  };
}
