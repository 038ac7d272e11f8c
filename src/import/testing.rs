//! Reading configuration text without a file, for the dialects' tests.

use super::*;

/// Reads `text` as a file named `name` in `dialect`, for the dialects' tests.
pub(crate) fn read_text(name: &str, text: &str, dialect: Dialect) -> Result<Vec<Block>, String> {
    read(&Source::new(Path::new(name), text), dialect)
        .map(|read| read.blocks)
        .map_err(|err| err.to_string())
}

/// `key = value` of a block's field, for the dialects' tests.
pub(crate) fn field(block: &Block, key: &str) -> Option<String> {
    block
        .fields
        .iter()
        .find(|f| f.key == key)
        .map(|f| f.value.to_string())
}
