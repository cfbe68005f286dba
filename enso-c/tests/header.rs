//! `include/enso.h` is written by hand: these tests check that it declares
//! exactly what the library (`src/`) defines, with the same C types: every
//! `extern "C"` function (name, parameter names and types, return type),
//! every `#[repr(C)]` structure (fields in order), the opaque device type,
//! and every `ENSO_*` error code.

use std::collections::BTreeMap;

mod common;

/// The library's sources, `src/lib.rs` first and then its modules.
fn rust_source() -> String {
    let src = common::crate_dir().join("src");
    let mut files: Vec<_> = std::fs::read_dir(&src)
        .expect("src/")
        .map(|e| e.expect("src/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("lib.rs"))
        .collect();
    files.sort();
    files.insert(0, src.join("lib.rs"));
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect::<Vec<_>>()
        .join("\n")
}

fn header() -> String {
    std::fs::read_to_string(common::crate_dir().join("include/enso.h")).expect("include/enso.h")
}

/// `EnsoDeviceOptions` -> `enso_device_options_t`.
fn c_struct_name(rust: &str) -> String {
    let mut s = String::new();
    for (i, ch) in rust.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(ch.to_ascii_lowercase());
        } else {
            s.push(ch);
        }
    }
    s + "_t"
}

/// The C spelling of a Rust FFI type, with pointer stars attached to the
/// type (`const uint8_t*`).
fn c_type(rust: &str) -> String {
    let t = rust.trim();
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{}*", c_type(inner));
    }
    if let Some(inner) = t.strip_prefix("*const ") {
        let i = c_type(inner);
        assert!(!i.ends_with('*'), "pointer to const pointer: {t}");
        return format!("const {i}*");
    }
    match t {
        "c_int" => "int".into(),
        "c_char" => "char".into(),
        "u8" => "uint8_t".into(),
        "u16" => "uint16_t".into(),
        "u32" => "uint32_t".into(),
        "u64" => "uint64_t".into(),
        "i32" => "int32_t".into(),
        "usize" => "size_t".into(),
        "" | "()" => "void".into(),
        "EnsoDevice" => "enso_device_t".into(),
        "EnsoSockets" => "enso_sockets_t".into(),
        t if t.starts_with("Enso") => c_struct_name(t),
        t => panic!("no C spelling for Rust type `{t}`: add it to the test"),
    }
}

/// `const uint8_t *` and `const uint8_t*` alike.
fn norm(c: &str) -> String {
    let s = c.split_whitespace().collect::<Vec<_>>().join(" ");
    s.replace(" *", "*").replace("* ", "*")
}

/// Splits on commas outside parentheses.
fn split_params(s: &str) -> Vec<String> {
    let mut out = vec![];
    let (mut depth, mut cur) = (0, String::new());
    for ch in s.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    out.push(cur);
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// A function: return type and (name, type) parameters, C spelling.
type Sig = (String, Vec<(String, String)>);

fn rust_functions(src: &str) -> BTreeMap<String, Sig> {
    let mut fns = BTreeMap::new();
    let mut rest = src;
    while let Some(at) = rest.find("extern \"C\" fn ") {
        let before = &rest[..at];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let prefix = before[line_start..].trim();
        rest = &rest[at + "extern \"C\" fn ".len()..];
        assert!(
            prefix == "pub" || prefix == "pub unsafe",
            "extern \"C\" fn that is not `pub`: {prefix} ..."
        );
        let open = rest.find('(').unwrap();
        let name = rest[..open].trim().to_string();
        // The parameter list ends at the parenthesis that closes it.
        let mut depth = 0;
        let mut close = open;
        for (i, ch) in rest[open..].char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let params = split_params(&rest[open + 1..close])
            .into_iter()
            .map(|p| {
                let (n, t) = p.split_once(':').expect("name: type");
                (n.trim().to_string(), norm(&c_type(t)))
            })
            .collect();
        let body = rest[close + 1..].find('{').unwrap();
        let ret = rest[close + 1..close + 1 + body]
            .trim()
            .strip_prefix("->")
            .unwrap_or("")
            .trim();
        fns.insert(name, (norm(&c_type(ret)), params));
    }
    fns
}

/// Removes `/* */` and `//` comments.
fn strip_comments(h: &str) -> String {
    let mut out = String::new();
    let mut rest = h;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        // The comment that starts first: a line comment, or a block one.
        let first_line = match (block, line) {
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(b), Some(l)) => (l < b).then_some(l),
            (None, l) => l,
            (Some(_), None) => None,
        };
        if let Some(l) = first_line {
            out.push_str(&rest[..l]);
            rest = rest[l..].find('\n').map_or("", |e| &rest[l + e..]);
        } else {
            let b = block.expect("a block comment comes first");
            out.push_str(&rest[..b]);
            let end = rest[b..].find("*/").expect("closed comment");
            rest = &rest[b + end + 2..];
        }
    }
}

