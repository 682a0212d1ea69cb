#![allow(dead_code)]

use ndflow_pva::ByteOrder;

pub const ORDERS: [ByteOrder; 2] = [ByteOrder::Little, ByteOrder::Big];

/// Parse "ca 02 41" style hex, with `"text"` runs copied verbatim as bytes and `|` ignored.
pub fn hex(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            let end = rest[1..]
                .find('"')
                .expect("unterminated string in test hex")
                + 1;
            out.extend_from_slice(&rest.as_bytes()[1..end]);
            rest = &rest[end + 1..];
        } else if c.is_ascii_hexdigit() {
            let (h, r) = rest.split_at(2);
            out.push(u8::from_str_radix(h, 16).expect("hex digit"));
            rest = r;
        } else {
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Small deterministic PRNG (xorshift64*), enough for fuzzing.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
