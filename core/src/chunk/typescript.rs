//! The chunks' TypeScript types, generated from the chunk types: `bindings/js/chunks.d.ts`,
//! which the npm package's `index.d.ts` builds on. The test fails when the committed file is
//! not what these types give; `scripts/gen-types.sh` writes it.

use ts_rs::TS;

use super::*;

/// A flag that is present only when set: `true` in TypeScript.
#[derive(TS)]
#[ts(type = "true")]
pub(super) struct True;

fn declaration<T: TS + ?Sized + 'static>() -> String {
    let text = T::export_to_string().expect("a TypeScript declaration");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("// This file was generated") && !l.starts_with("import "))
        .collect();
    lines.join("\n").trim().to_owned()
}

/// `export type <Variant>Chunk = ChunkOf<"<type>">`, with the variant's doc comment, for
/// every chunk type but `status` (typed per subtype in index.d.ts): ts-rs leaves variant
/// docs out of a union, so they are read from the source.
fn aliases(source: &str) -> String {
    let start = source.find("pub enum Chunk {").expect("the Chunk enum");
    let body = &source[start..];
    let body = &body[..body.find("\n}\n").expect("its end")];
    let mut docs: Vec<String> = Vec::new();
    let mut out = String::new();
    for line in body.lines().skip(1) {
        if let Some(doc) = line.strip_prefix("    ///") {
            docs.push(plain_doc(doc.trim()));
            continue;
        }
        let Some(rest) = line.strip_prefix("    ") else {
            continue;
        };
        if rest.starts_with(|c: char| c.is_ascii_uppercase()) {
            let name: String = rest
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            let mut tag = String::new();
            for (i, c) in name.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    tag.push('_');
                }
                tag.push(c.to_ascii_lowercase());
            }
            if name != "Status" {
                out.push_str(&format!(
                    "\n/**\n{} */\nexport type {name}Chunk = ChunkOf<\"{tag}\">;\n",
                    docs.iter()
                        .map(|d| format!(" * {d}\n").replace(" * \n", " *\n"))
                        .collect::<String>()
                ));
            }
            docs.clear();
        } else if !rest.starts_with('#') && !rest.starts_with(' ') {
            docs.clear();
        }
    }
    out
}

/// A doc line without rustdoc's link targets: [`A`](path) becomes `A`.
fn plain_doc(doc: &str) -> String {
    let mut out = String::new();
    let mut rest = doc;
    while let Some(at) = rest.find("`](") {
        let close = rest[at..]
            .find(')')
            .map(|c| at + c)
            .unwrap_or(rest.len() - 1);
        let open = rest[..at].rfind("[`").expect("a link opens");
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..at + 1]);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out.replace("[`", "`").replace("`]", "`")
}

#[test]
fn chunk_types() {
    let declarations = [
        declaration::<Chunk>(),
        declaration::<ElicitationDetails>(),
        declaration::<ToolStatus>(),
        declaration::<StatusReason>(),
        declaration::<Behavior>(),
        declaration::<ResolveReason>(),
        declaration::<ErrorKind>(),
        declaration::<ToolWait>(),
        declaration::<BlockedOn>(),
        declaration::<BlockedKind>(),
        declaration::<TitleChanged>(),
        declaration::<InstructionSizeWarning>(),
        declaration::<FileAttachmentsMissing>(),
        declaration::<MissingFile>(),
        declaration::<PermissionCheck>(),
        declaration::<InheritedAsksSettled>(),
        declaration::<PluginUi>(),
        declaration::<CommandLifecycle>(),
        declaration::<CliEvent>(),
    ];
    let text = format!(
        "// Generated from core/src/chunk/ by scripts/gen-types.sh; do not edit.\n\
         import type {{ Json }} from \"./index.js\";\n\n{}\n\n\
         /** The chunk of one `type`. */\n\
         export type ChunkOf<T extends Chunk[\"type\"]> = Extract<Chunk, {{ type: T }}>;\n{}",
        declarations.join("\n\n"),
        aliases(include_str!("mod.rs")),
    );
    if std::env::var_os("PRINT_TYPES").is_some() {
        print!("<<<TYPES\n{text}TYPES>>>\n");
        return;
    }
    let committed = include_str!("../../../bindings/js/chunks.d.ts");
    assert!(
        committed == text,
        "bindings/js/chunks.d.ts is not what the chunk types give: run scripts/gen-types.sh"
    );
}
