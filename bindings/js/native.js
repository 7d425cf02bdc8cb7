// The native `ccwire` binary: which platforms it is built for, and where npm put the one for
// this machine. The `ccwire` command (ccwire-cli.js) runs it; scripts/release/ builds and packs
// the platform packages from the same table.

import { createRequire } from "node:module";

/**
 * Every platform ccwire ships a binary for: the npm package that carries it, the Rust target
 * it is built for, and the tags its PyPI wheel is published under.
 */
export const PLATFORMS = Object.freeze({
  "linux-x64-gnu": {
    package: "@ccwire/linux-x64-gnu",
    target: "x86_64-unknown-linux-gnu",
    os: "linux",
    cpu: "x64",
    libc: "glibc",
    wheel: "manylinux_2_17_x86_64.manylinux2014_x86_64",
  },
  "linux-x64-musl": {
    package: "@ccwire/linux-x64-musl",
    target: "x86_64-unknown-linux-musl",
    os: "linux",
    cpu: "x64",
    libc: "musl",
    wheel: "musllinux_1_2_x86_64",
  },
  "linux-arm64-gnu": {
    package: "@ccwire/linux-arm64-gnu",
    target: "aarch64-unknown-linux-gnu",
    os: "linux",
    cpu: "arm64",
    libc: "glibc",
    wheel: "manylinux_2_17_aarch64.manylinux2014_aarch64",
  },
  "linux-arm64-musl": {
    package: "@ccwire/linux-arm64-musl",
    target: "aarch64-unknown-linux-musl",
    os: "linux",
    cpu: "arm64",
    libc: "musl",
    wheel: "musllinux_1_2_aarch64",
  },
  "darwin-arm64": {
    package: "@ccwire/darwin-arm64",
    target: "aarch64-apple-darwin",
    os: "darwin",
    cpu: "arm64",
    wheel: "macosx_11_0_arm64",
  },
  "darwin-x64": {
    package: "@ccwire/darwin-x64",
    target: "x86_64-apple-darwin",
    os: "darwin",
    cpu: "x64",
    wheel: "macosx_10_12_x86_64",
  },
});

/** This machine's key in `PLATFORMS` (`linux-x64-gnu`, `darwin-arm64`, …), supported or not. */
export function platformKey() {
  const { platform, arch } = process;
  if (platform !== "linux") return `${platform}-${arch}`;
  // Node's diagnostic report names the glibc it runs on; a musl build of Node has none.
  process.report.excludeNetwork = true;
  return `linux-${arch}-${process.report.getReport().header.glibcVersionRuntime ? "gnu" : "musl"}`;
}

/** The error the `ccwire` command reports when it has no binary to run. */
export class NoBinaryError extends Error {}

/**
 * The path of the native `ccwire` for this machine: `CCWIRE_BINARY` when set, else the binary of
 * the platform package npm installed beside this package.
 *
 * @throws {NoBinaryError} with what to do, when there is none.
 */
export function binaryPath() {
  if (process.env.CCWIRE_BINARY) return process.env.CCWIRE_BINARY;
  const key = platformKey();
  const platform = PLATFORMS[key];
  if (!platform) {
    const windows = process.platform === "win32" ? " On Windows, run it inside WSL." : "";
    throw new NoBinaryError(
      `ccwire has no native binary for ${key}: it is built for ${Object.keys(PLATFORMS).join(", ")}.` +
        `${windows} Elsewhere, build it from source (\`cargo install ccwire-host\`) and set` +
        " CCWIRE_BINARY to its path.",
    );
  }
  const require = createRequire(import.meta.url);
  try {
    return require.resolve(`${platform.package}/bin/ccwire`);
  } catch {
    throw new NoBinaryError(
      `ccwire's binary for ${key} is in the package ${platform.package}, which is not installed.` +
        " npm installs it with ccwire unless optional dependencies are left out (--omit=optional," +
        " --no-optional) or node_modules came from another platform: install ccwire again, or" +
        ` \`npm install ${platform.package}\`.`,
    );
  }
}
