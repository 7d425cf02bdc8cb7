// `ccwire/play`: a recorded transcript plays the Claude Code CLI's part, over stdin and stdout —
// what `ccwire play` does, in Node, with no Rust binary. Node only.

import { readFileSync } from "node:fs";
import { initSync, testedCliVersion, WasmPlayer } from "../pkg/ccwire_conversation.js";

let ready = false;

function load() {
  if (!ready) {
    initSync({ module: readFileSync(new URL("../pkg/ccwire_conversation_bg.wasm", import.meta.url)) });
    ready = true;
  }
}

/** The CLI release the player says it is (`claude --version`). */
export function cliVersion() {
  load();
  return testedCliVersion();
}

/**
 * Plays `tape` (a transcript: its path, or its bytes or text) as the CLI: the host's lines come
 * on `input`, the recorded CLI's lines go out on `output` as the host's lines before them come.
 * Resolves to the exit status the CLI should end with: the recorded one, 3 when `verify` found
 * the host saying something else than the recorded host did (the difference goes to `onDiverged`,
 * by default stderr).
 *
 * @param {string | Uint8Array} tape
 * @param {import("./play.d.ts").PlayOptions} [options]
 */
export async function play(tape, options = {}) {
  load();
  const bytes = typeof tape === "string" ? readFileSync(tape) : tape;
  const input = options.input ?? process.stdin;
  const output = options.output ?? process.stdout;
  const onDiverged = options.onDiverged ?? ((message) => process.stderr.write(`ccwire play: diverged: ${message}\n`));
  const player = new WasmPlayer(bytes, Boolean(options.verify), options.speed ?? undefined, options.faults ?? undefined);
  const start = performance.now();
  const now = () => Math.floor(performance.now() - start);
  return new Promise((resolve) => {
    let done = false;
    let timer = null;
    let stall = null;
    const finish = (code) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      input.off("data", onData);
      input.off("end", onEnd);
      input.pause?.();
      // Everything written is flushed before the status is given.
      output.write("", () => resolve(code));
    };
    const apply = (json) => {
      for (const out of JSON.parse(json)) {
        if (done) return;
        if (out.type === "write") output.write(out.data ?? Buffer.from(out.base64, "base64"));
        else if (out.type === "filler") output.write(Buffer.alloc(out.bytes + 1, "x").fill("\n", out.bytes));
        else if (out.type === "kill") {
          // As a crashing CLI: what was written goes out, then the process dies by SIGKILL.
          done = true;
          output.write("", () => process.kill(process.pid, "SIGKILL"));
          return;
        } else if (out.type === "stalled") {
          // Nothing more comes, stdin closing included: the process stays up until killed.
          stall ??= setInterval(() => {}, 1 << 30);
        } else if (out.type === "diverged") {
          onDiverged(out.message);
          finish(3);
        } else if (out.type === "exit") finish(out.code);
      }
      if (done) return;
      clearTimeout(timer);
      const at = player.nextDeadline();
      if (at !== undefined && at !== null) {
        timer = setTimeout(() => apply(player.handleTimeout(now())), Math.max(0, at - now()));
      }
    };
    const onData = (data) => apply(player.handleStdin(now(), data));
    const onEnd = () => apply(player.handleStdinEof(now()));
    input.on("data", onData);
    input.on("end", onEnd);
    apply(player.outputs());
  });
}
