//! A prompt's ACP content blocks as the content blocks of the CLI's user message.

use agent_client_protocol_schema::v1::{ContentBlock, EmbeddedResourceResource};
use serde_json::{json, Value};

/// The blocks of the user message for `prompt`: text as it is, images as base64 (or URL)
/// image blocks, a resource link as a mention of its URI, an embedded text resource as the
/// text in a `<context ref="…">` element after the prompt's own text. `Err` names a block
/// the agent said it does not take (audio).
pub(super) fn user_blocks(prompt: &[ContentBlock]) -> Result<Vec<Value>, String> {
    let mut blocks = Vec::new();
    let mut context = Vec::new();
    for item in prompt {
        match item {
            ContentBlock::Text(t) => blocks.push(json!({"type": "text", "text": t.text})),
            ContentBlock::Image(image) => {
                let source = match (&image.uri, image.data.is_empty()) {
                    (Some(uri), true) if uri.starts_with("http") => {
                        json!({"type": "url", "url": uri})
                    }
                    _ => {
                        json!({"type": "base64", "media_type": image.mime_type, "data": image.data})
                    }
                };
                blocks.push(json!({"type": "image", "source": source}));
            }
            ContentBlock::ResourceLink(link) => blocks.push(json!({
                "type": "text",
                "text": mention(&link.name, &link.uri),
            })),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(r) => {
                    blocks.push(json!({"type": "text", "text": mention(&r.uri, &r.uri)}));
                    context.push(json!({
                        "type": "text",
                        "text": format!("\n<context ref=\"{}\">\n{}\n</context>", r.uri, r.text),
                    }));
                }
                EmbeddedResourceResource::BlobResourceContents(r) => match r.mime_type.as_deref() {
                    Some(mime) if mime.starts_with("image/") => blocks.push(json!({
                        "type": "image",
                        "source": {"type": "base64", "media_type": mime, "data": r.blob},
                    })),
                    _ => blocks.push(json!({"type": "text", "text": mention(&r.uri, &r.uri)})),
                },
                _ => return Err("a resource of a kind ccwire does not know".into()),
            },
            ContentBlock::Audio(_) => {
                return Err(
                    "audio prompts are not supported (promptCapabilities.audio is false)".into(),
                )
            }
            _ => return Err("a content block of a kind ccwire does not know".into()),
        }
    }
    blocks.extend(context);
    Ok(blocks)
}

/// `[@name](uri)`, as editors write a mention of a file.
fn mention(name: &str, uri: &str) -> String {
    let name = name.rsplit('/').next().unwrap_or(name);
    format!("[@{name}]({uri})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_images_links_and_embedded_files() {
        let prompt: Vec<ContentBlock> = serde_json::from_value(json!([
            {"type": "text", "text": "Explain"},
            {"type": "resource_link", "name": "main.rs", "uri": "file:///w/main.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/lib.rs", "text": "pub fn f() {}"}},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        ]))
        .unwrap();
        assert_eq!(
            Value::Array(user_blocks(&prompt).unwrap()),
            json!([
                {"type": "text", "text": "Explain"},
                {"type": "text", "text": "[@main.rs](file:///w/main.rs)"},
                {"type": "text", "text": "[@lib.rs](file:///w/lib.rs)"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "text", "text": "\n<context ref=\"file:///w/lib.rs\">\npub fn f() {}\n</context>"},
            ])
        );
        let audio: Vec<ContentBlock> =
            serde_json::from_value(json!([{"type": "audio", "mimeType": "audio/wav", "data": ""}]))
                .unwrap();
        assert!(user_blocks(&audio).unwrap_err().contains("audio"));
    }
}
