/// Constant tables too large to print inline (`@@FILE@@`, written with this file).
static CONSTANTS: &[u8] = include_bytes!("@@FILE@@");

fn constant(offset: usize, len: usize) -> Vec<u8> {
    CONSTANTS[offset..offset + len].to_vec()
}
