//! A table as data — a header, rows of text and each column's alignment —
//! and its formats: the terminal's quiet table and the report's HTML table.
//! Every table burstsim prints or writes into a report is made this way.

use std::fmt::Write as _;

use comfy_table::{CellAlignment, ContentArrangement, LineStyle, Table, TableStyle};

/// No borders, one rule under the header: quiet enough to read 28 rows.
pub const STYLE: TableStyle =
    TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'));

/// How a column's cells stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text, left.
    Left,
    /// Figures, right.
    Right,
    /// A verdict: left; in HTML marked `ok` or `over`, as [`Row::over`] says.
    Verdict,
}

/// One row: its cells, and whether its verdict is over the limit.
#[derive(Clone, Debug, Default)]
pub struct Row {
    /// One text per column.
    pub cells: Vec<String>,
    /// The verdict cell says the backend was overrun.
    pub over: bool,
}

/// A table: a header, rows, and how each column stands.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    /// The columns' headers.
    pub header: Vec<String>,
    /// How each column's cells stand.
    pub align: Vec<Align>,
    /// The rows, in order.
    pub rows: Vec<Row>,
    /// Spaces after each column in the terminal (0 means 1).
    pub gap: u16,
}

impl Rows {
    /// An empty table with these columns.
    pub fn new(columns: impl IntoIterator<Item = (String, Align)>) -> Rows {
        let (header, align) = columns.into_iter().unzip();
        Rows {
            header,
            align,
            rows: Vec::new(),
            gap: 1,
        }
    }

    /// Adds a row.
    pub fn push(&mut self, cells: Vec<String>, over: bool) {
        self.rows.push(Row { cells, over });
    }

    /// Blanks the first cell where it repeats the row above's, so the eye
    /// groups a workload's rows.
    pub fn grouped(mut self) -> Rows {
        let mut previous: Option<String> = None;
        for row in &mut self.rows {
            let Some(first) = row.cells.first_mut() else {
                continue;
            };
            if previous.as_ref() == Some(first) {
                first.clear();
            } else {
                previous = Some(first.clone());
            }
        }
        self
    }

    /// The terminal's table: no borders, one rule under the header, one
    /// space after each column.
    pub fn terminal(&self) -> String {
        let mut table = Table::new();
        table
            .load_style(STYLE)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(self.header.clone());
        for row in &self.rows {
            table.add_row(row.cells.clone());
        }
        for (column, align) in table.column_iter_mut().zip(&self.align) {
            column.set_padding((0, self.gap.max(1)));
            if *align == Align::Right {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
        table.trim_fmt()
    }

    /// The report's table: `<th>` headers, figures in `class="n"` cells,
    /// verdicts in `ok` or `over` ones; every text escaped.
    pub fn html(&self) -> String {
        // Wider than the page, a table scrolls within its own box.
        let mut html = String::from("<div class=\"wide\"><table>\n<tr>");
        for header in &self.header {
            let _ = write!(html, "<th>{}</th>", escape(header));
        }
        html.push_str("</tr>\n");
        for row in &self.rows {
            html.push_str("<tr>");
            for (cell, align) in row.cells.iter().zip(&self.align) {
                let class = match align {
                    Align::Left => "",
                    Align::Right => " class=\"n\"",
                    Align::Verdict if row.over => " class=\"over\"",
                    Align::Verdict => " class=\"ok\"",
                };
                let _ = write!(html, "<td{class}>{}</td>", escape(cell));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</table></div>\n");
        html
    }
}

/// `text` safe inside HTML text and attribute values.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Most items a sentence names; the rest are counted.
const MAX_NAMED: usize = 12;

/// `a, b and c`; of a longer list, the first [`MAX_NAMED`] and how many more.
pub fn join(items: &[String]) -> String {
    if items.len() > MAX_NAMED {
        return format!(
            "{} and {} more",
            items[..MAX_NAMED].join(", "),
            items.len() - MAX_NAMED
        );
    }
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Rows {
        let mut rows = Rows::new([
            ("workload".to_string(), Align::Left),
            ("n".to_string(), Align::Right),
            ("backend".to_string(), Align::Verdict),
        ]);
        rows.push(vec!["a".into(), "5".into(), "ok 5/s".into()], false);
        rows.push(vec!["a".into(), "12".into(), "OVER 12/s".into()], true);
        rows.push(vec!["b<".into(), "7".into(), "-".into()], false);
        rows.grouped()
    }

    #[test]
    fn a_workload_is_named_on_its_first_row_only() {
        let rows = sample();
        let firsts: Vec<&str> = rows.rows.iter().map(|r| r.cells[0].as_str()).collect();
        assert_eq!(firsts, ["a", "", "b<"]);
    }

    #[test]
    fn the_terminal_table_aligns_figures_right() {
        let text = sample().terminal();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "workload   n  backend");
        assert_eq!(lines[2], "a          5  ok 5/s");
        assert_eq!(lines[3], "          12  OVER 12/s");
        assert_eq!(lines[4], "b<         7  -");
    }

    #[test]
    fn the_html_table_escapes_and_marks_verdicts() {
        let html = sample().html();
        assert!(html.contains("<tr><th>workload</th><th>n</th><th>backend</th></tr>"));
        assert!(html.contains("<td class=\"n\">12</td><td class=\"over\">OVER 12/s</td>"));
        assert!(html.contains("<td>b&lt;</td>"));
        assert!(html.contains("<td class=\"ok\">-</td>"));
    }
}
