//! Leaf's `leaf_alloc` as a CSV export: a header naming at least `biz_tag`, `max_id` and `step`
//! (any order; `description` and other columns such as `update_time` optional), then one row
//! per tag. Fields follow RFC 4180 (quotes around fields with commas, quotes or line breaks;
//! `""` for a quote). An empty or `\N` (MySQL's NULL) description is none.
use super::plan::LeafRow;

/// The largest export read (a Leaf table of about 400,000 short tags).
pub const MAX_CSV_BYTES: usize = 64 << 20;

/// Parses an export. Errors name the line.
pub fn parse(text: &str) -> Result<Vec<LeafRow>, String> {
    let records = records(text)?;
    let mut it = records.into_iter();
    let (_, header) = it.next().ok_or("the file is empty: it needs a header line")?;
    let col = |name: &str| header.iter().position(|h| h.trim().eq_ignore_ascii_case(name));
    let need = |name: &str| col(name).ok_or_else(|| format!("the header has no {name} column: {header:?}"));
    let (tag, max_id, step) = (need("biz_tag")?, need("max_id")?, need("step")?);
    let description = col("description");
    let mut rows = Vec::new();
    for (line, fields) in it {
        if fields.len() == 1 && fields[0].is_empty() {
            continue;
        }
        if fields.len() != header.len() {
            return Err(format!("line {line}: {} fields, the header has {}", fields.len(), header.len()));
        }
        let int = |i: usize, what: &str| {
            fields[i]
                .trim()
                .parse::<i64>()
                .map_err(|_| format!("line {line}: {what} {:?} is not an integer", fields[i]))
        };
        let d = description.map(|i| fields[i].clone()).filter(|d| !d.is_empty() && d != "\\N");
        rows.push(LeafRow {
            biz_tag: fields[tag].clone(),
            max_id: int(max_id, "max_id")?,
            step: int(step, "step")?,
            description: d,
        });
    }
    Ok(rows)
}

/// RFC 4180 records with the line each starts on.
fn records(text: &str) -> Result<Vec<(usize, Vec<String>)>, String> {
    let mut out = Vec::new();
    let (mut fields, mut field) = (Vec::new(), String::new());
    let (mut line, mut start) = (1, 1);
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => {
                if c == '\n' {
                    line += 1;
                }
                field.push(c);
            }
            (false, '"') if field.is_empty() && !was_quoted => {
                quoted = true;
                was_quoted = true;
            }
            (false, '"') => return Err(format!("line {line}: a quote inside an unquoted field")),
            (false, ',') => {
                fields.push(std::mem::take(&mut field));
                was_quoted = false;
            }
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                fields.push(std::mem::take(&mut field));
                out.push((start, std::mem::take(&mut fields)));
                was_quoted = false;
                line += 1;
                start = line;
            }
            (false, c) if was_quoted => return Err(format!("line {line}: {c:?} after a closing quote")),
            (false, c) => field.push(c),
        }
    }
    if quoted {
        return Err(format!("line {start}: a quoted field is never closed"));
    }
    if !field.is_empty() || !fields.is_empty() {
        fields.push(field);
        out.push((start, fields));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_parse_with_quotes_nulls_and_any_column_order() {
        let text = "step,biz_tag,max_id,description,update_time\r\n\
                    2000,orders,5001,\"orders, \"\"eu\"\"\nand more\",2020-01-01 00:00:00\r\n\
                    10,users,1,\\N,2020-01-01\n\
                    \n\
                    7,empty,3,,x\n";
        let rows = parse(text).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].biz_tag, "orders");
        assert_eq!((rows[0].max_id, rows[0].step), (5001, 2000));
        assert_eq!(rows[0].description.as_deref(), Some("orders, \"eu\"\nand more"));
        assert_eq!(rows[1].description, None);
        assert_eq!(rows[2].description, None);
        let no_desc = parse("biz_tag,max_id,step\na,1,1").unwrap();
        assert_eq!(no_desc[0], LeafRow { biz_tag: "a".into(), max_id: 1, step: 1, description: None });
    }

    #[test]
    fn broken_exports_are_refused_with_the_line() {
        for (text, says) in [
            ("", "empty"),
            ("tag,max_id,step\n", "biz_tag"),
            ("biz_tag,max_id,step\na,1\n", "line 2"),
            ("biz_tag,max_id,step\na,x,1\n", "max_id"),
            ("biz_tag,max_id,step\n\"a,1,1\n", "never closed"),
            ("biz_tag,max_id,step\na\"b,1,1\n", "quote"),
            ("biz_tag,max_id,step\n\"a\"b,1,1\n", "after a closing quote"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }
}
