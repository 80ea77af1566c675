//! Reading Leaf's `leaf_alloc` from a running MySQL or MariaDB (`mysql_async`, pure Rust; TLS
//! with `?require_ssl=true` in the URL). Every message that could carry the URL has its
//! password replaced by `***`. The password comes from the environment
//! ([`PASSWORD_ENV`], or the URL in `LEAF_IMPORT_MYSQL_URL`), never from the command line,
//! where every user of the machine can read it (`ps`, `/proc/<pid>/cmdline`).
//!
//! The same connection also reads `MAX(column)` of the business tables named with
//! `--check-column` ([`ColumnCheck`]). Table and column names are the only SQL the operator
//! writes, so they are checked to be plain identifiers and quoted; nothing else is put into a
//! query.
use std::time::Duration;

use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::prelude::Queryable;

use super::plan::{Floor, LeafRow};

/// How long connecting and reading `leaf_alloc` may take, and each column check after it (a MAX
/// over a column without an index scans the whole table).
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

/// Whether `p` is a plain identifier: 1–64 letters, digits and `_`. Safe to quote with
/// backticks and put into a query (it cannot hold a backtick, a dot or a space).
fn is_identifier(p: &str) -> bool {
    !p.is_empty() && p.len() <= 64 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `parts` quoted with backticks and joined with dots.
fn quoted(parts: &[&str]) -> String {
    parts.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(".")
}

/// Checks a table name: `table` or `database.table`, letters, digits and `_`.
pub fn check_table(table: &str) -> Result<String, String> {
    let parts: Vec<&str> = table.split('.').collect();
    if parts.len() > 2 || !parts.iter().all(|p| is_identifier(p)) {
        return Err(format!("--table {table:?} must be `table` or `database.table` of letters, digits and _"));
    }
    Ok(quoted(&parts))
}

/// One `--check-column TAG=db.table.column`: a column of a business table that holds IDs of the
/// Leaf tag `TAG`, whose `MAX` the tag's first ID must clear. `table.column` is in the URL's
/// database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnCheck {
    /// The Leaf `biz_tag`.
    pub tag: String,
    /// The column as given (`db.table.column` or `table.column`), for messages.
    pub column: String,
    /// `SELECT MAX(column) FROM db.table`, each name quoted with backticks; built from checked
    /// identifiers only.
    query: String,
}

impl ColumnCheck {
    /// Parses `TAG=db.table.column`. The tag is everything before the last `=` (a Leaf tag may
    /// hold one; an identifier cannot), and it is matched against the imported rows later.
    pub fn parse(arg: &str) -> Result<ColumnCheck, String> {
        let usage = || {
            format!(
                "--check-column {arg:?} must be TAG=db.table.column (or TAG=table.column), the names letters, \
                 digits and _"
            )
        };
        let (tag, column) = arg.rsplit_once('=').ok_or_else(usage)?;
        let parts: Vec<&str> = column.split('.').collect();
        if tag.is_empty() || !(2..=3).contains(&parts.len()) || !parts.iter().all(|p| is_identifier(p)) {
            return Err(usage());
        }
        let (table, col) = parts.split_at(parts.len() - 1);
        let query = format!("SELECT MAX({}) FROM {}", quoted(col), quoted(table));
        Ok(ColumnCheck { tag: tag.to_string(), column: column.to_string(), query })
    }

