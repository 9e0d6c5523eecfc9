//! A fetched body as plain text an agent can read: HTML reduced to its visible text
//! (scripts, styles, comments and tags gone, entities decoded), control characters,
//! terminal escapes and invisible format characters (bidi overrides, zero-width) removed,
//! blank runs collapsed. Binary content is refused rather than guessed at.
//!
//! Written here rather than taken from an HTML-to-text crate: those carry a full HTML5
//! parser (html5ever) for what is, in this use, a text extraction whose output is capped
//! at a few KiB and marked untrusted anyway.

/// The body's text, or why there is none (binary content).
pub fn of(content_type: Option<&str>, body: &[u8]) -> Result<String, String> {
    let mime = content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    let sniffed_html = head.trim_start().starts_with("<!doctype html") || head.contains("<html");
    let html =
        mime == "text/html" || mime == "application/xhtml+xml" || (mime.is_empty() && sniffed_html);
    let textual = html
        || mime.starts_with("text/")
        || mime == "application/json"
        || mime == "application/xml"
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || mime == "application/javascript"
        || (mime.is_empty() && std::str::from_utf8(body).is_ok());
    if !textual {
        return Err(format!(
            "the content ({}) is not text",
            if mime.is_empty() {
                "unlabelled binary"
            } else {
                &mime
            }
        ));
    }
    let raw = String::from_utf8_lossy(body);
    let text = if html {
        html_text(&raw)
    } else {
        raw.into_owned()
    };
    Ok(tidy(&text))
}

/// Elements whose content is never visible text.
const HIDDEN: [&str; 6] = ["script", "style", "noscript", "template", "svg", "head"];
/// Elements that break a line.
const BLOCKS: [&str; 24] = [
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "pre",
    "blockquote",
    "hr",
    "title",
    "dt",
    "dd",
];

fn html_text(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len() / 2);
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        if !rest.starts_with('<') {
            let next = rest.find('<').map_or(s.len(), |n| i + n);
            // Source line breaks are spaces in HTML: only elements break lines.
            out.extend(
                s[i..next]
                    .chars()
                    .map(|c| if c.is_whitespace() { ' ' } else { c }),
            );
            i = next;
            continue;
        }
        if rest.starts_with("<!--") {
            i = lower[i..].find("-->").map_or(s.len(), |n| i + n + 3);
            continue;
        }
        let name: String = lower[i + 1..]
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let closing = rest.starts_with("</");
        let starts_tag = !name.is_empty() || rest.starts_with("<!") || rest.starts_with("<?");
        if !starts_tag {
            // A bare `<` in text.
            out.push('<');
            i += 1;
            continue;
        }
        let end = lower[i..].find('>').map_or(s.len(), |n| i + n + 1);
        if !closing && HIDDEN.contains(&name.as_str()) && !lower[i..end].ends_with("/>") {
            // Skip to the element's end (its content is not shown: `<title>` is, and sits
            // in `<head>`, so it is kept separately).
            let close = format!("</{name}");
            let stop = lower[end..].find(&close).map_or(s.len(), |n| end + n);
            if name == "head"
                && let Some(t) = lower[end..stop].find("<title")
            {
                let t = end + t;
                let open = lower[t..stop].find('>').map_or(stop, |n| t + n + 1);
                let shut = lower[open..stop].find("</title").map_or(stop, |n| open + n);
                out.push_str(&s[open..shut]);
                out.push('\n');
            }
            i = lower[stop..].find('>').map_or(s.len(), |n| stop + n + 1);
            continue;
        }
        if BLOCKS.contains(&name.as_str()) {
            if !out.trim_end_matches(' ').ends_with('\n') {
                out.push('\n');
            }
        } else if name == "td" || name == "th" {
            out.push('\t');
        }
        i = end;
    }
    html_escape::decode_html_entities(&out).into_owned()
}

/// Whether a character is dropped: controls other than newline and tab, and invisible
/// format characters that can make text read differently from what it is, or carry text a
/// reader cannot see: bidi embeddings, overrides, isolates and marks, zero-width ones, the
/// BOM, variation selectors, interlinear annotations and the Unicode tag characters.
fn dropped(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{E0000}'..='\u{E007F}'
            | '\u{E0100}'..='\u{E01EF}')
}

fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    let mut chars = s.chars().peekable();
    let mut line = String::new();
    let flush = |line: &mut String, out: &mut String, blank: &mut usize| {
        let collapsed = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if collapsed.is_empty() {
            *blank += 1;
        } else {
            if !out.is_empty() {
                out.push_str(if *blank > 0 { "\n\n" } else { "\n" });
            }
            out.push_str(&collapsed);
            *blank = 0;
        }
        line.clear();
    };
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // A terminal escape: CSI (ESC [ … final byte) or a two-character one.
            if chars.peek() == Some(&'[') {
                chars.next();
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        if c == '\n' {
            flush(&mut line, &mut out, &mut blank);
            continue;
        }
        if c == '\r' {
            continue;
        }
        if !dropped(c) {
            line.push(c);
        }
    }
    flush(&mut line, &mut out, &mut blank);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_reduced_to_its_visible_text() {
        let page = r#"<!DOCTYPE html><html><head><title>Release &amp; notes</title>
            <style>body { color: red }</style><script>alert("x<y")</script></head>
            <body><!-- hidden <b>comment</b> --><h1>Argos  1.0</h1><p>Fixed a&nbsp;bug &lt;here&gt;.</p>
            <ul><li>one</li><li>two</li></ul><svg><text>no</text></svg>a < b</body></html>"#;
        let t = of(Some("text/html; charset=utf-8"), page.as_bytes()).unwrap();
        assert_eq!(
            t,
            "Release & notes\nArgos 1.0\nFixed a bug <here>.\none\ntwo\na < b"
        );
        assert!(!t.contains("alert") && !t.contains("color") && !t.contains("comment"));
    }

    #[test]
    fn controls_escapes_and_invisible_characters_are_removed() {
        let t = of(
            Some("text/plain"),
            "ok\x1b[31mred\x1b[0m\u{202E}evil\u{200B}\u{E0041}\u{E0069}\x07\r\nnext\n\n\n\nlast"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(t, "okredevil\nnext\n\nlast");
    }

    #[test]
    fn binary_content_is_refused() {
        assert!(of(Some("image/png"), b"\x89PNG").is_err());
        assert!(of(None, &[0xff, 0xfe, 0x00, 0x80]).is_err());
        assert_eq!(
            of(Some("application/json"), br#"{"a": 1}"#).unwrap(),
            r#"{"a": 1}"#
        );
        assert_eq!(of(None, b"<html><p>sniffed</p></html>").unwrap(), "sniffed");
    }
}
