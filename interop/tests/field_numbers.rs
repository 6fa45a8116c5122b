//! Field numbers and field types of `proto/kvproto/` (as compiled into
//! `meridian::kvproto::FILE_DESCRIPTOR_SET`) against an independent copy of kvproto: the
//! prost-generated Rust code that the published `tikv-client` 0.4 crate ships in
//! `src/generated/{pdpb,metapb,eraftpb}.rs`, read from Cargo's registry at test time.
//!
//! For every message and field present in both (matched by the Rust names prost-build gives
//! them), the tag, the prost kind (`uint64`, `message`, `enumeration`, `map`, ...), the
//! `repeated`-ness and the referenced message/enum/map type must agree, and no tag may belong
//! to a differently named field on the other side. For every enum present in both, every
//! value present in both (matched by its protobuf name) must have the same number.
//! tikv-client 0.4 was generated from an older kvproto, so fields and messages that only we
//! have are counted and listed, not failed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};

/// The kvproto packages Meridian compiles.
const PACKAGES: [&str; 3] = ["pdpb", "metapb", "eraftpb"];

// ---------------------------------------------------------------------------------------------
// Naming: prost-build 0.14's `ident.rs` (`to_snake`, `to_upper_camel`, `strip_enum_prefix`,
// `sanitize_identifier`), whose case conversion is heck 0.5's word splitting.
// ---------------------------------------------------------------------------------------------

/// heck 0.5's `transform` word splitting: non-alphanumeric characters separate words; inside
/// one, a boundary falls between a lowercase letter (or an uncased character after one) and an
/// uppercase letter, and before the last capital of a capital run followed by a lowercase
/// letter (`HTTPServer` -> `HTTP`, `Server`).
fn words(s: &str) -> Vec<&str> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mode {
        Boundary,
        Lowercase,
        Uppercase,
    }
    let mut out = Vec::new();
    for word in s.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        let mut init = 0;
        let mut mode = Mode::Boundary;
        for (k, &(i, c)) in chars.iter().enumerate() {
            let Some(&(next_i, next)) = chars.get(k + 1) else {
                out.push(&word[init..]);
                break;
            };
            let next_mode = if c.is_lowercase() {
                Mode::Lowercase
            } else if c.is_uppercase() {
                Mode::Uppercase
            } else {
                mode
            };
            if next_mode == Mode::Lowercase && next.is_uppercase() {
                out.push(&word[init..next_i]);
                init = next_i;
                mode = Mode::Boundary;
            } else if mode == Mode::Uppercase && c.is_uppercase() && next.is_lowercase() {
                out.push(&word[init..i]);
                init = i;
                mode = Mode::Boundary;
            } else {
                mode = next_mode;
            }
        }
    }
    out
}

/// prost-build's `sanitize_identifier`.
fn sanitize_identifier(ident: String) -> String {
    const RAW: &[&str] = &[
        "as", "break", "const", "continue", "else", "enum", "false", "fn", "for", "if", "impl",
        "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static",
        "struct", "trait", "true", "type", "unsafe", "use", "where", "while", "dyn", "abstract",
        "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized",
        "virtual", "yield", "async", "await", "try", "gen",
    ];
    match ident.as_str() {
        s if RAW.contains(&s) => format!("r#{s}"),
        "_" | "super" | "self" | "Self" | "extern" | "crate" => format!("{ident}_"),
        s if s.starts_with(|c: char| c.is_numeric()) => format!("_{s}"),
        _ => ident,
    }
}

/// prost-build's `to_snake`: field and module names.
fn to_snake(s: &str) -> String {
    let w: Vec<String> = words(s).iter().map(|w| w.to_lowercase()).collect();
    sanitize_identifier(w.join("_"))
}

/// prost-build's `to_upper_camel`: type and enum variant names.
fn to_upper_camel(s: &str) -> String {
    let mut out = String::new();
    for w in words(s) {
        let mut chars = w.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.extend(chars.flat_map(char::to_lowercase));
        }
    }
    sanitize_identifier(out)
}

/// prost-build's `strip_enum_prefix`: both arguments already upper camel case.
fn strip_enum_prefix(prefix: &str, name: &str) -> String {
    let stripped = name.strip_prefix(prefix).unwrap_or(name);
    let stripped = if stripped.chars().next().is_some_and(char::is_uppercase) {
        stripped
    } else {
        name
    };
    sanitize_identifier(stripped.to_string())
}

/// The Rust variant prost-build generates for value `value` of enum `enum_name` (proto names).
fn variant_name(enum_name: &str, value: &str) -> String {
    strip_enum_prefix(&to_upper_camel(enum_name), &to_upper_camel(value))
}

/// The last segment of a `.pkg.Outer.Name` or `super::pkg::Name` type path.
fn last_segment(path: &str) -> &str {
    path.rsplit(['.', ':']).next().unwrap_or(path).trim()
}