/// Functions, structures (name -> fields) and `#define`s of the header.
struct Header {
    fns: BTreeMap<String, Sig>,
    structs: BTreeMap<String, Vec<(String, String)>>,
    opaque: Vec<String>,
    defines: BTreeMap<String, String>,
}

fn parse_header(h: &str) -> Header {
    let text = strip_comments(h);
    let mut defines = BTreeMap::new();
    let mut code = String::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(d) = l.strip_prefix("#define ") {
            if let Some((n, v)) = d.split_once(' ') {
                defines.insert(n.to_string(), v.trim().to_string());
            }
        } else if !l.starts_with('#') && l != "extern \"C\" {" && l != "}" {
            code.push_str(line);
            code.push('\n');
        }
    }
    let mut structs = BTreeMap::new();
    let mut opaque = vec![];
    let mut fns = BTreeMap::new();
    let mut rest = code.as_str();
    loop {
        let t = rest.trim_start();
        if t.is_empty() {
            break;
        }
        if let Some(after) = t.strip_prefix("typedef struct ") {
            let semi = after.find(';').unwrap();
            if let Some(brace) = after[..semi].find('{') {
                let close = after.find('}').unwrap();
                let fields = after[brace + 1..close]
                    .split(';')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .map(|f| {
                        let at = f
                            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .unwrap()
                            + 1;
                        (f[at..].to_string(), norm(&f[..at]))
                    })
                    .collect();
                let end = after[close..].find(';').unwrap() + close;
                let alias = after[close + 1..end].trim().to_string();
                structs.insert(alias, fields);
                rest = &after[end + 1..];
            } else {
                // `typedef struct Tag alias;`
                let words: Vec<_> = after[..semi].split_whitespace().collect();
                opaque.push(format!("{} {}", words[0], words[1]));
                rest = &after[semi + 1..];
            }
            continue;
        }
        let semi = t.find(';').expect("declaration ends with ;");
        let decl = t[..semi].split_whitespace().collect::<Vec<_>>().join(" ");
        rest = &t[semi + 1..];
        let open = decl
            .find('(')
            .unwrap_or_else(|| panic!("not a prototype: {decl}"));
        let head = &decl[..open];
        let name_at = head
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap()
            + 1;
        let name = head[name_at..].to_string();
        let ret = norm(&head[..name_at]);
        let inner = decl[open + 1..decl.rfind(')').unwrap()].trim();
        let params = if inner == "void" {
            vec![]
        } else {
            split_params(inner)
                .into_iter()
                .map(|p| {
                    let at = p
                        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap()
                        + 1;
                    (p[at..].to_string(), norm(&p[..at]))
                })
                .collect()
        };
        assert!(
            fns.insert(name.clone(), (ret, params)).is_none(),
            "{name} declared twice"
        );
    }
    Header {
        fns,
        structs,
        opaque,
        defines,
    }
}

#[test]
fn every_function_is_declared_with_its_signature() {
    let rust = rust_functions(&rust_source());
    let h = parse_header(&header());
    assert!(rust.len() >= 30, "found only {} functions", rust.len());
    for (name, sig) in &rust {
        let Some(decl) = h.fns.get(name) else {
            panic!("enso.h does not declare {name}");
        };
        assert_eq!(
            decl, sig,
            "{name}: header (left) differs from the library (right)"
        );
    }
    for name in h.fns.keys() {
        assert!(
            rust.contains_key(name),
            "enso.h declares {name}, which the library lacks"
        );
    }
}

