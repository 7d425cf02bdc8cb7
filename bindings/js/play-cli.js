#!/usr/bin/env node
// `ccwire-play`: a recorded transcript stands in for the `claude` executable.
//
//   ccwire-play TAPE [--verify] [--instant | --speed N] [--fault F]... [-- ARGS THE HOST PASSES]
//   CCWIRE_TAPE=TAPE [CCWIRE_PLAY=verify,instant|speed=N,fault=F] ccwire-play ARGS THE HOST PASSES
//
// `--fault` injects a failure, as `ccwire play --fault` does (garbage@N, oversize@N,
// duplicate@N, unknown-response@N, unknown-cancel@N, exit-mid-line@N, kill@N, stall@N,
// exit-code=K; N is the Nth recorded line written, from 1).
//
// With CCWIRE_TAPE set every argument is the host's (an SDK's `pathToClaudeCodeExecutable`
// can name this file); `--version` answers as the CLI would.

import { cliVersion, play } from "./play.js";

const argv = process.argv.slice(2);
let tape = process.env.CCWIRE_TAPE || null;
let own = [];
let cliArgs = argv;
if (!tape) {
  const dash = argv.indexOf("--");
  own = dash === -1 ? argv : argv.slice(0, dash);
  cliArgs = dash === -1 ? [] : argv.slice(dash + 1);
  tape = own.shift() ?? null;
} else {
  own = (process.env.CCWIRE_PLAY ?? "")
    .split(",")
    .filter(Boolean)
    .flatMap((o) => {
      const [name, value] = o.split(/=(.*)/s);
      return value === undefined ? [`--${name}`] : [`--${name}`, value];
    });
}
if (cliArgs.includes("-v") || cliArgs.includes("--version")) {
  process.stdout.write(`${cliVersion()} (Claude Code)\n`);
  process.exit(0);
}
const usage = "usage: ccwire-play TAPE [--verify] [--instant | --speed N] [--fault F]... [-- ARGS], or CCWIRE_TAPE=TAPE";
if (!tape) {
  process.stderr.write(`ccwire-play: no tape given\n${usage}\n`);
  process.exit(2);
}
const options = { verify: false, speed: 1, faults: [] };
for (let i = 0; i < own.length; i++) {
  const option = own[i];
  if (option === "--verify") options.verify = true;
  else if (option === "--instant") options.speed = undefined;
  else if (option === "--speed" && Number(own[i + 1]) > 0) options.speed = Number(own[++i]);
  else if (option === "--fault" && own[i + 1] !== undefined) options.faults.push(own[++i]);
  else {
    process.stderr.write(`ccwire-play: unknown option ${option}\n${usage}\n`);
    process.exit(2);
  }
}
let code;
try {
  code = await play(tape, options);
} catch (err) {
  process.stderr.write(`ccwire-play: ${tape}: ${err?.message ?? err}\n`);
  process.exit(2);
}
process.exit(code);
