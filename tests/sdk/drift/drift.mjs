// Lists the wire message types and control requests of an Agent SDK release that ccwire does not
// model.
//
//   node tests/sdk/drift/drift.mjs                 # the release in package.json (0.3.332)
//   node tests/sdk/drift/drift.mjs 0.4.0           # another release, fetched with npm pack
//   node tests/sdk/drift/drift.mjs path/to/sdk.d.ts
//
// It reads the SDK's `sdk.d.ts` with the TypeScript compiler, takes every member of the
// `SDKMessage` union (and every `type`/`subtype` pair it allows), builds one stream-json line
// per pair with every required field filled in, and runs each line through `ccwire replay`
// (CCWIRE_BIN, default target/debug/ccwire). A line that comes out as an `unknown` chunk is a
// type ccwire does not model. It does the same for every subtype of the control request union:
// a request the CLI sends must become a chunk that is not `unknown`, one a host sends must be a
// typed request (`Session.request` of the npm package, built in bindings/). It prints each and
// what it became, and exits 1 when any is unknown. `--json` prints the report as JSON instead.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const args = process.argv.slice(2);
const json = args.includes("--json");
const target = args.find((a) => !a.startsWith("--"));

function sdkTypes(target) {
  if (!target) {
    return join(here, "node_modules/@anthropic-ai/claude-agent-sdk/sdk.d.ts");
  }
  if (existsSync(target)) return resolve(target);
  const dir = mkdtempSync(join(tmpdir(), "ccwire-drift-"));
  execFileSync("npm", ["pack", `@anthropic-ai/claude-agent-sdk@${target}`, "--silent"], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const tarball = readdirSync(dir).find((f) => f.endsWith(".tgz"));
  execFileSync("tar", ["xzf", tarball], { cwd: dir });
  // Its imports (`@anthropic-ai/sdk`'s message and stream event types, MCP, zod) resolve
  // against this directory's packages; unresolved, `user`, `assistant` and `stream_event`
  // lines would be sampled without their `message` or `event`.
  symlinkSync(join(here, "node_modules"), join(dir, "node_modules"));
  return join(dir, "package/sdk.d.ts");
}

const file = sdkTypes(target);
const program = ts.createProgram([file], { strict: true, noEmit: true, skipLibCheck: true });
const checker = program.getTypeChecker();
const source = program.getSourceFile(file);
if (!source) throw new Error(`cannot read ${file}`);

function alias(name) {
  const decl = source.statements.find((s) => ts.isTypeAliasDeclaration(s) && s.name.text === name);
  if (!decl) throw new Error(`${file} has no type ${name}`);
  return checker.getTypeAtLocation(decl.name);
}

/** The string literals a type allows (`'a' | 'b'` → ['a', 'b']). */
function literals(type) {
  const types = type.isUnion() ? type.types : [type];
  return types.filter((t) => t.isStringLiteral()).map((t) => t.value);
}

function propertyType(type, name) {
  const symbol = type.getProperty(name);
  return symbol && checker.getTypeOfSymbol(symbol);
}

/** A value of `type`, with every required property filled in (to a depth). */
function sample(type, depth = 0) {
  if (type.isStringLiteral() || type.isNumberLiteral()) return type.value;
  if (type.flags & ts.TypeFlags.BooleanLiteral) return checker.typeToString(type) === "true";
  if (type.flags & ts.TypeFlags.TemplateLiteral) return type.texts.join("0");
  if (type.flags & ts.TypeFlags.String) return "x";
  if (type.flags & ts.TypeFlags.Number) return 0;
  if (type.flags & ts.TypeFlags.Boolean) return false;
  if (type.flags & (ts.TypeFlags.Null | ts.TypeFlags.Undefined)) return null;
  if (type.isUnion()) {
    const defined = type.types.filter((t) => !(t.flags & ts.TypeFlags.Undefined));
    return sample(defined.find((t) => !(t.flags & ts.TypeFlags.Null)) ?? defined[0], depth);
  }
  if (checker.isArrayType(type)) {
    // One element, so that a message's content is not empty.
    const [element] = checker.getTypeArguments(type);
    return depth > 3 || !element ? [] : [sample(element, depth + 1)];
  }
  if (checker.isTupleType(type)) return [];
  if (depth > 4 || !(type.flags & ts.TypeFlags.Object || type.isIntersection())) return {};
  const out = {};
  for (const prop of checker.getPropertiesOfType(type)) {
    if (prop.flags & ts.SymbolFlags.Optional) continue;
    out[prop.name] = sample(checker.getTypeOfSymbol(prop), depth + 1);
  }
  return out;
}

/** Every `type`/`subtype` pair of the `SDKMessage` union, with a line for each. */
function messages() {
  const union = alias("SDKMessage");
  const rows = [];
  for (const member of union.isUnion() ? union.types : [union]) {
    const name = member.aliasSymbol?.name ?? checker.typeToString(member);
    const variants = member.isUnion() ? member.types : [member];
    for (const variant of variants) {
      const types = literals(propertyType(variant, "type") ?? checker.getNeverType());
      const subtypeType = propertyType(variant, "subtype");
      const subtypes = subtypeType ? literals(subtypeType) : [];
      for (const type of types) {
        for (const subtype of subtypes.length ? subtypes : [undefined]) {
          const line = { ...sample(variant), type };
          if (subtype !== undefined) line.subtype = subtype;
          const key = `${type}${subtype ? `/${subtype}` : ""}`;
          if (!rows.some((r) => r.key === key)) rows.push({ key, name, line });
        }
      }
    }
  }
  return rows;
}

/** Every subtype of the control request union, with a sample `request` for each. */
function controlRequests() {
  const union = alias("SDKControlRequestInner");
  const rows = [];
  for (const member of union.isUnion() ? union.types : [union]) {
    for (const subtype of literals(propertyType(member, "subtype") ?? checker.getNeverType())) {
      rows.push({ subtype, name: member.aliasSymbol?.name ?? subtype, request: { ...sample(member), subtype } });
    }
  }
  return rows;
}

// The requests the CLI sends the host; every other subtype is one a host sends.
const FROM_CLI = new Set(["can_use_tool", "hook_callback", "mcp_message", "elicitation", "request_user_dialog"]);

const ccwire = process.env.CCWIRE_BIN ?? join(repo, "target/debug/ccwire");
if (!existsSync(ccwire)) {
  console.error(`drift: ${ccwire} is missing (cargo build -p ccwire-host)`);
  process.exit(2);
}

const report = messages().map((row) => {
  const out = execFileSync(ccwire, ["replay", "-"], { input: `${JSON.stringify(row.line)}\n` });
  const chunks = out
    .toString()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  return { ...row, chunks: chunks.map((c) => c.type) };
});
// A line that gives no chunk at all is dropped: as bad as unknown.
const unknownMessages = report.filter((r) => r.chunks.includes("unknown") || r.chunks.length === 0);

// Control requests: one the CLI sends must become a chunk that is not `unknown`; one a host
// sends must be a typed request of the npm package's `Session.request`.
const { Session } = await import(join(repo, "bindings/js/node.js"));
const controls = controlRequests().map((row) => {
  if (FROM_CLI.has(row.subtype)) {
    const line = { type: "control_request", request_id: "r1", request: row.request };
    const out = execFileSync(ccwire, ["replay", "-"], { input: `${JSON.stringify(line)}\n` });
    const chunks = out.toString().split("\n").filter(Boolean).map((l) => JSON.parse(l).type);
    return { ...row, direction: "cli→host", outcome: chunks.join(", "), ok: !chunks.includes("unknown") && chunks.length > 0 };
  }
  if (row.subtype === "initialize") {
    return { ...row, direction: "host→cli", outcome: "Session.initialize", ok: true };
  }
  try {
    Session.driver().request({ subtype: row.subtype }, 0);
    return { ...row, direction: "host→cli", outcome: "Session.request", ok: true };
  } catch (err) {
    const typed = !/has no typed request/.test(String(err));
    return { ...row, direction: "host→cli", outcome: typed ? "Session.request" : "not typed", ok: typed };
  }
});
const unknownControls = controls.filter((c) => !c.ok);
const unknown = [...unknownMessages, ...unknownControls];
if (json) {
  console.log(
    JSON.stringify(
      {
        sdk: file,
        messages: report,
        controls,
        unknown: [...unknownMessages.map((r) => r.key), ...unknownControls.map((c) => `control_request/${c.subtype}`)],
      },
      null,
      2,
    ),
  );
} else {
  for (const r of report) {
    const mark = unknownMessages.includes(r) ? "UNKNOWN" : "ok";
    console.log(`${mark.padEnd(8)} ${r.key.padEnd(40)} ${r.name.padEnd(36)} → ${r.chunks.join(", ") || "(nothing)"}`);
  }
  for (const c of controls) {
    const mark = c.ok ? "ok" : "UNKNOWN";
    console.log(`${mark.padEnd(8)} ${`control_request/${c.subtype}`.padEnd(40)} ${c.direction.padEnd(36)} → ${c.outcome}`);
  }
  console.log(
    `\n${report.length} message types and subtypes and ${controls.length} control request subtypes in ${file}; ` +
      `${unknown.length} unknown to ccwire`,
  );
}
process.exit(unknown.length ? 1 : 0);