// ---------------------------------------------------------------------------------------------
// The model both sides are reduced to.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
struct Field {
    tag: u32,
    /// prost's kind keyword: `uint64`, `string`, `bytes`, `message`, `enumeration`, `map`, ...
    kind: String,
    repeated: bool,
    /// `message`: the message's type name; `enumeration`: the enum's; `map`: `"key, value"`
    /// kinds. Rust (upper camel case) names, last path segment only.
    type_ref: Option<String>,
}

#[derive(Clone, Debug, Default)]
struct Model {
    /// `pkg.Message` (nested: `pkg.outer.Inner`, as prost's modules) -> Rust field name -> field.
    messages: BTreeMap<String, BTreeMap<String, Field>>,
    /// `pkg.Enum` -> protobuf value name -> (Rust variant, number).
    enums: BTreeMap<String, BTreeMap<String, (String, i32)>>,
    /// Members of `oneof`s (not compared).
    oneof_fields_skipped: usize,
}

// ---------------------------------------------------------------------------------------------
// Our side: the compiled descriptors.
// ---------------------------------------------------------------------------------------------

fn kind_of(t: Type) -> &'static str {
    match t {
        Type::Double => "double",
        Type::Float => "float",
        Type::Int64 => "int64",
        Type::Uint64 => "uint64",
        Type::Int32 => "int32",
        Type::Fixed64 => "fixed64",
        Type::Fixed32 => "fixed32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Group => "group",
        Type::Message => "message",
        Type::Bytes => "bytes",
        Type::Uint32 => "uint32",
        Type::Enum => "enumeration",
        Type::Sfixed32 => "sfixed32",
        Type::Sfixed64 => "sfixed64",
        Type::Sint32 => "sint32",
        Type::Sint64 => "sint64",
    }
}

