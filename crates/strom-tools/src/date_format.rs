//! Java's `SimpleDateFormat`, for `--date-format` (default `yyyy-MM-dd HH:mm:ss:SSS`).
//!
//! Covers the pattern letters people put in perf-test scripts: `y M d H h k K m s S a E z Z
//! X`, quoted literals (`'T'`, `''`), and Java's rule that an unknown letter is an error.
//! Times are shown in the local time zone, as the JVM does by default.

use anyhow::{bail, Result};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// One piece of a compiled pattern.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Literal(String),
    Field(char, usize),
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct DateFormat {
    pieces: Vec<Piece>,
}

/// Broken-down local time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millis: u32,
    pub weekday: u32,
    pub utc_offset_s: i64,
    pub zone: String,
}

impl DateFormat {
    pub fn new(pattern: &str) -> Result<Self> {
        let mut pieces = Vec::new();
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        let mut literal = String::new();
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                if chars.get(i + 1) == Some(&'\'') {
                    literal.push('\'');
                    i += 2;
                    continue;
                }
                i += 1;
                loop {
                    match (chars.get(i), chars.get(i + 1)) {
                        (None, _) => bail!("Unterminated quote"),
                        (Some('\''), Some('\'')) => {
                            literal.push('\'');
                            i += 2;
                        }
                        (Some('\''), _) => {
                            i += 1;
                            break;
                        }
                        (Some(&q), _) => {
                            literal.push(q);
                            i += 1;
                        }
                    }
                }
                continue;
            }
            if c.is_ascii_alphabetic() {
                if !"yMdHhkKmsSaEzZX".contains(c) {
                    bail!("Illegal pattern character '{c}'");
                }
                let run = chars[i..].iter().take_while(|&&x| x == c).count();
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Field(c, run));
                i += run;
                continue;
            }
            literal.push(c);
            i += 1;
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(Self { pieces })
    }

    /// Formats milliseconds since the Unix epoch in the local time zone.
    pub fn format_millis(&self, epoch_ms: i64) -> String {
        self.format(&local_time(epoch_ms))
    }

    pub fn format(&self, t: &LocalTime) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Field(c, n) => out.push_str(&field(*c, *n, t)),
            }
        }
        out
    }
}

fn field(c: char, n: usize, t: &LocalTime) -> String {
    let num = |v: i64| format!("{v:0n$}");
    match c {
        'y' if n == 2 => format!("{:02}", t.year.rem_euclid(100)),
        'y' => num(t.year),
        'M' if n >= 4 => MONTHS[t.month as usize - 1].to_string(),
        'M' if n == 3 => MONTHS[t.month as usize - 1][..3].to_string(),
        'M' => num(i64::from(t.month)),
        'd' => num(i64::from(t.day)),
        'H' => num(i64::from(t.hour)),
        'k' => num(i64::from(if t.hour == 0 { 24 } else { t.hour })),
        'K' => num(i64::from(t.hour % 12)),
        'h' => num(i64::from(if t.hour.is_multiple_of(12) {
            12
        } else {
            t.hour % 12
        })),
        'm' => num(i64::from(t.minute)),
        's' => num(i64::from(t.second)),
        'S' => num(i64::from(t.millis)),
        'a' => if t.hour < 12 { "AM" } else { "PM" }.to_string(),
        'E' if n >= 4 => DAYS[t.weekday as usize].to_string(),
        'E' => DAYS[t.weekday as usize][..3].to_string(),
        'z' => t.zone.clone(),
        'X' if t.utc_offset_s == 0 => "Z".to_string(),
        _ => {
            let sign = if t.utc_offset_s < 0 { '-' } else { '+' };
            let abs = t.utc_offset_s.abs();
            format!("{sign}{:02}{:02}", abs / 3600, abs % 3600 / 60)
        }
    }
}

/// Local broken-down time from the C library, which honours `TZ` and /etc/localtime.
pub fn local_time(epoch_ms: i64) -> LocalTime {
    let secs = epoch_ms.div_euclid(1000) as libc::time_t;
    let millis = epoch_ms.rem_euclid(1000) as u32;
    // SAFETY: localtime_r writes only into `tm`, which lives on this stack frame; `tm_zone`
    // points into libc's static zone names, read immediately.
    let (tm, zone) = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        let zone = if tm.tm_zone.is_null() {
            String::new()
        } else {
            std::ffi::CStr::from_ptr(tm.tm_zone)
                .to_string_lossy()
                .into_owned()
        };
        (tm, zone)
    };
    LocalTime {
        year: i64::from(tm.tm_year) + 1900,
        month: tm.tm_mon as u32 + 1,
        day: tm.tm_mday as u32,
        hour: tm.tm_hour as u32,
        minute: tm.tm_min as u32,
        second: tm.tm_sec as u32,
        millis,
        weekday: tm.tm_wday as u32,
        utc_offset_s: tm.tm_gmtoff,
        zone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LocalTime {
        LocalTime {
            year: 2023,
            month: 2,
            day: 7,
            hour: 17,
            minute: 53,
            second: 25,
            millis: 127,
            weekday: 2,
            utc_offset_s: 3600,
            zone: "CET".to_string(),
        }
    }

    #[test]
    fn kafkas_default_pattern() {
        let f = DateFormat::new("yyyy-MM-dd HH:mm:ss:SSS").unwrap();
        assert_eq!(f.format(&sample()), "2023-02-07 17:53:25:127");
    }

    #[test]
    fn other_letters_and_quotes() {
        let f = DateFormat::new("EEE, d MMM yy hh:mm a 'o''clock' Z z").unwrap();
        assert_eq!(
            f.format(&sample()),
            "Tue, 7 Feb 23 05:53 PM o'clock +0100 CET"
        );
    }

    #[test]
    fn rejects_unknown_letters_like_java() {
        assert_eq!(
            DateFormat::new("yyyy-qq").unwrap_err().to_string(),
            "Illegal pattern character 'q'"
        );
    }

    #[test]
    fn formats_the_epoch_in_local_time() {
        let text = DateFormat::new("yyyy").unwrap().format_millis(0);
        assert!(text == "1970" || text == "1969");
    }
}
