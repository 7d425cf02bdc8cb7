// Packages built ccwire binaries for npm and PyPI.
//
//   node scripts/release/package.mjs OUT PLATFORM...
//
// Takes OUT/bin/<PLATFORM>/ccwire for each PLATFORM (a key of bindings/js/native.js) and makes
//   OUT/npm/ccwire-<platform>-<version>.tgz   the platform package (`@ccwire/<platform>`),
//   OUT/npm/ccwire-<version>.tgz              the main package: bindings/ as built, with every
//                                             platform package as an optional dependency,
//   OUT/pypi/ccwire-<version>-py3-none-<tag>.whl  a wheel installing the `ccwire` command,
//   OUT/SHA256SUMS                            of all of them.
// npm packs the packages and `wheel pack` (pypa's wheel) the wheels; a Python with `wheel` is
// found on PATH (scripts/release/install-tools.sh puts one there).

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { PLATFORMS, platformKey } from "../../bindings/js/native.js";

const root = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const [outArg, ...keys] = process.argv.slice(2);
if (!outArg || keys.length === 0) {
  console.error("usage: node scripts/release/package.mjs OUT PLATFORM...");
  process.exit(2);
}
const out = resolve(outArg);
const main = JSON.parse(readFileSync(join(root, "bindings/package.json"), "utf8"));
const version = main.version;
const crateVersion = /^version = "([^"]+)"/m.exec(readFileSync(join(root, "Cargo.toml"), "utf8"))[1];
if (crateVersion !== version) fail(`Cargo.toml says ${crateVersion}, bindings/package.json ${version}`);
for (const file of main.files.filter((f) => f.startsWith("pkg/"))) {
  if (!existsSync(join(root, "bindings", file))) fail(`bindings/${file} is not built (cd bindings && npm run build)`);
}

function fail(message) {
  console.error(`package.mjs: ${message}`);
  process.exit(1);
}

