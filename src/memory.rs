//! The machine's memory: the most a single tensor, and the whole arena RLX plans for a graph, may
//! take here ([`machine_memory`]). Past it RLX's arena allocation aborts the process
//! (`AlignedBytes::zeroed` → `handle_alloc_error`), so the graph checks ([`crate::graph_check`],
//! [`crate::sizing`]) refuse such sizes first.

use std::sync::OnceLock;

/// The memory a single tensor, and the whole arena, may take on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    /// Where the number comes from, for messages.
    pub source: String,
}

impl MemoryLimit {
    /// `1.0 MiB (1048576 bytes) (MemTotal in /proc/meminfo)`, for messages.
    pub fn describe(&self) -> String {
        format!("{} ({})", human(self.bytes), self.source)
    }
}

/// `n` bytes with a binary unit (`24.7 GiB (26520123392 bytes)`).
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    format!("{value:.1} {unit} ({n} bytes)")
}

/// Without a memory size to read (not Linux): only the user address space of x86-64
/// and arm64 (2^47 bytes) bounds a tensor, which still refuses every overflowing size.
const ADDRESS_SPACE: u64 = 1 << 47;

/// The machine's memory: MemTotal from /proc/meminfo, lowered to the cgroup's memory limit
/// (v2 `memory.max`, v1 `memory.limit_in_bytes`) when one is set below it. Read once.
pub fn machine_memory() -> &'static MemoryLimit {
    static LIMIT: OnceLock<MemoryLimit> = OnceLock::new();
    LIMIT.get_or_init(detect_memory)
}

fn detect_memory() -> MemoryLimit {
    let Some(total) = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| meminfo_total(&t))
    else {
        return MemoryLimit {
            bytes: ADDRESS_SPACE,
            source: "no /proc/meminfo: the 2^47-byte user address space".into(),
        };
    };
    let mut limit = MemoryLimit {
        bytes: total,
        source: "MemTotal in /proc/meminfo".into(),
    };
    for (path, text) in cgroup_limits() {
        if let Some(bytes) = text.trim().parse::<u64>().ok().filter(|b| *b < limit.bytes) {
            limit = MemoryLimit {
                bytes,
                source: format!("the cgroup memory limit in {path}"),
            };
        }
    }
    limit
}

/// MemTotal of /proc/meminfo text, in bytes.
fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// (path, contents) of the cgroup memory limit files that exist for this process.
fn cgroup_limits() -> Vec<(String, String)> {
    let mut paths = vec![
        "/sys/fs/cgroup/memory.max".to_string(),
        "/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string(),
    ];
    if let Ok(own) = std::fs::read_to_string("/proc/self/cgroup") {
        for line in own.lines() {
            if let Some(rel) = line.strip_prefix("0::")
                && rel != "/"
            {
                paths.push(format!("/sys/fs/cgroup{rel}/memory.max"));
            }
        }
    }
    paths
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, t)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_memtotal_in_bytes() {
        let text = "MemFree:  100 kB\nMemTotal:       24683652 kB\nSwapTotal: 0 kB\n";
        assert_eq!(meminfo_total(text), Some(24683652 * 1024));
        assert_eq!(meminfo_total("MemFree: 1 kB\n"), None);
        assert_eq!(meminfo_total("MemTotal: lots kB\n"), None);
        let found = machine_memory();
        assert!(found.bytes > 0 && !found.source.is_empty(), "{found:?}");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(3 << 30), "3.0 GiB (3221225472 bytes)");
    }

    #[test]
    fn a_limit_describes_its_size_and_source() {
        let limit = MemoryLimit {
            bytes: 1 << 20,
            source: "a test limit".into(),
        };
        assert_eq!(limit.describe(), "1.0 MiB (1048576 bytes) (a test limit)");
    }
}
