/** A platform ccwire ships a native binary for. */
export interface Platform {
  /** The npm package that carries the binary, e.g. `@ccwire/linux-x64-gnu`. */
  package: string;
  /** The Rust target it is built for, e.g. `x86_64-unknown-linux-gnu`. */
  target: string;
  /** `process.platform` where it runs. */
  os: "linux" | "darwin";
  /** `process.arch` where it runs. */
  cpu: "x64" | "arm64";
  /** The C library it needs, on Linux. */
  libc?: "glibc" | "musl";
  /** The platform tags of its PyPI wheel, joined by dots. */
  wheel: string;
}

/** Every platform ccwire ships a binary for, by key (`linux-x64-gnu`, `darwin-arm64`, …). */
export const PLATFORMS: Readonly<Record<string, Platform>>;

/** This machine's key in `PLATFORMS`, supported or not (e.g. `linux-riscv64-gnu`). */
export function platformKey(): string;

/** Thrown by `binaryPath` when there is no binary to run; its message says what to do. */
export class NoBinaryError extends Error {}

/**
 * The path of the native `ccwire` binary for this machine: `CCWIRE_BINARY` when set, else the
 * binary of the platform package npm installed with ccwire. Spawn it to run `ccwire serve`,
 * `ccwire play` or any other command from Node.
 *
 * @throws {NoBinaryError} when this platform has no binary or its package is not installed.
 */
export function binaryPath(): string;