function run(command, args, cwd) {
  return execFileSync(command, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
}

const licenses = ["LICENSE-MIT", "LICENSE-APACHE"];
const summary = "ccwire: the Claude Code CLI behind the Anthropic and OpenAI APIs, record and replay of its sessions";
rmSync(join(out, "npm"), { recursive: true, force: true });
rmSync(join(out, "pypi"), { recursive: true, force: true });
mkdirSync(join(out, "npm"), { recursive: true });
mkdirSync(join(out, "pypi"), { recursive: true });
const made = [];

for (const key of keys) {
  const platform = PLATFORMS[key] ?? fail(`no platform ${key} (there are ${Object.keys(PLATFORMS).join(", ")})`);
  const binary = join(out, "bin", key, "ccwire");
  if (runsHere(platform)) {
    const said = run(binary, ["--version"]);
    if (!said.includes(`(${platform.target}, commit `)) fail(`${binary} says "${said.trim()}", not a ${platform.target} build`);
  }

  // npm: `@ccwire/<key>`, installed by npm only where its os, cpu and libc fit.
  const pkg = join(out, "npm", key);
  mkdirSync(join(pkg, "bin"), { recursive: true });
  copyFileSync(binary, join(pkg, "bin", "ccwire"));
  chmodSync(join(pkg, "bin", "ccwire"), 0o755);
  for (const file of licenses) copyFileSync(join(root, file), join(pkg, file));
  writeFileSync(
    join(pkg, "README.md"),
    `# ${platform.package}\n\nThe \`ccwire\` binary for ${key} (${platform.target}). Install \`ccwire\`, which picks it:\n\n\`\`\`sh\nnpx ccwire serve\n\`\`\`\n\nSee ${main.homepage}.\n`,
  );
  writeFileSync(
    join(pkg, "package.json"),
    `${JSON.stringify(
      {
        name: platform.package,
        version,
        description: `The ccwire binary for ${key} (${platform.target}); installed by the ccwire package.`,
        license: main.license,
        repository: main.repository,
        homepage: main.homepage,
        os: [platform.os],
        cpu: [platform.cpu],
        ...(platform.libc ? { libc: [platform.libc] } : {}),
        files: ["bin/ccwire", ...licenses, "README.md"],
        preferUnplugged: true,
      },
      null,
      2,
    )}\n`,
  );
  const [packed] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", join(out, "npm")], pkg));
  made.push(join(out, "npm", packed.filename));

  // PyPI: a wheel whose one file is the `ccwire` script (pip installs it into the bin directory).
  const name = `ccwire-${version}`;
  const tree = join(out, "pypi", key, name);
  const info = join(tree, `${name}.dist-info`);
  mkdirSync(join(tree, `${name}.data`, "scripts"), { recursive: true });
  mkdirSync(join(info, "licenses"), { recursive: true });
  copyFileSync(binary, join(tree, `${name}.data`, "scripts", "ccwire"));
  chmodSync(join(tree, `${name}.data`, "scripts", "ccwire"), 0o755);
  for (const file of licenses) copyFileSync(join(root, file), join(info, "licenses", file));
  writeFileSync(
    join(info, "METADATA"),
    [
      "Metadata-Version: 2.4",
      "Name: ccwire",
      `Version: ${version}`,
      `Summary: ${summary}`,
      `Project-URL: Homepage, ${main.homepage}`,
      `Project-URL: Source, ${main.repository.url.replace(/^git\+/, "").replace(/\.git$/, "")}`,
      `License-Expression: ${main.license}`,
      ...licenses.map((file) => `License-File: ${file}`),
      "Requires-Python: >=3.8",
      "Description-Content-Type: text/markdown",
      "",
      `# ccwire\n\nThe \`ccwire\` command (${platform.target}): \`ccwire serve\` puts the Claude Code CLI behind the Anthropic Messages, OpenAI Chat Completions and Responses APIs; \`ccwire record\`, \`replay\` and \`play\` capture and play back its sessions.\n\n\`\`\`sh\nuvx ccwire serve\n\`\`\`\n\nSee ${main.homepage}.\n`,
    ].join("\n"),
  );
  const tags = platform.wheel.split(".").map((tag) => `Tag: py3-none-${tag}`);
  writeFileSync(
    join(info, "WHEEL"),
    ["Wheel-Version: 1.0", "Generator: ccwire scripts/release/package.mjs", "Root-Is-Purelib: false", ...tags, ""].join("\n"),
  );
  writeFileSync(join(info, "RECORD"), "");
  const before = new Set(readdirSync(join(out, "pypi")));
  run("python3", ["-m", "wheel", "pack", "--dest-dir", join(out, "pypi"), tree]);
  const wheel = readdirSync(join(out, "pypi")).find((f) => f.endsWith(".whl") && !before.has(f));
  made.push(join(out, "pypi", wheel));
  rmSync(join(out, "pypi", key), { recursive: true });
}

/** Whether this machine runs the platform's binary (a static musl one runs on any Linux). */
function runsHere(platform) {
  const glibcHere = platformKey().endsWith("-gnu");
  return platform.os === process.platform && platform.cpu === process.arch && (platform.libc !== "glibc" || glibcHere);
}

// The main package: bindings/ as built, its optional dependencies every platform package at
// this version. (They are added here, not in bindings/package.json: until a release has
// published them, npm could not lock them there.)
const stage = join(out, "npm", "ccwire");
for (const file of main.files) {
  mkdirSync(dirname(join(stage, file)), { recursive: true });
  copyFileSync(join(root, "bindings", file), join(stage, file));
}
const optionalDependencies = Object.fromEntries(Object.values(PLATFORMS).map((p) => [p.package, version]));
writeFileSync(join(stage, "package.json"), `${JSON.stringify({ ...main, optionalDependencies }, null, 2)}\n`);
const [packed] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", join(out, "npm")], stage));
rmSync(stage, { recursive: true });
made.push(join(out, "npm", packed.filename));

const sums = made.map((file) => `${createHash("sha256").update(readFileSync(file)).digest("hex")}  ${basename(file)}`);
writeFileSync(join(out, "SHA256SUMS"), `${sums.join("\n")}\n`);
for (const file of made) console.log(file);
