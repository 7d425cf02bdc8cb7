//! A structured answer's JSON Schema as the CLI takes it: the CLI checks `--json-schema`
//! (and a forced tool's input schema, which becomes one) with a draft-07 validator, and
//! offers the model no `StructuredOutput` tool when it refuses the schema. Client libraries
//! write other drafts: zod 4 and pydantic name draft 2020-12 in `$schema`, older tools write
//! draft-04. [`draft07`] rewrites any of them as the same constraints in draft-07's words.

use serde_json::{Map, Value};

/// `schema` in draft-07's words, with the same meaning:
/// - `$schema` is dropped (the CLI knows draft-07's meta-schema only);
/// - 2020-12: `prefixItems` (and the `items` after them) become draft-07's array form of
///   `items` (and `additionalItems`); `$dynamicRef` a `$ref`;
/// - 2019-09: `dependentRequired` and `dependentSchemas` become `dependencies`, `$anchor` a
///   `$id` of `#name`, `$recursiveRef` a `$ref`; `unevaluatedProperties` (`unevaluatedItems`)
///   becomes `additionalProperties` (`additionalItems`) where no subschema beside it could
///   have evaluated more, else it is dropped (the answer is then checked less strictly, never
///   refused for what the client accepts);
/// - draft-04: `id` becomes `$id` (in a schema whose `$schema` says draft-04), a boolean
///   `exclusiveMinimum`/`exclusiveMaximum` the number it qualifies;
/// - every other keyword the CLI's validator does not know is dropped: those draft-07 has no
///   equivalent for (`$vocabulary`, `$dynamicAnchor`, `$recursiveAnchor`, `minContains`,
///   `maxContains`), OpenAPI's (`discriminator`, `example`, `xml`) and extensions (`x-…`),
///   each of which makes the CLI refuse the whole schema. None of them constrains a value in
///   draft-07.
///
/// Only keywords in a schema's own position are read: a property named `id` or `$schema` is a
/// property, and `enum`, `const`, `default` and `examples` are values, left as they are.
pub fn draft07(schema: Value) -> Value {
    // draft-04's `id` is `$id` only in a schema that says it is draft-04: elsewhere it is no
    // keyword, and reading it as one would move the base its references resolve against.
    let draft04 =
        (schema.get("$schema").and_then(Value::as_str)).is_some_and(|s| s.contains("draft-04"));
    subschema(schema, draft04)
}

fn subschema(schema: Value, draft04: bool) -> Value {
    match schema {
        Value::Object(map) => Value::Object(object(map, draft04)),
        other => other,
    }
}

/// The keywords the CLI's validator (draft-07, strict) knows; it refuses a schema with any
/// other.
const KNOWN: [&str; 48] = [
    "$id",
    "$ref",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "nullable",
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "contentMediaType",
    "contentEncoding",
    "maxItems",
    "minItems",
    "uniqueItems",
    "items",
    "additionalItems",
    "contains",
    "maxProperties",
    "minProperties",
    "required",
    "properties",
    "patternProperties",
    "additionalProperties",
    "dependencies",
    "propertyNames",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
];

/// The keywords whose value is a schema.
const ONE: [&str; 10] = [
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// The keywords whose value is an array of schemas.
const MANY: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

/// The keywords whose value maps names to schemas.
const NAMED: [&str; 5] = [
    "properties",
    "patternProperties",
    "definitions",
    "$defs",
    "dependentSchemas",
];

fn object(mut map: Map<String, Value>, draft04: bool) -> Map<String, Value> {
    // Subschemas first, each in its own draft-07 words.
    for (key, value) in map.iter_mut() {
        let key = key.as_str();
        if ONE.contains(&key) || (key == "items" && value.is_object()) {
            *value = subschema(value.take(), draft04);
        } else if MANY.contains(&key) || (key == "items" && value.is_array()) {
            if let Value::Array(items) = value {
                for item in items.iter_mut() {
                    *item = subschema(item.take(), draft04);
                }
            }
        } else if NAMED.contains(&key) || key == "dependencies" {
            if let Value::Object(named) = value {
                for (_, child) in named.iter_mut() {
                    if child.is_object() {
                        *child = subschema(child.take(), draft04);
                    }
                }
            }
        }
    }
    // draft-04.
    if let (true, Some(Value::String(id))) = (draft04, map.get("id")) {
        if !map.contains_key("$id") {
            let id = Value::String(id.clone());
            map.remove("id");
            map.insert("$id".into(), id);
        }
    }
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(Value::Bool(on)) = map.get(exclusive) {
            let on = *on;
            map.remove(exclusive);
            if on {
                if let Some(limit) = map.remove(bound) {
                    map.insert(exclusive.into(), limit);
                }
            }
        }
    }
    // 2019-09 and 2020-12.
    for reference in ["$dynamicRef", "$recursiveRef"] {
        if let Some(target) = map.remove(reference) {
            map.entry("$ref").or_insert(target);
        }
    }
    if let Some(Value::String(anchor)) = map.remove("$anchor") {
        map.entry("$id")
            .or_insert(Value::String(format!("#{anchor}")));
    }
    if let Some(prefix) = map.remove("prefixItems") {
        if let Some(rest) = map.remove("items") {
            map.insert("additionalItems".into(), rest);
        }
        map.insert("items".into(), prefix);
    }
    let mut dependencies = match map.remove("dependencies") {
        Some(Value::Object(dependencies)) => dependencies,
        _ => Map::new(),
    };
    for split in ["dependentRequired", "dependentSchemas"] {
        if let Some(Value::Object(named)) = map.remove(split) {
            dependencies.extend(named);
        }
    }
    if !dependencies.is_empty() {
        map.insert("dependencies".into(), Value::Object(dependencies));
    }
    // What another subschema of this one may evaluate: then `unevaluated…` is not
    // `additional…`.
    let composed = ["allOf", "anyOf", "oneOf", "$ref", "if", "dependencies"]
        .iter()
        .any(|k| map.contains_key(*k));
    for (unevaluated, additional) in [
        ("unevaluatedProperties", "additionalProperties"),
        ("unevaluatedItems", "additionalItems"),
    ] {
        if let Some(rest) = map.remove(unevaluated) {
            // `unevaluatedItems` beside no tuple is what `items` says of every item.
            let target = match (additional, map.get("items")) {
                ("additionalItems", None) => "items",
                ("additionalItems", Some(Value::Object(_))) => continue,
                _ => additional,
            };
            if !composed && !map.contains_key(target) {
                map.insert(target.into(), rest);
            }
        }
    }
    // What is left that the CLI does not know (`$schema` and draft-04's `id` among them: their
    // words are in place by now).
    map.retain(|key, _| KNOWN.contains(&key.as_str()));
    map
}

