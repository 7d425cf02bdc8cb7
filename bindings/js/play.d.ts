/** Where the host's lines come from (a Node readable stream, such as `process.stdin`). */
export interface PlayInput {
  on(event: "data" | "end", listener: (...args: any[]) => void): unknown;
  off(event: "data" | "end", listener: (...args: any[]) => void): unknown;
  pause?(): unknown;
}

/** Where the recorded CLI's lines go (a Node writable stream, such as `process.stdout`). */
export interface PlayOutput {
  write(chunk: string | Uint8Array, callback?: () => void): unknown;
}

/** Options of `play`. */
export interface PlayOptions {
  /** Check that the host says what the recorded host said (by meaning: not ids, times or
   * field order); the first difference ends play with status 3. */
  verify?: boolean;
  /** Play this many times as fast as recorded; `undefined`: every line as soon as the host's
   * lines before it have come. Default: as recorded (1). */
  speed?: number;
  /** Failures to inject, as `ccwire play --fault` takes them (N is the Nth recorded line
   * written, from 1): `garbage@N`, `oversize@N`, `duplicate@N`, `unknown-response@N`,
   * `unknown-cancel@N`, `exit-mid-line@N`, `kill@N` (the process kills itself), `stall@N`
   * (nothing more, stdin closing ignored: the process stays up until killed), `exit-code=K`. */
  faults?: string[];
  /** The host's lines (default `process.stdin`). */
  input?: PlayInput;
  /** Where the recorded CLI's lines go (default `process.stdout`). */
  output?: PlayOutput;
  /** Told the difference when `verify` finds one (default: written to stderr). */
  onDiverged?: (message: string) => void;
}

/**
 * Plays a transcript (its path, or its bytes or text) as the Claude Code CLI over `input` and
 * `output`; resolves to the exit status the CLI should end with (3 when `verify` found a
 * difference). The transcript is what `ccwire record`, the Rust client's `record` and
 * `ccwire/node`'s `record` option write.
 */
export function play(tape: string | Uint8Array, options?: PlayOptions): Promise<number>;

/** The CLI release the player says it is (`claude --version`). */
export function cliVersion(): string;
