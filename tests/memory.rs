//! A process's memory as the benches report it: private memory (RssAnon) first, because that
//! is what a user pays for; PSS (its share of every page, shared ones split between the
//! processes that map them) and VmRSS (every resident page, the program's own clean code
//! included) beside it; VmHWM, the peak of VmRSS.

/// One reading of a process's memory, in KiB as the kernel reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// Resident anonymous memory: the heap, stacks and written private pages.
    pub rss_anon_kib: u64,
    /// Proportional set size, from `smaps_rollup`.
    pub pss_kib: u64,
    /// Every resident page, file-backed ones included.
    pub rss_kib: u64,
    /// The peak of VmRSS since the start or the last `clear_refs`.
    pub hwm_kib: u64,
}

impl Memory {
    /// Reads process `pid`'s memory from `/proc`; `None` once it has exited.
    #[must_use]
    pub fn of(pid: u32) -> Option<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
        Some(Self {
            rss_anon_kib: field(&status, "RssAnon:")?,
            pss_kib: field(&rollup, "Pss:")?,
            rss_kib: field(&status, "VmRSS:")?,
            hwm_kib: field(&status, "VmHWM:")?,
        })
    }

    /// Private memory in MiB.
    #[must_use]
    pub fn anon_mib(&self) -> f64 {
        mib(self.rss_anon_kib)
    }

    /// `RssAnon 0.7 MiB (PSS 2.1, VmRSS 4.1)`: the figure and what stands beside it.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "RssAnon {:.1} MiB (PSS {:.1}, VmRSS {:.1})",
            mib(self.rss_anon_kib),
            mib(self.pss_kib),
            mib(self.rss_kib)
        )
    }
}

/// KiB as MiB.
#[must_use]
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The value of the `name` line (`Name:   123 kB`) of a `/proc` file.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_private_memory_below_its_resident_set() {
        let memory = Memory::of(std::process::id()).unwrap();
        assert!(memory.rss_anon_kib > 0, "{memory:?}");
        assert!(memory.rss_anon_kib <= memory.rss_kib, "{memory:?}");
        assert!(memory.pss_kib <= memory.rss_kib, "{memory:?}");
        assert!(memory.rss_kib <= memory.hwm_kib, "{memory:?}");
    }

    #[test]
    fn a_field_is_read_in_kib_and_a_missing_one_is_none() {
        let text = "Name:\tx\nRssAnon:\t     712 kB\nVmRSS:\t4100 kB\n";
        assert_eq!(field(text, "RssAnon:"), Some(712));
        assert_eq!(field(text, "VmRSS:"), Some(4100));
        assert_eq!(field(text, "Pss:"), None);
        assert!(Memory::of(u32::MAX).is_none());
    }
}
