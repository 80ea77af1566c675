//! Reading Leaf's `leaf_alloc` from a running MySQL or MariaDB (`mysql_async`, pure Rust; TLS
//! with `?require_ssl=true` in the URL). Every message that could carry the URL has its
//! password replaced by `***`. The password comes from the environment
//! ([`PASSWORD_ENV`], or the URL in `LEAF_IMPORT_MYSQL_URL`), never from the command line,
//! where every user of the machine can read it (`ps`, `/proc/<pid>/cmdline`).
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::plan::LeafRow;

/// How long connecting and reading may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The variable that may hold the MySQL password, apart from the URL.
pub const PASSWORD_ENV: &str = "LEAF_IMPORT_MYSQL_PASSWORD";

/// Refuses a URL with a password that came on the command line (`args`: `--url URL` or
/// `--url=URL`): it would be readable by every user of the machine for as long as the import
/// runs. The same URL from `LEAF_IMPORT_MYSQL_URL` is fine.
pub fn check_not_in_args(url: &str, args: impl IntoIterator<Item = String>) -> Result<(), String> {
    match password_span(url) {
        Some((start, end)) if start < end => {}
        _ => return Ok(()),
    }
    let given = format!("--url={url}");
    if args.into_iter().any(|a| a == url || a == given) {
        return Err(format!(
            "the --url on the command line holds a password, which every user of this machine can read \
             (ps); give it in {PASSWORD_ENV} (and the URL without it), or the whole URL in \
             LEAF_IMPORT_MYSQL_URL: {}",
            redacted_url(url)
        ));
    }
    Ok(())
}

/// `url` with its password replaced by `***` (for messages).
pub fn redacted_url(url: &str) -> String {
    match password_span(url) {
        Some((start, end)) => format!("{}***{}", &url[..start], &url[end..]),
        None => url.to_string(),
    }
}

/// Where the password of `scheme://user:password@host` is in `url`.
fn password_span(url: &str) -> Option<(usize, usize)> {
    let after_scheme = url.find("://")? + 3;
    let at = after_scheme + url[after_scheme..].rfind('@')?;
    let colon = after_scheme + url[after_scheme..at].find(':')?;
    Some((colon + 1, at))
}

/// `msg` with every form of `url`'s password (as written and percent-decoded) replaced.
pub fn scrub(url: &str, msg: &str) -> String {
    let Some((start, end)) = password_span(url) else { return msg.to_string() };
    let raw = &url[start..end];
    let mut out = msg.replace(url, &redacted_url(url));
    if !raw.is_empty() {
        let decoded: String = form_urlencoded::parse(format!("p={raw}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        out = out.replace(raw, "***");
        if !decoded.is_empty() {
            out = out.replace(&decoded, "***");
        }
    }
    out
}

/// Checks a table name: `table` or `database.table`, letters, digits and `_`.
pub fn check_table(table: &str) -> Result<String, String> {
    let ok = |p: &str| !p.is_empty() && p.len() <= 64 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let parts: Vec<&str> = table.split('.').collect();
    if parts.len() > 2 || !parts.iter().all(|p| ok(p)) {
        return Err(format!("--table {table:?} must be `table` or `database.table` of letters, digits and _"));
    }
    Ok(parts.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join("."))
}

/// Every row of `table` at `url`, by tag; `password`, if given, replaces the URL's.
pub async fn read(url: &str, password: Option<&str>, table: &str) -> Result<Vec<LeafRow>, String> {
    let table = check_table(table)?;
    let hide = |msg: String| match password {
        Some(p) if !p.is_empty() => scrub(url, &msg).replace(p, "***"),
        _ => scrub(url, &msg),
    };
    let mut opts = mysql_async::Opts::from_url(url).map_err(|e| hide(format!("--url: {e}")))?;
    if let Some(p) = password {
        opts = mysql_async::OptsBuilder::from_opts(opts).pass(Some(p)).into();
    }
    let query = format!("SELECT biz_tag, max_id, step, description FROM {table} ORDER BY biz_tag");
    let work = async {
        let mut conn = mysql_async::Conn::new(opts).await?;
        let rows: Vec<(String, i64, i64, Option<String>)> = conn.query(query).await?;
        conn.disconnect().await?;
        Ok::<_, mysql_async::Error>(rows)
    };
    let rows = match tokio::time::timeout(READ_TIMEOUT, work).await {
        Err(_) => return Err(format!("no answer from {} within {READ_TIMEOUT:?}", redacted_url(url))),
        Ok(r) => r.map_err(|e| hide(format!("reading {table} at {}: {e}", redacted_url(url))))?,
    };
    Ok(rows
        .into_iter()
        .map(|(biz_tag, max_id, step, description)| LeafRow { biz_tag, max_id, step, description })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_on_the_command_line_is_refused_and_not_repeated() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let url = "mysql://leaf:pa55word@db:3306/leaf";
        let e = check_not_in_args(url, args(&["leaf", "import", "leaf-mysql", "--url", url])).unwrap_err();
        assert!(e.contains(PASSWORD_ENV) && !e.contains("pa55word"), "{e}");
        assert!(check_not_in_args(url, args(&["leaf", &format!("--url={url}")])).is_err());
        // From the environment, or without a password: nothing to refuse.
        assert!(check_not_in_args(url, args(&["leaf", "import", "leaf-mysql"])).is_ok());
        let bare = "mysql://leaf@db:3306/leaf";
        assert!(check_not_in_args(bare, args(&["leaf", "--url", bare])).is_ok());
        assert!(check_not_in_args("mysql://leaf:@db/leaf", args(&["--url", "mysql://leaf:@db/leaf"])).is_ok());
        // A short password that merely occurs in another argument is not the URL on the
        // command line (the URL came from the environment).
        let short = "mysql://leaf:a@db/leaf";
        assert!(
            check_not_in_args(short, args(&["/usr/bin/leaf", "import", "leaf-mysql", "--table", "leaf_alloc"])).is_ok()
        );
    }

    #[test]
    fn passwords_never_reach_a_message() {
        let url = "mysql://leaf:s3cr%40t@db.example:3306/leaf";
        assert_eq!(redacted_url(url), "mysql://leaf:***@db.example:3306/leaf");
        let msg = format!("failed for {url}: access denied for password s3cr@t (s3cr%40t)");
        let s = scrub(url, &msg);
        assert!(!s.contains("s3cr"), "{s}");
        assert_eq!(redacted_url("mysql://leaf@db/leaf"), "mysql://leaf@db/leaf");
        assert_eq!(scrub("mysql://db/leaf", "x"), "x");
    }

    #[test]
    fn table_names_are_identifiers() {
        assert_eq!(check_table("leaf_alloc").unwrap(), "`leaf_alloc`");
        assert_eq!(check_table("leaf.leaf_alloc").unwrap(), "`leaf`.`leaf_alloc`");
        for bad in ["", "a.b.c", "a;drop", "a`b", "a b", "a."] {
            assert!(check_table(bad).is_err(), "{bad:?}");
        }
    }
}