/// Full protobuf name (`.pkg.Msg.FooEntry`) of every map entry type -> `"key, value"` kinds.
fn map_entries(prefix: &str, messages: &[DescriptorProto], out: &mut BTreeMap<String, String>) {
    for m in messages {
        let full = format!("{prefix}.{}", m.name());
        if m.options.as_ref().is_some_and(|o| o.map_entry()) {
            let kind = |n: i32| {
                m.field
                    .iter()
                    .find(|f| f.number() == n)
                    .map_or("?", |f| kind_of(f.r#type()))
            };
            out.insert(full.clone(), format!("{}, {}", kind(1), kind(2)));
        }
        map_entries(&full, &m.nested_type, out);
    }
}

fn add_enums(rust_prefix: &str, enums: &[EnumDescriptorProto], model: &mut Model) {
    for e in enums {
        let values = e
            .value
            .iter()
            .map(|v| {
                let rust = variant_name(e.name(), v.name());
                (v.name().to_string(), (rust, v.number()))
            })
            .collect();
        model.enums.insert(
            format!("{rust_prefix}.{}", to_upper_camel(e.name())),
            values,
        );
    }
}

fn add_messages(
    proto_prefix: &str,
    rust_prefix: &str,
    messages: &[DescriptorProto],
    maps: &BTreeMap<String, String>,
    model: &mut Model,
) {
    for m in messages {
        if m.options.as_ref().is_some_and(|o| o.map_entry()) {
            continue; // prost generates a HashMap, not a struct
        }
        let mut fields = BTreeMap::new();
        for f in &m.field {
            if f.oneof_index.is_some() && !f.proto3_optional() {
                model.oneof_fields_skipped += 1;
                continue;
            }
            let field = if let Some(kv) = maps.get(f.type_name()) {
                Field {
                    tag: u32::try_from(f.number()).expect("field number"),
                    kind: "map".into(),
                    repeated: false,
                    type_ref: Some(kv.clone()),
                }
            } else {
                let t = f.r#type();
                Field {
                    tag: u32::try_from(f.number()).expect("field number"),
                    kind: kind_of(t).into(),
                    repeated: f.label() == Label::Repeated,
                    type_ref: matches!(t, Type::Message | Type::Enum | Type::Group)
                        .then(|| to_upper_camel(last_segment(f.type_name()))),
                }
            };
            fields.insert(to_snake(f.name()), field);
        }
        model.messages.insert(
            format!("{rust_prefix}.{}", to_upper_camel(m.name())),
            fields,
        );
        let proto_inner = format!("{proto_prefix}.{}", m.name());
        let rust_inner = format!("{rust_prefix}.{}", to_snake(m.name()));
        add_messages(&proto_inner, &rust_inner, &m.nested_type, maps, model);
        add_enums(&rust_inner, &m.enum_type, model);
    }
}

fn model_from_descriptors(set: &FileDescriptorSet) -> Model {
    let mut maps = BTreeMap::new();
    for file in &set.file {
        map_entries(
            &format!(".{}", file.package()),
            &file.message_type,
            &mut maps,
        );
    }
    let mut model = Model::default();
    for file in set.file.iter().filter(|f| PACKAGES.contains(&f.package())) {
        let pkg = file.package();
        add_messages(
            &format!(".{pkg}"),
            pkg,
            &file.message_type,
            &maps,
            &mut model,
        );
        add_enums(pkg, &file.enum_type, &mut model);
    }
    model
}

// ---------------------------------------------------------------------------------------------
// Their side: prost-generated Rust source, parsed line by line.
// ---------------------------------------------------------------------------------------------

/// `Name` from `<keyword>Name {` (or `<keyword>Name {}`), `Name` a plain identifier.
fn item_name<'a>(line: &'a str, keyword: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(keyword)?;
    let name = rest
        .strip_suffix(" {")
        .or_else(|| rest.strip_suffix(" {}"))?;
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(name)
}

/// Splits on commas outside double quotes.
fn split_attr(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// `"string, enumeration(Foo)"` -> `"string, enumeration"`.
fn normalize_map_kinds(s: &str) -> String {
    s.split(',')
        .map(|p| p.split('(').next().unwrap_or(p).trim())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The contents of one `#[prost(...)]` attribute plus the field's declared Rust type -> the
/// field, or `None` for a `oneof`.
fn field_from_attr(attr: &str, rust_type: &str) -> Result<Option<Field>, String> {
    let mut kind = None;
    let mut kind_arg = None;
    let mut tag = None;
    let mut repeated = false;
    for (i, part) in split_attr(attr).iter().enumerate() {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().trim_matches('"').to_string())),
            None => (part.as_str(), None),
        };
        match key {
            "oneof" => return Ok(None),
            "tag" => {
                let v = value.ok_or_else(|| format!("tag without value in `{attr}`"))?;
                tag = Some(v.parse::<u32>().map_err(|e| format!("tag `{v}`: {e}"))?);
            }
            "repeated" => repeated = true,
            _ if i == 0 => {
                kind = Some(key.to_string());
                kind_arg = value;
            }
            _ => {} // optional, required, packed = "..", default = "..", ...
        }
    }
    let kind = kind.ok_or_else(|| format!("no kind in `{attr}`"))?;
    let tag = tag.ok_or_else(|| format!("no tag in `{attr}`"))?;
    let type_ref = match kind.as_str() {
        "enumeration" => kind_arg.as_deref().map(|p| last_segment(p).to_string()),
        "map" => kind_arg.as_deref().map(normalize_map_kinds),
        "message" | "group" => {
            // `::core::option::Option<super::metapb::Peer>`, `Vec<Member>`, `Option<Box<X>>`:
            // the innermost generic argument.
            let inner = rust_type.rsplit('<').next().unwrap_or(rust_type);
            let inner = inner.split('>').next().unwrap_or(inner);
            Some(last_segment(inner.trim().trim_end_matches(',')).to_string())
        }
        _ => None,
    };
    Ok(Some(Field {
        tag,
        kind,
        repeated,
        type_ref,
    }))
}

/// Fields of one struct body (the lines between `pub struct X {` and its `}`).
fn parse_struct_body(
    lines: &[&str],
    skipped: &mut usize,
) -> Result<BTreeMap<String, Field>, String> {
    let mut fields = BTreeMap::new();
    let mut attr: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        i += 1;
        if t.starts_with("#[prost(") {
            let mut text = t.to_string();
            while !text.ends_with(")]") {
                let next = lines
                    .get(i)
                    .ok_or_else(|| format!("unterminated attribute `{text}`"))?;
                text.push(' ');
                text.push_str(next.trim());
                i += 1;
            }
            let inner = &text["#[prost(".len()..text.len() - ")]".len()];
            attr = Some(inner.to_string());
        } else if let Some(decl) = t.strip_prefix("pub ") {
            // The declaration may continue over several lines (`Option<\n  Long::Path,\n >,`).
            let mut decl = decl.to_string();
            let depth = |s: &str| s.matches('<').count() as i64 - s.matches('>').count() as i64;
            while depth(&decl) > 0 || !decl.ends_with(',') {
                let next = lines
                    .get(i)
                    .ok_or_else(|| format!("unterminated field `{decl}`"))?;
                decl.push(' ');
                decl.push_str(next.trim());
                i += 1;
            }
            let (name, ty) = decl
                .split_once(':')
                .ok_or_else(|| format!("field without type: `{decl}`"))?;
            let Some(a) = attr.take() else {
                return Err(format!("field `{name}` without #[prost(..)]"));
            };
            match field_from_attr(&a, ty)? {
                Some(f) => {
                    fields.insert(name.trim().to_string(), f);
                }
                None => *skipped += 1,
            }
        }
        // Doc comments and other attributes are skipped.
    }
    Ok(fields)
}

