//! What the engine asks of the operating system: its own CPU time and how long it waited for a
//! CPU, the machine's steal time, and the open-file limit.
#![allow(unsafe_code)]

use std::time::Duration;

/// CPU time (user + system) this process has used so far, all threads included.
pub fn process_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let micros = |time: libc::timeval| time.tv_sec as u64 * 1_000_000 + time.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// How long this process's threads have waited on a run queue (runnable but not running), summed
/// over its live threads, from Linux's schedstat; zero elsewhere. A thread that ends takes its
/// share with it, which only makes an interval's figure smaller, never larger.
pub fn process_run_delay() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let mut total_ns = 0u64;
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        // "<on-cpu ns> <waiting ns> <timeslices>"
        if let Some(waiting) = text.split_whitespace().nth(1).and_then(|field| field.parse::<u64>().ok()) {
            total_ns = total_ns.saturating_add(waiting);
        }
    }
    Duration::from_nanos(total_ns)
}

/// The machine's CPU time counters (all CPUs together, in clock ticks), from `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MachineCpu {
    pub total: u64,
    pub steal: u64,
}

impl MachineCpu {
    /// Parses the aggregate `cpu` line of `/proc/stat`: user nice system idle iowait irq softirq
    /// steal [guest guest_nice] (guest time is already counted in user and nice).
    pub fn parse(stat: &str) -> Option<MachineCpu> {
        let line = stat.lines().find(|line| line.starts_with("cpu "))?;
        let fields: Vec<u64> =
            line.split_whitespace().skip(1).take(8).map(|field| field.parse().ok()).collect::<Option<_>>()?;
        Some(MachineCpu { total: fields.iter().sum(), steal: fields.get(7).copied().unwrap_or(0) })
    }

    /// The share (0 to 1) of the machine's CPU time stolen between `earlier` and `self`.
    pub fn steal_share_since(&self, earlier: &MachineCpu) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0.0;
        }
        self.steal.saturating_sub(earlier.steal) as f64 / total as f64
    }
}

/// The machine's CPU counters now; zeros where `/proc/stat` cannot be read.
pub fn machine_cpu() -> MachineCpu {
    std::fs::read_to_string("/proc/stat").ok().and_then(|stat| MachineCpu::parse(&stat)).unwrap_or_default()
}

/// Raises the soft open-file limit to the hard one (every connection is a file descriptor) and
/// returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit read and write a struct we own.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
        limit.rlim_cur
    }
}

/// Asks Linux to pick a bound socket's port when it connects rather than when it binds
/// (IP_BIND_ADDRESS_NO_PORT): bound to port 0, each socket would otherwise hold a port of its
/// source address for every destination, and one address would run out after ~28,000
/// connections whatever the targets. Best effort: elsewhere, or if refused, bind picks the port.
pub fn defer_port_choice(socket: &impl std::os::fd::AsRawFd) {
    #[cfg(target_os = "linux")]
    // SAFETY: setsockopt reads an int we own, on a descriptor the socket owns and keeps open.
    unsafe {
        let enable: libc::c_int = 1;
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::addr_of!(enable).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_read_from_the_aggregate_cpu_line() {
        let before = MachineCpu::parse("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n").unwrap();
        let after = MachineCpu::parse("cpu  150 0 60 970 10 0 0 50 0 0\n").unwrap();
        assert_eq!(before, MachineCpu { total: 1000, steal: 40 });
        assert!((after.steal_share_since(&before) - 10.0 / 240.0).abs() < 1e-12);
        assert_eq!(after.steal_share_since(&after), 0.0);
        assert!(MachineCpu::parse("intr 1 2 3").is_none());
    }

    #[test]
    fn run_delay_counts_this_thread() {
        // The sum is over live threads: other tests' threads end meanwhile and take their share
        // with them, so it may go down between two readings. It always holds this thread's own
        // waiting, which only grows.
        let own = || {
            std::fs::read_to_string("/proc/thread-self/schedstat")
                .ok()
                .and_then(|text| text.split_whitespace().nth(1).and_then(|field| field.parse::<u64>().ok()))
                .map_or(Duration::ZERO, Duration::from_nanos)
        };
        let spin = std::time::Instant::now();
        while spin.elapsed() < Duration::from_millis(20) {}
        let mine = own();
        assert!(process_run_delay() >= mine);
    }
}
