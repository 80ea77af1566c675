//! The standard `process_*` metrics (as the Prometheus client libraries name them), read from
//! `/proc/self` at each scrape: CPU time, resident and virtual memory, open and maximum file
//! descriptors, threads and the start time; and, under `metrics.heap_stats`, the allocator's
//! heap in use and the free memory it holds (`leaf_heap_*`, [`crate::memory::heap`]), which
//! tell live memory from memory freed but not returned. Off by default: glibc (the dynamic
//! build's allocator) reads them by walking every arena's free lists under the arena's lock,
//! which on a fragmented heap held a scrape for about 18 ms more (and the allocations of
//! requests waiting on those locks); jemalloc (the static build's) reads its own counters. A
//! value that cannot be read is left out.
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What `/proc/self/stat` says, with the page size and clock tick applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcStat {
    pub cpu_seconds: f64,
    pub threads: i64,
    pub start_since_boot_seconds: f64,
    pub virtual_bytes: i64,
    pub resident_bytes: i64,
}

/// Parses `/proc/self/stat` (fields after the command name, which may hold spaces and
/// parentheses, so the text is split at its last `)`).
pub fn parse_stat(stat: &str, ticks_per_sec: f64, page_bytes: i64) -> Option<ProcStat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields from 3 (state), so field n (1-based, proc(5)) is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<i64>().ok());
    let (utime, stime) = (num(14)?, num(15)?);
    Some(ProcStat {
        cpu_seconds: (utime + stime) as f64 / ticks_per_sec,
        threads: num(20)?,
        start_since_boot_seconds: num(22)? as f64 / ticks_per_sec,
        virtual_bytes: num(23)?,
        resident_bytes: num(24)?.saturating_mul(page_bytes),
    })
}

/// The `btime` line of `/proc/stat`: boot time, Unix seconds.
pub fn parse_boot_time(stat: &str) -> Option<f64> {
    stat.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
pub fn parse_max_fds(limits: &str) -> Option<i64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// Reads `/proc/self` at each scrape, and the heap's figures when `heap` says so.
#[derive(Debug, Default)]
pub struct ProcessCollector {
    pub heap: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // SAFETY: sysconf only reads configuration values.
        let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let stat = stat.and_then(|s| parse_stat(&s, if ticks > 0 { ticks as f64 } else { 100.0 }, page.max(1)));
        let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| parse_boot_time(&s));
        let open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as i64);
        let max_fds = std::fs::read_to_string("/proc/self/limits").ok().and_then(|s| parse_max_fds(&s));
        let mut gauge = |name: &str, help: &str, v: Option<f64>| -> Result<(), std::fmt::Error> {
            if let Some(v) = v {
                let g = ConstGauge::new(v);
                g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
            }
            Ok(())
        };
        if let Some(s) = &stat {
            gauge("process_resident_memory_bytes", "Resident memory size in bytes", Some(s.resident_bytes as f64))?;
            gauge("process_virtual_memory_bytes", "Virtual memory size in bytes", Some(s.virtual_bytes as f64))?;
            gauge("process_threads", "Number of OS threads in the process", Some(s.threads as f64))?;
            let start = boot.map(|b| b + s.start_since_boot_seconds);
            gauge("process_start_time_seconds", "Start time of the process since the Unix epoch in seconds", start)?;
        }
        gauge("process_open_fds", "Number of open file descriptors", open_fds.map(|v| v as f64))?;
        let heap = if self.heap.load(std::sync::atomic::Ordering::Relaxed) { crate::memory::heap() } else { None };
        gauge(
            "leaf_heap_in_use_bytes",
            "Heap bytes the node has allocated and not freed (mapped, not all of it resident)",
            heap.map(|h| h.in_use as f64),
        )?;
        gauge(
            "leaf_heap_free_bytes",
            "Heap bytes freed by the node that the allocator keeps for reuse",
            heap.map(|h| h.free as f64),
        )?;
        gauge("process_max_fds", "Maximum number of open file descriptors", max_fds.map(|v| v as f64))?;
        if let Some(s) = &stat {
            let c = ConstCounter::new(s.cpu_seconds);
            c.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                c.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        // A command name with a space and a parenthesis.
        let stat = "4242 (leaf (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 7 0 12345 \
                    104857600 2560 18446744073709551615 1 1 0 0 0 0 0 4096 17003 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(stat, 100.0, 4096).unwrap();
        assert_eq!(
            s,
            ProcStat {
                cpu_seconds: 3.0,
                threads: 7,
                start_since_boot_seconds: 123.45,
                virtual_bytes: 104_857_600,
                resident_bytes: 2560 * 4096,
            }
        );
        assert_eq!(parse_stat("garbage", 100.0, 4096), None);
        assert_eq!(parse_boot_time("cpu 1 2 3\nbtime 1795579678\nprocesses 9\n"), Some(1_795_579_678.0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        assert_eq!(parse_max_fds("nothing"), None);
    }

    #[test]
    fn this_process_reports_itself() {
        let mut registry = prometheus_client::registry::Registry::default();
        let heap = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        registry.register_collector(Box::new(ProcessCollector { heap: heap.clone() }));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_start_time_seconds ",
            "process_threads ",
            "leaf_heap_in_use_bytes ",
            "leaf_heap_free_bytes ",
        ] {
            assert!(text.lines().any(|l| l.starts_with(name)), "{name} missing:\n{text}");
        }
        // Off: no walk of the allocator, no heap series.
        heap.store(false, std::sync::atomic::Ordering::Relaxed);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(!text.contains("leaf_heap_"), "{text}");
    }
}