/// The arms of `from_str_name` in an enum's `impl` body: `"NOT_BOOTSTRAPPED" =>
/// Some(Self::NotBootstrapped),`, or for long names `"X" => {` / `Some(Self::Y)` / `}` over
/// three lines -> (protobuf name, Rust variant).
fn from_str_arms(body: &[&str]) -> Vec<(String, String)> {
    let text = body.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    let mut arms = Vec::new();
    let mut rest = text.as_str();
    while let Some(pos) = rest.find("\" =>") {
        let before = &rest[..pos];
        rest = &rest[pos + "\" =>".len()..];
        let Some(open) = before.rfind('"') else {
            continue;
        };
        let after = rest.trim_start().trim_start_matches('{').trim_start();
        let Some(variant) = after.strip_prefix("Some(Self::") else {
            continue;
        };
        let variant: String = variant
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        arms.push((before[open + 1..].to_string(), variant));
    }
    arms
}

/// Adds the messages and enums of one prost-generated file (package `package`) to `model`.
fn parse_generated(package: &str, text: &str, model: &mut Model) -> Result<(), String> {
    enum Item {
        Struct,
        Enum,
        Impl,
    }
    let mut mods: Vec<(String, usize)> = Vec::new();
    let mut open: Option<(Item, String, usize, Vec<&str>)> = None;
    let mut derive = String::new();
    let mut in_attr = false;
    let mut variants: BTreeMap<String, BTreeMap<String, i32>> = BTreeMap::new();
    let mut from_str: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();

    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if let Some((_, _, start, body)) = &mut open {
            if t == "}" && indent == *start {
                let (item, name, _, body) = open.take().expect("open item");
                match item {
                    Item::Struct => {
                        let fields = parse_struct_body(&body, &mut model.oneof_fields_skipped)
                            .map_err(|e| format!("{package}: struct {name}: {e}"))?;
                        model.messages.insert(name, fields);
                    }
                    Item::Enum => {
                        let mut values = BTreeMap::new();
                        for l in body {
                            let l = l.trim();
                            if let Some((v, n)) =
                                l.strip_suffix(',').and_then(|l| l.split_once(" = "))
                            {
                                let n = n
                                    .parse::<i32>()
                                    .map_err(|e| format!("{package}: enum {name}: `{l}`: {e}"))?;
                                values.insert(v.to_string(), n);
                            }
                        }
                        variants.insert(name, values);
                    }
                    Item::Impl => {
                        let arms = from_str_arms(&body);
                        if !arms.is_empty() {
                            from_str.insert(name, arms);
                        }
                    }
                }
            } else {
                body.push(line);
            }
            continue;
        }
        let qualified = |name: &str| {
            let mut q = package.to_string();
            for (m, _) in &mods {
                q.push('.');
                q.push_str(m);
            }
            format!("{q}.{name}")
        };
        if t == "}" {
            if mods.last().is_some_and(|(_, i)| *i == indent) {
                mods.pop();
            }
        } else if let Some(name) = item_name(t, "pub mod ") {
            mods.push((name.to_string(), indent));
            derive.clear();
        } else if let Some(name) = item_name(t, "pub struct ") {
            let item = derive.contains("::prost::Message").then_some(Item::Struct);
            derive.clear();
            if let Some(item) = item {
                if t.ends_with("{}") {
                    model.messages.insert(qualified(name), BTreeMap::new());
                } else {
                    open = Some((item, qualified(name), indent, Vec::new()));
                }
            }
        } else if let Some(name) = item_name(t, "pub enum ") {
            let is_enum = derive.contains("::prost::Enumeration");
            derive.clear();
            if is_enum {
                open = Some((Item::Enum, qualified(name), indent, Vec::new()));
            }
        } else if let Some(name) = item_name(t, "impl ") {
            derive.clear();
            open = Some((Item::Impl, qualified(name), indent, Vec::new()));
        } else if t.starts_with("#[") || in_attr {
            // Attributes (possibly over several lines) before the next item.
            derive.push_str(t);
            in_attr = !t.ends_with(']');
        } else if !t.starts_with("//") {
            derive.clear(); // anything else between the attributes and an item we read
        }
    }
    if let Some((_, name, _, _)) = open {
        return Err(format!("{package}: item {name} not closed"));
    }

    for (name, values) in variants {
        let arms = from_str
            .get(&name)
            .ok_or_else(|| format!("{package}: enum {name} has no from_str_name"))?;
        let mut by_proto = BTreeMap::new();
        for (proto, rust) in arms {
            let n = values
                .get(rust)
                .ok_or_else(|| format!("{package}: {name}::{rust} not among the variants"))?;
            by_proto.insert(proto.clone(), (rust.clone(), *n));
        }
        model.enums.insert(name, by_proto);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The comparison.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Report {
    messages_compared: usize,
    fields_compared: usize,
    enums_compared: usize,
    values_compared: usize,
    /// `(message, field, tag)` of every field whose name and tag were found equal.
    checked: BTreeSet<(String, String, u32)>,
    only_ours_messages: Vec<String>,
    only_ours_fields: Vec<String>,
    only_ours_enums: Vec<String>,
    only_ours_values: Vec<String>,
    mismatches: Vec<String>,
}

fn compare(ours: &Model, theirs: &Model) -> Report {
    let mut r = Report::default();
    for (msg, fields) in &ours.messages {
        let Some(their_fields) = theirs.messages.get(msg) else {
            r.only_ours_messages.push(msg.clone());
            continue;
        };
        r.messages_compared += 1;
        let mut their_by_tag: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
        for (name, f) in their_fields {
            their_by_tag.entry(f.tag).or_default().push(name);
        }
        for (name, f) in fields {
            match their_fields.get(name) {
                Some(t) => {
                    r.fields_compared += 1;
                    if t.tag == f.tag {
                        r.checked.insert((msg.clone(), name.clone(), f.tag));
                    } else {
                        r.mismatches.push(format!(
                            "{msg}.{name}: tag {} here, {} in tikv-client",
                            f.tag, t.tag
                        ));
                    }
                    if t.kind != f.kind {
                        r.mismatches.push(format!(
                            "{msg}.{name}: kind `{}` here, `{}` in tikv-client",
                            f.kind, t.kind
                        ));
                    }
                    if t.repeated != f.repeated {
                        r.mismatches.push(format!(
                            "{msg}.{name}: repeated={} here, repeated={} in tikv-client",
                            f.repeated, t.repeated
                        ));
                    }
                    if let (Some(a), Some(b)) = (&f.type_ref, &t.type_ref) {
                        if a != b {
                            r.mismatches.push(format!(
                                "{msg}.{name}: type `{a}` here, `{b}` in tikv-client"
                            ));
                        }
                    }
                }
                None => r.only_ours_fields.push(format!("{msg}.{name} = {}", f.tag)),
            }
            for other in their_by_tag.get(&f.tag).into_iter().flatten() {
                if *other != name {
                    r.mismatches.push(format!(
                        "{msg}: tag {} is `{name}` here but `{other}` in tikv-client",
                        f.tag
                    ));
                }
            }
        }
    }
    for (e, values) in &ours.enums {
        let Some(their_values) = theirs.enums.get(e) else {
            r.only_ours_enums.push(e.clone());
            continue;
        };
        r.enums_compared += 1;
        let mut their_by_number: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
        for (proto, (_, n)) in their_values {
            their_by_number.entry(*n).or_default().push(proto);
        }
        for (proto, (rust, n)) in values {
            if let Some((their_rust, their_n)) = their_values.get(proto) {
                r.values_compared += 1;
                if their_n != n {
                    r.mismatches
                        .push(format!("{e}.{proto}: {n} here, {their_n} in tikv-client"));
                }
                if their_rust != rust {
                    r.mismatches.push(format!(
                        "{e}.{proto}: naming: prost-build rules give `{rust}`, tikv-client has \
                         `{their_rust}` (this test's naming functions are off)"
                    ));
                }
            } else {
                r.only_ours_values.push(format!("{e}.{proto} = {n}"));
            }
            let others = their_by_number
                .get(n)
                .map(Vec::as_slice)
                .unwrap_or_default();
            if !others.is_empty() && !others.contains(&proto.as_str()) {
                r.mismatches.push(format!(
                    "{e}: value {n} is `{proto}` here but {others:?} in tikv-client"
                ));
            }
        }
    }
    r
}

// ---------------------------------------------------------------------------------------------
// Loading both sides.
// ---------------------------------------------------------------------------------------------

/// The directory of the `tikv-client` package Cargo resolved for this workspace.
///
/// `--filter-platform <host>`: without it `cargo metadata` wants the sources of every
/// platform's dependencies (macOS' `core-foundation`, ...), which `--offline` cannot fetch and
/// a Linux build never downloads.
fn tikv_client_dir() -> (PathBuf, String) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let host = Command::new(&cargo).arg("-vV").output().ok().and_then(|o| {
        let text = String::from_utf8(o.stdout).ok()?;
        let line = text.lines().find_map(|l| l.strip_prefix("host: "))?;
        Some(line.trim().to_string())
    });
    let mut args = vec!["metadata", "--format-version", "1", "--locked", "--offline"];
    if let Some(host) = &host {
        args.extend(["--filter-platform", host.as_str()]);
    }
    let out = Command::new(&cargo)
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("running `{cargo:?} metadata`: {e}"));
    assert!(
        out.status.success(),
        "`{cargo:?} {}` in {} failed: {}",
        args.join(" "),
        env!("CARGO_MANIFEST_DIR"),
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("`cargo metadata` output is not JSON");
    let packages = meta["packages"]
        .as_array()
        .expect("`cargo metadata` output has no `packages`");
    let candidates: Vec<&serde_json::Value> = packages
        .iter()
        .filter(|p| p["name"] == "tikv-client")
        .collect();
    let pkg = candidates
        .iter()
        .find(|p| p["version"].as_str().is_some_and(|v| v.starts_with("0.4.")))
        .or(candidates.first())
        .unwrap_or_else(|| {
            panic!(
                "package `tikv-client` not found in `cargo metadata` of {} \
                 (is it still a dev-dependency of interop?)",
                env!("CARGO_MANIFEST_DIR")
            )
        });
    let manifest = pkg["manifest_path"]
        .as_str()
        .expect("tikv-client has no manifest_path");
    let dir = Path::new(manifest)
        .parent()
        .expect("manifest_path has a parent")
        .to_path_buf();
    (dir, pkg["version"].as_str().unwrap_or("?").to_string())
}

