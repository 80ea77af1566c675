use super::*;

fn render(m: &Metrics) -> String {
    render_idle(m)
}

#[test]
fn snowflake_keys_beyond_the_cap_count_as_other() {
    let m = Metrics::new();
    for i in 0..MAX_SNOWFLAKE_KEYS + 50 {
        m.snowflake_served(&format!("k{i}"), 2);
    }
    m.snowflake_served("k0", 1);
    m.snowflake_served("never-seen", 3);
    let text = render(&m);
    let series = text.lines().filter(|l| l.starts_with("leaf_ids_served_total{mode=\"snowflake\"")).count();
    assert_eq!(series, MAX_SNOWFLAKE_KEYS + 1, "the label set is bounded: 1,000 keys and `_other`");
    assert!(text.contains("leaf_ids_served_total{mode=\"snowflake\",tag=\"k0\"} 3"), "{text}");
    // The 50 keys after the cap (2 IDs each) and the unseen one (3) share `_other`.
    assert!(text.contains("leaf_ids_served_total{mode=\"snowflake\",tag=\"_other\"} 103"), "{text}");
}
