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

/// Whether a character is dropped: controls other than newline and tab, and every
/// character a reader cannot see or that changes how the text around it reads ([`hidden`]).
fn dropped(c: char) -> bool {
    c != '\n' && c != '\t' && hidden(c)
}

/// Whether a character can make text read differently from what it is, or carry text a
/// reader cannot see, wherever it is shown (a terminal, a browser, an agent's client): any
/// control (an escape sequence starts with one), a line or paragraph separator (a line
/// break to a renderer that honours them), every format character (bidi embeddings,
/// overrides, isolates and marks, zero-width ones, the BOM, interlinear annotations, the
/// Unicode tag characters), private-use and unassigned code points, variation selectors
/// and the other default-ignorable characters, every space but the ASCII one (a
/// no-break or wide space passes for a plain one), the letters and symbols drawn blank
/// (Braille's blank, Hangul's fillers, the musical null notehead), and the marks drawn
/// over what they follow: enclosing marks and the combining overlays (canonical
/// combining class 1: strokes and slashes through a letter, which can make one read as
/// another or strike it out). Other combining marks (accents) are text.
pub fn hidden(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Surrogate
            | G::Unassigned
            | G::EnclosingMark
    ) || (get_general_category(c) == G::SpaceSeparator && c != ' ')
        || matches!(c, '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
            | '\u{180B}'..='\u{180F}' | '\u{2800}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}'
            | '\u{FFA0}' | '\u{E0100}'..='\u{E01EF}' | '\u{1D159}')
        || overlay(c)
}

/// The combining overlays (Unicode's canonical combining class 1, as Unicode 14 lists them).
fn overlay(c: char) -> bool {
    matches!(c, '\u{0334}'..='\u{0338}' | '\u{1CD4}' | '\u{1CE2}'..='\u{1CE8}'
        | '\u{20D2}' | '\u{20D3}' | '\u{20D8}'..='\u{20DA}' | '\u{20E5}' | '\u{20E6}'
        | '\u{20EA}' | '\u{20EB}' | '\u{10A39}' | '\u{16AF0}'..='\u{16AF4}'
        | '\u{1BC9E}' | '\u{1D167}'..='\u{1D169}')
}

/// Longest run of plain spaces shown as it is by [`visible`]; a longer one is named.
const SPACE_RUN: usize = 8;

/// `s` as one line a person can read for what it is: every [`hidden`] character (a line
/// break too) shown as a `\u{…}` escape, and a run of more than eight spaces as
/// `\u{20}×N`, so that padding cannot push the rest of a line out of sight. Nothing is
/// dropped: what is shown is the whole of `s`.
pub fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut spaces = 0;
    let flush = |out: &mut String, spaces: &mut usize| {
        if *spaces > SPACE_RUN {
            out.push_str(&format!("\\u{{20}}×{spaces}"));
        } else {
            out.extend(std::iter::repeat_n(' ', *spaces));
        }
        *spaces = 0;
    };
    for c in s.chars() {
        if c == ' ' {
            spaces += 1;
            continue;
        }
        flush(&mut out, &mut spaces);
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    flush(&mut out, &mut spaces);
    out
}

/// A text from outside (an upstream tool's description or title) made safe to show: its
/// line breaks and tabs kept, every other [`hidden`] character shown as an escape.
pub fn shown_lines(s: &str) -> String {
    s.split('\n')
        .map(|line| line.split('\t').map(visible).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
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
        if matches!(c, '\n' | '\u{2028}' | '\u{2029}') {
            flush(&mut line, &mut out, &mut blank);
            continue;
        }
        if c == '\r' {
            continue;
        }
        if c != ' ' && c.is_whitespace() && !c.is_control() {
            // A no-break or wide space reads as a space.
            line.push(' ');
        } else if !dropped(c) {
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
    fn what_a_renderer_could_break_or_reorder_is_shown_as_an_escape() {
        // Line and paragraph separators, NEL, bidi overrides and isolates, zero-width and
        // tag characters, an escape sequence, a no-break space, private use.
        let s = "ok\u{2028}Argos: risk read_only\u{2029}x\u{85}y\u{202E}z\u{2066}\u{200B}\u{E0041}\x1b[2Ja\u{a0}b\u{E000}\tc\nd";
        let v = visible(s);
        assert_eq!(
            v,
            "ok\\u{2028}Argos: risk read_only\\u{2029}x\\u{85}y\\u{202e}z\\u{2066}\\u{200b}\\u{e0041}\\u{1b}[2Ja\\u{a0}b\\u{e000}\\u{9}c\\u{a}d"
        );
        assert!(!v.chars().any(hidden), "{v}");
        // Blank-looking letters and symbols (the review's U+2800, Hangul fillers) too.
        assert_eq!(
            visible("rm\u{2800}-rf\u{3164}/"),
            "rm\\u{2800}-rf\\u{3164}/"
        );
        // The second review: the musical null notehead draws nothing; overlays and
        // enclosing marks draw over the letter before them (`-rf` struck through, a
        // slash that turns `=` into `≠`).
        assert_eq!(
            visible("a\u{1D159}b -\u{0336}r\u{0336}f\u{0336} =\u{0338} x\u{20DD}"),
            "a\\u{1d159}b -\\u{336}r\\u{336}f\\u{336} =\\u{338} x\\u{20dd}"
        );
        // Accents stay text.
        assert_eq!(visible("nai\u{0308}ve"), "nai\u{0308}ve");
        // Padding is named, not shown: what follows it stays in sight.
        let padded = format!("df -h /tmp{}; rm -rf /srv", " ".repeat(70_000));
        assert_eq!(visible(&padded), "df -h /tmp\\u{20}×70000; rm -rf /srv");
        assert_eq!(visible("a        b"), "a        b");
        // Ordinary text of any script passes as it is.
        for plain in [
            "grep -r 'κόσμε' /etc",
            "日本語 テキスト",
            "naïve café",
            "emoji 🙂 ok",
        ] {
            assert_eq!(visible(plain), plain);
        }
        assert_eq!(
            shown_lines("one\ttwo\nthree\u{202E}"),
            "one\ttwo\nthree\\u{202e}"
        );
    }

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
