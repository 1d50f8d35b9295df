//! An I/O failure in words a person reads, without the `(os error N)` suffix of `io::Error`'s
//! own text: the one wording the launcher's and the connector's messages share.

use std::io;

/// `err`'s cause in words.
#[must_use]
pub fn io_words(err: &io::Error) -> String {
    kind_words(err.kind())
}

/// A kind of I/O failure in words.
#[must_use]
pub fn kind_words(kind: io::ErrorKind) -> String {
    match kind {
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        io::ErrorKind::NotADirectory => "a file stands where a folder should be".to_owned(),
        io::ErrorKind::IsADirectory => "it is a folder".to_owned(),
        io::ErrorKind::NotFound => "it does not exist".to_owned(),
        io::ErrorKind::ReadOnlyFilesystem => "the file system is read-only".to_owned(),
        io::ErrorKind::StorageFull => "the disk is full".to_owned(),
        kind => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_without_the_os_error_number() {
        let err = io::Error::from_raw_os_error(13);
        assert_eq!(io_words(&err), "permission denied");
        assert!(!io_words(&io::Error::from_raw_os_error(28)).contains("os error"));
    }
}
