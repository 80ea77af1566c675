//! The two text formats of `/metrics`, chosen by the scraper's `Accept` header:
//! - OpenMetrics 1.0, what `prometheus-client` encodes and what Prometheus asks for first;
//! - the Prometheus text format 0.0.4, the default (curl, `promtool check metrics`, older
//!   scrapers), made from the OpenMetrics text by [`to_text_004`]: a counter's family is named
//!   with its `_total` suffix (OpenMetrics names the family without it, which a 0.0.4 parser
//!   reads as samples without help or type), `# UNIT` and `# EOF` go, and so do `_created`
//!   samples and exemplars, which 0.0.4 does not have.

/// The content type of each format.
pub const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which text format a scrape gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Text004,
}

impl Format {
    /// The format `accept` prefers: OpenMetrics 1.0 only when asked for with a higher quality
    /// than the 0.0.4 text (by `text/plain`, `text/*` or `*/*`); 0.0.4 otherwise, also for no
    /// header, a malformed one, or a tie.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Text004 };
        let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let (mut q, mut version) = (1.0f32, None);
            for p in parts {
                let Some((k, v)) = p.split_once('=') else { continue };
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.trim().parse::<f32>().ok().filter(|q| (0.0..=1.0).contains(q)).unwrap_or(0.0),
                    "version" => version = Some(v.trim().trim_matches('"').to_string()),
                    _ => {}
                }
            }
            match media.as_str() {
                "application/openmetrics-text" if version.as_deref().is_none_or(|v| v == "1.0.0") => {
                    openmetrics = openmetrics.max(q)
                }
                "text/plain" if version.as_deref().is_none_or(|v| v == "0.0.4") => text = text.max(q),
                "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics > text {
            Format::OpenMetrics
        } else {
            Format::Text004
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS_TYPE,
            Format::Text004 => TEXT_TYPE,
        }
    }
}

