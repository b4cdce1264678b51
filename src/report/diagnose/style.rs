//! How `diagnose`'s terminal lines are styled: pieces of text, each plain, a heading, good,
//! bad, a warning or dim; `main` decides whether the styles are shown, and `-v` takes the text.

/// How a piece of text is shown on a colour terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Heading,
    Good,
    Bad,
    /// Not a fault, not fine: not judged, half-open beside a live one, a missing time.
    Warn,
    Dim,
}

impl Style {
    pub fn sgr(self) -> &'static str {
        match self {
            Style::Plain => "",
            Style::Heading => "\x1b[1m",
            Style::Good => "\x1b[32m",
            Style::Bad => "\x1b[1;31m",
            Style::Warn => "\x1b[33m",
            Style::Dim => "\x1b[2m",
        }
    }
}

/// One line of the terminal report: styled pieces.
pub type Line = Vec<(Style, String)>;

/// A line in one plain piece.
pub fn plain(t: String) -> Line {
    vec![(Style::Plain, t)]
}

/// A line's text, without its styles.
pub fn text(line: &Line) -> String {
    line.iter().map(|(_, text)| text.as_str()).collect()
}