    /// The column's MAX from one row of `SELECT MAX(..)`: `None` for an empty table. Refused:
    /// a column that is not of an integer type (MAX of a string column is the last in
    /// alphabetical order, `'99'` above `'100'`, and of a decimal or a float not an ID), and a
    /// MAX above the largest 64-bit ID.
    fn max_of(&self, mut row: mysql_async::Row) -> Result<Option<i64>, String> {
        let arg = format!("{}={}", self.tag, self.column);
        let Some(col) = row.columns_ref().first() else {
            return Err(format!("--check-column {arg}: MAX answered no column"));
        };
        let integer = matches!(
            col.column_type(),
            ColumnType::MYSQL_TYPE_TINY
                | ColumnType::MYSQL_TYPE_SHORT
                | ColumnType::MYSQL_TYPE_INT24
                | ColumnType::MYSQL_TYPE_LONG
                | ColumnType::MYSQL_TYPE_LONGLONG
        );
        if !integer {
            return Err(format!(
                "--check-column {arg}: not an integer column ({:?}); only a column of integer IDs can be checked",
                col.column_type()
            ));
        }
        let unsigned = col.flags().contains(ColumnFlags::UNSIGNED_FLAG);
        let value: mysql_async::Value = row.take(0).unwrap_or(mysql_async::Value::NULL);
        if value == mysql_async::Value::NULL {
            return Ok(None);
        }
        match mysql_async::from_value_opt::<i64>(value.clone()) {
            Ok(max) => Ok(Some(max)),
            Err(_) if unsigned => {
                Err(format!("--check-column {arg}: MAX is {}, above the largest 64-bit ID", value.as_sql(true)))
            }
            Err(_) => Err(format!("--check-column {arg}: MAX is not an integer: {}", value.as_sql(true))),
        }
    }
}

/// Every row of `table` at `url`, by tag, and the floors of `checks`, read on the same
/// connection right after the table; `password`, if given, replaces the URL's.
pub async fn read(
    url: &str,
    password: Option<&str>,
    table: &str,
    checks: &[ColumnCheck],
) -> Result<(Vec<LeafRow>, Vec<Floor>), String> {
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
        let at = redacted_url(url);
        let mut conn = mysql_async::Conn::new(opts).await.map_err(|e| format!("connecting to {at}: {e}"))?;
        let rows: Vec<(String, i64, i64, Option<String>)> =
            conn.query(query).await.map_err(|e| format!("reading {table} at {at}: {e}"))?;
        let mut floors = Vec::with_capacity(checks.len());
        for c in checks {
            let answer: Vec<mysql_async::Row> =
                conn.query(c.query.as_str()).await.map_err(|e| format!("reading MAX({}) at {at}: {e}", c.column))?;
            let row = answer.into_iter().next().ok_or_else(|| format!("MAX({}) at {at} answered no row", c.column))?;
            floors.push(Floor { tag: c.tag.clone(), column: c.column.clone(), max: c.max_of(row)? });
        }
        conn.disconnect().await.map_err(|e| format!("disconnecting from {at}: {e}"))?;
        Ok::<_, String>((rows, floors))
    };
    let limit = READ_TIMEOUT.saturating_mul(u32::try_from(checks.len()).unwrap_or(u32::MAX).saturating_add(1));
    let (rows, floors) = match tokio::time::timeout(limit, work).await {
        Err(_) => return Err(format!("no answer from {} within {limit:?}", redacted_url(url))),
        Ok(r) => r.map_err(hide)?,
    };
    let rows = rows
        .into_iter()
        .map(|(biz_tag, max_id, step, description)| LeafRow { biz_tag, max_id, step, description })
        .collect();
    Ok((rows, floors))
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

    #[test]
    fn column_checks_are_a_tag_and_quoted_identifiers() {
        let c = ColumnCheck::parse("orders=shop.orders.id").unwrap();
        assert_eq!((c.tag.as_str(), c.column.as_str()), ("orders", "shop.orders.id"));
        assert_eq!(c.query, "SELECT MAX(`id`) FROM `shop`.`orders`");
        let c = ColumnCheck::parse("orders=orders.order_id").unwrap();
        assert_eq!(c.query, "SELECT MAX(`order_id`) FROM `orders`");
        // A Leaf tag may hold `=` or a space; it is only compared with the rows, never queried.
        let c = ColumnCheck::parse("a=b c=db.t.id").unwrap();
        assert_eq!((c.tag.as_str(), c.query.as_str()), ("a=b c", "SELECT MAX(`id`) FROM `db`.`t`"));
        for bad in [
            "orders",
            "=db.t.id",
            "orders=",
            "orders=id",
            "orders=a.b.c.d",
            "orders=db.t.id;drop table t",
            "orders=db.t.`id`",
            "orders=db.t.id) FROM x UNION SELECT (1",
            "orders=db.t.max id",
            "orders=db..id",
            "orders=db.t.",
        ] {
            let e = ColumnCheck::parse(bad).unwrap_err();
            assert!(e.contains("TAG=db.table.column") && e.contains("letters, digits and _"), "{bad:?}: {e}");
        }
    }
}
