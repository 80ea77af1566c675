//! The metrics exposition as a scoped token may read it: series about tags only for the tags
//! its patterns match, series about tokens only for its own, and not the IDs served by
//! profile (a sum over every tenant's tags). Everything else (node, Raft, process, error
//! totals) is the node's and shown as is.
//!
//! A filter over the rendered text rather than a second registry: tag and token names are
//! restricted to characters that label values never escape (`[A-Za-z0-9_.:-]`, hex IDs), so a
//! label is found by its name and the next quote.

/// Samples of other tenants' tags summed, which no scoped token reads.
const SUMS_OVER_TENANTS: &str = "leaf_ids_served_by_profile";

/// `text` with every sample whose `tag` label `keep_tag` refuses, or whose `token` label is
/// not `own_token`, or that sums every tenant's tags, removed. Comment lines (`# HELP`,
/// `# TYPE`, `# EOF`) stay.
pub fn scoped(text: &str, keep_tag: impl Fn(&str) -> bool, own_token: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let shown = line.starts_with('#')
            || (!line.starts_with(SUMS_OVER_TENANTS)
                && label(line, "tag").is_none_or(&keep_tag)
                && label(line, "token").is_none_or(|t| t == own_token));
        if shown {
            out.push_str(line);
        }
    }
    out
}

/// The value of label `name` in a sample line, if it has one.
fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let open = line.find('{')?;
    let close = open + line[open..].find('}')?;
    let labels = &line[open + 1..close];
    let mut rest = labels;
    while !rest.is_empty() {
        let eq = rest.find("=\"")?;
        let key = &rest[..eq];
        let after = &rest[eq + 2..];
        let end = after.find('"')?;
        if key == name {
            return Some(&after[..end]);
        }
        rest = after[end + 1..].trim_start_matches(',');
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP leaf_ids_served_total IDs.\n\
        # TYPE leaf_ids_served_total counter\n\
        leaf_ids_served_total{mode=\"segment\",tag=\"orders-eu\"} 3\n\
        leaf_ids_served_total{mode=\"segment\",tag=\"users\"} 5\n\
        leaf_token_requests_total{token=\"00aa\",name=\"mine\",outcome=\"ok\"} 1\n\
        leaf_token_requests_total{token=\"00bb\",name=\"theirs\",outcome=\"ok\"} 1\n\
        leaf_raft_is_leader 1\n\
        leaf_x{subtag=\"users\"} 2\n\
        leaf_ids_served_by_profile_total{profile=\"segment\"} 8\n\
        # EOF\n";

    #[test]
    fn keeps_the_matching_tags_its_own_token_and_the_rest() {
        let out = scoped(TEXT, |t| t.starts_with("orders-"), "00aa");
        assert!(out.contains("tag=\"orders-eu\"} 3"), "{out}");
        assert!(!out.contains("users\"} 5"), "{out}");
        assert!(out.contains("name=\"mine\"") && !out.contains("theirs"), "{out}");
        assert!(out.contains("leaf_raft_is_leader 1") && out.contains("subtag=\"users\"") && out.ends_with("# EOF\n"));
        assert!(!out.contains("by_profile"), "{out}");
        assert_eq!(out.lines().filter(|l| l.starts_with('#')).count(), 3);
    }

    #[test]
    fn finds_labels_by_name() {
        assert_eq!(label("m{a=\"1\",tag=\"t\"} 1", "tag"), Some("t"));
        assert_eq!(label("m{subtag=\"t\"} 1", "tag"), None);
        assert_eq!(label("m 1", "tag"), None);
    }
}