struct Sides {
    ours: Model,
    theirs: Model,
    source: String,
}

fn sides() -> &'static Sides {
    static SIDES: OnceLock<Sides> = OnceLock::new();
    SIDES.get_or_init(|| {
        let set = FileDescriptorSet::decode(meridian::kvproto::FILE_DESCRIPTOR_SET)
            .expect("decoding meridian::kvproto::FILE_DESCRIPTOR_SET");
        let ours = model_from_descriptors(&set);

        let (dir, version) = tikv_client_dir();
        let generated = dir.join("src").join("generated");
        let mut theirs = Model::default();
        for pkg in PACKAGES {
            let path = generated.join(format!("{pkg}.rs"));
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if pkg == "eraftpb" && e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => panic!("reading {}: {e}", path.display()),
            };
            parse_generated(pkg, &text, &mut theirs)
                .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
        }
        Sides {
            ours,
            theirs,
            source: format!("tikv-client {version} ({})", generated.display()),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn field_numbers_and_types_match_tikv_client() {
    let Sides {
        ours,
        theirs,
        source,
    } = sides();
    let r = compare(ours, theirs);

    println!(
        "field_numbers: {} messages / {} fields / {} enums / {} enum values compared with \
         {source}; only ours (tikv-client's kvproto is older): {} fields in shared messages, \
         {} messages, {} enums, {} enum values; oneof members skipped: ours {}, theirs {}",
        r.messages_compared,
        r.fields_compared,
        r.enums_compared,
        r.values_compared,
        r.only_ours_fields.len(),
        r.only_ours_messages.len(),
        r.only_ours_enums.len(),
        r.only_ours_values.len(),
        ours.oneof_fields_skipped,
        theirs.oneof_fields_skipped,
    );
    println!("only-ours fields: {}", r.only_ours_fields.join(", "));
    println!("only-ours messages: {}", r.only_ours_messages.join(", "));
    println!(
        "only-ours enums: {}; only-ours enum values: {}",
        r.only_ours_enums.join(", "),
        r.only_ours_values.join(", ")
    );

    assert!(
        r.mismatches.is_empty(),
        "{} mismatches against {source}:\n  {}",
        r.mismatches.len(),
        r.mismatches.join("\n  ")
    );

    // Not vacuous: the parsers found the two sides and matched most of them up.
    assert!(
        r.messages_compared >= 40,
        "only {} messages compared",
        r.messages_compared
    );
    assert!(
        r.fields_compared >= 150,
        "only {} fields compared",
        r.fields_compared
    );
    assert!(
        r.enums_compared >= 5,
        "only {} enums compared",
        r.enums_compared
    );
    let key = [
        ("pdpb.RequestHeader", "cluster_id", 1),
        ("pdpb.ResponseHeader", "error", 2),
        ("pdpb.Error", "r#type", 1),
        ("pdpb.TsoRequest", "count", 2),
        ("pdpb.TsoResponse", "timestamp", 3),
        ("pdpb.AllocIdResponse", "id", 2),
        ("pdpb.GetMembersResponse", "leader", 3),
        ("pdpb.GetMembersResponse", "tso_allocator_leaders", 5),
        ("pdpb.GetRegionResponse", "region", 2),
        ("pdpb.GetRegionResponse", "leader", 3),
        ("pdpb.RegionHeartbeatRequest", "leader", 3),
        ("pdpb.RegionHeartbeatResponse", "change_peer", 2),
        ("pdpb.RegionHeartbeatResponse", "region_id", 4),
        ("pdpb.RegionHeartbeatResponse", "merge", 7),
        ("pdpb.Merge", "target", 1),
        ("pdpb.GetGcSafePointResponse", "safe_point", 2),
        ("pdpb.UpdateServiceGcSafePointRequest", "ttl", 3),
        ("metapb.Region", "region_epoch", 4),
        ("metapb.Region", "peers", 5),
        ("metapb.Peer", "role", 3),
        ("metapb.Store", "address", 2),
    ];
    let missing: Vec<String> = key
        .iter()
        .filter(|(m, f, t)| !r.checked.contains(&(m.to_string(), f.to_string(), *t)))
        .map(|(m, f, t)| format!("{m}.{f} = {t}"))
        .collect();
    assert!(missing.is_empty(), "key fields not checked: {missing:?}");
    for e in [
        "pdpb.ErrorType",
        "metapb.PeerRole",
        "metapb.StoreState",
        "eraftpb.ConfChangeType",
    ] {
        assert!(
            ours.enums.contains_key(e) && theirs.enums.contains_key(e),
            "enum {e} not compared"
        );
    }
}

#[test]
fn naming_follows_prost_build() {
    assert_eq!(to_upper_camel("AllocIDRequest"), "AllocIdRequest");
    assert_eq!(
        to_upper_camel("GetGCSafePointRequest"),
        "GetGcSafePointRequest"
    );
    assert_eq!(
        to_upper_camel("GetGCSafePointV2Request"),
        "GetGcSafePointV2Request"
    );
    assert_eq!(
        to_upper_camel("GetRegionByIDRequest"),
        "GetRegionByIdRequest"
    );
    assert_eq!(to_upper_camel("SyncMaxTSRequest"), "SyncMaxTsRequest");
    assert_eq!(to_upper_camel("TSOResponse"), "TsoResponse");
    assert_eq!(to_snake("TTL"), "ttl");
    assert_eq!(to_snake("serviceModes"), "service_modes");
    assert_eq!(to_snake("type"), "r#type");
    assert_eq!(to_snake("cluster_id"), "cluster_id");
    assert_eq!(to_snake("GetMembersResponse"), "get_members_response");
    assert_eq!(
        variant_name("ErrorType", "NOT_BOOTSTRAPPED"),
        "NotBootstrapped"
    );
    assert_eq!(variant_name("ServiceMode", "PD_SVC_MODE"), "PdSvcMode");
    assert_eq!(variant_name("PeerRole", "IncomingVoter"), "IncomingVoter");
    assert_eq!(
        variant_name("ConfChangeType", "AddLearnerNode"),
        "AddLearnerNode"
    );
    assert_eq!(variant_name("Color", "COLOR_RED"), "Red");
    assert_eq!(variant_name("Foo", "Foobar"), "Foobar");
    assert_eq!(variant_name("Foo", "FOO_SELF"), "Self_");
}

#[test]
fn parser_reads_prost_output() {
    let src = r#"// This file is @generated by prost-build.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Outer {
    /// doc
    #[prost(uint64, tag = "1")]
    pub cluster_id: u64,
    #[prost(message, optional, tag = "2")]
    pub peer: ::core::option::Option<
        super::metapb::Peer,
    >,
    #[prost(
        enumeration = "super::eraftpb::ConfChangeType",
        tag = "3"
    )]
    pub r#type: i32,
    #[prost(map = "string, message", tag = "4")]
    pub members: ::std::collections::HashMap<
        ::prost::alloc::string::String,
        Member,
    >,
    #[prost(uint64, repeated, tag = "5")]
    pub ids: ::prost::alloc::vec::Vec<u64>,
    #[prost(oneof = "outer::Choice", tags = "6, 7")]
    pub choice: ::core::option::Option<outer::Choice>,
}
/// Nested message and enum types in `Outer`.
pub mod outer {
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Inner {
        #[prost(bytes = "vec", tag = "1")]
        pub data: ::prost::alloc::vec::Vec<u8>,
    }
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Choice {
        #[prost(string, tag = "6")]
        A(::prost::alloc::string::String),
        #[prost(message, tag = "7")]
        B(Inner),
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Empty {}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum ErrorType {
    Ok = 0,
    /// doc
    NotBootstrapped = 2,
    RegionsNotContainAllKeyRange = 12,
}
impl ErrorType {
    pub fn as_str_name(&self) -> &'static str {
        match self {
            ErrorType::Ok => "OK",
            ErrorType::NotBootstrapped => "NOT_BOOTSTRAPPED",
            ErrorType::RegionsNotContainAllKeyRange => "REGIONS_NOT_CONTAIN_ALL_KEY_RANGE",
        }
    }
    pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
        match value {
            "OK" => Some(Self::Ok),
            "NOT_BOOTSTRAPPED" => Some(Self::NotBootstrapped),
            "REGIONS_NOT_CONTAIN_ALL_KEY_RANGE" => {
                Some(Self::RegionsNotContainAllKeyRange)
            }
            _ => None,
        }
    }
}
pub mod pd_client {
    #[derive(Debug, Clone)]
    pub struct PdClient<T> {
        inner: tonic::client::Grpc<T>,
    }
    impl<T> PdClient<T> {
        pub fn new(inner: T) -> Self {
            Self { inner }
        }
    }
}
"#;
    let mut m = Model::default();
    parse_generated("pdpb", src, &mut m).unwrap();
    let f = |tag, kind: &str, repeated, type_ref: Option<&str>| Field {
        tag,
        kind: kind.into(),
        repeated,
        type_ref: type_ref.map(Into::into),
    };
    let outer = &m.messages["pdpb.Outer"];
    assert_eq!(outer.len(), 5, "{outer:?}");
    assert_eq!(outer["cluster_id"], f(1, "uint64", false, None));
    assert_eq!(outer["peer"], f(2, "message", false, Some("Peer")));
    assert_eq!(
        outer["r#type"],
        f(3, "enumeration", false, Some("ConfChangeType"))
    );
    assert_eq!(
        outer["members"],
        f(4, "map", false, Some("string, message"))
    );
    assert_eq!(outer["ids"], f(5, "uint64", true, None));
    assert_eq!(m.oneof_fields_skipped, 1);
    assert_eq!(
        m.messages["pdpb.outer.Inner"]["data"],
        f(1, "bytes", false, None)
    );
    assert!(m.messages["pdpb.Empty"].is_empty());
    assert_eq!(m.messages.len(), 3, "{:?}", m.messages.keys());
    assert_eq!(m.enums.len(), 1, "{:?}", m.enums.keys());
    assert_eq!(
        m.enums["pdpb.ErrorType"]["NOT_BOOTSTRAPPED"],
        ("NotBootstrapped".to_string(), 2)
    );
    assert_eq!(
        m.enums["pdpb.ErrorType"]["REGIONS_NOT_CONTAIN_ALL_KEY_RANGE"],
        ("RegionsNotContainAllKeyRange".to_string(), 12)
    );
    assert_eq!(m.enums["pdpb.ErrorType"].len(), 3);
}