#[cfg(test)]
mod tests {
    use super::draft07;
    use serde_json::json;

    #[test]
    fn a_2020_12_schema_says_the_same_in_draft_07() {
        // As zod 4 writes it (`z.toJSONSchema`), with a tuple and a recursive reference.
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "$schema": {"type": "string"},
                "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": false},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
                "card": {"type": "object", "dependentRequired": {"number": ["cvc"]},
                         "properties": {"number": {"type": "string"}, "cvc": {"type": "string"}}},
                "kind": {"const": "a", "default": {"$schema": "kept", "id": 1}},
                "strict": {"type": "object", "properties": {"a": {"type": "string"}}, "unevaluatedProperties": false},
                "loose": {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": false}
            },
            "required": ["id", "point"],
            "additionalProperties": false,
            "$defs": {"Tag": {"$anchor": "tag", "type": "string", "minContains": 1}}
        });
        assert_eq!(
            draft07(schema),
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "$schema": {"type": "string"},
                    "point": {"type": "array", "items": [{"type": "number"}, {"type": "number"}], "additionalItems": false},
                    "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
                    "card": {"type": "object", "dependencies": {"number": ["cvc"]},
                             "properties": {"number": {"type": "string"}, "cvc": {"type": "string"}}},
                    "kind": {"const": "a", "default": {"$schema": "kept", "id": 1}},
                    "strict": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false},
                    "loose": {"allOf": [{"properties": {"a": {}}}]}
                },
                "required": ["id", "point"],
                "additionalProperties": false,
                "$defs": {"Tag": {"$id": "#tag", "type": "string"}}
            })
        );
    }

    #[test]
    fn a_draft_04_schema_says_the_same_in_draft_07() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-04/schema#",
            "id": "http://example.com/order",
            "type": "object",
            "properties": {
                "qty": {"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 9, "exclusiveMaximum": false},
                "id": {"type": "string"}
            }
        });
        assert_eq!(
            draft07(schema),
            json!({
                "$id": "http://example.com/order",
                "type": "object",
                "properties": {
                    "qty": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9},
                    "id": {"type": "string"}
                }
            })
        );
    }

    #[test]
    fn an_id_outside_draft_04_is_no_keyword() {
        let schema = json!({"type": "object", "id": "person", "properties": {"a": {"id": "a"}}});
        assert_eq!(
            draft07(schema),
            json!({"type": "object", "properties": {"a": {}}})
        );
    }

    #[test]
    fn keywords_the_cli_does_not_know_are_left_out() {
        // As pydantic (a discriminated union) and OpenAPI tools write them.
        let schema = json!({
            "type": "object",
            "x-order": 1,
            "properties": {
                "pet": {
                    "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                    "discriminator": {"propertyName": "kind", "mapping": {"cat": "#/$defs/Cat"}}
                },
                "name": {"type": "string", "example": "Ada", "nullable": true, "deprecated": true,
                         "xml": {"name": "n"}, "examples": ["Ada"], "$comment": "kept"}
            },
            "$defs": {
                "Cat": {"type": "object", "properties": {"kind": {"const": "cat"}}},
                "Dog": {"type": "object", "properties": {"kind": {"const": "dog"}}}
            }
        });
        assert_eq!(
            draft07(schema),
            json!({
                "type": "object",
                "properties": {
                    "pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]},
                    "name": {"type": "string", "nullable": true, "deprecated": true,
                             "examples": ["Ada"], "$comment": "kept"}
                },
                "$defs": {
                    "Cat": {"type": "object", "properties": {"kind": {"const": "cat"}}},
                    "Dog": {"type": "object", "properties": {"kind": {"const": "dog"}}}
                }
            })
        );
    }

    #[test]
    fn a_draft_07_schema_is_left_as_it_is() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"type": "array", "items": [{"type": "string"}], "additionalItems": false}},
            "definitions": {"B": {"type": "object", "additionalProperties": {"type": "number"}}},
            "dependencies": {"a": {"required": ["b"]}}
        });
        let mut expected = schema.clone();
        expected.as_object_mut().unwrap().remove("$schema");
        assert_eq!(draft07(schema), expected);
    }
}
