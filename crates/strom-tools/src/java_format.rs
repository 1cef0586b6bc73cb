//! Java's `%.Nf` formatting of doubles, reproduced so Kafka's output lines stay byte-identical.
//!
//! Java's `Formatter` does not round the binary value as C's `printf` does: it takes the
//! shortest decimal digits that identify the double (as `Double.toString` does) and rounds
//! those digits HALF_UP. So `%.2f` of `0.125` is `0.13` in Java but `0.12` in C, and `%.2f`
//! of `1.005` (binary `1.00499…`) is `1.01` in Java. Rust's `{:e}` yields the same shortest
//! digits, on which this module applies Java's rounding. The locale is taken to be `ROOT`/`en`
//! (a `.` decimal separator, no grouping), as on the machines the seeds were run on.

/// Formats `value` as Java's `String.format("%.{precision}f", value)` does.
pub fn fixed(value: f64, precision: usize) -> String {
    if value.is_nan() {
        return "NaN".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let (mut digits, mut point) = shortest_digits(value.abs());
    let keep = point + precision as i64;
    if keep < 0 {
        digits.clear();
    } else if (keep as usize) < digits.len() {
        let round_up = digits[keep as usize] >= 5;
        digits.truncate(keep as usize);
        if round_up && increment(&mut digits) {
            digits.insert(0, 1);
            point += 1;
        }
    }
    let mut out = String::with_capacity(precision + 24);
    if value.is_sign_negative() {
        out.push('-');
    }
    let digit_at = |i: i64| -> char {
        if i >= 0 && (i as usize) < digits.len() {
            (b'0' + digits[i as usize]) as char
        } else {
            '0'
        }
    };
    if point <= 0 {
        out.push('0');
    } else {
        (0..point).for_each(|i| out.push(digit_at(i)));
    }
    if precision > 0 {
        out.push('.');
        (point..point + precision as i64).for_each(|i| out.push(digit_at(i)));
    }
    out
}

/// Java's `%f`, whose default precision is 6.
pub fn f(value: f64) -> String {
    fixed(value, 6)
}

/// Java's `Double.toString` (what string concatenation prints): plain notation with at
/// least one decimal for magnitudes in [1e-3, 1e7), computerized scientific otherwise.
pub fn double_to_string(value: f64) -> String {
    if value.is_nan() || value.is_infinite() {
        return fixed(value, 0);
    }
    let magnitude = value.abs();
    if value == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let plain = format!("{value}");
        return if plain.contains('.') {
            plain
        } else {
            plain + ".0"
        };
    }
    let (digits, point) = shortest_digits(magnitude);
    let mut out = String::new();
    if value < 0.0 {
        out.push('-');
    }
    out.push((b'0' + digits[0]) as char);
    out.push('.');
    if digits.len() == 1 {
        out.push('0');
    } else {
        digits[1..]
            .iter()
            .for_each(|d| out.push((b'0' + d) as char));
    }
    out.push_str(&format!("E{}", point - 1));
    out
}

/// The shortest decimal digits of a non-negative finite `value`, and the position of the
/// decimal point counted from the left of those digits (`1.005` gives `[1,0,0,5]`, 1).
fn shortest_digits(value: f64) -> (Vec<u8>, i64) {
    if value == 0.0 {
        return (vec![0], 1);
    }
    let text = format!("{value:e}");
    let (mantissa, exponent) = text.split_once('e').expect("{:e} always has an exponent");
    let exponent: i64 = exponent.parse().expect("{:e} exponent is an integer");
    let digits = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    (digits, exponent + 1)
}

/// Adds one unit in the last place of `digits`; returns true when the carry leaves the top.
fn increment(digits: &mut [u8]) -> bool {
    for digit in digits.iter_mut().rev() {
        if *digit == 9 {
            *digit = 0;
        } else {
            *digit += 1;
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_the_shortest_decimal_half_up_like_java() {
        assert_eq!(fixed(0.125, 2), "0.13");
        assert_eq!(fixed(1.005, 2), "1.01");
        assert_eq!(fixed(0.15, 1), "0.2");
        assert_eq!(fixed(2.5, 0), "3");
        assert_eq!(fixed(0.0049, 2), "0.00");
        assert_eq!(fixed(0.005, 2), "0.01");
    }

    #[test]
    fn pads_and_carries() {
        assert_eq!(fixed(0.0, 2), "0.00");
        assert_eq!(fixed(9.995, 2), "10.00");
        assert_eq!(fixed(99.96, 1), "100.0");
        assert_eq!(fixed(1e20, 1), "100000000000000000000.0");
        assert_eq!(fixed(1.5e-7, 6), "0.000000");
        assert_eq!(fixed(5e-7, 6), "0.000001");
        assert_eq!(fixed(123456.0, 4), "123456.0000");
    }

    #[test]
    fn f_has_six_decimals() {
        assert_eq!(f(199.97333688874083), "199.973337");
        assert_eq!(f(100000.0), "100000.000000");
    }

    #[test]
    fn double_to_string_like_java() {
        assert_eq!(double_to_string(12.0), "12.0");
        assert_eq!(double_to_string(0.5), "0.5");
        assert_eq!(double_to_string(1.234567), "1.234567");
        assert_eq!(double_to_string(0.0001), "1.0E-4");
        assert_eq!(double_to_string(1.5e7), "1.5E7");
        assert_eq!(double_to_string(0.0), "0.0");
    }

    #[test]
    fn keeps_java_spellings_of_special_values() {
        assert_eq!(fixed(f64::NAN, 4), "NaN");
        assert_eq!(fixed(f64::INFINITY, 4), "Infinity");
        assert_eq!(fixed(-0.001, 2), "-0.00");
        assert_eq!(fixed(-1.25, 1), "-1.3");
    }
}
