//! The basename patterns of FILE_LIST, matched as Python's `fnmatch` does.

/// Whether basename globs ignore case. The reference probes the filesystem; the platform
/// default is what such a probe reports on a default install.
pub(super) const GLOB_CASE_INSENSITIVE: bool = cfg!(any(windows, target_os = "macos"));

/// One element of a parsed `fnmatch` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `?`
    AnyOne,
    /// `*`
    AnyRun,
    /// `[...]` or `[!...]`, as inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches_one(&self, c: char) -> bool {
        match self {
            Self::Literal(literal) => *literal == c,
            Self::AnyOne => true,
            Self::AnyRun => false,
            Self::Class { negated, ranges } => {
                ranges.iter().any(|&(low, high)| low <= c && c <= high) != *negated
            }
        }
    }
}

/// A Python `fnmatch` pattern: `*`, `?`, `[seq]`, `[!seq]`; a `[` without a closing `]` is
/// literal, and `]` right after `[` or `[!` is a member. No escapes, as in `fnmatch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    pub(super) fn new(pattern: &str) -> Self {
        let folded;
        let pattern = if GLOB_CASE_INSENSITIVE {
            folded = pattern.to_lowercase();
            folded.as_str()
        } else {
            pattern
        };
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' => {
                    if tokens.last() != Some(&Token::AnyRun) {
                        tokens.push(Token::AnyRun);
                    }
                    i += 1;
                }
                '?' => {
                    tokens.push(Token::AnyOne);
                    i += 1;
                }
                '[' => {
                    let mut end = i + 1;
                    let negated = chars.get(end) == Some(&'!');
                    if negated {
                        end += 1;
                    }
                    let start = end;
                    if chars.get(end) == Some(&']') {
                        end += 1;
                    }
                    while end < chars.len() && chars[end] != ']' {
                        end += 1;
                    }
                    if end >= chars.len() {
                        tokens.push(Token::Literal('['));
                        i += 1;
                    } else {
                        tokens.push(Token::Class {
                            negated,
                            ranges: class_ranges(&chars[start..end]),
                        });
                        i = end + 1;
                    }
                }
                c => {
                    tokens.push(Token::Literal(c));
                    i += 1;
                }
            }
        }
        Self { tokens }
    }

    pub(super) fn matches(&self, name: &str) -> bool {
        let folded;
        let name = if GLOB_CASE_INSENSITIVE {
            folded = name.to_lowercase();
            folded.as_str()
        } else {
            name
        };
        let name: Vec<char> = name.chars().collect();
        let tokens = &self.tokens;
        let (mut t, mut n) = (0, 0);
        // Where the last `*` was and how much of the name it has swallowed so far.
        let mut backtrack: Option<(usize, usize)> = None;
        while n < name.len() {
            match tokens.get(t) {
                Some(Token::AnyRun) => {
                    backtrack = Some((t, n));
                    t += 1;
                    continue;
                }
                Some(token) if token.matches_one(name[n]) => {
                    t += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
            let Some((star, swallowed)) = backtrack else {
                return false;
            };
            t = star + 1;
            n = swallowed + 1;
            backtrack = Some((star, swallowed + 1));
        }
        tokens[t..].iter().all(|token| *token == Token::AnyRun)
    }
}

fn class_ranges(body: &[char]) -> Vec<(char, char)> {
    let mut ranges = Vec::new();
    let mut k = 0;
    while k < body.len() {
        if k + 2 < body.len() && body[k + 1] == '-' {
            ranges.push((body[k], body[k + 2]));
            k += 3;
        } else {
            ranges.push((body[k], body[k]));
            k += 1;
        }
    }
    ranges
}
