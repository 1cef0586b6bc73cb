//! Kafka's fixed-width, big-endian fields outside the request schemas: the keys and
//! values of `__consumer_offsets`, the consumer protocol's assignment bytes. Every read
//! fails softly (`None`) on a short buffer, because these bytes come from other programs.

/// A cursor over big-endian fields.
#[derive(Debug, Clone, Copy)]
pub struct FieldReader<'a>(pub &'a [u8]);

impl<'a> FieldReader<'a> {
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        (self.0.len() >= n).then(|| {
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            head
        })
    }

    pub fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    pub fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    /// Kafka's STRING: an i16 length, then UTF-8 bytes (a negative length is not one).
    pub fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }

    /// Kafka's NULLABLE_STRING: a length of -1 is null.
    pub fn nullable_string(&mut self) -> Option<Option<String>> {
        let len = self.i16()?;
        if len == -1 {
            return Some(None);
        }
        let len = usize::try_from(len).ok()?;
        String::from_utf8(self.take(len)?.to_vec()).ok().map(Some)
    }

    /// Kafka's BYTES: an i32 length, then the bytes (a negative length is not one).
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.i32()?).ok()?;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_in_order_and_stops_at_a_short_buffer() {
        let bytes = [
            0, 7, 0, 0, 0, 9, 0, 2, b'h', b'i', 0, 0, 0, 0, 0, 0, 0, 1, 5,
        ];
        let mut r = FieldReader(&bytes);
        assert_eq!(r.i16(), Some(7));
        assert_eq!(r.i32(), Some(9));
        assert_eq!(r.string().as_deref(), Some("hi"));
        assert_eq!(r.i64(), Some(1));
        assert_eq!(r.i16(), None);
        assert_eq!(FieldReader(&[0xff, 0xff]).string(), None);
        assert_eq!(FieldReader(&[0xff, 0xff]).nullable_string(), Some(None));
        assert_eq!(
            FieldReader(&[0, 1, b'x']).nullable_string(),
            Some(Some("x".into()))
        );
        assert_eq!(
            FieldReader(&[0, 0, 0, 2, 7, 8, 9]).bytes(),
            Some(&[7u8, 8][..])
        );
        assert_eq!(FieldReader(&[0xff, 0xff, 0xff, 0xff]).bytes(), None);
    }
}