#[test]
fn every_structure_has_the_same_fields() {
    let src = rust_source();
    let h = parse_header(&header());
    let mut found = 0;
    for (at, _) in src.match_indices("#[repr(C)]") {
        let s = &src[at..];
        let start = s.find("pub struct ").unwrap() + "pub struct ".len();
        let brace = s[start..].find('{').unwrap() + start;
        let name = s[start..brace].trim();
        let close = s[brace..].find('}').unwrap() + brace;
        let fields: Vec<(String, String)> = s[brace + 1..close]
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .map(|l| {
                let l = l.trim_end_matches(',').trim_start_matches("pub ");
                let (n, t) = l.split_once(':').unwrap();
                (n.trim().to_string(), norm(&c_type(t)))
            })
            .collect();
        let c = c_struct_name(name);
        let Some(decl) = h.structs.get(&c) else {
            panic!("enso.h does not define {c} (for {name})");
        };
        assert_eq!(
            decl, &fields,
            "{c}: header (left) differs from {name} (right)"
        );
        found += 1;
    }
    assert_eq!(
        found,
        h.structs.len(),
        "enso.h defines structures the library does not"
    );
    assert_eq!(found, 5);
    // The device is opaque: C sees only a pointer to it.
    assert_eq!(
        h.opaque,
        ["EnsoDevice enso_device_t", "EnsoSockets enso_sockets_t"]
    );
    assert!(!src.contains("#[repr(C)]\npub struct EnsoDevice {"));
}

#[test]
fn every_error_code_has_the_same_value() {
    let src = rust_source();
    let h = parse_header(&header());
    let mut rust = BTreeMap::new();
    for line in src.lines() {
        if let Some(d) = line.strip_prefix("pub const ENSO_") {
            let (name, value) = d.split_once(": c_int = ").unwrap();
            let v: i32 = value.trim_end_matches(';').parse().unwrap();
            rust.insert(format!("ENSO_{name}"), v);
        }
    }
    let header: BTreeMap<String, i32> = h
        .defines
        .iter()
        .filter(|(n, _)| n.starts_with("ENSO_") && n.as_str() != "ENSO_H")
        .map(|(n, v)| (n.clone(), v.trim_matches(['(', ')']).parse().unwrap()))
        .collect();
    assert_eq!(header, rust);
    // The other constants (formats, offsets) are not error codes.
    rust.retain(|n, _| n == "ENSO_OK" || n.starts_with("ENSO_ERR_"));
    assert_eq!(rust.len(), 25);
    // Codes are distinct, and each has its own text.
    let mut texts = std::collections::BTreeSet::new();
    for &code in rust.values() {
        let s = unsafe_free_strerror(code);
        assert_ne!(s, "unknown error code", "code {code}");
        assert!(texts.insert(s), "code {code} shares its text");
    }
}

fn unsafe_free_strerror(code: i32) -> String {
    let p = enso_c::enso_strerror(code);
    // SAFETY: `enso_strerror` returns a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_str()
        .unwrap()
        .to_string()
}

/// The header compiles as C11 with warnings as errors, and the test
/// program that calls every function in it (error paths only, without a
/// device) runs clean against the static library.
#[test]
fn the_header_compiles_and_every_function_links() {
    let Some(cc) = common::c_compiler() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = common::crate_dir().join("tests/c/api.c");
    let text = std::fs::read_to_string(&src).unwrap();
    for name in rust_functions(&rust_source()).keys() {
        assert!(
            text.contains(&format!("{name}(")),
            "tests/c/api.c does not call {name}"
        );
    }
    let exe = dir.path().join("api");
    common::build_c(&cc, &src, &exe);
    let o = std::process::Command::new(&exe).output().unwrap();
    assert!(
        o.status.success(),
        "tests/c/api.c failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("api: ok"));
}
