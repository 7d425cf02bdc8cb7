#!/usr/bin/env node
// `ccwire`: runs the native ccwire binary for this platform (from its npm platform package)
// with the same arguments, standard streams and environment; SIGINT, SIGTERM and SIGHUP are
// passed on, and the command ends with the binary's status.

import { spawn } from "node:child_process";
import { constants } from "node:os";
import { binaryPath, NoBinaryError } from "./native.js";

let binary;
try {
  binary = binaryPath();
} catch (err) {
  if (!(err instanceof NoBinaryError)) throw err;
  process.stderr.write(`ccwire: ${err.message}\n`);
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
const forward = (signal) => child.kill(signal);
const signals = ["SIGINT", "SIGTERM", "SIGHUP"];
for (const signal of signals) process.on(signal, forward);
child.on("error", (err) => {
  process.stderr.write(`ccwire: cannot run ${binary}: ${err.message}\n`);
  process.exit(1);
});
// Ended by a signal, the command's status is the shell's for it (128 + its number).
child.on("exit", (code, signal) => process.exit(signal ? 128 + (constants.signals[signal] ?? 0) : (code ?? 1)));
