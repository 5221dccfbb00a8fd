//! The studio's HTML: escaping, the page shell every page shares (title, navigation, the
//! style sheet and script, served from the binary), and small pieces several pages use.
//! Must not read the store: pages pass what they show.

use std::fmt::Write as _;

/// The style sheet (`/static/studio.css`).
pub(super) const CSS: &str = include_str!("assets/studio.css");
/// The script (`/static/studio.js`): live refresh of a running run's page, and the forms'
/// small conveniences. Pages work without it.
pub(super) const JS: &str = include_str!("assets/studio.js");

/// Text made safe for HTML element content and quoted attribute values.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value made safe for a query string (`?thread=…`): everything but unreserved
/// characters percent-encoded.
pub(super) fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// What the page shell needs besides the body.
pub(super) struct Shell<'a> {
    /// The page's title (after the agent's name).
    pub(super) title: &'a str,
    pub(super) agent: &'a str,
    /// Whether this browser holds the studio's token (actions are offered as usable).
    pub(super) signed_in: bool,
    /// Whether anything can act on runs here (not a store read without the agents' code).
    pub(super) acts: bool,
}

/// A whole page: the shell around `body` (already HTML).
pub(super) fn page(shell: &Shell<'_>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · {agent} · saap studio</title>\
         <link rel=\"stylesheet\" href=\"/static/studio.css\">\
         <script src=\"/static/studio.js\" defer></script></head><body>\
         <header class=\"top\"><a class=\"brand\" href=\"/\">saap studio</a>\
         <span class=\"agent\">{agent}</span>\
         <nav><a href=\"/\">runs</a> <a href=\"/graph\">graph</a></nav>\
         <span class=\"who\">{who}</span></header>\n<main>{body}</main></body></html>\n",
        title = esc(shell.title),
        agent = esc(shell.agent),
        who = match (shell.acts, shell.signed_in) {
            (false, _) => "read-only: the agents' specs without their code",
            (true, true) => "actions enabled",
            (true, false) => "read-only: open the link the studio printed to enable actions",
        },
    );
    out
}

/// A status as a coloured badge (`live`, `waiting_event`, `stopped`, …).
pub(super) fn badge(status: &str) -> String {
    let class = match status {
        "stopped" => "ok",
        "failed" => "bad",
        "cancelled" => "off",
        s if s.starts_with("waiting") => "wait",
        "running" | "live" | "claimed" | "queued" | "not_started" => "run",
        _ => "off",
    };
    format!(
        "<span class=\"badge {class}\" data-status=\"{s}\">{s}</span>",
        s = esc(status)
    )
}

/// JSON pretty-printed for a `<pre>`, cut at `limit` bytes with a marker.
pub(super) fn json_block(value: &serde_json::Value, limit: usize) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    if text.len() <= limit {
        return format!("<pre class=\"json\">{}</pre>", esc(&text));
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "<pre class=\"json\">{}\n… ({} more bytes: the whole run is at /api/runs/…)</pre>",
        esc(&text[..cut]),
        text.len() - cut
    )
}

/// A duration in nanoseconds as people read it: `850 µs`, `12.3 ms`, `4.2 s`, `3 min 5 s`.
pub(super) fn duration(ns: u64) -> String {
    match ns {
        n if n < 1_000_000 => format!("{} µs", n / 1_000),
        n if n < 1_000_000_000 => format!("{:.1} ms", n as f64 / 1e6),
        n if n < 120_000_000_000 => format!("{:.1} s", n as f64 / 1e9),
        n => {
            let s = n / 1_000_000_000;
            format!("{} min {} s", s / 60, s % 60)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup_and_queries_no_separators() {
        assert_eq!(
            esc("<script>\"a\" & 'b'</script>"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
        assert_eq!(query_value("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn long_json_is_cut_on_a_character_boundary_with_what_was_left_out() {
        let v = serde_json::json!({"text": "é".repeat(100)});
        let block = json_block(&v, 31);
        assert!(block.contains("more bytes"), "{block}");
        assert!(block.starts_with("<pre class=\"json\">"));
    }

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(duration(850_000), "850 µs");
        assert_eq!(duration(12_345_678), "12.3 ms");
        assert_eq!(duration(4_200_000_000), "4.2 s");
        assert_eq!(duration(185_000_000_000), "3 min 5 s");
    }
}