fn field_mut<'a>(m: &'a mut Model, msg: &str, name: &str) -> &'a mut Field {
    m.messages
        .get_mut(msg)
        .and_then(|f| f.get_mut(name))
        .unwrap_or_else(|| panic!("{msg}.{name} not in tikv-client's side"))
}

/// The comparison does report a perturbed copy of tikv-client's side.
#[test]
fn comparison_reports_tampering() {
    let Sides { ours, theirs, .. } = sides();
    assert!(compare(ours, theirs).mismatches.is_empty());

    let expect = |what: &str, tamper: &dyn Fn(&mut Model), needle: &str| {
        let mut t = theirs.clone();
        tamper(&mut t);
        let r = compare(ours, &t);
        assert!(
            r.mismatches.iter().any(|m| m.contains(needle)),
            "{what}: no mismatch containing `{needle}` in {:?}",
            r.mismatches
        );
    };
    expect(
        "tag changed",
        &|t| field_mut(t, "pdpb.RequestHeader", "cluster_id").tag = 7,
        "pdpb.RequestHeader.cluster_id: tag 1 here, 7 in tikv-client",
    );
    expect(
        "tags swapped",
        &|t| {
            let m = t.messages.get_mut("pdpb.TsoRequest").unwrap();
            m.get_mut("count").unwrap().tag = 3;
            m.get_mut("dc_location").unwrap().tag = 2;
        },
        "pdpb.TsoRequest: tag 2 is `count` here but `dc_location` in tikv-client",
    );
    expect(
        "field renamed",
        &|t| {
            let m = t.messages.get_mut("metapb.Region").unwrap();
            let f = m.remove("region_epoch").unwrap();
            m.insert("epoch".into(), f);
        },
        "metapb.Region: tag 4 is `region_epoch` here but `epoch` in tikv-client",
    );
    expect(
        "kind changed",
        &|t| field_mut(t, "pdpb.TsoRequest", "count").kind = "uint64".into(),
        "pdpb.TsoRequest.count: kind `uint32` here, `uint64` in tikv-client",
    );
    expect(
        "repeated dropped",
        &|t| field_mut(t, "metapb.Region", "peers").repeated = false,
        "metapb.Region.peers: repeated=true here, repeated=false in tikv-client",
    );
    expect(
        "message type changed",
        &|t| field_mut(t, "pdpb.RegionHeartbeatRequest", "leader").type_ref = Some("Store".into()),
        "pdpb.RegionHeartbeatRequest.leader: type `Peer` here, `Store` in tikv-client",
    );
    expect(
        "enum value changed",
        &|t| {
            let e = t.enums.get_mut("pdpb.ErrorType").unwrap();
            e.get_mut("NOT_BOOTSTRAPPED").unwrap().1 = 42;
        },
        "pdpb.ErrorType.NOT_BOOTSTRAPPED: 2 here, 42 in tikv-client",
    );
}