/// Writes infinite sample values as both formats spell them (`+Inf`, `-Inf`): the encoder
/// writes Rust's `inf`.
pub fn spell_infinities(text: String) -> String {
    if !text.contains(" inf\n") && !text.contains(" -inf\n") {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.lines() {
        match (line.strip_suffix(" inf"), line.strip_suffix(" -inf")) {
            (Some(head), _) if !line.starts_with('#') => {
                out.push_str(head);
                out.push_str(" +Inf");
            }
            (_, Some(head)) if !line.starts_with('#') => {
                out.push_str(head);
                out.push_str(" -Inf");
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The families' types as a 0.0.4 parser knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Histogram,
    Other,
}

/// OpenMetrics text (as `prometheus-client` writes it: `# HELP`, `# TYPE`, optionally
/// `# UNIT`, then the family's samples) as Prometheus text 0.0.4.
pub fn to_text_004(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // The family being read: its OpenMetrics name and kind.
    let mut family: Option<(String, Kind)> = None;
    let mut help: Option<(String, String)> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            // 0.0.4 help escapes only `\` and newlines.
            help = Some((name.to_string(), text.replace("\\\"", "\"")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (out_name, out_kind, k) = match kind {
                "counter" => (format!("{name}_total"), "counter", Kind::Counter),
                "histogram" => (name.to_string(), "histogram", Kind::Histogram),
                "gauge" => (name.to_string(), "gauge", Kind::Other),
                "summary" => (name.to_string(), "summary", Kind::Other),
                "info" => (format!("{name}_info"), "gauge", Kind::Other),
                _ => (name.to_string(), "untyped", Kind::Other),
            };
            if let Some((_, text)) = help.take().filter(|(n, _)| n == name) {
                out.push_str(&format!("# HELP {out_name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {out_name} {out_kind}\n"));
            family = Some((name.to_string(), k));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        // A sample: drop an exemplar (` # {...}`) and the `_created` series 0.0.4 lacks.
        let sample = match line.find(" # ") {
            Some(i) => &line[..i],
            None => line,
        };
        if let Some((name, kind)) = &family {
            let created = format!("{name}_created");
            if matches!(kind, Kind::Counter | Kind::Histogram) && sample_name(sample) == created {
                continue;
            }
        }
        out.push_str(sample);
        out.push('\n');
    }
    out
}

/// The metric name of a sample line.
fn sample_name(sample: &str) -> &str {
    let end = sample.find(['{', ' ']).unwrap_or(sample.len());
    &sample[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_gets_openmetrics_and_everyone_else_the_0_0_4_text() {
        let prometheus =
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                          text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text")), Format::OpenMetrics);
        for other in [
            None,
            Some("*/*"),
            Some("text/plain"),
            Some("text/plain;version=0.0.4"),
            Some(""),
            Some("garbage;;;=,"),
            // A tie, and an OpenMetrics version this node does not write.
            Some("application/openmetrics-text, text/plain"),
            Some("application/openmetrics-text;version=0.0.1"),
            Some("application/openmetrics-text;q=0, */*"),
            Some("application/openmetrics-text;q=1.5"),
            Some("application/json"),
        ] {
            assert_eq!(Format::negotiate(other), Format::Text004, "{other:?}");
        }
        assert_eq!(
            Format::negotiate(Some("text/plain;q=0.2, application/openmetrics-text;q=0.3")),
            Format::OpenMetrics
        );
        assert!(Format::OpenMetrics.content_type().starts_with("application/openmetrics-text; version=1.0.0"));
        assert!(Format::Text004.content_type().starts_with("text/plain; version=0.0.4"));
    }

    #[test]
    fn infinities_are_spelled_as_prometheus_reads_them() {
        let text = "# HELP a inf\na inf\nb -inf\nc 1.5\nd{x=\"inf\"} 2\n".to_string();
        assert_eq!(spell_infinities(text), "# HELP a inf\na +Inf\nb -Inf\nc 1.5\nd{x=\"inf\"} 2\n");
        assert_eq!(spell_infinities("x 1\n".to_string()), "x 1\n");
    }

    #[test]
    fn counters_take_their_total_name_and_openmetrics_only_lines_go() {
        let om = "# HELP leaf_ids_served IDs handed out.\n\
                  # TYPE leaf_ids_served counter\n\
                  leaf_ids_served_total{tag=\"a\"} 3\n\
                  leaf_ids_served_created{tag=\"a\"} 1.7e9\n\
                  # HELP leaf_refill_seconds Refill latency.\n\
                  # TYPE leaf_refill_seconds histogram\n\
                  # UNIT leaf_refill_seconds seconds\n\
                  leaf_refill_seconds_sum 0.5\n\
                  leaf_refill_seconds_count 1\n\
                  leaf_refill_seconds_bucket{le=\"+Inf\"} 1 # {trace=\"x\"} 0.5\n\
                  # HELP leaf_build Build.\n\
                  # TYPE leaf_build info\n\
                  leaf_build_info{version=\"1\"} 1\n\
                  # HELP leaf_ready Ready \\\"now\\\".\n\
                  # TYPE leaf_ready gauge\n\
                  leaf_ready 1.0\n\
                  # TYPE leaf_odd unknown\n\
                  leaf_odd 2\n\
                  # EOF\n";
        let text = to_text_004(om);
        let expected = "# HELP leaf_ids_served_total IDs handed out.\n\
                        # TYPE leaf_ids_served_total counter\n\
                        leaf_ids_served_total{tag=\"a\"} 3\n\
                        # HELP leaf_refill_seconds Refill latency.\n\
                        # TYPE leaf_refill_seconds histogram\n\
                        leaf_refill_seconds_sum 0.5\n\
                        leaf_refill_seconds_count 1\n\
                        leaf_refill_seconds_bucket{le=\"+Inf\"} 1\n\
                        # HELP leaf_build_info Build.\n\
                        # TYPE leaf_build_info gauge\n\
                        leaf_build_info{version=\"1\"} 1\n\
                        # HELP leaf_ready Ready \"now\".\n\
                        # TYPE leaf_ready gauge\n\
                        leaf_ready 1.0\n\
                        # TYPE leaf_odd untyped\n\
                        leaf_odd 2\n";
        assert_eq!(text, expected);
    }
}
